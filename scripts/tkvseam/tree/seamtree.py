"""SeamTree: the one owner of a tree tkv-seam made (a build tree or a port tree).

A ``SeamTree`` is a path and what the tool knows about it: its lock (one run at a time,
``lock.locked`` on ``.<name>.lock`` beside it), its state (``state``, one versioned
schema that never names the tree, so a tree is always the one at the path given), its
crash recovery (a swapped-out tree put back, scratch trees of killed runs removed, under
the lock), the single rule for what in it is the user's work and when it may be replaced
(``check_replaceable``), and what it keeps when it drops something (``keep_dropped``,
``set_aside``, ``back_up``: named by ``fsutil.stamp``, listed by the caller). Trees move
only in two ways a crash cannot split: an in-place switch recorded as pending first
(``switch_in_place``; the next run finishes it, ``finish_pending_switch``), or a tree built
in a scratch directory beside it and swapped in by renames (``swap_in``, which carries the
kept refs and files over). A tree is removed only after its work is kept outside it
(``remove_keeping``: a bundle of every ref, the index and the work tree).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .. import git, hints
from ..errors import RefusedError, SeamError, UsageError
from ..fsutil import describe_dir, lexists, stamp
from ..lock import locked, tree_lock_path
from ..progress import QUIET, Progress
from .state import LEGACY_PORT_STATE, STATE, Kind, TreeState
from .checkouts import (
    BASE_TAG,
    BRANCH,
    DROPPED_DIR,
    DROPPED_REFS,
    carry_kept,
    put_back_unborn_head,
    refuse_blocked_branch,
    refuse_linked_worktrees,
)

__all__ = ["BASE_TAG", "BRANCH", "DROPPED_DIR", "DROPPED_REFS", "SeamTree", "UserWork", "legacy_port_state"]

_SCRATCH = re.compile(r"\.tmp-[a-z0-9_]{8}")
_STAMP = re.compile(r"\d{8}T\d{6}Z-\d+-\d+")  # fsutil.stamp()


@dataclass
class UserWork:
    """What a user added to a tree since tkv-seam recorded it."""

    tree: Path
    dirty: list[tuple[str, str]] = field(default_factory=list)  # (status, path)
    commits: list[tuple[str, str]] = field(default_factory=list)  # (id, subject), newest first
    moved_head: str | None = None  # HEAD, when it is not the recorded one
    moved_seam: str | None = None  # the seam branch, when HEAD is elsewhere and it holds commits of its own

    def __bool__(self) -> bool:
        return bool(self.dirty or self.moved_head or self.moved_seam)

    def describe(self, limit: int = 20) -> str:
        """Lines naming the files and commits (id + subject), for a refusal or a --force warning."""
        out = []
        if self.dirty:
            out.append(f"uncommitted changes ({len(self.dirty)} paths):")
            out += [f"    {st} {path}" for st, path in self.dirty[:limit]]
            if len(self.dirty) > limit:
                out.append(f"    … and {len(self.dirty) - limit} more (git -C {self.tree} status)")
        if self.commits:
            out.append(f"commits that are not in patches/ ({len(self.commits)}):")
            out += [f"    {c[:12]} {subject}" for c, subject in self.commits[:limit]]
        elif self.moved_head:
            out.append(f"HEAD moved to {self.moved_head[:12]} (not the recorded result)")
        if self.moved_seam:
            out.append(f"the branch {BRANCH} (HEAD is not on it) moved to {self.moved_seam[:12]}")
        return "\n".join(out)


class SeamTree:
    def __init__(self, path: Path):
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"

    # -- lock and recovery ------------------------------------------------------

    @contextmanager
    def locked(self, progress: Progress = QUIET) -> Iterator[SeamTree]:
        """Hold the tree's lock for the block; first undo what an interrupted run left beside it."""
        self.refuse_symlink()
        with locked(tree_lock_path(self.path), str(self.path), progress):
            self.recover(progress)
            yield self

    def refuse_symlink(self) -> None:
        """A tree is the directory at its path: a symlink there is refused (its lock would not be
        the tree's, and removing through it removes elsewhere)."""
        if self.path.is_symlink():
            raise RefusedError(
                f"{self.path} is a symlink (to {os.readlink(self.path)}), not a tree: refused",
                hint=f"pass the directory itself (--tree {self.path.resolve()}) where the command takes --tree; "
                f"else move the link away (`{hints.shell('mv', self.path, f'{self.path}.link')}`)",
            )

    def leftovers(self, pattern: str) -> list[Path]:
        """The entries beside the tree named ``.<name>`` + a suffix matching ``pattern``."""
        return self._beside(pattern)

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
            for index in self.git_dir.glob(f"{git.PRIVATE_INDEX}*"):  # a killed run's private index
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

    def swap_in(self, new: Path, progress: Progress = QUIET) -> None:
        """Replace the tree by the complete tree ``new`` (same parent) with two renames.

        What the old tree kept (``keep_dropped``, ``set_aside``) and the user's own branches,
        tags and stash go over first (``_carry_kept``); the old tree is removed last. A crash
        between the renames leaves ``.<name>.old-<pid>``, which ``recover`` puts back.
        """
        old = None
        if lexists(self.path):
            carry_kept(self.path, new, progress)
            old = self.path.parent / f".{self.path.name}.old-{os.getpid()}"
            os.replace(self.path, old)
        os.replace(new, self.path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    # -- state --------------------------------------------------------------------

    def load(self) -> TreeState | None:
        """The tree's state, or None when tkv-seam did not make it (NewerState when too new)."""
        if self.path.is_symlink() or not self.path.is_dir():
            return None
        return TreeState.load(self.path)

    def state(self) -> TreeState:
        """The tree's state, or an error saying it is not a tkv-seam tree."""
        state = self.load()
        if state is None:
            base = self.path.name.removeprefix("vllm-") if self.path.name.startswith("vllm-") else None
            raise SeamError(
                f"{self.path} is not a tree made by tkv-seam apply", hint=hints.make("apply", BASE=base)
            )
        return state

    def save(self, state: TreeState) -> None:
        state.save(self.path)

    def head(self) -> str:
        return git.head(self.path)

    # -- what is the user's --------------------------------------------------------

    def uncommitted(self) -> UserWork:
        """The uncommitted (and untracked, not ignored) files of the tree."""
        return UserWork(self.path, dirty=[(st.strip() or "??", p) for st, p in git.status_paths(self.path)])

    def user_work(self, state: TreeState, expected_heads: tuple[str, ...] = ()) -> UserWork:
        """Uncommitted files and commits in the tree that its recorded state does not hold."""
        work = self.uncommitted()
        head = self.head()
        known = [h for h in (state.head, *expected_heads) if h]
        if head not in known:
            work.moved_head = head
            work.commits = git.subjects(self.path, head, *(f"^{h}" for h in known))
        seam = git.resolve(self.path, f"refs/heads/{BRANCH}")
        if seam and git.branch(self.path) != f"refs/heads/{BRANCH}" and seam not in (*known, head):
            work.commits += git.subjects(self.path, seam, f"^{head}", *(f"^{h}" for h in known))
            work.moved_seam = seam
        return work

    def check_replaceable(
        self,
        kinds: tuple[Kind, ...],
        made_by: str,
        force: bool = False,
        rerun: str = "run the command again",
        force_hint: str | None = None,
        progress: Progress = QUIET,
    ) -> tuple[TreeState | None, str | None]:
        """The one rule for replacing a tree. Refuse (exit 5, naming what is there) unless the path
        is free, or holds a tree of one of ``kinds`` that is not a port in progress, not
        half-switched, and holds nothing the user added. ``force`` (when the caller allows it,
        ``force_hint``) drops the user's work only after keeping it in a ref (listed).

        Returns the tree's state (None when absent) and the ref keeping what ``force`` dropped.
        """
        for parent in self.path.parents:  # a tree inside a tree: files the outer tree does not hold
            if SeamTree(parent).load() is not None:
                raise RefusedError(
                    f"{self.path} is inside {parent}, a tree tkv-seam made: a tree there would be files "
                    "that tree does not hold",
                    hint=f"choose another --tree (beside {parent}, not in it)",
                )
        if not lexists(self.path):
            return None, None
        if self._holds_project():
            raise RefusedError(
                f"{self.path} holds a project (its bases.toml) or the directory you are in: never a tree "
                f"{made_by} makes or replaces; nothing was changed",
                hint="choose another --tree (the default is the project's build/<tree>)",
            )
        move = hints.shell("mv", self.path, f"{self.path}.mine")
        if self.path.is_symlink() or not self.path.is_dir():
            what = "a symlink" if self.path.is_symlink() else "a file"
            raise RefusedError(
                f"{self.path} exists but was not made by {made_by} ({what})",
                hint=f"{move}, then {rerun}",
            )
        state = self.load()
        if state is None or state.kind not in kinds:
            holds = (
                f"a tree of tkv-seam {state.kind}"
                if state
                else f"no .git/{STATE}; it holds: {describe_dir(self.path)}"
            )
            raise RefusedError(
                f"{self.path} exists but was not made by {made_by} ({holds})",
                hint=f"{move} (or choose another --tree), then {rerun}",
            )
        if state.port_in_progress:
            where = f"stopped at {state.port.current}" if state.port.current else "in progress"
            raise RefusedError(
                f"a port to {state.base} is already in progress in {self.path} ({where})",
                hint=f"{hints.port('status', state.base, self.path)}   (then continue, skip, or abort)",
            )
        if state.pending:
            raise RefusedError(
                f"{self.path}: an interrupted apply left it half-switched to {state.head[:12]}",
                hint=f"finish it first: {self._rerun('apply', state.base)}",
            )
        refuse_linked_worktrees(self.path, rerun)
        put_back_unborn_head(self.path, state.head, force, rerun, force_hint)
        work = self.user_work(state)
        if not work:
            return state, None
        if force and force_hint:
            ref = self.keep_dropped(work, "replacing the tree (--force)")
            progress.warn(
                f"--force drops from {self.path}:\n{work.describe()}\nkept in {ref} ({self._show(ref)})"
            )
            return state, ref
        raise RefusedError(
            f"{self.path} holds work that tkv-seam did not record:\n{work.describe()}",
            hint=f"keep it: commit it, then `{self._rerun('refresh', state.base)}`"
            + (f"; drop it: {force_hint} (lists it and keeps it in a ref)" if force_hint else "")
            + f"; or `{move}`, then {rerun}",
        )

    def _rerun(self, verb: str, base: str, force: bool = False) -> str:
        """``apply``/``refresh`` of this tree, from its project's root (``build/vllm-<base>``: make)."""
        return hints.rerun(verb, self.path.parent.parent, base, self.path, force)

    def _show(self, ref: str) -> str:
        return hints.shell("git", "-C", self.path, "show", ref)

    def _holds_project(self) -> bool:
        """The path is a tkv-seam project (its bases.toml), or the current directory or above it."""
        here = Path(os.path.realpath(Path.cwd()))
        real = Path(os.path.realpath(self.path))
        return (self.path / "bases.toml").is_file() or real == here or real in here.parents

    # -- what the tool keeps ----------------------------------------------------

    def dropped_dir(self) -> Path:
        """A new directory of ``.git/tkv-seam-dropped/`` for files the tool sets aside or backs up."""
        keep = self.git_dir / DROPPED_DIR / stamp()
        keep.mkdir(parents=True)
        return keep

    def kept_dir(self, name: str) -> Path:
        """The dropped directory ``name`` (as ``dropped_dir`` made it); a name from a state edited
        by hand that is not one of those (``..``, a path) is refused, never followed."""
        if not _STAMP.fullmatch(name):
            raise RefusedError(
                f"{self.path}: its state names the kept directory {name!r}, which is not a name tkv-seam gives "
                f"(.git/{DROPPED_DIR}/<time>-<pid>-<n>): the state was edited by hand; nothing was removed",
                hint=f"{hints.shell('ls', '-la', self.git_dir / DROPPED_DIR)}  (then fix or remove the state's field)",
            )
        return self.git_dir / DROPPED_DIR / name

    @staticmethod
    def read_kept(keep: Path) -> dict[str, bytes]:
        """The files of a dropped directory: relative name -> bytes (what ``back_up`` wrote)."""
        return {str(p.relative_to(keep)): p.read_bytes() for p in sorted(keep.rglob("*")) if p.is_file()}

    def keep_dropped(self, work: UserWork, reason: str) -> str:
        """Keep what is about to be dropped in a ref of the tree; return the ref name.

        The ref points at HEAD, or at a snapshot commit on HEAD holding the uncommitted and
        untracked files too, so every dropped file and commit stays recoverable.
        """
        head = self.head()
        commit = git.snapshot_worktree(self.path, f"tkv-seam: kept before {reason}\n") if work.dirty else head
        if work.moved_seam:  # one ref reaching both: a commit of the same files on HEAD's and seam's
            commit = git.commit_tree(
                self.path,
                git.tree_of(self.path, commit),
                [commit, work.moved_seam],
                f"tkv-seam: kept before {reason} (second parent: the branch {BRANCH})\n",
            )
        ref = f"{DROPPED_REFS}/{stamp()}"
        git.update_ref(self.path, ref, commit)
        return ref

    def set_aside(self, paths: list[str]) -> Path:
        """Move ``paths`` of the tree into a new dropped directory; return it."""
        keep = self.dropped_dir()
        for rel in paths:
            (keep / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.path / rel, keep / rel)
        return keep

    def back_up(self, files: dict[str, bytes]) -> Path:
        """Write ``files`` (relative name -> bytes) into a new dropped directory; return it."""
        keep = self.dropped_dir()
        for name, data in files.items():
            (keep / name).parent.mkdir(parents=True, exist_ok=True)
            (keep / name).write_bytes(data)
        return keep

    def remove_keeping(self, dest_dir: Path, extra: dict[str, bytes]) -> Path:
        """Remove the tree after keeping everything in it in a bundle in ``dest_dir``; return the bundle.

        The bundle holds every branch, tag and kept ref, and under ``refs/tkv-seam/kept/``: the
        staged changes (``index``, on HEAD), the work tree with untracked files (``worktree``, on
        ``index``; a conflicted file as it is, markers and all) and ``extra`` files that live
        outside any commit (``files``: the tool's state, the kept directories).
        ``git clone <bundle>`` gets it back.
        """
        kept = "refs/tkv-seam/kept"
        index = git.snapshot_index(self.path, "tkv-seam: staged changes when the tree was removed\n")
        work = git.snapshot_worktree(
            self.path, "tkv-seam: the work tree when it was removed\n", parent=index, start=index
        )
        files = dict(extra)
        dropped = self.git_dir / DROPPED_DIR
        if dropped.is_dir():
            for p in sorted(dropped.rglob("*")):
                if p.is_file() and not p.is_symlink():
                    files[f"{DROPPED_DIR}/{p.relative_to(dropped)}"] = p.read_bytes()
        for name, commit in (("index", index), ("worktree", work)):
            git.update_ref(self.path, f"{kept}/{name}", commit)
        git.update_ref(
            self.path, f"{kept}/files", git.snapshot_files(self.path, files, "tkv-seam: files kept\n")
        )
        dest_dir.mkdir(parents=True, exist_ok=True)
        bundle = dest_dir / f"{self.path.name}-{stamp()}.bundle"
        refs = [r for r in git.refs(self.path, "refs/") if not r.startswith("refs/remotes/")]
        git.bundle(self.path, bundle, refs + (["HEAD"] if git.branch(self.path) else []))
        self.remove()
        return bundle

    def remove(self) -> None:
        """Remove the tree: renamed to a scratch name first, so a kill midway leaves a scratch tree
        the next run's ``recover`` removes, never half a tree at the path."""
        gone = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.tmp-", dir=self.path.parent))
        os.replace(self.path, gone)
        shutil.rmtree(gone, ignore_errors=True)

    # -- switching in place (apply) ------------------------------------------------

    def _pending_work(self, state: TreeState) -> UserWork:
        """What a user added to a half-switched tree: a file counts as the switch's own only when
        the switch touches it and its content is that of the old or the new commit."""
        start = state.switch_from or state.head
        touched = set(git.changed_paths(self.path, start, state.head))
        work = self.user_work(state, expected_heads=(start,))
        work.dirty = [
            (st, path)
            for st, path in work.dirty
            if path not in touched
            or git.file_blob_id(self.path, path)
            not in (git.blob_id(self.path, state.head, path), git.blob_id(self.path, start, path))
        ]
        return work

    def finish_pending_switch(self, state: TreeState, force: bool, progress: Progress) -> str | None:
        """Finish an interrupted in-place switch, never over work added since; return a kept ref."""
        rerun = f"`{self._rerun('apply', state.base)}`"
        refuse_blocked_branch(self.path, rerun)
        refuse_linked_worktrees(self.path, rerun)
        put_back_unborn_head(
            self.path, state.head, force, rerun, f"`{self._rerun('apply', state.base, True)}`"
        )
        work = self._pending_work(state)
        ref = None
        if work and not force:
            raise RefusedError(
                f"{self.path}: an interrupted apply left it half-switched to {state.head[:12]}, and it "
                f"holds work added since:\n{work.describe()}",
                hint=f"finish the switch and keep that work in a ref it names: `{self._rerun('apply', state.base, True)}` "
                f"(then `{hints.shell('git', '-C', self.path, 'checkout', '<ref>', '--', '<file>')}` or "
                "`git cherry-pick <ref>` brings it back)",
            )
        if work:
            ref = self.keep_dropped(work, "finishing an interrupted switch")
            progress.warn(
                f"--force drops from {self.path}:\n{work.describe()}\nkept in {ref} ({self._show(ref)})"
            )
        progress.step(f"finish the interrupted switch of {self.path} to {state.head[:12]}")
        git.attach_head(self.path, f"refs/heads/{BRANCH}")  # the reset moves our branch, never another
        if work:
            git.reset_clean(self.path, state.head)  # the untracked files are in the kept ref
        else:
            git.reset_hard(self.path, state.head)
        git.update_ref(self.path, f"refs/heads/{BRANCH}", state.head)
        state.pending, state.switch_from = False, None
        self.save(state)
        return ref

    def switch_in_place(self, new: TreeState, force: bool = False, progress: Progress = QUIET) -> None:
        """Move a clean tree from its HEAD to ``new.head``, touching only the files that differ.

        ``new`` is saved first, marked pending with the HEAD it starts from; an interrupted
        switch is finished by the next run (``finish_pending_switch``). An ignored file at a
        path the switch adds is refused (``force``: set aside, and said so).
        """
        in_the_way = [
            p for p in git.changed_paths(self.path, "HEAD", new.head, only="A") if lexists(self.path / p)
        ]
        if in_the_way and not force:
            shown = "\n".join(f"    {p}" for p in in_the_way[:10])
            raise RefusedError(
                f"{self.path}: the patches add files that exist there as ignored files; the switch would "
                f"overwrite them:\n{shown}",
                hint=f"keep them: `{hints.shell('mv', self.path / in_the_way[0], f'{self.path / in_the_way[0]}.mine')}` "
                f"(each), then `{self._rerun('apply', new.base)}`; or `{self._rerun('apply', new.base, True)}` "
                f"(sets them aside in .git/{DROPPED_DIR}/)",
            )
        if in_the_way:
            keep = self.set_aside(in_the_way)
            progress.warn(
                f"--force sets aside ignored files the patches add, in {keep}: {', '.join(in_the_way)}"
            )
        new.pending, new.switch_from = True, self.head()
        self.save(new)
        git.switch_worktree(self.path, new.head)
        git.update_ref(self.path, f"refs/heads/{BRANCH}", new.head)
        git.attach_head(self.path, f"refs/heads/{BRANCH}")  # HEAD was detached or another branch
        new.pending, new.switch_from = False, None
        self.save(new)


def legacy_port_state(tree: Path) -> Path:
    """Where the old tool kept a port's progress (read once, then replaced by the schema-2 state)."""
    return tree / ".git" / LEGACY_PORT_STATE


def require_build_tree(tree: Path, base) -> None:
    """The build tree is a tkv-seam tree of ``base`` (its overlay is what the image gets)."""
    state = SeamTree(tree).load()
    if state is None or state.base != base.name:
        what = (
            "is not a tree made by tkv-seam apply"
            if state is None
            else f"holds {state.base}, not {base.name}"
        )
        raise UsageError(f"{tree} {what}", hint=f"make apply BASE={base.name}")
