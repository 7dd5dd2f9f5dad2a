"""What a rebuilt or removed tree keeps of the user's git, found by attacking apply, clean and abort.

- every stash entry, not only the newest: ``refs/stash`` holds ``stash@{0}``, its reflog the
  others; a rebuilt tree got only ``stash@{0}`` and a bundle only that one;
- the tree's own git settings: ``.git/config`` (a remote, an identity), ``.git/info/exclude``
  (what the user ignores there), hooks: gone with a rebuilt tree;
- an ignored file standing where a patch adds a directory (``notes`` a file, the patch adds
  ``notes/x.py``): the switch replaced it silently;
- a removed tree's git settings (its config, hooks): not in its bundle;
- a port tree with a worktree linked to it: ``port abort`` removed it, the worktree's index and
  HEAD with it (they live in the port tree's ``.git``);
- ``build/dropped`` a plain file: ``clean --force`` removed trees, then failed to keep the next;
- a tree applied from a git source holds upstream's tags and branches (its clone's): clean and
  retire took them for the user's and refused the tree (``TreeState.clone_refs`` records them).

Each failed before its fix.
"""

from __future__ import annotations

import json
import subprocess

from tkvseam import git

from ..fixtures.portcase import port, port_tree
from ..fixtures.queue import message
from ..fixtures.upstream import NAME, NEXT_VERSION


def _stash_two(tree) -> list[str]:
    (tree / "README.md").write_text("first stash\n")
    git.core.run(tree, "stash", "-q")
    (tree / "README.md").write_text("second stash\n")
    git.core.run(tree, "stash", "-q")
    return _stash(tree)


def _stash(tree) -> list[str]:
    return git.core.out(tree, "log", "-g", "--format=%H", "refs/stash", "--").split()


def test_a_rebuilt_tree_keeps_every_stash_entry_and_the_trees_git_settings(project, upstream):
    project.apply()
    tree = project.tree
    entries = _stash_two(tree)
    assert len(entries) == 2
    git.core.run(tree, "remote", "add", "fork", "https://example.invalid/fork.git")
    (tree / ".git" / "info").mkdir(exist_ok=True)
    (tree / ".git" / "info" / "exclude").write_text("scratch/\n")
    hook = tree / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    project.apply("--git", str(upstream.root))  # a new source: the tree is rebuilt aside
    assert _stash(tree) == entries
    assert git.core.out(tree, "show", "stash@{1}:README.md") == "first stash"
    assert git.repo.remote_url(tree, "fork") == "https://example.invalid/fork.git"
    assert (tree / ".git" / "info" / "exclude").read_text() == "scratch/\n"
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"
    assert not git.repo.refs(tree, "refs/tkv-seam/carry")


def test_a_bundle_keeps_every_stash_entry(pproject, tmp_path):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    git.core.run(tree, "reset", "-q", "--hard")
    entries = _stash_two(tree)
    out = json.loads(port(pproject, "abort", "--json").output)
    clone = tmp_path / "back"
    subprocess.run(["git", "clone", "-q", "--no-checkout", out["bundle"], str(clone)], check=True)
    kept = [
        git.core.out(clone, "rev-parse", f"refs/tkv-seam/kept/stash/{n}")
        for n in range(2)
        if not subprocess.run(
            [
                "git",
                "-C",
                str(clone),
                "fetch",
                "-q",
                out["bundle"],
                f"refs/tkv-seam/kept/stash/{n}:refs/tkv-seam/kept/stash/{n}",
            ]
        ).returncode
    ]
    assert kept == entries


def test_an_ignored_file_where_a_patch_adds_a_directory_is_refused_then_set_aside(project):
    project.apply()
    project.commit_in_tree("notes/x.py", "x = 1\n", message("add-notes", "add notes/x.py"))
    project.refresh()
    project.write_series()
    project.apply()  # in place, back to the base: notes/ goes
    (project.tree / ".git" / "info").mkdir(exist_ok=True)
    (project.tree / ".git" / "info" / "exclude").write_text("notes\n")
    (project.tree / "notes").write_text("my notes\n")  # ignored: a file where the patch adds a directory
    project.write_series("0001-add-notes.patch")
    err = project.apply(expect=5).stderr
    assert "    notes\n" in err and "ignored files" in err
    assert (project.tree / "notes").read_text() == "my notes\n"
    res = project.apply("--force")
    assert "sets aside" in res.stderr and (project.tree / "notes" / "x.py").read_text() == "x = 1\n"
    (kept,) = (project.tree / ".git" / "tkv-seam-dropped").iterdir()
    assert (kept / "notes").read_text() == "my notes\n"


def test_clean_force_refuses_a_build_dropped_that_is_a_file_before_removing_anything(pproject):
    pproject.commit_in_tree("vllm/new.py", "x = 1\n", message("new-file", "add new.py"))
    pproject.cli("overlay", "stage", "--base", NAME)
    (pproject.root / "build" / "dropped").write_text("not a directory\n")
    err = pproject.cli("clean", "--force", expect=5).stderr
    assert "build/dropped is not a directory" in err
    assert (pproject.tree / "vllm/new.py").exists() and (pproject.root / "build" / f"overlay-{NAME}").is_dir()


def test_the_refs_a_git_sources_clone_brings_are_not_taken_for_the_users(project, upstream):
    project.apply("--git", str(upstream.root))
    tags = git.repo.refs(project.tree, "refs/tags/")
    assert f"refs/tags/v{NEXT_VERSION}" in tags  # upstream's, from the clone
    git.core.run(project.tree, "tag", "mine", f"v{NEXT_VERSION}")  # one of the user's, on upstream's history
    err = project.cli("clean", expect=5).stderr
    assert "refs/tags/mine" in err and f"refs/tags/v{NEXT_VERSION}" not in err
    git.core.run(project.tree, "tag", "-d", "mine")
    out = json.loads(project.cli("clean", "--json").output)
    assert out["removed"] == [f"build/vllm-{NAME}"]


def test_port_abort_refuses_a_port_tree_with_a_linked_worktree(pproject, tmp_path):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    other = tmp_path / "other"
    git.core.run(tree, "worktree", "add", "-q", "--detach", str(other), "HEAD")
    (other / "wip.txt").write_text("mine\n")
    git.core.run(other, "add", "wip.txt")
    err = port(pproject, "abort", expect=5).stderr
    assert str(other) in err and "worktree remove" in err
    assert tree.is_dir() and git.index.staged_paths(other) == ["wip.txt"]


def test_a_rebuild_killed_while_carrying_the_stash_over_loses_no_entry(project, upstream, crash_at):
    project.apply()
    entries = _stash_two(project.tree)
    argv = project.argv("apply", "--base", NAME, "--git", str(upstream.root))
    crash_at("tkvseam.git.repo.stash_store", *argv, nth=2)  # one entry stored in the new tree, one not
    assert _stash(project.tree) == entries  # the old tree, as it was
    project.apply("--git", str(upstream.root))
    assert _stash(project.tree) == entries and not git.repo.refs(project.tree, "refs/tkv-seam/carry")


def test_clean_force_refuses_what_no_bundle_holds_before_removing_anything(pproject, tmp_path):
    """A build tree with a linked worktree (and a commit: work, so FORCE=1 would bundle it) beside
    an output clean would remove: nothing goes, the worktree is named."""
    pproject.commit_in_tree("vllm/new.py", "x = 1\n", message("new-file", "add new.py"))
    other = tmp_path / "other"
    git.core.run(pproject.tree, "worktree", "add", "-q", "--detach", str(other), "HEAD")
    pproject.cli("overlay", "stage", "--base", NAME)
    err = pproject.cli("clean", "--force", expect=5).stderr
    assert str(other) in err and "worktree remove" in err
    assert pproject.tree.is_dir() and (pproject.root / "build" / f"overlay-{NAME}").is_dir()
    assert not (pproject.root / "build" / "dropped").exists()


def test_a_bundle_keeps_the_trees_git_settings(pproject, tmp_path):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    git.core.run(tree, "remote", "add", "fork", "https://example.invalid/fork.git")
    (tree / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    out = json.loads(port(pproject, "abort", "--json").output)
    clone = tmp_path / "back"
    subprocess.run(["git", "clone", "-q", "--no-checkout", out["bundle"], str(clone)], check=True)
    ref = "refs/tkv-seam/kept/files"
    subprocess.run(["git", "-C", str(clone), "fetch", "-q", out["bundle"], f"{ref}:{ref}"], check=True)
    assert "https://example.invalid/fork.git" in git.core.out(clone, "show", f"{ref}:git/config")
    assert git.core.out(clone, "show", f"{ref}:git/hooks/pre-commit") == "#!/bin/sh\nexit 0"
