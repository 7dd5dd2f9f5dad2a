"""The resumable port: start, stop at a conflict, continue, skip, abort, status, finish (``portcase``'s queue).

Kills are real: ``crash_at`` runs the verb in another process and SIGKILLs it at the point named.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

from tkvseam import git

from ..fixtures.queue import message
from ..fixtures.upstream import NAME, bases_toml
from ..fixtures.portcase import AUTHOR, NEXT, port, port_tree, resolve_0001


def test_start_stops_at_the_conflict_and_a_second_start_is_refused(pproject):
    err = port(pproject, "start", expect=12).stderr
    assert "stopped at 0001-add-mul.patch: conflict" in err and "vllm/engine/arg_utils.py: conflict" in err
    assert "next:" in err and "make port VERB=continue TO=" in err and "make port VERB=skip TO=" in err
    assert not err.startswith("Error:") and err.startswith(
        "port to v9.10.0 stopped at"
    )  # a stop, not a crash
    tree = port_tree(pproject)
    assert "<<<<<<<" in (tree / "vllm/engine/arg_utils.py").read_text()
    status = json.loads(port(pproject, "status", "--json").output)
    assert status["current"] == "0001-add-mul.patch" and status["done"] == []
    err = port(pproject, "start", expect=5).stderr
    assert "already in progress" in err and "stopped at 0001-add-mul.patch" in err


def test_continue_commits_with_the_patch_header_and_skip_records_the_reason(pproject):
    top = {p.name: p.read_bytes() for p in (pproject.root / "patches").glob("*")}
    series = (pproject.root / "series").read_bytes()
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    err = port(pproject, "continue", expect=5).stderr
    assert "still unmerged" in err  # nothing resolved yet
    resolve_0001(tree)
    err = port(
        pproject, "continue", "--verdict", "re-expressed", "--reason", "upstream rewrote sub()", expect=12
    ).stderr
    assert "stopped at 0006-register.patch: likely obsolete" in err
    msg = git.core.out(tree, "log", "-1", "--format=%an <%ae>%n%B", "HEAD~4")
    assert msg.startswith(AUTHOR + "\nadd-mul: add mul()")
    assert (
        "Verdict: re-expressed\nReason: upstream rewrote sub()\nUpstream: upstreamable\nDepends-on: none\n"
        "Tests: tests/" in msg
    )
    res = port(pproject, "skip", "--reason", "upstream added register() itself")
    assert "1 skipped" in res.output and "lint + style gate: ok" in res.output
    queue = pproject.root / "patches" / NEXT
    names = (queue / "series").read_text().split()
    assert names == [
        "0001-add-mul.patch",
        "0002-use-mul.patch",
        "0003-test-more.patch",
        "0004-fuzz-far.patch",
        "0005-tail-append.patch",
        "0006-old-mod.patch",
        "0007-seam-tests.patch",
    ]
    assert "Verdict: re-expressed" in (queue / names[0]).read_text()
    umask = os.umask(0o022)
    os.umask(umask)
    assert {stat.S_IMODE(p.stat().st_mode) for p in queue.iterdir()} == {0o666 & ~umask}  # not mkstemp's 0600
    assert "Test-depends-on: add-mul" in (queue / names[-1]).read_text()
    assert (
        "| 0006-register.patch | skipped | obsolete | upstream added register() itself |"
        in (queue / "PORT.md").read_text()
    )
    # finish wrote only the new base's queue
    assert {p.name: p.read_bytes() for p in (pproject.root / "patches").glob("*") if p.is_file()} == top
    assert (pproject.root / "series").read_bytes() == series
    if shutil.which("quilt"):  # the new queue is a quilt queue too (absolute QUILT_SERIES: README)
        pristine = pproject.root / "build" / "quilt"
        pristine.mkdir()
        archive = git.core.run(pproject.root / "build" / f"port-{NEXT}", "archive", "tkv-seam-base").stdout
        subprocess.run(["tar", "-x", "-C", str(pristine)], input=archive, check=True)
        env = {**os.environ, "QUILT_PATCHES": str(queue), "QUILT_SERIES": str(queue / "series")}
        proc = subprocess.run(
            ["quilt", "push", "-a", "--fuzz=0"], cwd=pristine, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0 and "Now at patch" in proc.stdout, proc.stdout + proc.stderr
    assert sorted(p.name for p in (pproject.root / "patches").iterdir() if p.is_dir()) == [NEXT]
    # the new queue applies on its base
    out = json.loads(pproject.cli("apply", "--base", NEXT, "--json").output)
    assert len(out["patches"]) == 7
    # refresh --base NEXT round-trips NEXT's queue and writes nothing else
    refreshed = json.loads(pproject.cli("refresh", "--base", NEXT, "--json").output)["exported"]
    assert {r["status"] for r in refreshed} == {"unchanged"}
    assert (pproject.root / "series").read_bytes() == series
    # drift: each patch's version on NEXT against NAME's
    drift = json.loads(pproject.cli("drift", "--json").output)
    cells = {r["slug"]: r["cells"][NEXT] for r in drift["rows"]}
    assert cells == {
        "add-mul": "re-expressed",
        "use-mul": "same hunks",
        "test-more": "same hunks",  # line numbers moved, lines the same
        "fuzz-far": "context only",  # upstream's line 150 is in its context now
        "tail-append": "same hunks",
        "register": "absent",
        "old-mod": "re-expressed",  # another file
        "seam-tests": "same hunks",
    }
    assert "| register | carried | absent |" in drift["matrix"]


def _stopped_at_0006(pproject, tree) -> None:
    """The port goes on from where it was killed: one commit per patch, none twice."""
    err = port(pproject, "continue", expect=12).stderr
    assert "stopped at 0006-register.patch: likely obsolete" in err
    subjects = git.core.out(tree, "log", "--format=%s", "tkv-seam-base..HEAD").splitlines()
    assert [s.split(":")[0] for s in reversed(subjects)] == [
        "add-mul",
        "use-mul",
        "test-more",
        "fuzz-far",
        "tail-append",
    ]
    status = json.loads(port(pproject, "status", "--json").output)
    assert [d["name"][:4] for d in status["done"]] == ["0001", "0002", "0003", "0004", "0005"]


CONTINUE = ("continue", "--to", NEXT, "--verdict", "re-expressed", "--reason", "upstream rewrote sub()")


def test_a_port_killed_after_a_commit_records_it_as_what_it_was_and_goes_on(pproject, crash_at):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    resolve_0001(tree)
    # killed right after committing 0002 (applied 3-way: its offset needs a merge), before recording it
    crash_at("tkvseam.git.index.commit", *pproject.argv("port", *CONTINUE), after=True)
    assert git.core.out(tree, "log", "-1", "--format=%s") == "use-mul: use mul"
    status = json.loads(port(pproject, "status", "--json").output)
    assert [(d["name"], d["status"]) for d in status["done"]] == [
        ("0001-add-mul.patch", "resolved"),
        ("0002-use-mul.patch", "3-way"),  # what it was, not a guess ("exact" before)
    ]
    assert status["done"][1]["note"].endswith("recorded after an interrupted run")
    _stopped_at_0006(pproject, tree)


def test_a_port_killed_after_committing_a_resolution_keeps_its_verdict(pproject, crash_at):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    resolve_0001(tree)
    # killed right after the resolution is committed, the state still says "stopped at 0001"
    crash_at("tkvseam.git.index.commit_index", *pproject.argv("port", *CONTINUE), after=True)
    _stopped_at_0006(pproject, tree)
    first = json.loads(port(pproject, "status", "--json").output)["done"][0]
    assert (first["status"], first["verdict"], first["reason"]) == (
        "resolved",
        "re-expressed",
        "upstream rewrote sub()",
    )


def test_a_port_killed_while_applying_keeps_the_leftovers_and_applies_again(pproject, crash_at):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    resolve_0001(tree)
    # killed once 0003's files are in the tree, nothing recorded
    crash_at(
        "tkvseam.tree.porttree:PortTree.apply_files",
        *pproject.argv("port", *CONTINUE),
        after=True,
        when="0003-",
    )
    assert git.index.status_porcelain(tree)  # half applied
    before = set(git.repo.refs(tree, "refs/tkv-seam/dropped"))
    _stopped_at_0006(pproject, tree)
    kept = set(git.repo.refs(tree, "refs/tkv-seam/dropped")) - before
    assert len(kept) == 1  # the leftovers are kept, not thrown away
    ref = kept.pop()
    assert git.core.out(tree, "diff", "--name-only", f"{ref}^", ref).split() == [
        "tests/test_seam.py",
        "vllm/config/cache.py",
    ]


def test_skip_needs_a_reason(pproject):
    port(pproject, "start", expect=12)
    assert "--reason" in port(pproject, "skip", expect=2).stderr
    assert "--reason" in port(pproject, "skip", "--reason", "  ", expect=2).stderr


def test_finish_refuses_before_every_patch_is_through(pproject):
    port(pproject, "start", expect=12)
    err = port(pproject, "finish", expect=5).stderr
    assert "8 patch(es) not yet ported (stopped at 0001-add-mul.patch)" in err
    assert not (pproject.root / "patches" / NEXT).exists()


def test_refresh_refuses_a_tree_of_another_base(pproject):
    err = pproject.cli("refresh", "--base", NEXT, "--tree", str(pproject.tree), expect=5).stderr
    assert (
        f"is a tree of {NAME}, not {NEXT}" in err
    )  # SeamTree.require's one message (it said "was applied on")


# --------------------------------------------------------------------------- nothing lost:
# port may only replace a tree it made, holding nothing the user added


def _two_bases(project, releases):
    from ..fixtures.upstream import NEXT_VERSION as NV

    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[f"v{NV}"], name=f"v{NV}", version=NV)
    )
    return f"v{NV}"


def test_port_refuses_to_wipe_an_unrelated_directory(project, releases):
    nxt = _two_bases(project, releases)
    mine = project.root / "mine"
    (mine / "src").mkdir(parents=True)
    (mine / "notes.txt").write_text("precious\n")
    err = project.cli("port", "start", "--base", NAME, "--to", nxt, "--tree", str(mine), expect=5).stderr
    assert f"{mine} exists but was not made by tkv-seam port" in err and "notes.txt" in err and "src" in err
    # a directory that is not the tool's is never to be moved (issue 26, item 6): choose another --tree
    assert "next: choose another --tree" in err and "mv " not in err
    assert (mine / "notes.txt").read_text() == "precious\n"


def test_port_refuses_a_build_tree_holding_an_unrefreshed_commit(project, releases):
    nxt = _two_bases(project, releases)
    project.apply()
    project.commit_in_tree("vllm/new.py", "x = 1\n", message("new-file", "add new.py"))
    head = git.repo.head(project.tree)
    err = project.cli(
        "port", "start", "--base", NAME, "--to", nxt, "--tree", str(project.tree), expect=5
    ).stderr
    assert "not made by tkv-seam port" in err
    assert git.repo.head(project.tree) == head and (project.tree / "vllm/new.py").exists()


def test_port_refuses_to_restart_over_a_committed_resolution(project, releases):
    from ..fixtures.queue import make_two_patches

    nxt = _two_bases(project, releases)
    make_two_patches(project)
    project.cli("port", "start", "--base", NAME, "--to", nxt, expect=12)  # stops at add-mul
    tree = project.root / "build" / f"port-{nxt}"
    (tree / "vllm/engine/arg_utils.py").write_text("def add(a, b):\n    return a + b\n")  # resolved
    git.index.commit(tree, "add-mul: add mul()\n", "Seam Dev <dev@example.invalid>")
    resolution = git.repo.head(tree)
    err = project.cli("port", "start", "--base", NAME, "--to", nxt, expect=5).stderr
    assert "already in progress" in err and "0002-add-mul.patch" in err
    assert git.repo.head(tree) == resolution


def test_port_refuses_a_finished_port_tree_with_a_user_commit_and_replaces_an_untouched_one(
    project, releases
):
    nxt = _two_bases(project, releases)
    project.apply()
    project.commit_in_tree(
        "vllm/config/cache.py",
        (project.tree / "vllm/config/cache.py").read_text().replace("line 10\n", "line 10 (seam)\n"),
        message("cache-tweak", "mark line 10"),
    )
    project.refresh()
    project.cli("port", "start", "--base", NAME, "--to", nxt)  # applies (3-way): finishes, writes the queue
    tree = project.root / "build" / f"port-{nxt}"
    project.cli("port", "start", "--base", NAME, "--to", nxt)  # its own, untouched: replaced
    (tree / "vllm/extra.py").write_text("y = 2\n")
    git.index.commit(
        tree, "extra: my resolution\n", "Seam Dev <dev@example.invalid>", paths=["vllm/extra.py"]
    )
    err = project.cli("port", "start", "--base", NAME, "--to", nxt, expect=5).stderr
    assert "extra: my resolution" in err
    assert (tree / "vllm/extra.py").read_text() == "y = 2\n"


def test_a_patch_that_goes_in_by_itself_commits_only_its_own_files(pproject):
    """A cache a linter left in the port tree (ruff's .ruff_cache ignores itself with a `*`
    .gitignore) stays out of the commits of the patches that go in after it, and stays where it
    is (vLLM 0.34.0's carry: a 3-way patch's commit took the .ruff_cache of a hand-run ruff)."""
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    cache = tree / ".ruff_cache"
    cache.mkdir()
    (cache / ".gitignore").write_text("*\n")
    (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    resolve_0001(tree)
    port(pproject, "continue", "--verdict", "re-expressed", "--reason", "upstream rewrote sub()", expect=12)
    first = git.core.out(tree, "rev-list", "--max-parents=0", "HEAD")
    committed = git.core.out(tree, "log", "--name-only", "--format=", f"{first}..HEAD").split()
    assert committed and not [name for name in committed if name.startswith(".ruff_cache/")], committed
    assert (cache / "CACHEDIR.TAG").is_file()


def test_untracked_files_left_in_the_port_tree_are_never_hinted_away_with_checkout(pproject):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    (tree / "notes.txt").write_text("mine\n")
    resolve_0001(tree)
    err = port(pproject, "continue", expect=5).stderr
    assert "not staged: notes.txt" in err and "checkout" not in err
    assert f"move notes.txt out of {tree}" in err
    assert (tree / "notes.txt").read_text() == "mine\n"
