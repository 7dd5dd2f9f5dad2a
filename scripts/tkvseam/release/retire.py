"""Retire a base: its queue, pin, CPU lock and the trees the tool built for it go.

Everything is checked before anything changes, holding the bases file's lock and the lock of
every build and port tree of the project for the whole run (no pin, seam-table, apply or port
runs meanwhile; a port that started before is met once its tree is in place). Refused: a name
the bases file does not pin (exit 2, whatever lies at its queue path), the top-level queue
(v0.31.0's ``series`` + ``patches/``, what ``make apply BASE=v0.31.0``, ``quilt push -a`` and
``git am`` read with no variables; its paths are compared resolved and normalised, however the
bases file spells them), a base another port is being carried from, a tree holding work the
tool did not record (unless ``--force``), or a queue that is a symlink. Then:

1. a copy of the queue directory, the lock and the bases file goes to ``build/dropped/<time>-retire-<base>/``;
2. the trees: ``build/vllm-<base>``, ``build/port-<base>`` (with ``--force``, one holding your
   work is kept in the kept directory first: a bundle, as ``port abort`` keeps a port tree), ``build/seamtest/<base>``,
   ``build/bench/<base>``, the test venv ``.venv-vllm-<base>``;
3. ``ci/lock-cpu-<base>.txt``; the queue's own files (``series``, the patches it lists,
   ``PORT.md``; anything else in the directory is left and named); last the base's tables in
   the bases file. A run killed half-way is finished by running it again; what to commit is
   what git sees changed (a lock an earlier killed run deleted too).

The per-user cache (``bases/<base>-sdist``, the stock baselines) is not the project's: every
checkout and every run using it shares it, so it is left, and named.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import git, hints, layout
from ..answer import Answer
from ..bases import file as basesfile
from ..bases.pins import Base, load_bases
from ..errors import RefusedError, SeamError, UsageError
from ..fsutil import lexists
from ..tree.kept import keep
from ..lock import locked
from ..outputs import symlink_on_the_way
from ..progress import QUIET, Progress
from ..queue.series import DEFAULT_QUEUE, PORT_MD, Queue, parse_series_text
from ..tree.seamtree import SeamTree
from ..tree.state import STATE, Kind, TreeState


@dataclass
class RetireResult(Answer):
    base: str
    kept: str
    removed: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # path: why it stayed
    moved: list[str] = field(default_factory=list)  # trees holding your work, moved into `kept`
    to_commit: list[str] = field(default_factory=list)  # project files changed (for `git add -A`)

    def lines(self) -> list[str]:
        return (
            [f"  removed {path}" for path in self.removed]
            + [f"  moved   {path}" for path in self.moved]
            + [f"  left    {path}" for path in self.left]
            + [
                f"{self.base}: retired; a copy of its queue, lock and the old bases file is in {self.kept}\n"
                + (
                    f"\n  commit it: {hints.shell('git', 'add', '-A', *self.to_commit)}"
                    if self.to_commit
                    else ""
                )
            ]
        )


_NAME = re.compile(r"v?[0-9][A-Za-z0-9._+-]*")  # a base without a pin must still look like one


def _inside(root: Path, path: Path) -> bool:
    """True when ``path`` (its parents resolved, the last part not followed) is inside ``root``."""
    return (path.parent.resolve() / path.name).is_relative_to(root.resolve()) and ".." not in Path(
        path.name
    ).parts


def _same_path(root: Path, a: str, b: str) -> bool:
    """``a`` and ``b`` (project-relative) name one path: normalised, resolved, or the same file."""
    pa, pb = root / a, root / b
    if os.path.normpath(a) == os.path.normpath(b) or pa.resolve() == pb.resolve():
        return True
    try:
        return os.path.samefile(pa, pb)
    except OSError:
        return False


def _refuse_top_level(root: Path, name: str, queue: Queue) -> None:
    if _same_path(root, queue.series, DEFAULT_QUEUE.series) or _same_path(
        root, queue.patches, DEFAULT_QUEUE.patches
    ):
        spelt = (queue.series, queue.patches) != (DEFAULT_QUEUE.series, DEFAULT_QUEUE.patches)
        raise RefusedError(
            f"{name}'s queue is the top-level one (`{DEFAULT_QUEUE.series}` + `{DEFAULT_QUEUE.patches}/`"
            + (f", spelt `{queue.series}` + `{queue.patches}` in the bases file" if spelt else "")
            + "): it is what "
            f"`make apply BASE={name}`, `quilt push -a` and `git am patches/*.patch` use with no variables, "
            "and every other base's queue lives under patches/; it cannot be retired",
            hint=".venv/bin/tkv-seam carried   (retire one of the other carried bases instead)",
        )


def _unknown(root: Path, bases: dict[str, Base], name: str) -> UsageError:
    """A name the bases file does not pin: nothing of it is retired, whatever its paths hold. What
    it names for ``git rm`` is only what is there as it says (a directory ``patches/<name>/``, a
    file ``ci/lock-cpu-<name>.txt``), reached through no link and no pinned base's own (a file of
    the top-level queue named ``0001-….patch`` is not a queue directory)."""
    known = ", ".join(bases) or "none"
    close = f"v{name}" if f"v{name}" in bases else None
    queue = Queue.for_base(name)
    ours = [p for b in bases.values() for p in (b.queue.patches, b.queue.series, b.cpu_lock)]
    there = [
        rel
        for rel, kind in ((f"{queue.patches}/", Path.is_dir), (f"ci/lock-cpu-{name}.txt", Path.is_file))
        if _NAME.fullmatch(name)
        and symlink_on_the_way(root, root / rel.rstrip("/")) is None
        and kind(root / rel.rstrip("/"))
        and not any(_same_path(root, rel.rstrip("/"), other) for other in ours)
    ]
    left = (
        f" ({' and '.join(there)} exist but are no pinned base's: retire leaves them; remove them "
        "with git rm if they are yours to drop)"
        if there
        else ""
    )
    return UsageError(
        f"unknown base {name!r}: bases.toml pins no such base{left}; known bases: {known}",
        hint=f"make retire BASE={close}" if close else ".venv/bin/tkv-seam carried",
    )


def _port_trees(root: Path) -> list[SeamTree]:
    """Every port tree of the project: those in place and those a run is building (its lock)."""
    build = layout.build(root)
    names = {p.name for p in build.glob("port-*")}
    names |= {p.name[1:].removesuffix(".lock") for p in build.glob(".port-*.lock")}
    return [SeamTree(build / n, root) for n in sorted(names)]


def _ports_from(root: Path, name: str) -> list[str]:
    """Port trees under build/ carrying ``name``'s queue forward that have not finished."""
    out = []
    for path in sorted(layout.build(root).glob("port-*")):
        try:
            state = SeamTree(path).load()
        except SeamError:  # a state too new for this tkv-seam: not ours to judge
            continue
        if state is not None and state.port_in_progress and state.port.from_base == name:
            out.append(str(path.relative_to(root)))
    return out


def _queue_files(root: Path, queue: Queue) -> tuple[list[Path], list[Path]]:
    """(the queue's own files, the other entries of its directory).

    The series comes last: it names the patches, so a run killed before it went finds them again.
    """
    directory = root / queue.patches
    series = root / queue.series
    own = []
    if series.is_file():
        own += [directory / n for n in parse_series_text(series.read_text()) if (directory / n).is_file()]
    if (directory / PORT_MD).is_file():
        own.append(directory / PORT_MD)
    own = [p for p in dict.fromkeys(own) if p != series]  # a series listing itself goes once, last
    if series.is_file():
        own.append(series)
    others = []
    if directory.is_dir():
        others = [p for p in sorted(directory.iterdir()) if p not in own]
    return own, others


def _keeper(tree: SeamTree, name: str) -> str | None:
    """How to keep what ``tree`` holds before it goes: refresh a build tree's commits into the queue;
    abort a port in progress (its bundle holds all of it); a finished port only with FORCE=1 (None)."""
    state = tree.load()
    if state is not None and state.kind == Kind.PORT:
        return (
            f"`{hints.port('abort', name)}` keeps all of it in a bundle" if state.port_in_progress else None
        )
    return f"commit it, then `{hints.make('refresh', BASE=name)}`"


def _tree_problem(tree: SeamTree, rerun: str) -> str | None:
    """Why ``tree`` (a build or port tree) may not simply be deleted, or None (absent, or a tree
    the tool made holding nothing of yours): ``SeamTree.removal_problem``, the one rule."""
    return tree.removal_problem("tkv-seam", rerun)


def retire(
    root: Path, bases_file: Path, name: str, cache: Path, force: bool = False, progress: Progress = QUIET
) -> RetireResult:
    """Retire base ``name`` (see the module docstring)."""
    if not _NAME.fullmatch(name):
        raise UsageError(f"{name!r} is not a base name (e.g. v0.32.0)", hint=".venv/bin/tkv-seam carried")
    with contextlib.ExitStack() as held:  # no pin, seam-table, apply or port runs meanwhile
        held.enter_context(locked(layout.lock_of(bases_file), f"the bases file {bases_file}", progress))
        bases = load_bases(bases_file, root)
        basesfile.refuse_link(
            bases_file
        )  # its tables go last: a link refused there would leave the rest done
        base = bases.get(name)
        if base is None:
            raise _unknown(root, bases, name)
        queue = base.queue
        _refuse_top_level(root, name, queue)
        lock = root / f"ci/lock-cpu-{name}.txt"
        queue_dir = root / queue.patches
        if queue_dir.is_symlink() or (root / queue.series).is_symlink():
            raise RefusedError(
                f"{queue.patches} (or its series) is a symlink: retire removes a queue's own files, never through a link",
                hint=f"ls -l {queue.patches}",
            )
        for path in (queue_dir, root / queue.series, lock):
            if not _inside(root, path):
                raise RefusedError(
                    f"{path} is outside the project {root}: retire never removes anything there"
                )
        trees = [SeamTree(layout.build_tree(root, name), root), SeamTree(layout.port_tree(root, name), root)]
        for tree in sorted({t.path: t for t in [*trees, *_port_trees(root)]}.values(), key=lambda t: t.path):
            if not tree.path.is_symlink():
                held.enter_context(tree.locked(progress))
        ports = _ports_from(root, name)
        if ports:
            raise RefusedError(
                f"{', '.join(ports)}: a port from {name}'s queue is in progress; it reads that queue's patches",
                hint=f"finish or abort it first: make port VERB=abort TO={Path(ports[0]).name.removeprefix('port-')}",
            )
        return _retire(root, bases_file, name, base, queue, lock, trees, cache, force, progress)


def _retire(root, bases_file, name, base, queue, lock, trees, cache, force, progress) -> RetireResult:
    queue_dir = root / queue.patches
    rerun = f"make retire BASE={name}"
    problems = {t.path: p for t in trees if (p := _tree_problem(t, rerun))}
    if problems and not force:
        lines = "\n".join(f"  {t.relative_to(root)}: {p}" for t, p in problems.items())
        keeps = [k for t in trees if t.path in problems and (k := _keeper(t, name))]
        raise RefusedError(
            f"retiring {name} would delete trees holding work the tool did not record:\n{lines}",
            hint=(f"keep it first ({'; '.join(keeps)}), or " if keeps else "")
            + f"`make retire BASE={name} FORCE=1` "
            f"(each such tree is then kept in {layout.shown(layout.dropped(root), root)}/: a bundle of a git tree, "
            "else moved there)",
        )
    for tree in trees:  # what cannot be kept is refused before anything goes
        if tree.path in problems and tree.path.is_dir() and not tree.path.is_symlink():
            tree.refuse_unbundlable(f"`make retire BASE={name} FORCE=1`")
    own, others = _queue_files(root, queue)
    series = root / queue.series  # kept too when it lies outside the queue's directory
    backup = [p for p in dict.fromkeys((queue_dir, series, lock, bases_file)) if lexists(p)]
    backup = [p for p in backup if p == queue_dir or not p.is_relative_to(queue_dir)]
    kept = keep(root, backup, f"retire-{name}")
    result = RetireResult(name, str(kept.relative_to(root)))
    progress.step(f"kept {', '.join(os.path.relpath(p, root) for p in backup)} in {result.kept}")

    for tree in trees:
        rel = tree.path.relative_to(root)
        if tree.path in problems:
            result.moved.append(f"{rel} -> {_keep_tree(tree, kept).relative_to(root)}")
        elif lexists(tree.path):
            tree.remove()
            result.removed.append(str(rel))
    for work in (layout.seamtest_work(root, name), layout.bench_work(root, name)):
        link = symlink_on_the_way(layout.build(root), work)
        if link is not None:  # a directory elsewhere: what is there may not be the tool's
            rel = work.relative_to(root)
            result.left.append(f"{rel}: reached through the symlink {link.relative_to(root)}, not removed")
            continue
        _remove_dir(work, root, result)
    venv = root / f".venv-vllm-{name}"
    if venv.is_dir() and not venv.is_symlink() and (venv / "pyvenv.cfg").is_file():
        _remove_dir(venv, root, result)
    elif venv.exists() or venv.is_symlink():
        result.left.append(f"{venv.relative_to(root)}: not a venv the Makefile made (no pyvenv.cfg)")
    shared = [f"bases/{name}-sdist"] if lexists(cache / "bases" / f"{name}-sdist") else []
    shared += [
        f"seamtest/{p.name}" for p in sorted((cache / "seamtest").glob(f"upstream-stock-{name}-*.json"))
    ]
    for entry in shared:
        result.left.append(
            f"cache: {entry}: the cache {cache} is shared by every checkout and run using it, not this project's"
        )

    changed = []
    if lock.is_file() and not lock.is_symlink():
        lock.unlink()
        result.removed.append(str(lock.relative_to(root)))
        changed.append(str(lock.relative_to(root)))
    for path in own:
        path.unlink()
        result.removed.append(str(path.relative_to(root)))
    if own:
        changed.append(queue.patches)
    for path in others:
        result.left.append(f"{path.relative_to(root)}: not part of the queue (a copy is in {result.kept})")
    if queue_dir.is_dir() and not any(queue_dir.iterdir()):
        queue_dir.rmdir()
    if basesfile.remove_base(bases_file, name, held=True):
        result.removed.append(f"{bases_file.name}: [{name!r}] and its .seam table")
        changed.append(bases_file.name)
    result.to_commit = _to_commit(
        root, bases_file, [str(lock.relative_to(root)), queue.patches, queue.series], changed
    )
    return result


def _to_commit(root: Path, bases_file: Path, paths: list[str], changed: list[str]) -> list[str]:
    """What to ``git add -A``: of the base's lock, queue and the bases file, those git sees
    changed (also what a killed run before this one deleted); without git, what this run changed."""
    if bases_file.parent.resolve() == root.resolve():
        paths = [*paths, bases_file.name]
    if git.index.toplevel(root) is None:
        return changed
    out = []
    for rel in dict.fromkeys(paths):
        if any(rel == o or rel.startswith(f"{o}/") for o in out):  # the queue's series, inside it
            continue
        if git.index.status_paths(root, [rel]):
            out.append(rel)
    return out


def _keep_tree(tree: SeamTree, kept: Path) -> Path:
    """Keep a tree holding your work in ``kept`` before it goes: a git tree as a bundle of all it
    holds (``SeamTree.remove_keeping``: refs, index, work tree, the tool's state), anything else
    (a symlink, a directory that is no repository) moved there as it is."""
    if tree.path.is_dir() and not tree.path.is_symlink() and (tree.git_dir / "HEAD").is_file():
        extra = {STATE: TreeState.path(tree.path).read_bytes()} if TreeState.path(tree.path).is_file() else {}
        return tree.remove_keeping(kept, extra)
    dest = kept / tree.path.relative_to(tree.root) if tree.root else kept / tree.path.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tree.path, dest)
    return dest


def _remove_dir(path: Path, top: Path, result: RetireResult, label: str | None = None) -> None:
    if path.is_symlink():
        result.left.append(f"{label or path.relative_to(top)}: a symlink, not removed")
    elif path.is_dir():
        shutil.rmtree(path)
        result.removed.append(label or str(path.relative_to(top)))
