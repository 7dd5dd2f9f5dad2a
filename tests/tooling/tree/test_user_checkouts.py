"""apply over checkouts a user made in the tree: their own branches, an unborn HEAD, a `seam/...` name."""

from __future__ import annotations


import json

import pytest

from tkvseam import git

from ..fixtures.queue import message, make_two_patches
from ..fixtures.upstream import NAME


def _edit_patch_2(project):
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("return a * b", "return b * a"))


def _branch_of_mine(project, name="mine") -> str:
    """A branch of the user's holding a commit that is in no patch; HEAD back on seam."""
    git.core.run(project.tree, "checkout", "-q", "-b", name)
    project.commit_in_tree("vllm/mine.py", "z = 3\n", message("mine", "my commit"))
    git.core.run(project.tree, "checkout", "-q", "seam")
    return git.core.out(project.tree, "rev-parse", name)


@pytest.mark.parametrize("how", ["force-untracked", "new-base"])
def test_a_branch_of_the_users_survives_a_tree_rebuilt_aside(project, upstream, how):
    """A tree rebuilt in a scratch directory and swapped in kept only the tool's refs: the user's own
    branch (a commit in no patch) and tag were gone with the old tree, with and without --force."""
    make_two_patches(project)
    project.apply("--force")
    mine = _branch_of_mine(project)
    git.core.run(project.tree, "tag", "my-tag", mine)
    if how == "force-untracked":  # an untracked file + --force: built aside
        (project.tree / "scratch.txt").write_text("x\n")
        _edit_patch_2(project)
        project.apply("--force")
    else:  # another base commit (the git source): built aside, no --force needed
        project.apply("--git", str(upstream.root))
    assert git.core.out(project.tree, "rev-parse", "refs/heads/mine") == mine
    assert git.core.out(project.tree, "rev-parse", "refs/tags/my-tag") == mine
    assert git.repo.branch(project.tree) == "refs/heads/seam"


def test_a_carried_branch_whose_name_the_new_tree_uses_is_kept_in_a_ref_it_names(project, upstream):
    """The git source's clone has its own `main`: the user's `main` of the sdist tree goes to a kept ref."""
    make_two_patches(project)
    project.apply("--force")
    mine = _branch_of_mine(project, "main")
    res = project.apply("--git", str(upstream.root))
    kept = [
        r
        for r in git.repo.refs(project.tree, "refs/tkv-seam/dropped/")
        if git.repo.rev_parse(project.tree, r) == mine
    ]
    assert len(kept) == 1 and kept[0] in res.stderr
    assert git.repo.rev_parse(project.tree, "refs/heads/main") != mine  # the git source's own
    assert not [r for r in git.repo.refs(project.tree, "refs/tkv-seam/dropped/") if r.endswith("/heads/base")]


def test_a_branch_named_under_seam_is_refused_before_anything_moves(project):
    """`git branch -m seam seam/old`: refs/heads/seam could not be written, so the switch failed
    after the files moved (exit 1, half-switched) and every later apply failed in its reset."""
    make_two_patches(project)
    project.apply("--force")
    head = git.repo.head(project.tree)
    git.core.run(project.tree, "branch", "-m", "seam", "seam/old")
    _edit_patch_2(project)
    err = project.apply(expect=5).stderr
    assert "seam/old" in err and "git -C" in err and "branch -m" in err
    assert git.repo.branch(project.tree) == "refs/heads/seam/old" and git.repo.head(project.tree) == head
    assert git.index.status_porcelain(project.tree) == []
    git.core.run(project.tree, "branch", "-m", "seam/old", "old-seam")  # what the hint says
    project.apply()
    assert git.repo.branch(project.tree) == "refs/heads/seam"
    assert git.repo.rev_parse(project.tree, "old-seam") == head


@pytest.mark.parametrize("how", ["orphan", "missing-branch"])
def test_an_unborn_head_is_refused_naming_it_and_force_puts_it_back(project, how):
    """HEAD on a branch with no commits (`git checkout --orphan`, a symbolic ref to a missing branch):
    apply failed with git's 'ambiguous argument HEAD' (exit 1), also with --force."""
    make_two_patches(project)
    project.apply("--force")
    if how == "orphan":
        git.core.run(project.tree, "checkout", "-q", "--orphan", "fresh")
    else:
        git.core.run(project.tree, "symbolic-ref", "HEAD", "refs/heads/nope")
    (project.tree / "notes.txt").write_text("mine\n")
    _edit_patch_2(project)
    err = project.apply(expect=5).stderr
    assert "no commits" in err and "FORCE=1" in err and "symbolic-ref HEAD refs/heads/seam" in err
    res = project.apply("--force")
    (ref,) = [r for r in git.repo.refs(project.tree, "refs/tkv-seam/dropped/") if r in res.stderr]
    assert git.core.out(project.tree, "show", f"{ref}:notes.txt") == "mine"
    assert git.repo.branch(project.tree) == "refs/heads/seam"
    assert git.index.status_porcelain(project.tree) == []
    assert "return b * a" in (project.tree / "vllm/engine/arg_utils.py").read_text()


def test_commits_on_seam_are_kept_when_head_is_on_another_branch(project):
    """HEAD on a branch of the user's at the recorded head, their commit on `seam`: the switch
    moved `seam` to the new head, and the commit was in no ref."""
    make_two_patches(project)
    project.apply("--force")
    git.core.run(project.tree, "branch", "mine")
    project.commit_in_tree("vllm/mine.py", "z = 3\n", message("mine", "my commit"))
    mine = git.repo.head(project.tree)
    git.core.run(project.tree, "checkout", "-q", "mine")
    _edit_patch_2(project)
    err = project.apply(expect=5).stderr
    assert "mine: my commit" in err and git.repo.rev_parse(project.tree, "seam") == mine
    res = project.apply("--force")
    kept = [r for r in git.repo.refs(project.tree, "refs/tkv-seam/dropped/") if r in res.stderr]
    assert len(kept) == 1 and git.repo.is_ancestor(project.tree, mine, kept[0])
    assert git.repo.branch(project.tree) == "refs/heads/seam"


def test_seam_checked_out_in_a_linked_worktree_is_refused(project, tmp_path):
    """`git worktree add ../other seam` from the tree: the switch moved `seam` under that checkout
    (its files then showed as changes against the new head) and attached a second HEAD to it."""
    make_two_patches(project)
    project.apply("--force")
    git.core.run(project.tree, "checkout", "-q", "-b", "mine")
    other = tmp_path / "other"
    git.core.run(project.tree, "worktree", "add", "-q", str(other), "seam")
    head = git.repo.head(other)
    _edit_patch_2(project)
    err = project.apply(expect=5).stderr
    assert str(other) in err and "worktree" in err
    assert git.repo.head(other) == head and git.index.status_porcelain(other) == []


@pytest.mark.parametrize("target", ["index.switch_worktree", "repo.update_ref", "repo.attach_head"])
@pytest.mark.parametrize("where", ["detached", "mine"])
def test_a_switch_killed_at_each_step_from_another_checkout_is_finished_on_seam(
    project, crash_at, target, where
):
    """Killed (SIGKILL) right after each step of the switch: the next apply ends on `seam` at the new
    head, clean, the user's branch where it was; refresh then writes the queue the tree holds."""
    make_two_patches(project)
    project.apply("--force")
    git.core.run(project.tree, "checkout", "-q", *(["--detach"] if where == "detached" else ["-b", "mine"]))
    before = git.repo.head(project.tree)
    _edit_patch_2(project)
    when = None if target == "index.switch_worktree" else "refs/heads/seam"
    crash_at(f"tkvseam.git.{target}", *project.argv("apply", "--base", NAME), after=True, when=when)
    out = json.loads(project.apply("--json").output)
    assert git.repo.branch(project.tree) == "refs/heads/seam" and git.repo.head(project.tree) == out["head"]
    assert git.index.status_porcelain(project.tree) == []
    if where == "mine":
        assert git.repo.rev_parse(project.tree, "mine") == before
    project.refresh()
    assert "return b * a" in (project.root / "patches/0002-add-mul.patch").read_text()
    assert {r["status"] for r in json.loads(project.refresh("--json").output)["exported"]} == {"unchanged"}
