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
from pathlib import Path

from ..bases.pins import Base
from .patch import Patch
from .series import read_series


@dataclass
class DriftRow:
    slug: str
    cells: dict[str, str] = field(default_factory=dict)  # base -> status ("" when the base has no queue)
    names: dict[str, str] = field(default_factory=dict)  # base -> patch file name


def _hunks(patch: Patch) -> list[tuple[str, list[str]]]:
    return [(fc.path, [str(line) for line in h]) for fc in patch.files for h in fc.pfile]


def _changes(patch: Patch) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for fc in patch.files:
        out[fc.path] = [str(line) for h in fc.pfile for line in h if line.is_added or line.is_removed]
    return out


def compare(old: Patch, new: Patch) -> str:
    """How ``new`` differs from ``old``: same hunks, context only, or re-expressed."""
    if _hunks(old) == _hunks(new):
        return "same hunks"
    if _changes(old) == _changes(new):
        return "context only"
    return "re-expressed"


def drift(root: Path, bases: dict[str, Base]) -> tuple[list[str], list[DriftRow]]:
    """Base names with a queue (in bases.toml order) and one row per patch slug."""
    queues: dict[str, dict[str, Patch] | None] = {}
    for name, base in bases.items():
        if not (root / base.queue.series).exists():
            queues[name] = None
            continue
        queues[name] = {p.header.slug: p for p in read_series(root, base.queue, name).load()}
    rows: dict[str, DriftRow] = {}
    for q in queues.values():
        for slug in q or {}:
            rows.setdefault(slug, DriftRow(slug))
    prev: dict[str, Patch] | None = None
    first = True
    for name, q in queues.items():
        for slug, row in rows.items():
            if q is None:
                row.cells[name] = ""
                continue
            if slug not in q:
                row.cells[name] = "absent"
                continue
            row.names[name] = q[slug].name
            if first:
                row.cells[name] = "carried"
            elif prev is None or slug not in prev:
                row.cells[name] = "new"
            else:
                row.cells[name] = compare(prev[slug], q[slug])
        if q is not None:
            prev, first = q, False
    return list(queues), list(rows.values())


def matrix(names: list[str], rows: list[DriftRow]) -> str:
    """The patch x base matrix as Markdown (a base without a queue shows 'no queue')."""
    out = ["| patch | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for row in rows:
        cells = [row.cells.get(n) or "no queue" for n in names]
        out.append(f"| {row.slug} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
