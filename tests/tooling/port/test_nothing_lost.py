"""The port never loses a resolution, a queue or a tree: each case a hostile but realistic user hit.

Verbs never combine; abort keeps everything; finish never overwrites a changed queue without
``--force`` (and keeps what it replaces); the port acts on the tree it is given (a copied or
moved project works); killed starts and reports leave nothing that is not cleaned; writes never
go through a symlink of the new base; a self-port or a backport is refused; reasons are one line.
Kills are real (``crash_at``: another process, SIGKILL at the point named).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tkvseam import git
from tkvseam.tree.commits import symlinked_path
from tkvseam.queue.patch import parse_text
from tkvseam.tree.porttree import PortTree

from ..fixtures.project import Project
from ..fixtures.queue import message
from ..fixtures.upstream import NAME
from ..fixtures.portcase import NEXT, port, port_tree, resolve_0001


def _stopped_at_0006(pproject, again: bool = False) -> None:
    """The port stopped at 0006; ``again``: a port of the project after one that resolved 0001,
    whose resolution (recorded) is replayed: the start goes through 0001 by itself."""
    if again:
        res = port(pproject, "start", expect=12)
        assert "stopped at 0006-register.patch" in res.stderr
        assert "0001-add-mul.patch: replay: vllm/engine/arg_utils.py" in res.stderr
        return
    port(pproject, "start", expect=12)
    resolve_0001(port_tree(pproject))
    port(pproject, "continue", expect=12)  # 0002-0005 go in, 0006 (likely obsolete) stops


# --------------------------------------------------------------------------- verbs do not combine


@pytest.mark.parametrize(
    "args",
    [
        ("port", "--to", NEXT, "--status", "--abort"),  # the old flags: the last one won
        ("port", "--base", NAME, "--to", NEXT, "--report", "--abort"),
        ("port", "status", "--to", NEXT, "--abort"),
        ("port", "continue", "--to", NEXT, "--skip", "--reason", "x"),
        ("port", "abort", "--to", NEXT, "--finish"),
    ],
    ids=["status+abort", "report+abort", "status-verb+abort", "continue+skip", "abort+finish"],
)
def test_two_modes_never_combine_and_the_tree_keeps_its_staged_resolution(pproject, args):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    resolve_0001(tree)
    staged = git.index.staged_paths(tree)
    res = pproject.cli(*args, expect=2)
    assert "No such option" in res.stderr or "no such option" in res.stderr.lower()
    assert tree.is_dir() and git.index.staged_paths(tree) == staged
    assert json.loads(port(pproject, "status", "--json").output)["current"] == "0001-add-mul.patch"


def test_port_help_lists_the_verbs(pproject):
    out = pproject.cli("port", "--help").output
    for verb in ("report", "start", "continue", "skip", "abort", "status", "finish"):
        assert f"  {verb} " in out or f"  {verb}\n" in out, verb


# --------------------------------------------------------------------------- abort keeps everything


def test_abort_keeps_every_commit_staged_and_unstaged_change_in_a_bundle(pproject, tmp_path):
    _stopped_at_0006(pproject)
    tree = port_tree(pproject)
    resolution = git.repo.head(tree)
    (tree / "vllm/registry.py").write_text("REG = {'staged': 1}\n")
    git.index.stage(tree, ["vllm/registry.py"])
    (tree / "vllm/tail.py").write_text("unstaged = 1\n")
    (tree / "notes.txt").write_text("my notes\n")
    before = sorted(
        str(p.relative_to(pproject.root)) for p in pproject.root.rglob("*") if "build" not in p.parts
    )
    out = json.loads(port(pproject, "abort", "--json").output)
    assert not tree.exists() and (pproject.root / "build" / f"vllm-{NAME}").exists()
    assert sorted(
        str(p.relative_to(pproject.root)) for p in pproject.root.rglob("*") if "build" not in p.parts
    ) == (before)  # no queue was written
    bundle = Path(out["bundle"])
    assert bundle.parent == pproject.root / "build" / "dropped" and bundle.is_file()
    back = tmp_path / "back"
    subprocess.run(["git", "clone", "-q", str(bundle), str(back)], check=True)
    git.repo.fetch(back, bundle, "+refs/tkv-seam/*:refs/tkv-seam/*", "+refs/tags/*:refs/tags/*")
    assert git.repo.head(back) == resolution  # every commit: 0001's resolution and 0002-0005
    subjects = git.core.out(back, "log", "--format=%s", "tkv-seam-base..HEAD").splitlines()
    assert [s.split(":")[0] for s in subjects] == [
        "tail-append",
        "fuzz-far",
        "test-more",
        "use-mul",
        "add-mul",
    ]
    kept = "refs/tkv-seam/kept"
    assert git.repo.show(back, f"{kept}/index", "vllm/registry.py") == b"REG = {'staged': 1}\n"
    assert git.repo.show(back, f"{kept}/index", "vllm/tail.py") == git.repo.show(back, "HEAD", "vllm/tail.py")
    assert git.repo.show(back, f"{kept}/worktree", "vllm/tail.py") == b"unstaged = 1\n"
    assert git.repo.show(back, f"{kept}/worktree", "notes.txt") == b"my notes\n"
    state = json.loads(git.repo.show(back, f"{kept}/files", "tkv-seam.json"))
    assert state["port"]["current"] == "0006-register.patch"
    assert git.repo.show(back, f"{kept}/files", "tkv-seam-port-msg").startswith(b"register: add register()")
    assert "none in progress" in port(pproject, "status").output  # gone: no port (an answer, exit 0)


def test_abort_at_a_conflict_keeps_the_conflicted_files_as_they_are(pproject, tmp_path):
    port(pproject, "start", expect=12)  # 0001 conflicts: unmerged index entries, markers in the file
    tree = port_tree(pproject)
    marked = (tree / "vllm/engine/arg_utils.py").read_bytes()
    assert b"<<<<<<<" in marked and git.index.unmerged_paths(tree)
    bundle = Path(json.loads(port(pproject, "abort", "--json").output)["bundle"])
    back = tmp_path / "back"
    subprocess.run(["git", "clone", "-q", str(bundle), str(back)], check=True)
    git.repo.fetch(back, bundle, "+refs/tkv-seam/*:refs/tkv-seam/*")
    assert git.repo.show(back, "refs/tkv-seam/kept/index", "vllm/engine/arg_utils.py") == marked
    assert git.repo.show(back, "refs/tkv-seam/kept/worktree", "vllm/engine/arg_utils.py") == marked


def test_abort_through_a_symlinked_tree_is_refused_and_says_so(pproject):
    port(pproject, "start", expect=12)
    link = pproject.root / "build" / "link"
    link.symlink_to(port_tree(pproject))
    res = pproject.cli("port", "abort", "--to", NEXT, "--tree", str(link), expect=5)
    assert "is a symlink" in res.stderr and f"--tree {port_tree(pproject)}" in res.stderr
    assert "free space" not in res.stderr
    assert port_tree(pproject).is_dir() and link.is_symlink()


# --------------------------------------------------------------------------- finish keeps the queue


def test_finish_refuses_a_queue_written_since_the_port_started_and_force_keeps_it(pproject):
    _stopped_at_0006(pproject)
    queue = pproject.root / "patches" / NEXT
    queue.mkdir(parents=True)
    (queue / "series").write_text("0001-reviewed.patch\n")
    (queue / "0001-reviewed.patch").write_text("reviewed by hand\n")
    (queue / "PORT.md").write_text("# the reviewed verdicts\n")
    err = port(pproject, "skip", "--reason", "upstream has register()", expect=5).stderr
    assert "changed since the port started" in err and "make port VERB=finish TO=v9.10.0 FORCE=1" in err
    assert (queue / "0001-reviewed.patch").read_text() == "reviewed by hand\n"
    assert (queue / "PORT.md").read_text() == "# the reviewed verdicts\n"
    res = port(pproject, "finish", "--force", "--json")
    backup = json.loads(res.stdout)["backup"]
    assert backup and "the old ones are in" in res.stderr and f"patches/{NEXT}/PORT.md" in res.stderr
    assert (
        open(f"{backup}/patches/{NEXT}/PORT.md").read() == "# the reviewed verdicts\n"
    )  # what it replaced, kept
    assert open(f"{backup}/patches/{NEXT}/series").read() == "0001-reviewed.patch\n"
    assert "0001-add-mul.patch" in (queue / "series").read_text()


def _git_project(project: Project) -> None:
    git.repo.init(project.root)
    (project.root / ".gitignore").write_text("/build/\n")
    git.index.commit(project.root, "the project\n", "Seam Dev <dev@example.invalid>")


def test_finish_refuses_a_queue_with_uncommitted_edits_and_a_re_port_keeps_what_it_replaces(pproject):
    _git_project(pproject)
    _stopped_at_0006(pproject)
    port(pproject, "skip", "--reason", "upstream has register()")  # finishes: the queue is written
    queue = pproject.root / "patches" / NEXT
    git.index.commit(pproject.root, "the port's queue\n", "Seam Dev <dev@example.invalid>")
    reviewed = (queue / "PORT.md").read_text() + "\nReviewed: every verdict checked by hand.\n"
    (queue / "PORT.md").write_text(reviewed)
    git.index.commit(pproject.root, "reviewed PORT.md\n", "Seam Dev <dev@example.invalid>")
    # port again onto the base that has its reviewed queue; an uncommitted edit is in it
    _stopped_at_0006(pproject, again=True)
    edit = queue / "0002-use-mul.patch"
    edit.write_text(edit.read_text().replace("uses mul", "uses mul (my edit)"))
    err = port(pproject, "skip", "--reason", "upstream has register()", expect=5).stderr
    assert "uncommitted edits" in err and f"patches/{NEXT}/0002-use-mul.patch" in err
    assert "(my edit)" in edit.read_text()
    git.index.checkout_paths(pproject.root, "HEAD", [str(edit.relative_to(pproject.root))])
    res = port(pproject, "finish")  # committed and unchanged since the start: written, what it replaced kept
    assert "the files it replaced are in" in res.output
    backup = res.output.rsplit("the files it replaced are in ", 1)[1].split()[0]
    assert open(f"{backup}/patches/{NEXT}/PORT.md").read() == reviewed
    assert "Reviewed:" not in (queue / "PORT.md").read_text()


# --------------------------------------------------------------------------- the tree it is given


def test_a_copied_project_ports_its_own_tree_and_never_the_original(pproject, tmp_path):
    port(pproject, "start", expect=12)
    resolve_0001(port_tree(pproject))
    staged = git.index.staged_paths(port_tree(pproject))
    copy = Project(tmp_path / "copy", pproject.cache)
    shutil.copytree(pproject.root, copy.root, symlinks=True)
    copy.cli("port", "skip", "--to", NEXT, "--reason", "left out in the copy", expect=12)
    assert git.index.staged_paths(port_tree(pproject)) == staged  # the original's resolution is untouched
    assert json.loads(port(pproject, "status", "--json").output)["current"] == "0001-add-mul.patch"
    status = json.loads(copy.cli("port", "status", "--to", NEXT, "--json").output)
    assert status["done"][0]["status"] == "skipped" and status["tree"] == str(port_tree(copy))


def test_a_moved_project_goes_on_where_it_stopped(pproject, tmp_path):
    port(pproject, "start", expect=12)
    resolve_0001(port_tree(pproject))
    moved = Project(tmp_path / "moved", pproject.cache)
    shutil.move(pproject.root, moved.root)
    assert (
        json.loads(moved.cli("port", "status", "--to", NEXT, "--json").output)["current"]
        == "0001-add-mul.patch"
    )
    err = moved.cli("port", "continue", "--to", NEXT, expect=12).stderr
    assert "stopped at 0006-register.patch" in err


# --------------------------------------------------------------------------- killed starts and reports


def test_a_start_killed_after_placing_the_tree_is_a_port_the_next_run_goes_on_with(pproject, crash_at):
    crash_at(
        "tkvseam.tree.seamtree:SeamTree.swap_in",
        *pproject.argv("port", "start", "--base", NAME, "--to", NEXT),
        after=True,
    )
    status = json.loads(port(pproject, "status", "--json").output)
    assert status["done"] == [] and status["current"] is None and len(status["todo"]) == 8
    assert "stopped at 0001-add-mul.patch: conflict" in port(pproject, "continue", expect=12).stderr


@pytest.mark.parametrize("verb", ["start", "report"])
def test_a_killed_start_or_report_leaves_a_scratch_tree_the_next_run_removes(pproject, crash_at, verb):
    crash_at(
        "tkvseam.tree.porttree:PortTree.build",
        *pproject.argv("port", verb, "--base", NAME, "--to", NEXT),
        after=True,
    )
    build = pproject.root / "build"
    assert [p.name for p in build.glob(".port-*") if p.is_dir()]  # a port tree's worth, left behind
    port(pproject, verb, expect=12 if verb == "start" else 0)  # a start stops; a report that ran is done
    assert not [p.name for p in build.glob(".port-*") if p.is_dir()]


# --------------------------------------------------------------------------- symlinks of the new base


def test_port_writes_never_go_through_a_symlink_of_the_new_base(tmp_path):
    tree = tmp_path / "build" / "port"
    git.repo.init(tree)
    (tree / "vllm").mkdir()
    (tree / "vllm" / "engine").symlink_to("../..")  # vllm/engine/x -> build/x
    (tree / "vllm" / "other.py").write_text("a = 1\n")
    git.index.commit(tree, "new base\n", "Up Stream <up@example.invalid>")
    text = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Seam Dev <dev@example.invalid>\nSubject: [PATCH] " + message("extra", "add extra.py")
    )
    text = text.replace("\n\n", "\n\n", 1) + (
        "---\ndiff --git a/vllm/engine/extra.py b/vllm/engine/extra.py\nnew file mode 100644\n"
        "index 0000000000000000000000000000000000000000..1111111111111111111111111111111111111111\n"
        "--- /dev/null\n+++ b/vllm/engine/extra.py\n@@ -0,0 +1 @@\n+escaped = True\n"
    )
    patch = parse_text(text, "0001-extra.patch")
    assert symlinked_path(tree, "HEAD", patch) == ("vllm/engine/extra.py", "vllm/engine")
    files, _ = PortTree(tree).apply_files(patch, {})
    assert [(f.status, f.note) for f in files] == [
        ("refused", "goes through the symlink vllm/engine of the new base: refused")
    ]
    assert not (tmp_path / "build" / "extra.py").exists()


# --------------------------------------------------------------------------- direction and reasons


def test_a_self_port_and_a_port_onto_an_older_base_are_refused(pproject):
    before = {p: p.read_bytes() for p in (pproject.root / "patches").rglob("*") if p.is_file()}
    for verb in ("start", "report"):
        err = pproject.cli("port", verb, "--base", NAME, "--to", NAME, expect=2).stderr
        assert "onto v9.9.9 itself" in err and "next:" in err
        err = pproject.cli("port", verb, "--base", NEXT, "--to", NAME, expect=2).stderr
        assert "is not newer than" in err and "forward only" in err
    assert {p: p.read_bytes() for p in (pproject.root / "patches").rglob("*") if p.is_file()} == before
    assert not port_tree(pproject).exists()


@pytest.mark.parametrize("verb", ["skip", "continue"])
def test_a_multi_line_reason_is_refused_before_anything_is_written(pproject, verb):
    _stopped_at_0006(pproject)
    tree = port_tree(pproject)
    head = git.repo.head(tree)
    err = port(pproject, verb, "--reason", "upstream has it\n\nVerdict: dropped", expect=2).stderr
    assert "--reason must be one line" in err
    assert git.repo.head(tree) == head and not (pproject.root / "patches" / NEXT).exists()
    assert json.loads(port(pproject, "status", "--json").output)["current"] == "0006-register.patch"


def test_refresh_of_an_unfinished_port_tree_names_the_port_not_apply(pproject):
    port(pproject, "start", expect=12)
    err = pproject.cli("refresh", "--base", NEXT, "--tree", str(port_tree(pproject)), expect=5).stderr
    assert "port to v9.10.0 in progress" in err and "make port VERB=status TO=v9.10.0" in err
    assert "make apply" not in err


def test_a_finish_killed_while_writing_the_queue_is_taken_up_by_the_next(pproject, crash_at):
    _git_project(pproject)
    _stopped_at_0006(pproject)
    port(pproject, "skip", "--reason", "upstream has register()")
    queue = pproject.root / "patches" / NEXT
    reviewed = {}
    for p in sorted(queue.glob("000[1-3]-*.patch")):  # the reviewed queue words its descriptions its own way
        reviewed[p.name] = p.read_text().replace("Changes things.", "Reviewed: changes things.")
        p.write_text(reviewed[p.name])
    git.index.commit(pproject.root, "the reviewed queue\n", "Seam Dev <dev@example.invalid>")
    _stopped_at_0006(pproject, again=True)  # a port again, onto the base that has a reviewed queue
    # killed as the second patch file is written: the queue half new, half reviewed
    argv = pproject.argv("port", "skip", "--to", NEXT, "--reason", "upstream has register()")
    crash_at("tkvseam.queue.writer.atomic_write", *argv, nth=2)
    assert "Reviewed:" not in (queue / "0001-add-mul.patch").read_text()
    assert "Reviewed:" in (queue / "0002-use-mul.patch").read_text()
    res = port(pproject, "finish")  # no refusal of its own half-written queue
    assert "the files it replaced are in" in res.output
    backup = res.output.rsplit("the files it replaced are in ", 1)[1].split()[0]
    for name, text in reviewed.items():  # what it replaced, as it was before the killed run began
        assert open(f"{backup}/patches/{NEXT}/{name}").read() == text
        assert "Reviewed:" not in (queue / name).read_text()
    assert "lint: ok" not in res.stderr and "lint + style gate: ok" in res.output


def test_continue_refuses_a_message_that_would_lose_the_header_before_committing(pproject):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    resolve_0001(tree)
    head = git.repo.head(tree)
    msg = tree / ".git" / "tkv-seam-port-msg"
    text = msg.read_text()
    msg.write_text(text.replace("Verdict: still needed\n", "Verdict: still needed\n\n"))  # the fields split
    err = port(pproject, "continue", expect=5).stderr
    assert "lost the header field(s) Verdict" in err and "next:" in err
    msg.write_text(text.replace("add-mul: add mul()", "renamed: add mul()"))
    assert "not the patch's slug 'add-mul'" in port(pproject, "continue", expect=5).stderr
    assert git.repo.head(tree) == head and git.index.staged_paths(
        tree
    )  # nothing committed, the resolution staged
    msg.write_text(text)
    assert "stopped at 0006-register.patch" in port(pproject, "continue", expect=12).stderr


def test_two_starts_at_once_make_one_port_and_the_other_is_refused(pproject):
    import os
    import sys

    cmd = [sys.executable, "-m", "tkvseam", *pproject.argv("port", "start", "--base", NAME, "--to", NEXT)]
    env = dict(os.environ, TKV_SEAM_LOCK_TIMEOUT="300")
    runs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = sorted((r.wait(), r.stderr.read()) for r in runs)
    assert [rc for rc, _ in results] == [5, 12], results
    assert "already in progress" in results[0][1] and "stopped at 0001-add-mul.patch" in results[1][1]
    status = json.loads(port(pproject, "status", "--json").output)
    assert status["current"] == "0001-add-mul.patch" and status["done"] == []
    assert not [p.name for p in (pproject.root / "build").glob(".port-*") if p.is_dir()]


def test_a_port_state_no_release_wrote_is_not_read_and_nothing_changes(pproject):
    """A development version's port state (.git/tkv-seam-port.json, no tkv-seam.json): tkv-seam 0.1.0
    was never released, so no release wrote it and none reads it. The port tree is named, nothing
    in it changes, and the hint keeps it (its commits stay there)."""
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    state = json.loads((tree / ".git/tkv-seam.json").read_text())
    (tree / ".git/tkv-seam.json").unlink()
    (tree / ".git/tkv-seam-port.json").write_text(json.dumps({"to_base": state["base"], "next": 0}))
    head = git.repo.head(tree)
    res = port(pproject, "status", "--json", expect=1)
    out = json.loads(res.stdout)
    assert "holds no port tkv-seam can go on with" in out["error"] and "mv " in out["hint"]
    assert git.repo.head(tree) == head and (tree / ".git/tkv-seam-port.json").exists()
