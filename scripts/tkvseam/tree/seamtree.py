"""SeamTree: the one owner of a tree tkv-seam made (a build tree or a port tree), and of its rules.

A ``SeamTree`` is a path and what the tool knows about it: its lock (one run at a time,
``lock.locked`` on ``.<name>.lock`` beside it), its state (``state``, one versioned schema that
never names the tree, so a tree is always the one at the path given), its crash recovery (a
swapped-out tree put back, scratch trees of killed runs removed, under the lock), and the rules:

- ``require(kind, base, use)``: the one check that a tree is usable as a tree of ``base``
  (made by the tool, of that base, not a port in progress, not half-switched); anything else is
  refused, exit 5, naming why and the command that makes one;
- ``check_replaceable``: the one rule for replacing a tree. The path is free, or holds a tree of
  the tool's holding nothing the user added (``work.user_work``: changed, untracked and ignored
  files, commits), whose checkouts a switch or a rebuild cannot break (``work.refuse_checkouts``);
  ``--force`` drops the user's work only after keeping it (``keep_dropped``);
- ``removal_work``: what a tree about to be removed (``retire``, ``clean``) holds that would be
  lost with it; ``remove_keeping`` removes a tree after keeping all of it in a bundle.

Trees move only in two ways a crash cannot split: an in-place switch recorded as pending first
(``switch_in_place``; the next run finishes it, ``finish_pending_switch``), or a tree rebuilt in a
scratch directory beside it with its state and swapped in by renames (``rebuild``, which keeps
ignored files of the old tree by the same rule and carries its kept refs and files over). What
is kept goes through ``tree.kept`` (``keep_dropped``, ``set_aside``, ``back_up``; named by
``fsutil.stamp``, listed by the caller).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .. import git, hints, layout
from ..errors import RefusedError
from ..fsutil import describe_dir, lexists
from ..lock import locked
from ..progress import QUIET, Progress
from . import kept, switch
from .state import STATE, Kind, TreeState, refuse_in_git_dir, tree_above
from .work import UserWork, in_the_way, refuse_linked_worktrees, uncommitted, user_work

__all__ = ["SeamTree", "UserWork"]

_SCRATCH = re.compile(r"\.tmp-[a-z0-9_]{8}")


class SeamTree:
    def __init__(self, path: Path, root: Path | None = None):
        """``root``: the project the tree belongs to, when known (its hints may then tell to move a
        path of the project's build/ aside, and spell the default trees with make)."""
        self.path = Path(path)
        self.root = Path(root) if root is not None else None

    def __str__(self) -> str:
        return str(self.path)

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"

    # -- lock and recovery ------------------------------------------------------

    @contextmanager
    def locked(self, progress: Progress = QUIET) -> Iterator[SeamTree]:
        """Hold the tree's lock for the block; first undo what an interrupted run left beside it.

        A path outside the project's build/ holding something that is not a tree of the tool's
        (``/etc``, ``$HOME``: no state) gets no lock file beside it: nothing is written there, and
        every step refuses such a path before it writes (no run of the tool can make a tree over it).
        """
        self.refuse_symlink()
        if self._foreign():
            yield self
            return
        with locked(layout.lock_of(self.path), str(self.path), progress):
            self.recover(progress)
            yield self

    def _foreign(self) -> bool:
        return (
            lexists(self.path)
            and not layout.in_build(self.root, self.path)
            and not (self.git_dir / STATE).is_file()
        )

    def refuse_symlink(self) -> None:
        """A tree is the directory at its path: a symlink there is refused (its lock would not be
        the tree's, and removing through it removes elsewhere)."""
        if self.path.is_symlink():
            way = (
                f"move the link away (`{hints.shell('mv', self.path, f'{self.path}.link')}`)"
                if layout.in_build(self.root, self.path)
                else "choose another --tree"
            )
            raise RefusedError(
                f"{self.path} is a symlink (to {os.readlink(self.path)}), not a tree: refused",
                hint=f"pass the directory itself (--tree {self.path.resolve()}) where the command takes --tree; else {way}",
            )

    def _beside(self, pattern: str) -> list[Path]:
        parent = self.path.parent
        if not parent.is_dir():
            return []
        prefix = f".{self.path.name}"
        return sorted(
            p
            for p in parent.iterdir()
            if p.name.startswith(prefix) and re.fullmatch(pattern, p.name[len(prefix) :])
        )

    def recover(self, progress: Progress = QUIET) -> None:
        """Put back a tree an interrupted swap moved aside; remove scratch trees of killed runs.

        Call it holding the tree's lock (a scratch tree may be another run's otherwise).
        """
        olds = self._beside(r"\.old-\d+")
        if olds and not lexists(self.path):
            progress.step(f"restore {self.path} from an interrupted run ({olds[-1].name})")
            os.replace(olds[-1], self.path)
            olds = olds[:-1]
        for leftover in olds + self._beside(_SCRATCH.pattern):
            progress.step(f"remove {leftover} (left by an interrupted run)")
            shutil.rmtree(leftover, ignore_errors=True)
        if self.git_dir.is_dir() and not self.path.is_symlink():
            for index in self.git_dir.glob(f"{git.index.PRIVATE_INDEX}*"):  # a killed run's private index
                index.unlink(missing_ok=True)

    @contextmanager
    def scratch(self) -> Iterator[Path]:
        """A scratch directory beside the tree (``.<name>.tmp-XXXXXXXX``), removed at the end.

        What the block moves out of it (``swap_in``) stays; a killed run's is removed by the
        next run's ``recover``.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.tmp-", dir=self.path.parent))
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def swap_in(self, new: Path, progress: Progress = QUIET, cloned: dict[str, str] | None = None) -> None:
        """Replace the tree by the complete tree ``new`` (same parent) with two renames.

        What the old tree kept (``keep_dropped``, ``set_aside``) and the user's own branches,
        tags and stash go over first (``kept.carry_kept``; ``cloned``: the old tree's clone refs,
        not the user's); the old tree is removed last. A crash between the renames leaves
        ``.<name>.old-<pid>``, which ``recover`` puts back.
        """
        old = None
        if lexists(self.path):
            kept.carry_kept(self.path, new, progress, cloned or {})
            old = self.path.parent / f".{self.path.name}.old-{os.getpid()}"
            os.replace(self.path, old)
        os.replace(new, self.path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def rebuild(
        self,
        old: TreeState | None,
        build: Callable[[Path], tuple[Path, TreeState]],
        force: bool = False,
        force_hint: str | None = None,
        rerun: str = "run the command again",
        progress: Progress = QUIET,
    ) -> tuple[TreeState, str | None]:
        """Replace the tree (``old``: its state, as ``check_replaceable`` returned it; None: no tree
        there) by a new one, or make it: ``build(scratch)`` makes the new tree in a scratch directory
        beside this one and returns it with its state; the state is written into it (never a tree
        in place without its state), then it is swapped in (``swap_in``).

        The files git ignores in the old tree are the user's and do not survive a rebuild: refused
        (exit 5, naming them) unless ``force`` (when the caller allows it, ``force_hint``), which
        keeps them in a ref first. Returns the new state and that ref (or None).
        """
        ref = None
        if old is not None:
            work = uncommitted(self.path, ignored=True)
            work.dirty = [(st, p) for st, p in work.dirty if p in work.ignored]
            ref = self._keep_or_refuse(work, force, force_hint, rerun, "replacing the tree", progress, old)
        with self.scratch() as tmp:
            new, state = build(tmp)
            state.save(new)
            self.swap_in(new, progress, old.clone_refs if old else None)
        return state, ref

    # -- state --------------------------------------------------------------------

    def load(self) -> TreeState | None:
        """The tree's state, or None when tkv-seam did not make it (NewerState when too new)."""
        if self.path.is_symlink() or not self.path.is_dir():
            return None
        return TreeState.load(self.path)

    def state(self) -> TreeState:
        """The tree's state, or an error saying it is not a tkv-seam tree (exit 5)."""
        state = self.load()
        if state is None:
            raise self._not_made(Kind.APPLY, self._guess_base())
        return state

    def save(self, state: TreeState) -> None:
        state.save(self.path)

    def head(self) -> str:
        return git.repo.head(self.path)

    def _guess_base(self) -> str | None:
        return self.path.name.removeprefix("vllm-") if self.path.name.startswith("vllm-") else None

    # -- is it usable ---------------------------------------------------------------

    def require(self, kind: Kind | None, base: str, use: str, then: str | None = None) -> TreeState:
        """The tree's state when it is usable as a ``kind`` tree of ``base`` for ``use`` (what the
        caller does with it: "refresh", "the seam tests", "the image", "the style gate"); else
        RefusedError (exit 5) naming why and the command that makes one (``then``: the command that
        does ``use`` on this tree once it is made, hinted after it):

        - no tree of the tool's there (nothing, a file, a directory without the tool's state);
        - a port in progress where a queue's commits are needed (``Kind.APPLY`` takes a build tree
          or a finished port: its commits are a queue's), or a build tree where a port is needed
          (``kind`` None: any tree of the tool's, a port in progress too: its files are read as
          they are);
        - a switch an interrupted apply left half done;
        - a tree of another base.
        """
        state = self.load()
        if state is None:
            raise self._not_made(kind, base, then)
        if kind == Kind.APPLY and state.port_in_progress:
            where = f"stopped at {state.port.current}" if state.port.current else "not finished"
            raise RefusedError(
                f"{self.path} is a port to {state.base} in progress ({where}); its commits are a queue only "
                f"when it finishes: {use} refused",
                hint=f"{self._port('status', state.base)}   (then continue, skip or finish)",
            )
        if kind == Kind.PORT and state.kind != Kind.PORT:
            raise RefusedError(
                f"{self.path} is a tkv-seam {state.kind} tree of {state.base}, not a port: {use} refused",
                hint=self._port("status", base),
            )
        if state.pending:
            raise RefusedError(
                f"{self.path}: an interrupted apply left it half-switched to {state.head[:12]}; its commits "
                f"are not what the queue was applied from: {use} refused",
                hint=f"finish the switch first: {self._rerun('apply', state.base)}",
            )
        if state.base != base:
            own = layout.build_tree(self.root, base) if self.root else None
            again = hints.make("apply", BASE=base)
            if own is not None and own != self.path:
                again += (
                    f"  (then --tree {layout.shown(own, self.root)}; or --base {state.base}, the tree's own)"
                )
            raise RefusedError(
                f"{self.path} is a tree of {state.base}, not {base}: {use} of {base} would take {state.base}'s files",
                hint=again,
            )
        return state

    def _not_made(self, kind: Kind | None, base: str | None, then: str | None = None) -> RefusedError:
        what = "nothing is there" if not lexists(self.path) else f"no .git/{STATE}"
        ours = not lexists(self.path) or layout.in_build(self.root, self.path)  # the tool may make one there
        if kind == Kind.PORT:
            return RefusedError(
                f"{self.path} is not a port tree made by tkv-seam port start ({what})",
                hint=self._port("start", base or "<base>") if ours else hints.aside(self.root, self.path, ""),
            )
        if base is None:
            hint = hints.make("apply", BASE="<base>")
        elif self.root is None:
            hint = hints.make("apply", BASE=base)
        elif ours:
            hint = f"`{self._rerun('apply', base)}`, then `{then}`" if then else self._rerun("apply", base)
        else:
            hint = f"{hints.aside(self.root, self.path, '')}; the base's own tree: {hints.make('apply', BASE=base)}"
        made = "tkv-seam apply" if kind == Kind.APPLY else "tkv-seam apply or port start"
        return RefusedError(f"{self.path} is not a tree made by {made} ({what})", hint=hint)

    def _rerun(self, verb: str, base: str, force: bool = False) -> str:
        """``apply``/``refresh`` of this tree, from its project's root (its own build tree: make)."""
        return hints.rerun(verb, self.root or self.path.parent.parent, base, self.path, force)

    def _port(self, verb: str, to: str) -> str:
        default = self.root is not None and self.path == layout.port_tree(self.root, to)
        return hints.port(verb, to, None if default else self.path)

    # -- what is the user's --------------------------------------------------------

    def uncommitted(self) -> UserWork:
        """The uncommitted (and untracked, not ignored) files of the tree."""
        return uncommitted(self.path)

    def user_work(
        self, state: TreeState, expected_heads: tuple[str, ...] = (), ignored: bool = True
    ) -> UserWork:
        """Files and commits in the tree that its recorded state does not hold (``ignored``: the
        files git ignores count, as the user's)."""
        return user_work(self.path, state, expected_heads, ignored)

    def removal_problem(self, made_by: str = "tkv-seam", rerun: str = "run the command again") -> str | None:
        """Why removing the tree (``retire``, ``clean``) would lose something, or None (nothing there,
        or a tree of the tool's holding nothing but what it recorded): the replace rule's refusals
        (not the tool's, a port in progress, half-switched, linked worktrees, …) and what a removed
        tree takes with it beyond them: ignored files, the user's own refs and stash, what an
        earlier step kept in the tree."""
        try:
            state, _ = self.check_replaceable((Kind.APPLY, Kind.PORT), made_by, rerun=rerun)
        except RefusedError as e:
            return e.message
        if state is None:
            return None
        work = user_work(self.path, state, removing=True)
        return f"{self.path} holds what a removed tree would lose:\n{work.describe()}" if work else None

    # -- the replace rule -------------------------------------------------------------

    def check_replaceable(
        self,
        kinds: tuple[Kind, ...],
        made_by: str,
        force: bool = False,
        rerun: str = "run the command again",
        force_hint: str | None = None,
        progress: Progress = QUIET,
        ignored: bool = True,
        finish_switch: bool = False,
    ) -> tuple[TreeState | None, list[str]]:
        """The one rule for replacing a tree. Refuse (exit 5, naming what is there) unless the path
        is free, or holds a tree of one of ``kinds`` that is not a port in progress, not
        half-switched (``finish_switch``: the interrupted switch is finished first, by the same
        rule), whose checkouts a switch or rebuild cannot break, and that holds nothing the user
        added (``ignored``: files git ignores count; a caller that may switch in place, which
        leaves them, passes False and lets ``rebuild`` judge them). ``force`` (when the caller
        allows it, ``force_hint``) drops the user's work only after keeping it in a ref (listed).

        Returns the tree's state (None when absent) and the refs keeping what ``force`` dropped.
        """
        refuse_in_git_dir(self.path)
        parent = tree_above(self.path)  # a tree inside a tree: files the outer tree does not hold
        if parent is not None:
            raise RefusedError(
                f"{self.path} is inside {parent}, a tree tkv-seam made: a tree there would be files "
                "that tree does not hold",
                hint=f"choose another --tree (beside {parent}, not in it)",
            )
        if not lexists(self.path):
            return None, []
        if self._holds_project():
            raise RefusedError(
                f"{self.path} holds a project (its bases.toml) or the directory you are in: never a tree "
                f"{made_by} makes or replaces; nothing was changed",
                hint="choose another --tree (the default is the project's own build tree)",
            )
        if self.path.is_symlink() or not self.path.is_dir():
            what = "a symlink" if self.path.is_symlink() else "a file"
            raise RefusedError(
                f"{self.path} exists but was not made by {made_by} ({what})", hint=self._aside(rerun)
            )
        state = self.load()
        if state is None or state.kind not in kinds:
            holds = (
                f"a tree of tkv-seam {state.kind}"
                if state
                else f"no .git/{STATE}; it holds: {describe_dir(self.path)}"
            )
            raise RefusedError(
                f"{self.path} exists but was not made by {made_by} ({holds})", hint=self._aside(rerun)
            )
        if state.port_in_progress:
            where = f"stopped at {state.port.current}" if state.port.current else "in progress"
            raise RefusedError(
                f"a port to {state.base} is already in progress in {self.path} ({where})",
                hint=f"{self._port('status', state.base)}   (then continue, skip, or abort)",
            )
        dropped = []
        if state.pending and finish_switch:
            dropped += [r for r in [self.finish_pending_switch(state, force, progress)] if r]
        elif state.pending:
            raise RefusedError(
                f"{self.path}: an interrupted apply left it half-switched to {state.head[:12]}",
                hint=f"finish it first: {self._rerun('apply', state.base)}",
            )
        work = in_the_way(self.path, state, rerun, force, force_hint, ignored)
        ref = self._keep_or_refuse(
            work, force, force_hint, rerun, "replacing the tree (--force)", progress, state
        )
        return state, dropped + ([ref] if ref else [])

    def _keep_or_refuse(
        self,
        work: UserWork,
        force: bool,
        force_hint: str | None,
        rerun: str,
        why: str,
        progress: Progress,
        state: TreeState | None = None,
    ) -> str | None:
        """``kept.keep_or_refuse`` with this tree's ways out: refresh the commits (its own base),
        move the tree aside (a tree of the project's build/ only)."""
        base = state.base if state else self._guess_base() or "<base>"
        aside = (
            f"`{hints.shell('mv', self.path, f'{self.path}.mine')}`, then {rerun}"
            if layout.in_build(self.root, self.path)
            else None
        )
        return kept.keep_or_refuse(
            work, why, force, force_hint, f"`{self._rerun('refresh', base)}`", aside, rerun, progress
        )

    def _aside(self, rerun: str) -> str:
        return hints.aside(self.root, self.path, rerun)

    def _show(self, ref: str) -> str:
        return hints.shell("git", "-C", self.path, "show", ref)

    def _holds_project(self) -> bool:
        """The path is a tkv-seam project (its bases.toml), or the current directory or above it."""
        here = Path(os.path.realpath(Path.cwd()))
        real = Path(os.path.realpath(self.path))
        return (self.path / "bases.toml").is_file() or real == here or real in here.parents

    # -- what the tool keeps (tree.kept) ---------------------------------------------------

    def keep_dropped(self, work: UserWork, reason: str) -> str:
        """Keep what is about to be dropped (``work``: files, ignored ones too, and commits) in a
        ref of the tree; return the ref name (``kept.keep_dropped``)."""
        return kept.keep_dropped(self.path, work, reason)

    def dropped_dir(self) -> Path:
        return kept.dropped_dir(self.path)

    def kept_dir(self, name: str) -> Path:
        return kept.kept_dir(self.path, name)

    read_kept = staticmethod(kept.read_kept)

    def set_aside(self, paths: list[str]) -> Path:
        return kept.set_aside(self.path, paths)

    def back_up(self, files: dict[str, bytes]) -> Path:
        return kept.back_up(self.path, files)

    def remove_keeping(self, dest_dir: Path, extra: dict[str, bytes]) -> Path:
        """Remove the tree after keeping everything in it (ignored files too) in a bundle in
        ``dest_dir`` (``kept.bundle``); return the bundle. What a bundle cannot hold is refused
        first (exit 5): worktrees linked to the tree (their index and HEAD live in its .git), a git
        repository inside it."""
        self.refuse_unbundlable()
        out = kept.bundle(self.path, dest_dir, extra)
        self.remove()
        return out

    def refuse_unbundlable(self, rerun: str = "run the command again") -> None:
        """Refuse (exit 5) what no bundle of the tree can hold, before anything is removed: worktrees
        linked to it (their index and HEAD live in its .git), a git repository inside it."""
        if self.git_dir.is_dir():
            refuse_linked_worktrees(self.path, rerun)
            kept.refuse_nested(uncommitted(self.path, ignored=True), rerun)

    def remove(self) -> None:
        """Remove the tree: renamed to a scratch name first, so a kill midway leaves a scratch tree
        the next run's ``recover`` removes, never half a tree at the path."""
        gone = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.tmp-", dir=self.path.parent))
        os.replace(self.path, gone)
        shutil.rmtree(gone, ignore_errors=True)

    # -- switching in place (apply; tree.switch) ------------------------------------

    def finish_pending_switch(self, state: TreeState, force: bool, progress: Progress) -> str | None:
        """Finish an interrupted in-place switch, never over work added since; return a kept ref."""
        return switch.finish_pending(
            self.path,
            state,
            force,
            self._rerun("apply", state.base),
            self._rerun("apply", state.base, True),
            progress,
        )

    def switch_in_place(self, new: TreeState, force: bool = False, progress: Progress = QUIET) -> None:
        """Move a clean tree from its HEAD to ``new.head``, touching only the files that differ
        (``switch.switch_in_place``: recorded as pending first; ignored files stay)."""
        switch.switch_in_place(
            self.path,
            new,
            force,
            self._rerun("apply", new.base),
            self._rerun("apply", new.base, True),
            progress,
        )
