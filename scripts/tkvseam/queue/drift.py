"""Drift: how each patch's version on one base differs from its version on the previous base.

Bases are taken in ``bases.toml`` order; patches are matched by slug. Per base:

- ``same hunks``: every hunk's lines are the same (line numbers may differ);
- ``context only``: the same lines added and removed per file, only context changed;
- ``re-expressed``: different lines added or removed, or different files;
- ``absent``: not in this base's queue (dropped, obsolete, or not ported yet);
- ``new``: in this base's queue, not in the previous base's; ``carried``: the first base.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from ..answer import Answer, plain
from .patch import Patch
from .series import Queue, read_series


class Drift(StrEnum):
    """One cell of the drift matrix: a patch on one base against the previous base (module docstring)."""

    SAME_HUNKS = "same hunks"
    CONTEXT_ONLY = "context only"
    RE_EXPRESSED = "re-expressed"
    ABSENT = "absent"
    NEW = "new"
    CARRIED = "carried"
    NO_QUEUE = ""  # the base has no queue


# What each cell says, for the legend under the matrix.
MEANING = {
    Drift.CARRIED: "the first base with a queue",
    Drift.SAME_HUNKS: "the same hunks as on the base before (line numbers aside)",
    Drift.CONTEXT_ONLY: "the same lines added and removed, other context",
    Drift.RE_EXPRESSED: "other lines added or removed, or other files",
    Drift.NEW: "not in the base before's queue",
    Drift.ABSENT: "not in this base's queue (dropped, obsolete, or not ported yet)",
    Drift.NO_QUEUE: "the base has no queue yet",
}


@dataclass
class DriftRow:
    slug: str
    cells: dict[str, Drift] = field(default_factory=dict)  # base -> its cell
    names: dict[str, str] = field(default_factory=dict)  # base -> patch file name


@dataclass
class DriftMatrix(Answer):
    """Every patch on every base: the rows and the Markdown matrix (``drift``)."""

    bases: list[str]
    rows: list[DriftRow]

    def lines(self) -> list[str]:
        """The matrix once, then what each of its words means (``--json``: each row's patch files)."""
        used = {row.cells.get(name, Drift.NO_QUEUE) for row in self.rows for name in self.bases}
        legend = [f"  {d or 'no queue'}: {meaning}" for d, meaning in MEANING.items() if d in used]
        return [
            self.matrix().rstrip("\n"),
            "",
            "each cell: the patch on that base against the base before it",
            *legend,
            "one patch's change between two bases: make drift DIFF=<slug> BASE=<base>",
        ]

    def matrix(self) -> str:
        return matrix(self.bases, self.rows)

    def to_json(self) -> dict:
        return {"bases": self.bases, "rows": plain(self.rows), "matrix": self.matrix()}


def _hunks(patch: Patch) -> list[tuple[str, list[str]]]:
    return [(fc.path, [str(line) for line in h]) for fc in patch.files for h in fc.pfile]


def _changes(patch: Patch) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for fc in patch.files:
        out[fc.path] = [str(line) for h in fc.pfile for line in h if line.is_added or line.is_removed]
    return out


def compare(old: Patch, new: Patch) -> Drift:
    """How ``new`` differs from ``old``: same hunks, context only, or re-expressed."""
    if _hunks(old) == _hunks(new):
        return Drift.SAME_HUNKS
    if _changes(old) == _changes(new):
        return Drift.CONTEXT_ONLY
    return Drift.RE_EXPRESSED


def drift(root: Path, layouts: dict[str, Queue]) -> DriftMatrix:
    """The bases (``layouts``: each base's queue, in bases.toml order; a base without a queue too)
    and one row per patch slug."""
    queues: dict[str, dict[str, Patch] | None] = {}
    for name, queue in layouts.items():
        if not (root / queue.series).exists():
            queues[name] = None
            continue
        queues[name] = {p.header.slug: p for p in read_series(root, queue, name).load()}
    rows: dict[str, DriftRow] = {}
    for q in queues.values():
        for slug in q or {}:
            rows.setdefault(slug, DriftRow(slug))
    prev: dict[str, Patch] | None = None
    first = True
    for name, q in queues.items():
        for slug, row in rows.items():
            if q is None:
                row.cells[name] = Drift.NO_QUEUE
                continue
            if slug not in q:
                row.cells[name] = Drift.ABSENT
                continue
            row.names[name] = q[slug].name
            if first:
                row.cells[name] = Drift.CARRIED
            elif prev is None or slug not in prev:
                row.cells[name] = Drift.NEW
            else:
                row.cells[name] = compare(prev[slug], q[slug])
        if q is not None:
            prev, first = q, False
    return DriftMatrix(list(queues), list(rows.values()))


def matrix(names: list[str], rows: list[DriftRow]) -> str:
    """The patch x base matrix as Markdown (a base without a queue shows 'no queue')."""
    out = ["| patch | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for row in rows:
        cells = [row.cells.get(n) or "no queue" for n in names]
        out.append(f"| {row.slug} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
