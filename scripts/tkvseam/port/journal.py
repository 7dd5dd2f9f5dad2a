"""The port's crash journal: what a port tree records of its port, so no crash loses or repeats a step.

``PortJournal(root, to_name, path)`` reads and writes the port's state in its tree (``state``,
kind ``port``) and the files beside it in the tree's ``.git``: the old queue as the port started
(``QUEUE_COPY``: ``copy_queue`` at the start, ``patch`` after) and the stopped patch's commit
message (``PORT_MSG``). Each step of a verb is recorded before or after it so that a run killed
anywhere is taken up by the next:

- before each commit, ``begin`` records what the commit is (``Committing``: the patch, its
  status, the HEAD it goes on); ``record`` marks the patch through once it is committed;
- ``load`` reads the state back and ``recover``s a commit a killed run made but did not record
  (as what ``begin`` said it is); a HEAD the port did not make is taken only when it carries the
  ported patches in order (``check_head``);
- ``keep_leftovers`` keeps what a run killed while applying a patch left in the tree (in a
  ``refs/tkv-seam/dropped/`` ref) before the patch is applied again or skipped.

The journal never decides what the port does next: ``session.PortSession`` does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .. import git, hints, layout
from ..errors import RefusedError, SeamError
from ..fsutil import atomic_write, lexists
from ..layout import BRANCH
from ..progress import QUIET, Progress
from ..queue.message import message_header
from ..queue.patch import Patch, parse_text
from ..tree.seamtree import SeamTree
from ..tree.state import STATE, Committing, DonePatch, DoneStatus, Kind, PortProgress, TreeState
from ..findings.auto import Did
from ..findings.model import PatchReport
from .render import git_c, port_command

PORT_MSG = "tkv-seam-port-msg"  # the stopped patch's commit message, for the user to edit
QUEUE_COPY = "tkv-seam-port-queue"  # in the port tree's .git: the old queue's patches as the port started


class PortJournal:
    def __init__(
        self,
        root: Path,
        to_name: str,
        path: Path | None = None,
        progress: Progress = QUIET,
    ):
        self.root = root
        self.to_name = to_name
        self.default_tree = layout.port_tree(root, to_name)
        self.path = Path(path) if path is not None else self.default_tree
        self.progress = progress
        self.seam = SeamTree(self.path, root)

    def command(self, verb: str, **variables: str) -> str:
        """``make port VERB=<verb>`` for this port (its tree named when it is not the default)."""
        return port_command(verb, self.to_name, self.path, self.default_tree, **variables)

    @property
    def message_file(self) -> Path:
        """The stopped patch's commit message, as the user edits it (``PORT_MSG``)."""
        return self.seam.git_dir / PORT_MSG

    # -- reading and writing the state -------------------------------------------------

    def load(self, recover: bool = True) -> TreeState:
        """The port's state; refused (naming what is there) when the tree holds no port to ``to_name``.

        ``recover``: record a commit an interrupted run made, and check HEAD is the port's.
        """
        state = self.seam.load()
        if state is None or state.kind != Kind.PORT or state.port is None:
            raise self._no_port(state)
        if state.base != self.to_name:
            raise RefusedError(
                f"{self.path} holds the port to {state.base}, not to {self.to_name}",
                hint=port_command("status", state.base, self.path, layout.port_tree(self.root, state.base)),
            )
        if recover:
            self._check_progress(state.port)
            note = self.recover(state)
            if note:
                self.progress.step(note)
            self.check_head(state)
        return state

    def _no_port(self, state: TreeState | None) -> SeamError:
        if not lexists(self.path):
            return SeamError(
                f"no port to {self.to_name} in progress ({self.path})", hint=self.command("start")
            )
        if self.path.is_symlink() or not self.path.is_dir():  # a start there is refused too
            what = "a symlink" if self.path.is_symlink() else "a file"
            return SeamError(
                f"{self.path} is {what}, not a port tree; nothing was changed",
                hint=hints.aside(self.root, self.path, f"`{self.command('start')}`"),
            )
        # a tree is there, but not a port this tool can read: say what it is, never touch it
        if state is not None:  # the user's tree of another kind: nothing to move aside
            return SeamError(
                f"{self.path} is a tkv-seam {state.kind} tree of {state.base}, not a port; nothing was changed",
                hint=f"{port_command('status', self.to_name)}   (the port's own tree, "
                f"{layout.shown(self.default_tree, self.root)}; PORT_TREE= names another port tree)",
            )
        if not self.seam.git_dir.is_dir():
            what = "no .git: not a git tree (removed by hand?)"
        elif TreeState.path(self.path).exists():
            what = f"its state .git/{STATE} is unreadable (edited by hand?)"
        else:
            what = f"no state .git/{STATE} (deleted by hand?)"
        return SeamError(
            f"{self.path} is there, but holds no port tkv-seam can go on with: {what}; nothing was changed",
            hint=f"keep it aside (`{hints.shell('mv', self.path, f'{self.path}.mine')}`; its commits stay "
            f"there to cherry-pick), then `{self.command('start')}`"
            if layout.in_build(self.root, self.path)
            else hints.aside(self.root, self.path, ""),
        )

    def _check_progress(self, p: PortProgress) -> None:
        """Refuse a state whose place in the series is none (``next`` past its end, or below 0:
        edited by hand) before any verb reads a patch by it."""
        if isinstance(p.next, int) and not isinstance(p.next, bool) and 0 <= p.next <= len(p.series):
            if p.current is None or p.next < len(p.series):
                return
        raise SeamError(
            f"{TreeState.path(self.path)}: the port's place in its queue, next = {p.next!r}"
            + (f" (stopped at {p.current})" if p.current else "")
            + f", is not one of the queue's {len(p.series)} patch(es) (edited by hand?); nothing was changed",
            hint=f"abort the port (its tree is kept in a bundle): `{self.command('abort')}`, then "
            f"`{self.command('start')}`",
        )

    def save(self, state: TreeState) -> None:
        state.head = self.seam.head()
        self.seam.save(state)

    @staticmethod
    def copy_queue(tree: Path, patches: dict[str, bytes]) -> None:
        """Keep the old queue's patches (project-relative path: bytes) in the new port ``tree``."""
        for rel, data in patches.items():
            kept = tree / ".git" / QUEUE_COPY / rel
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(data)

    def patch(self, p: PortProgress, k: int) -> Patch:
        """Patch ``k`` of the old queue as it was when the port started (its copy in the port tree)."""
        rel = p.series[k]
        kept = self.seam.git_dir / QUEUE_COPY / rel
        if not kept.is_file():
            raise SeamError(
                f"{self.path}: .git/{QUEUE_COPY}/{rel}, patch {k + 1} of the queue as this port started from it, "
                "is gone (removed by hand?); nothing was changed",
                hint=f"abort the port (its tree is kept in a bundle): `{self.command('abort')}`, then `{self.command('start')}`",
            )
        return parse_text(kept.read_text(), Path(rel).name, self.root / rel)

    # -- the steps ----------------------------------------------------------------------

    def begin(self, state: TreeState, patch: Patch, status: DoneStatus, note: str = "") -> None:
        """Record, before committing ``patch``, what its commit is (a run killed after it records it so)."""
        state.port.committing = Committing(patch.name, status, self.seam.head(), note)
        self.save(state)

    def record(
        self,
        state: TreeState,
        patch: Patch,
        status: DoneStatus,
        commit: str,
        message: str | None = None,
        note: str = "",
    ) -> None:
        """``patch`` is through as ``commit``; its verdict and reason are those of the commit's message."""
        header = message_header(patch, message) if message else patch.header
        p = state.port
        verdict, reason = (" ".join(header.get(key)) for key in ("Verdict", "Reason"))
        p.done.append(DonePatch(patch.name, patch.header.slug, status, commit, verdict, reason, note))
        p.next += 1
        p.current = p.stopped = p.committing = None
        self.message_file.unlink(missing_ok=True)
        self.save(state)

    def stop(self, state: TreeState, patch: Patch, report: PatchReport) -> None:
        """The port stops at ``patch`` for a human: its report kept, its message ready to edit."""
        p = state.port
        report.did = stamp(self.path, report.did)
        p.current, p.stopped = patch.name, report
        atomic_write(self.message_file, patch.header.message)
        self.save(state)

    def skip(self, state: TreeState, patch: Patch, verdict: str, reason: str) -> None:
        """``patch`` is left out of the new queue with ``verdict`` and ``reason``."""
        p = state.port
        p.done.append(DonePatch(patch.name, patch.header.slug, DoneStatus.SKIPPED, None, verdict, reason))
        p.next += 1
        p.current = p.stopped = None
        self.message_file.unlink(missing_ok=True)
        self.save(state)

    # -- after a crash ------------------------------------------------------------------

    def recover(self, state: TreeState) -> str | None:
        """Record the commit a killed run made for the next patch but did not record; a note, or None.

        Only a commit whose parent is the HEAD the state recorded and whose subject is the
        next patch's counts (a commit of the user's own is left alone: continue says what it
        finds). Its status is the one written before the commit (``Committing``); a commit
        the user made of a stopped patch is undone to staged (``git reset --soft``, its message
        kept in ``PORT_MSG``), so that ``continue`` gates it as any resolution.
        """
        p = state.port
        if p.finished or p.next >= len(p.series):
            return None
        head = self.seam.head()
        c = p.committing
        parent = c.parent if c else state.head
        if head == parent:
            if c:  # killed before the commit: nothing to record
                p.committing = None
                self.save(state)
            return None
        info = git.repo.commit_info(self.path, head)
        patch = self.patch(p, p.next)
        if (
            info.parents[:1] != (parent,)
            or info.subject != git.core.Commit("", (), git.core.TOOL, patch.header.message).subject
        ):
            return None
        if c:
            status = c.status
        elif p.current:  # the user committed the stopped patch by hand: back to staged, so that
            # continue checks it and runs the gate on it (a commit is never let past the gate)
            git.index.reset_soft(self.path, parent)
            atomic_write(self.message_file, info.message)
            return (
                f"{patch.name}: your commit {head[:12]} of it is staged again (its message in "
                f"{self.message_file}): continue checks it and runs the gate on it, as on any resolution"
            )
        else:  # every commit the port makes is recorded first (Committing): this one is not the port's
            return None
        note = "; ".join(x for x in ((c.note if c else ""), "recorded after an interrupted run") if x)
        self.record(state, patch, status, head, info.message, note)
        return f"{patch.name}: committed by an interrupted run ({head[:12]}); recorded as {status}"

    def check_head(self, state: TreeState) -> None:
        """Go on only from the HEAD the port recorded: a HEAD that carries the ported patches in order
        (commits amended or rebased by hand) is taken, and said; any other HEAD (a branch switched,
        commits dropped or added) is refused, since the queue is exported from HEAD."""
        p = state.port
        head = self.seam.head()
        if p.finished or head == state.head:
            return
        ported = [d for d in p.done if d.commit]
        found = list(reversed(git.repo.subjects(self.path, head, f"^{state.base_commit}")))
        slugs = [subject.split(":", 1)[0] for _, subject in found]
        if slugs == [d.slug for d in ported]:
            for d, (commit, _) in zip(ported, found):
                if d.commit != commit:
                    d.commit, d.note = commit, "; ".join(x for x in (d.note, "edited in the port tree") if x)
            self.progress.warn(
                f"{self.path}: the ported commits were rewritten by hand; taking HEAD {head[:12]}"
            )
            self.save(state)
            return
        branch = git.repo.branch(self.path)
        raise RefusedError(
            f"{self.path}: HEAD is {head[:12]}"
            + (f" ({branch.removeprefix('refs/heads/')})" if branch else " (detached)")
            + f", not the port's {state.head[:12]}: it carries {len(found)} commit(s) after the base "
            f"({', '.join(slugs) or 'none'}), where the port has {len(ported)} "
            f"({', '.join(d.slug for d in ported) or 'none'}); the queue would be exported without the difference",
            hint=(
                f"`{git_c(self.path, 'reset', '--soft', state.head[:12])}` (your commits' changes stay staged), "
                f"then `{self.command('continue')}`"
                if branch == f"refs/heads/{BRANCH}"
                else f"`{git_c(self.path, 'checkout', BRANCH)}` (the port's branch), then `{self.command('status')}`"
            ),
        )

    def keep_leftovers(self, why: str) -> None:
        """Keep what the tree holds beyond HEAD (a half-applied patch, a staged resolution) in a
        ``refs/tkv-seam/dropped/`` ref, then clean the tree back to HEAD."""
        left = self.seam.uncommitted()
        if left:
            ref = self.seam.keep_dropped(left, why)
            self.progress.warn(f"{len(left.dirty)} changed file(s) in {self.path} kept in {ref} before {why}")
            git.index.reset_clean(self.path, "HEAD")


def stamp(tree: Path, did: list[Did]) -> list[Did]:
    """The port's steps on a patch it stops at, each with its file's staged blob as the port left it."""
    return [replace(d, blob=git.repo.blob_id(tree, "", d.file) or "") for d in did]


def still_so(tree: Path, did: list[Did]) -> list[Did]:
    """The steps of a stopped patch, as a resolution is continued: a step whose file the resolution
    changed since says so (what went in is the resolution's, not only the step's)."""
    return [
        replace(d, text=f"{d.text} (then changed by the resolution)", blob="")
        if d.blob and git.repo.blob_id(tree, "", d.file) != d.blob
        else d
        for d in did
    ]
