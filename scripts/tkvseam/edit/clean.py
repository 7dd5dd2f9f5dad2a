"""``clean`` (``make clean``): remove what the tool made under ``build/``, never what is yours.

Every entry of ``build/`` (a link to a directory is followed, as every command does) but
``build/dropped/`` is judged, under its lock (``.<name>.lock``), before anything is removed:

- a tree the tool made (a build or port tree) goes when it holds nothing but what the tool
  recorded (``SeamTree.removal_problem``: no changed, untracked or ignored files, no commits not
  yet refreshed, no port in progress, no refs of yours, nothing an earlier step kept in it);
- an output directory (an overlay stage, an image context, a report: its marker) goes when it
  holds exactly what its step wrote (``outputs.removal_problem``);
- the tool's work directories (``seamtest/``, ``bench/``, ``plugin/``, ``locks/``, ``image-logs/``,
  ``port-resolutions/``, ``scratch/``), the pass records (``passes/``: the next ``make test``
  runs every lane again), lock files
  and what interrupted runs left beside a tree (put back or removed, as the next run would);
- anything else (a file or directory of yours, a symlink) is left as it is and named.

A tree or output holding your work is refused (exit 5), naming it and the command that keeps
it, and nothing at all is removed; ``force`` keeps each one in ``build/dropped/`` first (a
bundle of a tree, a copy of an output) and says so. ``build/dropped/`` itself stays.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import hints, layout
from ..answer import Answer
from ..errors import RefusedError, SeamError
from ..fsutil import lexists
from ..lock import locked
from ..outputs import output_kind
from ..outputs import removal_problem as output_problem
from ..progress import QUIET, Progress
from ..tree.kept import keep, kept_root
from ..tree.seamtree import SeamTree
from ..tree.state import STATE, TreeState
from ..tree.work import IGNORED

# the tool's own work, no marker: removed (port-resolutions: the resolutions ports recorded, replayed
# where a conflict comes back; only a convenience, every resolution is in its port's commits;
# passes: the pass records, the next make test runs every lane again)
WORK_DIRS = ("seamtest", "bench", "plugin", "locks", "image-logs", "port-resolutions", "scratch", "passes")
_BESIDE = re.compile(r"\.(?P<name>.+?)\.(?:lock|old-\d+|tmp-[a-z0-9_]{8})")  # lock, swap, scratch


@dataclass
class CleanResult(Answer):
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # "build/<entry> -> build/dropped/<what>"
    left: list[str] = field(default_factory=list)  # "build/<entry>: why"
    dropped: str | None = None  # build/dropped/, when there is one (it stays)

    def lines(self) -> list[str]:
        out = [f"kept     {line}" for line in self.kept] + [f"left     {line}" for line in self.left]
        out.append(f"clean: {len(self.removed)} removed, {len(self.kept)} kept first, {len(self.left)} left")
        if self.dropped:
            out.append(
                f"clean: {self.dropped}/ stays (what the tool kept; remove it by hand when you no longer need it)"
            )
        return out


def clean(root: Path, force: bool = False, progress: Progress = QUIET) -> CleanResult:
    """Remove what the tool made under ``root``'s ``build/`` (see the module docstring)."""
    top = layout.build(root)
    result = CleanResult()
    if not lexists(top):
        return result
    if not top.is_dir():  # a link to a directory is followed: build/ may live on another disk
        raise RefusedError(
            f"{top} is not a directory: clean removes nothing there",
            hint=f"{hints.shell('ls', '-ld', top)}   (remove what you do not need by hand)",
        )
    with contextlib.ExitStack() as held:
        names = _names(top)
        trees = {}
        for name in names:  # under each entry's lock; a tree's interrupted runs undone first
            path = top / name
            tree = SeamTree(path, root)
            if path.is_symlink():
                continue
            if _is_tree_name(top, name):
                held.enter_context(tree.locked(progress))
            else:
                held.enter_context(locked(layout.lock_of(path), str(path), progress))
            if _loads(tree):
                trees[name] = tree
        for lock in sorted((top / "locks").glob("*.lock")) if (top / "locks").is_dir() else []:
            held.enter_context(locked(lock, str(lock), progress))  # lock-cpu's: none runs meanwhile
        work = top / "seamtest"
        for lock in sorted(work.glob(".*.lock")) if work.is_dir() and not work.is_symlink() else []:
            held.enter_context(locked(lock, str(lock), progress))  # a seam lane's: none runs meanwhile
        problems = _problems(root, top, trees, names)
        if force and problems:  # what cannot be kept is refused before anything goes
            kept_root(root)  # build/dropped/ a directory of the project, not a link elsewhere
            for name in problems:
                if name in trees:
                    trees[name].refuse_unbundlable(f"`{hints.make('clean', FORCE='1')}`")
        if problems and not force:
            lines = "\n".join(f"  {layout.shown(top / n, root)}: {why}" for n, (why, _) in problems.items())
            keeps = sorted({k for _, k in problems.values() if k})
            raise RefusedError(
                f"clean would delete what the tool did not record; nothing was removed:\n{lines}",
                hint=(f"keep it first ({', '.join(f'`{k}`' for k in keeps)}), or " if keeps else "")
                + f"`{hints.make('clean', FORCE='1')}` (each is then kept in {layout.shown(layout.dropped(root), root)}/ first)",
            )
        for name in names:
            _clean_one(root, top / name, trees.get(name), name in problems, result, progress)
    if layout.dropped(root).is_dir():
        result.dropped = layout.shown(layout.dropped(root), root)
    return result


def _names(top: Path) -> list[str]:
    """The entries of ``build/`` to judge: every name but ``dropped``, a name for each lock,
    scratch or swapped-out tree left beside an entry (so the entry's lock recovers it)."""
    names = set()
    for entry in top.iterdir():
        m = _BESIDE.fullmatch(entry.name)
        name = m.group("name") if m else entry.name
        if name != layout.DROPPED:
            names.add(name)
    return sorted(names)


def _loads(tree: SeamTree) -> bool:
    """The entry is a tree of the tool's with a state this tkv-seam reads (a newer one's is left)."""
    try:
        return tree.load() is not None
    except SeamError:
        return False


def _is_tree_name(top: Path, name: str) -> bool:
    """A tree's name, or the name of something an interrupted swap left of one."""
    path = top / name
    return (
        TreeState.path(path).is_file()
        or any(top.glob(f".{glob_escape(name)}.old-*"))
        or any(top.glob(f".{glob_escape(name)}.tmp-*"))
    )


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _problems(
    root: Path, top: Path, trees: dict[str, SeamTree], names: list[str]
) -> dict[str, tuple[str, str | None]]:
    """name -> (why removing it would lose something, the command that keeps it)."""
    out = {}
    for name in names:
        path = top / name
        if name in trees:
            tree = trees[name]
            why = tree.removal_problem("tkv-seam", hints.make("clean"))
            if why:
                out[name] = (why.replace(f"{path}", layout.shown(path, root)), _keeper(tree))
        elif output_kind(path) is not None:
            why = output_problem(path)
            if why:
                out[name] = (f"{output_kind(path)} changed since its step wrote it: {why}", None)
    return out


def _keeper(tree: SeamTree) -> str | None:
    """The command that keeps what a tree holds before it goes: a port's abort (its bundle holds
    everything), refresh for commits and edits (its own refusal says how to commit the edits); none
    for files git ignores, refs of yours or what an earlier step kept (refresh keeps none of them:
    ``FORCE=1`` bundles them)."""
    state = tree.load()
    if state is None:
        return None
    if state.port_in_progress:
        return hints.port(
            "abort", state.base, None if tree.path == layout.port_tree(tree.root, state.base) else tree.path
        )
    work = tree.user_work(state)
    if not (work.commits or work.moved_head or any(st != IGNORED for st, _ in work.dirty)):
        return None
    return hints.rerun("refresh", tree.root, state.base, tree.path)


def _clean_one(
    root: Path, path: Path, tree: SeamTree | None, kept_first: bool, result: CleanResult, progress: Progress
) -> None:
    rel = layout.shown(path, root)
    if not lexists(path):
        return
    if tree is not None:
        if kept_first:
            extra = {STATE: TreeState.path(path).read_bytes()}
            kept = layout.shown(layout.dropped(root), root)
            progress.step(
                f"{rel}: keeping all of it in a git bundle under {kept}/ first (a large tree takes a minute)"
            )
            bundle = tree.remove_keeping(kept_root(root), extra)
            result.kept.append(f"{rel} -> {layout.shown(bundle, root)}")
        else:
            tree.remove()
            result.removed.append(rel)
        progress.step(f"{rel}: {'kept, then removed' if kept_first else 'removed'}")
        return
    if path.is_symlink():
        result.left.append(f"{rel}: a symlink (left as it is)")
    elif output_kind(path) is not None:
        if kept_first:
            result.kept.append(f"{rel} -> {layout.shown(keep(root, [path], f'clean-{path.name}'), root)}")
        shutil.rmtree(path)
        result.removed.append(rel)
    elif path.is_dir() and path.name in WORK_DIRS:
        shutil.rmtree(path)
        result.removed.append(rel)
    else:
        why = (
            "a tree whose state this tkv-seam cannot read"
            if (path / ".git" / STATE).exists()
            else "not made by tkv-seam"
        )
        result.left.append(f"{rel}: {why} (left as it is)")
