"""What the port records is what was given, and its hints are the next step, as written (issue 26).

A verdict no queue patch may have is refused (and lint refuses it); a ``|`` in a reason stays a
``|``; a tampered place in the queue is a clean error; a retire that runs while a port starts
leaves no port tree for a base that is no longer pinned; the refusals of finish, abort, start
and a backport name a step that runs and is the right one.
"""

from __future__ import annotations

import json

import pytest

from tkvseam import git
from tkvseam.tree.state import TreeState

from ..fixtures.carrying import git_project
from ..fixtures.pausing import paused
from ..fixtures.portcase import NEXT, port, port_tree, resolve_0001
from ..fixtures.upstream import NAME


def _stopped_at_0006(pproject) -> None:
    port(pproject, "start", expect=12)
    resolve_0001(port_tree(pproject))
    port(pproject, "continue", expect=12)  # 0002-0005 go in, 0006 (likely obsolete) stops


def _commit_project(pproject, msg: str) -> None:
    git.core.run(pproject.root, "add", "patches")
    git.core.run(
        pproject.root,
        "commit",
        "-q",
        "-m",
        msg,
        env={"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "d@x.invalid"},
    )


def _finished(pproject):
    _stopped_at_0006(pproject)
    return port(pproject, "skip", "--reason", "upstream added register() itself")


# --------------------------------------------------------------------------- verdicts


def test_continue_refuses_an_unknown_verdict_listing_the_allowed_ones(pproject):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    resolve_0001(tree)
    head = git.repo.head(tree)
    err = port(pproject, "continue", "--verdict", "bogus", "--reason", "x", expect=2).stderr
    assert "Verdict 'bogus' is not one of 'still needed', 'still needed, fixed', 're-expressed'" in err
    assert "make port VERB=continue TO=v9.10.0 VERDICT='still needed'" in err
    assert git.repo.head(tree) == head and git.index.staged_paths(
        tree
    )  # nothing committed, the resolution staged
    assert json.loads(port(pproject, "status", "--json").output)["current"] == "0001-add-mul.patch"


def test_a_message_edited_to_an_unknown_verdict_is_refused_before_the_commit(pproject):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    resolve_0001(tree)
    msg = tree / ".git" / "tkv-seam-port-msg"
    msg.write_text(msg.read_text().replace("Verdict: still needed", "Verdict: maybe"))
    head = git.repo.head(tree)
    err = port(pproject, "continue", expect=5).stderr
    assert f"{msg}: Verdict 'maybe' is not one of" in err and "would fail lint" in err
    assert git.repo.head(tree) == head


def test_lint_refuses_a_patch_whose_verdict_is_unknown(pproject):
    patch = pproject.root / "patches" / "0002-use-mul.patch"
    patch.write_text(patch.read_text().replace("Verdict: still needed", "Verdict: bogus", 1))
    problems = json.loads(pproject.cli("lint", "--json", expect=6).output)["problems"]
    assert [(p["patch"], p["message"]) for p in problems] == [
        (
            "0002-use-mul.patch",
            "header: Verdict 'bogus' is not one of 'still needed', 'still needed, fixed', 're-expressed'",
        )
    ]


# --------------------------------------------------------------------------- reasons and places


def test_a_pipe_in_a_reason_is_kept_escaped_in_port_md(pproject):
    _stopped_at_0006(pproject)
    port(pproject, "skip", "--reason", "upstream has it | same code")
    md = (pproject.root / "patches" / NEXT / "PORT.md").read_text()
    assert "| 0006-register.patch | skipped | obsolete | upstream has it \\| same code |" in md
    done = json.loads(port(pproject, "status", "--json").output)["done"]
    assert [d["reason"] for d in done if d["status"] == "skipped"] == ["upstream has it | same code"]


@pytest.mark.parametrize("place", [999, -5])
def test_a_tampered_place_in_the_queue_is_a_clean_error_on_skip(pproject, place):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    state = TreeState.path(tree)
    data = json.loads(state.read_text())
    data["port"]["next"] = place
    state.write_text(json.dumps(data))
    head = git.repo.head(tree)
    res = port(pproject, "skip", "--reason", "x", expect=1)
    assert f"next = {place}" in res.stderr and "edited by hand?" in res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert "make port VERB=abort TO=v9.10.0" in res.stderr
    assert git.repo.head(tree) == head and json.loads(state.read_text())["port"]["next"] == place
    port(pproject, "abort")  # the way out the hint names works, and keeps the tree in a bundle
    assert not tree.exists()


def test_a_retire_while_a_port_starts_leaves_no_port_tree_for_the_retired_base(pproject, tmp_path):
    start = pproject.argv("port", "start", "--base", NAME, "--to", NEXT)
    with paused(tmp_path / "pause", "tkvseam.tree.seamtree:SeamTree.locked", *start) as porting:
        porting.wait_reached()  # the port read bases.toml and is about to take its tree's lock
        pproject.cli("retire", NEXT)
        ported = porting.release()
    assert ported.returncode == 5, ported.stderr
    assert (
        f"{NEXT} is no longer pinned in bases.toml" in ported.stderr and "nothing was made" in ported.stderr
    )
    assert "make carry VERSION=9.10.0" in ported.stderr
    assert not port_tree(pproject).exists()
    assert not [p for p in (pproject.root / "build").glob(".port-*")]  # no scratch tree either


# --------------------------------------------------------------------------- hints that are the next step


def test_a_finish_over_a_queue_written_and_committed_meanwhile_hints_force_not_a_commit(pproject):
    git_project(pproject.root)
    _stopped_at_0006(pproject)
    queue = pproject.root / "patches" / NEXT
    queue.mkdir()
    (queue / "series").write_text("")
    _commit_project(pproject, "someone's queue")  # nothing uncommitted now
    err = port(pproject, "skip", "--reason", "upstream added register() itself", expect=5).stderr
    assert "changed since the port started" in err and "uncommitted edits" not in err
    assert "commit or move those edits" not in err  # committing again would change nothing: a loop
    assert "make port VERB=finish TO=v9.10.0 FORCE=1" in err
    assert "lint + style gate: ok" in port(pproject, "finish", "--force").output


@pytest.mark.parametrize("tracked", [False, True])
def test_abort_of_a_finished_port_names_how_to_drop_a_new_or_a_tracked_queue(pproject, tracked):
    git_project(pproject.root)
    _finished(pproject)
    if tracked:
        _commit_project(pproject, "the ported queue")
    err = port(pproject, "abort", expect=5).stderr
    assert "has finished; its queue is written" in err
    if tracked:
        assert "`git checkout -- patches/v9.10.0`" in err and "rm -r" not in err
    else:  # git does not track it: checkout would fail ("did not match any file(s) known to git")
        assert "`rm -r -- patches/v9.10.0`" in err and "git checkout" not in err
    assert "make apply" not in err  # apply replaces build/vllm-<base>, never a port tree
    assert port_tree(pproject).is_dir()


def test_a_start_over_a_finished_port_holding_commits_hints_the_refresh_of_that_tree(pproject):
    _finished(pproject)
    tree = port_tree(pproject)
    (tree / "notes.py").write_text("x = 1\n")
    git.index.commit(tree, "notes: mine\n", "Seam Dev <dev@example.invalid>", paths=["notes.py"])
    err = port(pproject, "start", expect=5).stderr
    assert "make refresh" not in err  # that refreshes build/vllm-v9.10.0, not the port tree
    refresh = f".venv/bin/tkv-seam refresh --base {NEXT} --tree {tree}"
    assert f"keep the commits: `{refresh}` (writes them into the queue)" in err  # already a commit
    assert "added     patches/v9.10.0/0008-notes.patch" in pproject.cli(*refresh.split()[1:]).output
    port(pproject, "start", expect=12)  # the commit is kept in the queue: the tree may go


def test_a_backport_from_a_base_with_a_queue_onto_one_without_names_a_newer_base(pproject):
    queue = pproject.root / "patches" / NEXT
    queue.mkdir()
    (queue / "series").write_text("")  # v9.10.0 has a queue (empty)
    (pproject.root / "series").unlink()  # v9.9.9 has none
    err = pproject.cli("port", "start", "--base", NEXT, "--to", NAME, expect=2).stderr
    assert "forward only" in err
    assert f"BASE={NAME}" not in err  # no queue of v9.9.9 to port forward
    assert f"make port VERB=start TO=<newer-base> BASE={NEXT}" in err
