"""``port finish``: write the new base's own queue from the port tree, never over reviewed work by surprise.

The queue (its series, patches, PORT.md) is written only when it is what the port found at
its start and has no uncommitted edits, or under ``--force``. Before the first write, every
file that is there is kept in the port tree's ``.git/tkv-seam-dropped/<time>/`` and the state
records that the writing began (``finishing``): a finish killed midway is taken up by the next
one (no refusal of its own half-written queue), and what it replaced is listed from that backup.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .. import hints, layout
from ..answer import Answer, plain
from ..bases.pins import Base
from ..errors import EXIT_LINT, RefusedError
from ..progress import Progress
from ..tree.seamtree import SeamTree
from ..queue.writer import (
    Exported,
    ExportStatus,
    changed_files,
    queue_digest,
    queue_edits,
    queue_snapshot,
    write_queue,
)
from ..tree.export import export_texts, record_export
from ..fsutil import atomic_write
from ..queue.series import Queue
from ..tree.state import DoneStatus, PortProgress, TreeState
from .ending import queue_problems
from .gate import WentIn, by_themselves_lines, patches_by_themselves
from .render import WHY, port_md, status_json


class PortContext(Protocol):
    """What finishing reads of the port it finishes (``session.PortSession`` is one)."""

    root: Path
    to_base: Base
    path: Path
    seam: SeamTree
    cache: Path
    progress: Progress

    def command(self, verb: str, **variables: str) -> str:
        """``make port VERB=<verb>`` for this port."""

    def save(self, state: TreeState) -> None:
        """Record ``state`` in the port tree."""


@dataclass
class Finished(Answer):
    """The new base's queue written (``port finish``, or a verb that went through the last patch):
    each file, the lint and style gate's problems (exit 6 when any), and where replaced files are."""

    tree: Path
    queue: Queue
    state: TreeState
    exported: list[Exported]
    problems: list[str]
    backup: Path | None = None  # the queue files finish replaced, as they were
    by_themselves: list[WentIn] = field(default_factory=list)  # went in without a human: re-read them

    def lines(self) -> list[str]:
        skipped = [d for d in self.state.port.done if d.status == DoneStatus.SKIPPED]
        written = sum(e.status != ExportStatus.REMOVED for e in self.exported)
        base = self.state.base
        return (
            [e.line(self.queue.patches) for e in self.exported]
            + by_themselves_lines(self.by_themselves)
            + [
                f"port -> {base} finished: {written} patches in {self.queue.series}, "
                f"{len(skipped)} skipped (see {self.queue.patches}/PORT.md); "
                + (
                    "lint + style gate: ok"
                    if not self.problems
                    else f"NOT ready: {len(self.problems)} lint/style problem(s) (listed above); fix them in "
                    f"{layout.default(layout.build_tree, base)} (`make apply BASE={base}`, amend the patch's commit, "
                    f"`make refresh BASE={base}`), then `make lint-patches BASE={base}`"
                )
                + (f"; the files it replaced are in {self.backup}" if self.backup else "")
            ]
        )

    def notes(self) -> list[str]:
        return list(self.problems)

    def to_json(self) -> dict:
        return {
            "state": status_json(self.tree, self.state),
            "exported": [plain(e) for e in self.exported],
            "problems": self.problems,
            "backup": str(self.backup) if self.backup else None,
            "by_themselves": [w.to_json() for w in self.by_themselves],
            "ok": not self.problems,
        }

    def exit_code(self) -> int:
        return EXIT_LINT if self.problems else 0


def finish_queue(session: PortContext, state: TreeState, force: bool) -> Finished:
    """Write the new base's own queue from the port tree's commits; lint it and run the style gate.

    Refuses (exit 5) to write over a queue that changed since the port started or that has
    uncommitted edits, unless ``force``; the files it replaces are kept (``backup``).
    """
    p = state.port
    left = len(p.series) - p.next
    if p.current is not None or left:
        raise RefusedError(
            f"{left} patch(es) not yet ported" + (f" (stopped at {p.current})" if p.current else ""),
            hint=f"{session.command('continue')} (or `{session.command('skip', REASON=WHY)}`)",
        )
    queue = session.to_base.queue
    texts, order = export_texts(session.path, state.base_commit)
    if p.finishing is None:
        check_queue(session, p, force)
        before = queue_snapshot(session.root, queue)
        kept = session.seam.back_up(before) if before else None  # every file it may replace, first
        p.finishing = kept.name if kept else ""
        session.save(state)
    else:  # killed while writing: the queue is half written by it; its backup holds what was there
        session.progress.step(f"finish writing {queue.patches}/ (an interrupted finish began it)")
    backup = session.seam.kept_dir(p.finishing) if p.finishing else None
    exported = write_queue(
        session.root,
        queue,
        texts,
        order,
        force,
        again=session.command("finish", FORCE="1"),
        verb="port finish",
    )
    atomic_write(session.root / queue.port_md, port_md(p.from_base, state.base, p))
    replaced = changed_files(session.seam.read_kept(backup), session.root) if backup else {}
    if backup and not replaced:
        shutil.rmtree(backup)  # nothing it held was replaced: the backup is not needed
        backup = None
    if backup:
        session.progress.warn(
            f"port finish replaced {len(replaced)} file(s) of {queue.patches}/; the old ones are in {backup}:\n"
            + "\n".join(f"    {rel}" for rel in sorted(replaced))
        )
    record_export(session.path, state, session.to_base, session.root, order)
    p.finished, p.finishing = True, None
    p.queue_digest = queue_digest(session.root, queue)
    session.save(state)
    problems = queue_problems(session.root, session.to_base, session.cache, session.progress)
    by_themselves = patches_by_themselves(session.path, state)
    return Finished(session.path, queue, state, exported, problems, backup, by_themselves)


def check_queue(session: PortContext, p: PortProgress, force: bool) -> None:
    queue = session.to_base.queue
    changed = queue_digest(session.root, queue) != p.queue_digest
    if p.finished and not changed:
        return  # the queue as this port's finish wrote it (not committed yet): its own, not an edit
    edits = queue_edits(session.root, queue)
    if not (edits or changed) or force:
        return
    why = []
    if changed:
        why.append(f"{queue.patches}/ changed since the port started (someone wrote it meanwhile)")
    if edits:
        why.append("it has uncommitted edits:\n" + "\n".join(f"    {st} {path}" for st, path in edits[:20]))
    force_it = f"`{session.command('finish', FORCE='1')}` (keeps the files it replaces and lists them)"
    if changed:  # committing or moving edits leaves it changed: only --force (or a new port) goes on
        hint = (
            f"see what is there (`{hints.shell('git', 'status', '--', queue.patches)}`, "
            f"`{hints.shell('git', 'log', '--', queue.patches)}`), then write over it: {force_it}"
        )
    else:  # the queue the port found, with edits not committed: committing them is the way on
        hint = f"commit or move those edits, then `{session.command('finish')}`; or {force_it}"
    raise RefusedError(
        f"port finish would write over {session.to_base.name}'s queue, but " + "; and ".join(why), hint=hint
    )
