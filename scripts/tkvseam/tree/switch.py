"""Moving a build tree in place: apply's switch of a clean tree to new commits of the same base.

The switch touches only the files that differ (``git.index.switch_worktree``: a two-tree merge), so
files git ignores stay where they are; one at a path the switch adds is refused (``force``: set
aside in ``.git/tkv-seam-dropped/``, and said so). The new state is saved first, marked pending
with the HEAD it starts from, so a switch killed at any step is finished by the next run
(``finish_pending``), never over work added since: a file counts as the switch's own only when
the switch touches it and its content is that of the old or the new commit.
"""

from __future__ import annotations

from pathlib import Path

from .. import git, hints
from ..errors import RefusedError
from ..fsutil import lexists
from ..layout import BRANCH, DROPPED_DIR
from ..progress import QUIET, Progress
from . import kept
from .state import TreeState
from .work import UserWork, refuse_checkouts, user_work


def pending_work(tree: Path, state: TreeState) -> UserWork:
    """What a user added to a half-switched tree (ignored files stay where they are: the switch set
    aside those in its way before it started)."""
    start = state.switch_from or state.head
    touched = set(git.repo.changed_paths(tree, start, state.head))
    work = user_work(tree, state, expected_heads=(start,), ignored=False)
    work.dirty = [
        (st, path)
        for st, path in work.dirty
        if path not in touched
        or git.repo.file_blob_id(tree, path)
        not in (git.repo.blob_id(tree, state.head, path), git.repo.blob_id(tree, start, path))
    ]
    return work


def finish_pending(
    tree: Path, state: TreeState, force: bool, rerun: str, force_rerun: str, progress: Progress = QUIET
) -> str | None:
    """Finish an interrupted in-place switch, never over work added since; return a kept ref.

    ``rerun``/``force_rerun``: the apply of this tree without and with ``--force`` (for hints)."""
    refuse_checkouts(tree, state.head, f"`{rerun}`", force, f"`{force_rerun}`")
    work = pending_work(tree, state)
    ref = None
    if work and not force:
        raise RefusedError(
            f"{tree}: an interrupted apply left it half-switched to {state.head[:12]}, and it "
            f"holds work added since:\n{work.describe()}",
            hint=f"finish the switch and keep that work in a ref it names: `{force_rerun}` "
            f"(then `{hints.shell('git', '-C', tree, 'checkout', '<ref>', '--', '<file>')}` or "
            "`git cherry-pick <ref>` brings it back)",
        )
    if work:
        kept.refuse_nested(work, f"`{rerun}`")
        ref = kept.keep_dropped(tree, work, "finishing an interrupted switch")
        show = hints.shell("git", "-C", tree, "show", ref)
        progress.warn(f"--force drops from {tree}:\n{work.describe()}\nkept in {ref} ({show})")
    progress.step(f"finish the interrupted switch of {tree} to {state.head[:12]}")
    git.repo.attach_head(tree, f"refs/heads/{BRANCH}")  # the reset moves our branch, never another
    if work:
        git.index.reset_clean(tree, state.head)  # the untracked files are in the kept ref
    else:
        git.index.reset_hard(tree, state.head)
    git.repo.update_ref(tree, f"refs/heads/{BRANCH}", state.head)
    state.pending, state.switch_from = False, None
    state.save(tree)
    return ref


def _in_the_way(tree: Path, added: list[str]) -> list[str]:
    """What stands where the switch writes ``added`` (paths HEAD lacks): something at the path
    itself, or a file or symlink of the user's at one of its parent directories (git would
    replace it, or write through the link)."""
    out = []
    for rel in added:
        parts = Path(rel).parts
        for i in range(1, len(parts)):
            parent = tree.joinpath(*parts[:i])
            if (parent.is_symlink() or (lexists(parent) and not parent.is_dir())) and not git.repo.exists_at(
                tree, "HEAD", "/".join(parts[:i])
            ):
                out.append("/".join(parts[:i]))
                break
        else:
            if lexists(tree / rel):
                out.append(rel)
    return sorted(set(out))


def switch_in_place(
    tree: Path, new: TreeState, force: bool, rerun: str, force_rerun: str, progress: Progress = QUIET
) -> None:
    """Move a clean tree from its HEAD to ``new.head``, touching only the files that differ."""
    in_the_way = _in_the_way(tree, git.repo.changed_paths(tree, "HEAD", new.head, only="A"))
    if in_the_way and not force:
        shown = "\n".join(f"    {p}" for p in in_the_way[:10])
        first = tree / in_the_way[0]
        raise RefusedError(
            f"{tree}: the patches add files that exist there as ignored files; the switch would "
            f"overwrite them:\n{shown}",
            hint=f"keep them: `{hints.shell('mv', first, f'{first}.mine')}` (each), then `{rerun}`; "
            f"or `{force_rerun}` (sets them aside in .git/{DROPPED_DIR}/)",
        )
    if in_the_way:
        keep = kept.set_aside(tree, in_the_way)
        progress.warn(f"--force sets aside ignored files the patches add, in {keep}: {', '.join(in_the_way)}")
    new.pending, new.switch_from = True, git.repo.head(tree)
    new.save(tree)
    git.index.switch_worktree(tree, new.head)
    git.repo.update_ref(tree, f"refs/heads/{BRANCH}", new.head)
    git.repo.attach_head(tree, f"refs/heads/{BRANCH}")  # HEAD was detached or another branch
    new.pending, new.switch_from = False, None
    new.save(tree)
