"""The state of a tree tkv-seam made, and the rule that protects what a user added to it.

``TreeState`` is kept in the tree's ``.git/tkv-seam.json`` (written atomically). A tree
may be removed or replaced only when its state file says tkv-seam made it and it holds
nothing the user added: no uncommitted or untracked files, no commits beyond the
recorded HEAD, no port stopped for a human (``check_removable``). ``--force`` may drop
such work, but only after listing it and keeping it in ``refs/tkv-seam/dropped/<time>``
(``keep_dropped``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from . import git
from .errors import TOOL, RefusedError

STATE = "tkv-seam.json"  # inside the tree's .git directory
DROPPED_REFS = "refs/tkv-seam/dropped"


@dataclass
class AppliedPatch:
    name: str
    commit: str
    files: list[str]


@dataclass
class TreeState:
    """What tkv-seam recorded about a tree it made.

    ``pending`` marks an in-place switch to ``head`` that started from ``switch_from``
    and has not finished; ``kind`` is "apply" or "port"; a port tree stopped at a
    conflict for the user to resolve names it in ``port_stopped_at``. ``inputs`` maps
    each applied patch file to its sha256 (to name the ones edited since).
    """

    tree: str
    base: str
    source: str
    base_commit: str
    upstream_commit: str
    head: str
    digest: str
    patches: list[AppliedPatch] = field(default_factory=list)
    inputs: dict[str, str] = field(default_factory=dict)
    kind: str = "apply"
    pending: bool = False
    switch_from: str | None = None
    port_stopped_at: str | None = None

    @staticmethod
    def path(tree: Path) -> Path:
        return tree / ".git" / STATE

    @classmethod
    def load(cls, tree: Path) -> TreeState | None:
        """The state of ``tree``, or None when tkv-seam did not make it (or it is unreadable)."""
        try:
            data = json.loads(cls.path(tree).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        try:
            data["patches"] = [AppliedPatch(**p) for p in data.get("patches", [])]
            return cls(**data)
        except TypeError:
            return None

    def save(self, tree: Path) -> None:
        """Write the state atomically (a crash leaves the old file or the new one, never half)."""
        target = self.path(tree)
        tmp = target.with_name(f"{STATE}.tmp-{os.getpid()}")
        with open(tmp, "w") as f:
            f.write(json.dumps(asdict(self), indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)

    def to_json(self) -> dict:
        return asdict(self)


def load_state(tree: Path) -> TreeState:
    """The state of ``tree``, or an error saying it is not a tkv-seam tree."""
    from .errors import SeamError

    state = TreeState.load(tree)
    if state is None:
        raise SeamError(f"{tree} is not a tree made by tkv-seam apply", hint="make apply")
    return state


# --------------------------------------------------------------------------- user work


@dataclass
class UserWork:
    """What a user added to a tree since tkv-seam recorded it."""

    tree: Path
    dirty: list[tuple[str, str]] = field(default_factory=list)  # (status, path)
    commits: list[tuple[str, str]] = field(default_factory=list)  # (id, subject), newest first
    moved_head: str | None = None  # HEAD, when it is not the recorded one

    def __bool__(self) -> bool:
        return bool(self.dirty or self.moved_head)

    def describe(self, limit: int = 20) -> str:
        """Lines naming the files and commits (id + subject), for a refusal or a --force warning."""
        out = []
        if self.dirty:
            out.append(f"uncommitted changes ({len(self.dirty)} paths):")
            out += [f"    {st} {path}" for st, path in self.dirty[:limit]]
            if len(self.dirty) > limit:
                out.append(f"    … and {len(self.dirty) - limit} more (git -C {self.tree} status)")
        if self.commits:
            out.append(f"commits not in the recorded result ({len(self.commits)}):")
            out += [f"    {c[:12]} {subject}" for c, subject in self.commits[:limit]]
        elif self.moved_head:
            out.append(f"HEAD moved to {self.moved_head[:12]} (not the recorded result)")
        return "\n".join(out)


def uncommitted_work(tree: Path) -> UserWork:
    """The uncommitted (and untracked, not ignored) files of ``tree``."""
    return UserWork(tree, dirty=[(st.strip() or "??", p) for st, p in git.status_paths(tree)])


def user_work(tree: Path, state: TreeState, expected_heads: tuple[str, ...] = ()) -> UserWork:
    """Uncommitted files and commits in ``tree`` that its recorded state does not hold."""
    work = uncommitted_work(tree)
    head = git.head(tree)
    if head not in (state.head, *expected_heads):
        work.moved_head = head
        work.commits = git.subjects(tree, head, *(f"^{h}" for h in (state.head, *expected_heads) if h))
    return work


def keep_dropped(tree: Path, work: UserWork, reason: str) -> str:
    """Keep what ``--force`` is about to drop in a ref of ``tree``; return the ref name.

    The ref points at HEAD, or at a snapshot commit on HEAD holding the uncommitted and
    untracked files too, so every dropped file and commit stays recoverable.
    """
    commit = (
        git.snapshot_worktree(tree, f"tkv-seam: kept before {reason}\n") if work.dirty else git.head(tree)
    )
    ref = f"{DROPPED_REFS}/{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    git.run(tree, "update-ref", ref, commit)
    return ref


# --------------------------------------------------------------------------- removal


def describe_dir(path: Path, limit: int = 8) -> str:
    """The first entries of a directory, for a refusal that names what is there."""
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        return f"unreadable: {e.strerror}"
    shown = ", ".join(names[:limit]) + (f", … ({len(names)} entries)" if len(names) > limit else "")
    return shown or "empty"


def check_removable(path: Path, rerun: str = "run the command again") -> TreeState | None:
    """Refuse (exit 5, naming what is there) unless ``path`` is absent or a tree tkv-seam made
    that holds nothing the user added; return its state (None when absent).

    ``rerun`` completes the hints ("move it away, then <rerun>").
    """
    if not path.exists() and not path.is_symlink():
        return None
    moved = f"{path}.mine"
    if path.is_symlink() or not path.is_dir():
        raise RefusedError(
            f"{path} exists and is not a tree tkv-seam made (a {'symlink' if path.is_symlink() else 'file'})",
            hint=f"mv {path} {moved}, then {rerun}",
        )
    state = TreeState.load(path)
    if state is None:
        raise RefusedError(
            f"{path} exists and is not a tree tkv-seam made (no .git/{STATE}); it holds: {describe_dir(path)}",
            hint=f"mv {path} {moved} (or choose another --tree), then {rerun}",
        )
    if state.pending:
        raise RefusedError(
            f"{path}: an interrupted apply left it half-switched to {state.head[:12]}",
            hint=f"finish it first: {TOOL} apply --base {state.base} --tree {path}",
        )
    if state.kind == "port" and state.port_stopped_at:
        raise RefusedError(
            f"{path} is a port in progress: it stopped at {state.port_stopped_at} for you to resolve",
            hint=f"resolve, commit, `{TOOL} refresh --base {state.base} --tree {path}`; "
            f"or start the port again: mv {path} {moved}, then {rerun}",
        )
    work = user_work(path, state)
    if work:
        raise RefusedError(
            f"{path} holds work that tkv-seam did not record:\n{work.describe()}",
            hint=f"keep it: `{TOOL} refresh --base {state.base} --tree {path}` (commit first); "
            f"or mv {path} {moved}, then {rerun}",
        )
    return state


def remove_tree_if_ours(path: Path, rerun: str = "run the command again") -> None:
    """Remove ``path`` only when ``check_removable`` allows it (absent: nothing to do)."""
    if check_removable(path, rerun) is not None:
        shutil.rmtree(path)
