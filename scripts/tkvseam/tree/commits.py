"""A queue as commits, made with plumbing only: objects first, no ref or file moves.

``commit_series`` makes one commit per patch on a base commit in a repository's object
store (a private index of this run, blobs, trees, commit-tree); the work tree and the
real index are never touched, so a failing patch, or a kill, leaves the repository as it
was (unreferenced objects aside). Every hunk is replayed exactly (``patch.replay_file``).

``refuse_symlinked_paths`` is the one symlink guard for patch paths: apply and the port
both refuse a patch whose path is, or goes through, a symlink of the tree it applies to.
"""

from __future__ import annotations

from pathlib import Path

from .. import git
from ..errors import ApplyError, SeamError, VerifyError
from ..queue.patch import ChangeKind, Patch, replay_file
from ..progress import Progress
from .state import AppliedPatch


class CorruptObject(VerifyError):
    """An object the base needs cannot be read (missing or corrupt)."""


def symlinked_path(repo: Path, commit: str, patch: Patch) -> tuple[str, str] | None:
    """``(patch path, symlink)`` for the first path of ``patch`` that is, or goes through, a
    symlink at ``commit``; None when there is none."""
    paths = {p for fc in patch.files for p in (fc.old, fc.new) if p}
    prefixes = sorted({str(Path(*Path(p).parts[: i + 1])) for p in paths for i in range(len(Path(p).parts))})
    for entry in git.repo.ls_tree(repo, commit, prefixes):
        if entry.mode == git.core.SYMLINK_MODE:
            bad = next(p for p in sorted(paths) if p == entry.path or p.startswith(entry.path + "/"))
            return bad, entry.path
    return None


def refuse_symlinked_paths(repo: Path, commit: str, patch: Patch) -> None:
    """Refuse (exit 3) a patch whose path is, or goes through, a symlink at ``commit``."""
    found = symlinked_path(repo, commit, patch)
    if found:
        raise ApplyError(f"{patch.name}: {found[0]}: goes through the symlink {found[1]}: refused")


def _read_base_file(
    repo: Path, commit: str, patch: Patch, path: str, origin: str
) -> tuple[str | None, str | None]:
    """(text, mode) of ``path`` at ``commit``, (None, None) when absent; CorruptObject when unreadable."""
    try:
        entry = git.repo.tree_entry(repo, commit, path)
        if entry is None:
            return None, None
        if entry.mode == git.core.TREE_MODE:
            raise ApplyError(
                f"{patch.name}: {path}: is a directory at {commit[:12]}, the patch treats it as a file"
            )
        return git.repo.read_blob(repo, entry.id).decode("utf-8", "surrogateescape"), entry.mode
    except ApplyError:
        raise
    except SeamError as e:
        raise CorruptObject(
            f"{patch.name}: {path}: cannot read it from {origin} (missing or corrupt object): "
            f"{e.message.splitlines()[-1]}",
            hint=f"mv {repo} {repo}.corrupt, then run the command again",
        ) from e


def commit_series(
    repo: Path, base_commit: str, patches: list[Patch], progress: Progress, origin: str | None = None
) -> list[AppliedPatch]:
    """Make one commit per patch on ``base_commit`` in ``repo``'s object store; nothing else moves.

    ``origin`` names where the objects came from, for the error when one is unreadable.
    """
    contents: dict[str, str | None] = {}
    modes: dict[str, str | None] = {}
    parent, applied = base_commit, []
    with git.index.private_index(repo, base_commit) as index:
        for k, patch in enumerate(patches, 1):
            progress.step(f"apply [{k}/{len(patches)}] {patch.name}")
            refuse_symlinked_paths(repo, parent, patch)
            entries = []
            for fc in patch.files:
                path = fc.old or fc.new
                if path not in contents:
                    contents[path], modes[path] = _read_base_file(
                        repo, parent, patch, path, origin or str(repo)
                    )
                new_text = replay_file(
                    patch, fc, contents[path] if fc.kind != ChangeKind.ADD else contents.get(fc.new)
                )
                target = fc.new or fc.old
                contents[target] = new_text
                if new_text is None:
                    entries.append(("0", "", target))
                else:
                    sha = git.index.hash_blob(repo, new_text.encode("utf-8", "surrogateescape"))
                    mode = fc.new_mode or modes.get(target) or "100644"
                    modes[target] = mode
                    entries.append((mode, sha, target))
            git.index.update_index(repo, index, entries)
            tree = git.index.write_tree(repo, index)
            parent = git.index.commit_tree(
                repo, tree, [parent], patch.header.message, git.core.Person.parse(patch.header.author)
            )
            applied.append(AppliedPatch(patch.name, parent, [fc.new or fc.old for fc in patch.files]))
    return applied
