"""What the tool keeps when it drops something, and where.

In a tree (it stays with the tree; a rebuilt tree gets it over, ``carry_kept``):

- ``keep_dropped``: files and commits about to be dropped, in a ref ``refs/tkv-seam/dropped/<time>``
  (a snapshot commit on HEAD holding the changed, untracked and ignored files; ``git -C <tree>
  checkout <ref> -- <file>`` brings one back);
- ``set_aside`` / ``back_up``: files moved or copied into ``.git/tkv-seam-dropped/<time>/``.

Outside a tree, under the project's ``build/dropped/`` (``make clean`` and ``tkv-seam clean``
leave it; the tool never removes it):

- ``bundle``: a whole tree about to be removed (``port abort``, ``retire``, ``clean``), as a git
  bundle of every ref, the index, the work tree with untracked and ignored files, and the tool's
  own files; ``git clone <bundle> <dir>`` gets the commits back and ``git -C <dir> fetch <bundle>
  'refs/tkv-seam/*:refs/tkv-seam/*'`` the rest;
- ``keep``: copies of project files a step replaces or removes (``seam-table --force``,
  ``lock-cpu``, ``retire``), at their project-relative paths (``cp -a build/dropped/<dir>/<path>
  <path>`` puts one back).

``build/dropped/`` is written only when it is a directory of the project: a symlink on the way
(``build`` or ``build/dropped`` linking elsewhere) is refused (exit 5), so what is kept never
lands outside the project.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from .. import git, hints
from ..errors import RefusedError
from ..fsutil import lexists, stamp
from ..layout import BASE_TAG, BRANCH, CARRY_REFS, DROPPED_DIR, DROPPED_REFS, KEPT_REFS, dropped
from ..outputs import symlink_on_the_way
from ..progress import QUIET, Progress
from .work import IGNORED, UserWork, user_refs

_STAMP = re.compile(r"\d{8}T\d{6}Z-\d+-\d+")  # fsutil.stamp()


# --------------------------------------------------------------------------- in a tree


def keep_or_refuse(
    work: UserWork,
    why: str,
    force: bool,
    force_hint: str | None,
    refresh: str,
    aside: str | None,
    rerun: str,
    progress: Progress = QUIET,
) -> str | None:
    """The one answer to work a step would drop: nothing there, None; ``force`` (when the caller
    allows it, ``force_hint``), keep it in a ref of the tree, say so, return the ref; else refuse
    (exit 5), naming it and each way to keep it (``refresh`` the commits, move the files git
    ignores out, ``force_hint``, ``aside``: move the tree aside)."""
    if not work:
        return None
    if force and force_hint:
        refuse_nested(work, rerun)
        ref = keep_dropped(work.tree, work, why)
        show = hints.shell("git", "-C", work.tree, "show", ref)
        progress.warn(f"--force drops from {work.tree}:\n{work.describe()}\nkept in {ref} ({show})")
        return ref
    ways = []
    changed = any(st != IGNORED for st, _ in work.dirty)
    if changed:  # files: commit them (commits are then refreshed with the rest)
        ways.append(f"keep the changes: commit them, then {refresh}")
    elif work.commits or work.moved_head:  # already commits: refresh writes them into the queue
        ways.append(f"keep the commits: {refresh} (writes them into the queue)")
    if work.ignored:
        ways.append("keep the files git ignores: move them out of the tree (a new tree does not hold them)")
    if force_hint:
        ways.append(f"drop it: {force_hint} (lists it and keeps it in a ref)")
    if aside:
        ways.append(f"or {aside}")
    raise RefusedError(
        f"{work.tree} holds work that tkv-seam did not record:\n{work.describe()}", hint="; ".join(ways)
    )


def refuse_nested(work: UserWork, rerun: str) -> None:
    """A git repository inside the tree (untracked or ignored) cannot go into a ref or a bundle
    (git keeps it as a bare link, without its files): refused (exit 5), nothing changed."""
    if not work.nested:
        return
    first = work.tree / work.nested[0].rstrip("/")
    shown = "\n".join(f"    {p}" for p in work.nested)
    raise RefusedError(
        f"{work.tree} holds git repositories of yours that tkv-seam cannot keep (a ref or a bundle "
        f"would hold only a link to them); nothing was changed:\n{shown}",
        hint=f"move each out of the tree (`{hints.shell('mv', first, f'{work.tree}-{first.name}')}`), then {rerun}",
    )


def keep_dropped(tree: Path, work: UserWork, reason: str) -> str:
    """Keep what is about to be dropped from ``tree`` in a ref of it; return the ref name.

    The ref points at HEAD, or at a snapshot commit on HEAD holding the changed, untracked and
    (when ``work`` names any) ignored files too, so every dropped file and commit stays
    recoverable. A repository inside the tree (``work.nested``) cannot be kept so: refused.
    """
    refuse_nested(work, "run the command again")
    head = git.repo.head(tree)
    commit = (
        git.index.snapshot_worktree(tree, f"tkv-seam: kept before {reason}\n", ignored=bool(work.ignored))
        if work.dirty
        else head
    )
    if work.moved_seam:  # one ref reaching both: a commit of the same files on HEAD's and seam's
        commit = git.index.commit_tree(
            tree,
            git.repo.tree_of(tree, commit),
            [commit, work.moved_seam],
            f"tkv-seam: kept before {reason} (second parent: the branch {BRANCH})\n",
        )
    ref = f"{DROPPED_REFS}/{stamp()}"
    git.repo.update_ref(tree, ref, commit)
    return ref


def dropped_dir(tree: Path) -> Path:
    """A new directory of ``.git/tkv-seam-dropped/`` for files the tool sets aside or backs up
    (refused, exit 5, when a symlink is on the way: what is kept stays in the tree)."""
    link = symlink_on_the_way(tree, tree / ".git" / DROPPED_DIR)
    if link is not None:
        raise RefusedError(
            f"{link} is a symlink (to {link.readlink()}): what tkv-seam keeps of {tree} goes into the tree's own "
            f".git/{DROPPED_DIR}/, never through a link; nothing was dropped",
            hint=f"make it a directory: `{hints.shell('mv', link, f'{link}.link')}`, then run the command again",
        )
    keep = tree / ".git" / DROPPED_DIR / stamp()
    keep.mkdir(parents=True)
    return keep


def kept_dir(tree: Path, name: str) -> Path:
    """The dropped directory ``name`` (as ``dropped_dir`` made it); a name from a state edited by
    hand that is not one of those (``..``, a path) is refused, never followed."""
    where = tree / ".git" / DROPPED_DIR
    if not _STAMP.fullmatch(name):
        raise RefusedError(
            f"{tree}: its state names the kept directory {name!r}, which is not a name tkv-seam gives "
            f"(.git/{DROPPED_DIR}/<time>-<pid>-<n>): the state was edited by hand; nothing was removed",
            hint=f"{hints.shell('ls', '-la', where)}  (then fix or remove the state's field)",
        )
    return where / name


def read_kept(keep: Path) -> dict[str, bytes]:
    """The files of a dropped directory: relative name -> bytes (what ``back_up`` wrote)."""
    return {str(p.relative_to(keep)): p.read_bytes() for p in sorted(keep.rglob("*")) if p.is_file()}


def set_aside(tree: Path, paths: list[str]) -> Path:
    """Move ``paths`` of the tree into a new dropped directory; return it."""
    keep = dropped_dir(tree)
    for rel in paths:
        (keep / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).replace(keep / rel)
    return keep


def back_up(tree: Path, files: dict[str, bytes]) -> Path:
    """Write ``files`` (relative name -> bytes) into a new dropped directory; return it."""
    keep = dropped_dir(tree)
    for name, data in files.items():
        (keep / name).parent.mkdir(parents=True, exist_ok=True)
        (keep / name).write_bytes(data)
    return keep


def carry_kept(
    old: Path, new: Path, progress: Progress = QUIET, cloned: dict[str, str] | None = None
) -> None:
    """Copy into the replacement of a tree what the tree keeps: the refs and files keeping dropped
    work, the user's own refs under their names (not those its clone brought, unmoved:
    ``cloned``, the old state's ``clone_refs``), every stash entry (not only the newest, which is
    all ``refs/stash`` holds), and the tree's own git settings (``.git/config``: remotes, identity;
    ``.git/info/exclude``; hooks). A name the new tree holds at another commit (the base clone's
    own branch after a new base) keeps the old one under ``DROPPED_REFS`` (said), unless it is the
    old base's (nothing of the user's on it)."""
    if not (old / ".git").is_dir():
        return
    specs = [f"+{DROPPED_REFS}/*:{DROPPED_REFS}/*"] if git.repo.refs(old, DROPPED_REFS) else []
    old_base = git.repo.resolve(old, f"{BASE_TAG}^{{commit}}")
    renamed, prefix = [], f"{DROPPED_REFS}/{stamp()}"
    cloned = cloned or {}
    stash = git.repo.stash_entries(old)
    carried = [f"{CARRY_REFS}/stash/{n}" for n in range(len(stash))]
    for ref, (commit, _) in zip(carried, stash):  # a ref each, so that a fetch takes them over
        git.repo.update_ref(old, ref, commit)
    specs += [f"+{ref}:{ref}" for ref in carried]
    for ref in user_refs(old) + git.repo.refs(old, "refs/notes/"):
        if ref == "refs/stash":
            continue  # every entry goes over (above), then back into the new tree's stash, in order
        if cloned.get(ref) is not None and git.repo.resolve(old, ref) == cloned[ref]:
            continue  # what the old tree's clone brought, unmoved: not the user's
        theirs = git.repo.resolve(new, ref)
        if theirs is None:
            specs.append(f"{ref}:{ref}")
        elif theirs != git.repo.resolve(old, ref) and not (
            old_base and git.repo.is_ancestor(old, f"{ref}^{{commit}}", old_base)
        ):
            specs.append(f"{ref}:{prefix}/{ref.removeprefix('refs/')}")
            renamed.append(f"{ref} -> {prefix}/{ref.removeprefix('refs/')}")
    if specs:
        git.repo.fetch(new, old, *specs)
    for ref, (commit, message) in reversed(list(zip(carried, stash))):  # the oldest first: stash@{0} last
        git.repo.stash_store(new, commit, message)
    for ref in carried:
        git.repo.delete_ref(new, ref)
        git.repo.delete_ref(old, ref)
    _carry_settings(old / ".git", new / ".git")
    if renamed:
        progress.warn(
            "the new tree uses these names for other commits; the old ones are kept in:\n    "
            + "\n    ".join(renamed)
        )
    kept = old / ".git" / DROPPED_DIR
    if kept.is_dir():
        shutil.copytree(kept, new / ".git" / DROPPED_DIR, dirs_exist_ok=True, symlinks=True)


def _settings(git_dir: Path) -> list[str]:
    """The user's own settings of a tree's git (files, never through a link): its config, ignore
    patterns and hooks (git's samples aside), relative to ``git_dir``."""
    names = ["config", "info/exclude"]
    hooks = git_dir / "hooks"
    if hooks.is_dir() and not hooks.is_symlink():
        names += [f"hooks/{p.name}" for p in sorted(hooks.iterdir()) if not p.name.endswith(".sample")]
    return [n for n in names if (git_dir / n).is_file() and not (git_dir / n).is_symlink()]


def _carry_settings(old: Path, new: Path) -> None:
    for name in _settings(old):
        (new / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(old / name, new / name)


def bundle(tree: Path, dest_dir: Path, extra: dict[str, bytes]) -> Path:
    """Keep everything in ``tree`` in a new bundle in ``dest_dir``; return the bundle.

    The bundle holds every branch, tag and kept ref, and under ``refs/tkv-seam/kept/``: every stash
    entry (``stash/<n>``, ``stash@{n}``), the staged
    changes (``index``, on HEAD), the work tree with untracked and ignored files (``worktree``, on
    ``index``; a conflicted file as it is, markers and all) and ``extra`` files that live outside
    any commit (``files``: the tool's state, the kept directories, and under ``git/`` the tree's git
    settings: its config, ignore patterns, hooks).
    """
    index = git.index.snapshot_index(tree, "tkv-seam: staged changes when the tree was removed\n")
    work = git.index.snapshot_worktree(
        tree, "tkv-seam: the work tree when it was removed\n", parent=index, start=index, ignored=True
    )
    files = dict(extra)
    files.update({f"git/{name}": (tree / ".git" / name).read_bytes() for name in _settings(tree / ".git")})
    kept = tree / ".git" / DROPPED_DIR
    if kept.is_dir():
        for p in sorted(kept.rglob("*")):
            if p.is_file() and not p.is_symlink():
                files[f"{DROPPED_DIR}/{p.relative_to(kept)}"] = p.read_bytes()
    for name, commit in (("index", index), ("worktree", work)):
        git.repo.update_ref(tree, f"{KEPT_REFS}/{name}", commit)
    for n, (commit, _) in enumerate(git.repo.stash_entries(tree)):  # refs/stash holds only stash@{0}
        git.repo.update_ref(tree, f"{KEPT_REFS}/stash/{n}", commit)
    git.repo.update_ref(
        tree, f"{KEPT_REFS}/files", git.index.snapshot_files(tree, files, "tkv-seam: files kept\n")
    )
    dest_dir.mkdir(parents=True, exist_ok=True)
    out = dest_dir / f"{tree.name}-{stamp()}.bundle"
    refs = [r for r in git.repo.refs(tree, "refs/") if not r.startswith("refs/remotes/")]
    git.repo.bundle(tree, out, refs + (["HEAD"] if git.repo.branch(tree) else []))
    return out


# --------------------------------------------------------------------------- in build/dropped/


def kept_root(root: Path) -> Path:
    """The project's ``build/dropped/``, refused (exit 5) when it is a symlink: what the tool keeps
    stays where the project's trees are (``build/`` itself may be a link to another disk: the
    trees and what is kept of them then live there, together)."""
    where = dropped(root)
    if lexists(where) and not where.is_symlink() and not where.is_dir():
        rel = where.relative_to(root)
        raise RefusedError(
            f"{rel} is not a directory: what tkv-seam keeps goes there; nothing was dropped",
            hint=f"{hints.shell('ls', '-l', rel)}   (move that file away, then run the command again)",
        )
    if where.is_symlink():
        rel = where.relative_to(root)
        raise RefusedError(
            f"{rel} is a symlink (to {where.readlink()}): what tkv-seam keeps goes to {rel}/ beside the trees, "
            "never through a link; nothing was dropped",
            hint=f"make it a directory of the project: `{hints.shell('mv', rel, f'{rel}.link')}`, then run the command "
            "again (the link's target stays as it is)",
        )
    return where


def keep(root: Path, paths: list[Path], why: str) -> Path:
    """Copy each of ``paths`` (files or directories inside ``root``) into a new kept directory
    under ``build/dropped/``.

    Symlinks are copied as symlinks (never followed); a file outside the project goes to ``_outside/``.
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", why).strip("-") or "kept"
    dest = kept_root(root) / f"{stamp()}-{slug}"
    dest.mkdir(parents=True, exist_ok=False)
    for path in paths:
        rel = _inside(root, path)
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            shutil.copytree(path, out, symlinks=True)
        else:
            shutil.copy2(path, out, follow_symlinks=False)
    return dest


def _inside(root: Path, path: Path) -> Path:
    """Where a copy of ``path`` goes: its project-relative path, or ``_outside/<absolute path>``
    for a file elsewhere (a ``--bases`` file outside the project)."""
    real = path.parent.resolve() / path.name
    try:
        return real.relative_to(root.resolve())
    except ValueError:
        return Path("_outside", *real.parts[1:])
