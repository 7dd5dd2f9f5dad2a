"""Concurrent runs: one tkv-seam run at a time per tree and per cache entry (issue 8, items 6-7).

Real processes (``python -m tkvseam``) run at once; a lock held by the test stands for
another run. Nothing depends on timing: a waiting run is released by an event it
reports (its "waiting for" line), and the busy case uses a zero timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from tkvseam.tree import commits as commits_mod
from tkvseam import git
from tkvseam.progress import QUIET
from tkvseam.queue.series import read_series

from ..fixtures.upstream import NAME
from ..fixtures.queue import make_two_patches


def start(project, *args: str, timeout: str = "120") -> subprocess.Popen:
    env = dict(os.environ, TKV_SEAM_LOCK_TIMEOUT=timeout)
    cmd = [sys.executable, "-m", "tkvseam", "--root", str(project.root), "--cache", str(project.cache), "-q"]
    return subprocess.Popen([*cmd, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def assert_tree_is_whole(project, subjects: list[str]) -> None:
    tree = project.tree
    state = json.loads((tree / ".git/tkv-seam.json").read_text())
    assert not state.get("pending")
    assert git.repo.head(tree) == state["head"] and git.index.status_porcelain(tree) == []
    log = git.core.out(tree, "log", "--format=%s", f"{state['base_commit']}..HEAD").splitlines()
    assert log == subjects
    # every commit holds the whole base (no partial trees from a shared index)
    assert git.core.out(tree, "ls-tree", "-r", "--name-only", "HEAD").count("\n") >= 5
    assert not [p.name for p in tree.parent.iterdir() if p.name.startswith(".")]
    assert not list(project.cache.rglob("*.lock")) and not list((project.cache / "bases").glob(".*"))


def test_four_applies_at_once_on_one_tree_all_succeed_and_never_interleave(project):
    make_two_patches(project)
    subjects = ["add-mul: add mul()", "cache-tweak: mark line 10"]
    for round_ in ("cold", "switch"):
        if round_ == "cold":  # nothing cached, no tree: all four download, build the base, build aside
            subprocess.run(["rm", "-rf", str(project.cache), str(project.tree)], check=True)
        else:  # a changed patch: all four switch the tree in place
            p = project.root / "patches/0002-add-mul.patch"
            p.write_text(p.read_text().replace("return a * b", "return b * a"))
        runs = [start(project, "apply", "--base", NAME, "--json") for _ in range(4)]
        results = [(r.wait(), *r.communicate()) for r in runs]
        assert [rc for rc, _, _ in results] == [0] * 4, results
        heads = {json.loads(out)["head"] for _, out, _ in results}
        assert len(heads) == 1
        assert_tree_is_whole(project, subjects)
    assert "return b * a" in (project.tree / "vllm/engine/arg_utils.py").read_text()


def test_a_second_run_waits_for_the_first_then_proceeds(project):
    from tkvseam.layout import lock_of
    from tkvseam.lock import locked

    project.apply()
    with locked(lock_of(project.tree), "test"):
        run = start(project, "apply", "--base", NAME)
        line = run.stderr.readline()  # the run says it waits (it cannot go on while we hold the lock)
        assert f"waiting for another tkv-seam run on {project.tree}" in line
    assert run.wait() == 0, run.stderr.read()


def test_a_run_that_cannot_get_the_lock_in_time_exits_busy(project):
    from tkvseam.layout import lock_of
    from tkvseam.lock import locked

    project.apply()
    with locked(lock_of(project.tree), "test"):
        run = start(project, "apply", "--base", NAME, "--json", timeout="0")
        out, err = run.communicate()
    assert run.returncode == 10
    assert "waiting for another tkv-seam run on" in err and "Error: another tkv-seam run" in err
    assert "next:" in err and "TKV_SEAM_LOCK_TIMEOUT" in err
    assert json.loads(out) == json.loads(out) | {"ok": False, "exit_code": 10}
    for command in (
        ("refresh", "--base", NAME),
        ("port", "status", "--to", NAME, "--tree", str(project.tree)),
    ):
        with locked(lock_of(project.tree), "test"):
            run = start(project, *command, timeout="0")
            assert run.wait() == 10, command


def test_fetch_holds_the_cache_entry_lock(project):
    from tkvseam.bases.pins import lock_file
    from tkvseam.lock import locked

    with locked(lock_file(project.cache, f"base-{NAME}-sdist"), "test"):
        run = start(project, "fetch", "--base", NAME, timeout="0")
        _, err = run.communicate()
    assert run.returncode == 10 and f"the cached base {NAME}" in err
    assert start(project, "fetch", "--base", NAME).wait() == 0


def test_the_private_index_belongs_to_one_run(project, monkeypatch):
    """Run B starts and ends while run A is between its read-tree and its update-index."""
    make_two_patches(project)
    patches = read_series(project.root).load()
    base_commit = json.loads((project.tree / ".git/tkv-seam.json").read_text())["base_commit"]
    a_waits, b_done = threading.Event(), threading.Event()
    real = commits_mod.replay_file

    def replay(patch, fc, old_text):
        if threading.current_thread().name == "A" and not a_waits.is_set():
            a_waits.set()
            b_done.wait()
        return real(patch, fc, old_text)

    monkeypatch.setattr(commits_mod, "replay_file", replay)
    result = {}
    a = threading.Thread(
        name="A",
        target=lambda: result.update(a=commits_mod.commit_series(project.tree, base_commit, patches, QUIET)),
    )
    a.start()
    a_waits.wait()
    try:
        b = commits_mod.commit_series(project.tree, base_commit, patches, QUIET)
    finally:
        b_done.set()
        a.join()
    assert [p.commit for p in result["a"]] == [p.commit for p in b]


def test_a_relative_tree_works(project, monkeypatch):
    monkeypatch.chdir(project.root)
    make_two_patches(project)
    rel = "build/elsewhere"
    out = json.loads(project.cli("apply", "--base", NAME, "--tree", rel, "--json").stdout)
    assert len(out["patches"]) == 2 and out["tree"] == str(project.root / rel)
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("return a * b", "return b * a"))
    project.cli("apply", "--base", NAME, "--tree", rel)  # in place, relative
    project.cli("refresh", "--base", NAME, "--tree", rel)
    assert "return b * a" in (project.root / rel / "vllm/engine/arg_utils.py").read_text()
