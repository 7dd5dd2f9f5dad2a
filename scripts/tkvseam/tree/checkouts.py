"""The user's checkouts in a tree tkv-seam made: what apply refuses and what a rebuilt tree keeps.

A switch writes the branch ``seam`` and points HEAD at it; a tree rebuilt aside replaces the
whole repository. So a ``seam/...`` branch (git cannot hold both), worktrees linked to the tree
and an unborn HEAD are refused before anything moves (``refuse_blocked_branch``,
``refuse_linked_worktrees``, ``put_back_unborn_head``), and the user's own branches, tags and
stash go over to a rebuilt tree (``carry_kept``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .. import git, hints
from ..errors import RefusedError
from ..fsutil import stamp
from ..progress import QUIET, Progress

BRANCH = "seam"
BASE_TAG = "tkv-seam-base"
DROPPED_REFS = "refs/tkv-seam/dropped"  # refs keeping what the tool dropped from a tree
DROPPED_DIR = "tkv-seam-dropped"  # in the tree's .git: files the tool set aside or backed up


def refuse_blocked_branch(tree: Path, rerun: str) -> None:
    """Refuse (exit 5, nothing changed) when a branch of the user's is named ``seam/...``: git
    then cannot write the tool's branch ``seam``, and a switch would stop half done."""
    blocking = [r.removeprefix("refs/heads/") for r in git.refs(tree, f"refs/heads/{BRANCH}/")]
    if not blocking:
        return
    name = blocking[0]
    raise RefusedError(
        f"{tree}: the branch {', '.join(blocking)} blocks the branch `{BRANCH}` tkv-seam moves "
        f"(git cannot hold both {BRANCH} and {BRANCH}/...); nothing was changed",
        hint=f"rename it (each): `{hints.shell('git', '-C', tree, 'branch', '-m', name, name.replace('/', '-'))}`, "
        f"then {rerun}",
    )


def refuse_linked_worktrees(tree: Path, rerun: str) -> None:
    """Refuse (exit 5, nothing changed) a tree with worktrees linked to it (``git worktree add``):
    a switch moves ``seam`` under the one that has it checked out, and a tree replaced or removed
    takes their git data (.git/worktrees) with it."""
    linked = git.linked_worktrees(tree)
    if not linked:
        return
    shown = "\n".join(f"    {path} ({branch or 'detached'})" for path, branch in linked)
    raise RefusedError(
        f"{tree} has worktrees linked to it; tkv-seam would move their branch or drop their git "
        f"data; nothing was changed:\n{shown}",
        hint=f"commit what they hold, then unlink each: `{hints.shell('git', '-C', tree, 'worktree', 'remove', linked[0][0])}`, "
        f"then {rerun}",
    )


def put_back_unborn_head(tree: Path, head: str, force: bool, rerun: str, force_hint: str | None) -> None:
    """HEAD on a branch with no commits (``git checkout --orphan``, a symbolic ref to a missing
    branch): refused, naming it (exit 5); ``force`` points HEAD at the recorded head first (the
    files and the index stay: what differs is then the user's work, kept by the usual rule)."""
    if git.resolve(tree, "HEAD") is not None:
        return
    if force and force_hint:
        git.detach_head(tree, head)
        return
    seam = f"refs/heads/{BRANCH}"
    back = (
        hints.shell("git", "-C", tree, "symbolic-ref", "HEAD", seam)
        if git.resolve(tree, seam)
        else hints.shell("git", "-C", tree, "update-ref", "--no-deref", "HEAD", head)
    )
    raise RefusedError(
        f"{tree}: HEAD is on {git.branch(tree)}, a branch with no commits (not the recorded "
        f"{head[:12]}); nothing was changed",
        hint=f"put HEAD back (your files and index stay; they then show as changes): `{back}`, then {rerun}"
        + (f"; or {force_hint} (does that, then keeps what differs in a ref)" if force_hint else ""),
    )


def user_refs(tree: Path) -> list[str]:
    """The refs of a tree that are the user's: branches and tags the tool did not make, the stash."""
    ours = {f"refs/heads/{BRANCH}", f"refs/tags/{BASE_TAG}"}
    found = git.refs(tree, "refs/heads/") + git.refs(tree, "refs/tags/") + git.refs(tree, "refs/stash")
    return [r for r in found if r not in ours]


def carry_kept(old: Path, new: Path, progress: Progress = QUIET) -> None:
    """Copy into the replacement of a tree what the tree keeps: the refs and files keeping dropped
    work, and the user's own refs under their names. A name the new tree holds at another commit
    (the base clone's own branch after a new base) keeps the old one under ``DROPPED_REFS`` (said),
    unless it is the old base's (nothing of the user's on it)."""
    if not (old / ".git").is_dir():
        return
    specs = [f"+{DROPPED_REFS}/*:{DROPPED_REFS}/*"] if git.refs(old, DROPPED_REFS) else []
    old_base = git.resolve(old, f"{BASE_TAG}^{{commit}}")
    renamed, prefix = [], f"{DROPPED_REFS}/{stamp()}"
    for ref in user_refs(old):
        theirs = git.resolve(new, ref)
        if theirs is None:
            specs.append(f"{ref}:{ref}")
        elif theirs != git.resolve(old, ref) and not (
            old_base and git.is_ancestor(old, f"{ref}^{{commit}}", old_base)
        ):
            specs.append(f"{ref}:{prefix}/{ref.removeprefix('refs/')}")
            renamed.append(f"{ref} -> {prefix}/{ref.removeprefix('refs/')}")
    if specs:
        git.fetch(new, old, *specs)
    if renamed:
        progress.warn(
            "the new tree uses these names for other commits; the old ones are kept in:\n    "
            + "\n    ".join(renamed)
        )
    kept = old / ".git" / DROPPED_DIR
    if kept.is_dir():
        shutil.copytree(kept, new / ".git" / DROPPED_DIR, dirs_exist_ok=True, symlinks=True)
