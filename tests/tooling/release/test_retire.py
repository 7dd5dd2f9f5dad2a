"""retire: a base's queue, pin, lock and trees go; a copy is kept; the wrong things are refused."""

from __future__ import annotations

import json
import os


from tkvseam import git
from tkvseam.bases.pins import load_bases
from tkvseam.tree.state import Kind, PortProgress, TreeState

from ..fixtures.carrying import NEW, NEW_NAME, OLD_NAME, status
from ..fixtures.retire import carried_project  # noqa: F401  (fixtures)


def test_retire_removes_queue_pin_lock_and_trees_keeping_a_copy(carried_project):  # noqa: F811
    root, cache = carried_project.root, carried_project.cache
    bases_before = (root / "bases.toml").read_text()
    (root / "patches" / NEW_NAME / "NOTES.md").write_text("my notes\n")  # not part of the queue
    (root / f".venv-vllm-{NEW_NAME}").mkdir()
    (root / f".venv-vllm-{NEW_NAME}" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "build" / "seamtest" / NEW_NAME / "logs").mkdir(parents=True)
    baseline = cache / "seamtest" / f"upstream-stock-{NEW_NAME}-0123.json"
    baseline.parent.mkdir(parents=True)
    baseline.write_text("{}")
    other = cache / "seamtest" / f"upstream-stock-{OLD_NAME}-0123.json"
    other.write_text("{}")
    assert (cache / "bases" / f"{NEW_NAME}-sdist").is_dir()

    out = json.loads(carried_project.cli("retire", NEW_NAME, "--json").output)

    assert not (root / "patches" / NEW_NAME / "series").exists()
    assert (root / "patches" / NEW_NAME / "NOTES.md").read_text() == "my notes\n"
    assert f"patches/{NEW_NAME}/NOTES.md: not part of the queue (a copy is in {out['kept']})" in out["left"]
    assert not (root / "ci" / f"lock-cpu-{NEW_NAME}.txt").exists()
    assert NEW_NAME not in load_bases(root / "bases.toml")
    assert OLD_NAME in load_bases(root / "bases.toml")
    for gone in (f"build/vllm-{NEW_NAME}", f"build/seamtest/{NEW_NAME}", f".venv-vllm-{NEW_NAME}"):
        assert not (root / gone).exists(), gone
    # the cache is shared by every checkout using it: left (test_retire_owns.py)
    assert (cache / "bases" / f"{NEW_NAME}-sdist").is_dir() and baseline.exists()
    assert other.exists() and (cache / "sdist" / f"vllm-{NEW}.tar.gz").exists()  # the download stays
    kept = root / out["kept"]
    assert (kept / "bases.toml").read_text() == bases_before
    assert (kept / "patches" / NEW_NAME / "series").read_text() == "# the v9.10.0 queue\n"
    assert (kept / "ci" / f"lock-cpu-{NEW_NAME}.txt").read_text() == "# header\nvllm==9.10.0\n"
    # git sees only the base's queue, its lock and its bases.toml tables change
    assert sorted(status(root)) == sorted(
        [
            " M bases.toml",
            f" D ci/lock-cpu-{NEW_NAME}.txt",
            f" D patches/{NEW_NAME}/PORT.md",
            f" D patches/{NEW_NAME}/series",
            f"?? patches/{NEW_NAME}/NOTES.md",
        ]
    )
    assert sorted(out["to_commit"]) == ["bases.toml", f"ci/lock-cpu-{NEW_NAME}.txt", f"patches/{NEW_NAME}"]
    text = carried_project.cli("carried").output.split()
    assert text == [OLD_NAME]


def test_retire_refuses_the_top_level_queue_saying_why(carried_project):  # noqa: F811
    before = (carried_project.root / "bases.toml").read_bytes()
    err = carried_project.cli("retire", OLD_NAME, expect=5).stderr
    assert f"{OLD_NAME}'s queue is the top-level one (`series` + `patches/`)" in err
    assert (
        f"make apply BASE={OLD_NAME}" in err
        and "quilt push -a" in err
        and "next: .venv/bin/tkv-seam carried" in err
    )
    assert (carried_project.root / "bases.toml").read_bytes() == before and status(carried_project.root) == []
    assert not (carried_project.root / "build" / "kept").exists()


def test_retire_of_an_unknown_base_or_through_a_symlink_is_refused(carried_project, tmp_path):  # noqa: F811
    err = carried_project.cli("retire", "v1.2.3", expect=2).stderr
    assert "unknown base 'v1.2.3'" in err and f"known bases: {OLD_NAME}, {NEW_NAME}" in err
    queue = carried_project.root / "patches" / NEW_NAME
    elsewhere = tmp_path / "elsewhere"
    os.replace(queue, elsewhere)
    queue.symlink_to(elsewhere)
    err = carried_project.cli("retire", NEW_NAME, expect=1).stderr  # the bases file's own check refuses it
    assert "reached through a symlink" in err
    assert (elsewhere / "series").exists() and (
        carried_project.root / "ci" / f"lock-cpu-{NEW_NAME}.txt"
    ).exists()


def test_retire_refuses_a_tree_holding_your_work_and_force_keeps_it_in_a_bundle(carried_project, tmp_path):  # noqa: F811
    tree = carried_project.root / "build" / f"vllm-{NEW_NAME}"
    (tree / "mine.txt").write_text("work in progress\n")
    err = carried_project.cli("retire", NEW_NAME, expect=5).stderr
    assert f"build/vllm-{NEW_NAME}: " in err and "mine.txt" in err and "FORCE=1" in err
    assert (carried_project.root / "patches" / NEW_NAME / "series").exists() and status(
        carried_project.root
    ) == []
    out = json.loads(carried_project.cli("retire", NEW_NAME, "--force", "--json").output)
    (moved,) = out["moved"]
    src, _, bundle = moved.partition(" -> ")
    assert src == f"build/vllm-{NEW_NAME}" and bundle.startswith(out["kept"]) and bundle.endswith(".bundle")
    assert not tree.exists()
    back = tmp_path / "back"
    git.core.run(None, "clone", "-q", str(carried_project.root / bundle), str(back))
    git.core.run(back, "fetch", "-q", str(carried_project.root / bundle), "refs/tkv-seam/kept/worktree:kept")
    assert git.core.run(back, "show", "kept:mine.txt").stdout == b"work in progress\n"


def test_retire_refuses_a_base_a_port_is_carried_from(carried_project):  # noqa: F811
    port = carried_project.root / "build" / "port-v9.11.0"
    (port / ".git").mkdir(parents=True)
    progress = PortProgress(NEW_NAME, "0" * 40, [f"patches/{NEW_NAME}/0001-x.patch"], current="0001-x.patch")
    TreeState(Kind.PORT, "v9.11.0", "sdist", "1" * 40, "2" * 9, "1" * 40, port=progress).save(port)
    err = carried_project.cli("retire", NEW_NAME, expect=5).stderr
    assert "build/port-v9.11.0: a port from v9.10.0's queue is in progress" in err
    assert "make port VERB=abort TO=v9.11.0" in err
    assert status(carried_project.root) == []


def test_a_retire_killed_half_way_is_finished_by_running_it_again(carried_project, crash_at):  # noqa: F811
    """A real process, killed (SIGKILL) after the queue and the lock went, before the pin did."""
    crash_at(
        "tkvseam.bases.file.remove_base",
        "--root",
        str(carried_project.root),
        "--cache",
        str(carried_project.cache),
        "-q",
        "retire",
        NEW_NAME,
    )
    assert not (carried_project.root / "patches" / NEW_NAME / "series").exists()
    assert NEW_NAME in load_bases(carried_project.root / "bases.toml")  # the pin was still there
    out = json.loads(carried_project.cli("retire", NEW_NAME, "--json").output)
    assert f"bases.toml: ['{NEW_NAME}'] and its .seam table" in out["removed"]
    assert NEW_NAME not in load_bases(carried_project.root / "bases.toml")
    assert sorted(s.split()[-1] for s in status(carried_project.root)) == [
        "bases.toml",
        f"ci/lock-cpu-{NEW_NAME}.txt",
        f"patches/{NEW_NAME}/PORT.md",
        f"patches/{NEW_NAME}/series",
    ]
    assert git.core.out(carried_project.root, "ls-files", "--others", "--exclude-standard") == ""


def test_retire_takes_no_path_for_a_name(carried_project, tmp_path):  # noqa: F811
    victim = tmp_path / "victim"
    (victim / "series").parent.mkdir(parents=True)
    (victim / "series").write_text("x.patch\n")
    (victim / "x.patch").write_text("mine\n")
    rel = os.path.relpath(victim, carried_project.root / "patches")
    err = carried_project.cli("retire", rel, expect=2).stderr
    assert f"{rel!r} is not a base name" in err
    assert (victim / "x.patch").read_text() == "mine\n"
    err = carried_project.cli("retire", NEW, expect=2).stderr  # 9.10.0 for v9.10.0
    assert f"next: make retire BASE={NEW_NAME}" in err


def test_an_unknown_name_is_told_to_git_rm_only_a_directory_that_is_there(carried_project):  # noqa: F811
    root = carried_project.root
    top = "0001-cache-tweak.patch"  # a patch file of the top-level queue, as the real one holds
    (root / "patches" / top).write_text("From: x\n")
    err = carried_project.cli("retire", top, expect=2).stderr  # a file of the live top-level queue
    assert "git rm" not in err and f"patches/{top}" not in err, err
    (root / "patches" / "9.99.0").mkdir()
    (root / "patches" / "9.99.0" / "series").write_text("")
    err = carried_project.cli("retire", "9.99.0", expect=2).stderr
    assert "patches/9.99.0/ exist but are no pinned base's" in err and "git rm" in err
    (root / "patches" / "9.98.0").symlink_to(root / "patches" / "9.99.0")
    err = carried_project.cli("retire", "9.98.0", expect=2).stderr  # reached through a link: not named
    assert "git rm" not in err and "patches/9.98.0" not in err, err
