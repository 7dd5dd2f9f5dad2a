"""What a port decides about each patch: hunk placement, obsolescence evidence, status, draft verdict.

Per hunk: where GNU patch would place it (``patch._diagnose``, whole-file search), the file
its content went to when it fails (``git diff -M -C``), and upstream's change of its region.
Per patch: the status from its files, its dependencies (``Depends-on``, ``Test-depends-on``)
and typed evidence of obsolescence (``model.Evidence``), and a draft verdict.

Decisions on data: the bases are read only through ``BaseView`` (the port tree is one); the
one trial of a patch on a port tree is ``tree.porttree.try_patch``.
"""

from __future__ import annotations

import re
from typing import Protocol

from unidiff import PatchSet

from ..queue.patch import ChangeKind, FileChange, Patch, PlacementKind, _diagnose, hunk_start
from .model import (
    APPLIED,
    FILE_APPLIED,
    Evidence,
    EvidenceKind,
    FileStatus,
    HunkNote,
    HunkReport,
    PatchReport,
    PatchStatus,
    UpstreamRegion,
    is_test_file,
)


class BaseView(Protocol):
    """What the analysis reads of the two bases (``tree.porttree.PortTree`` is one; a test may pass its own)."""

    def old_lines(self, rel: str) -> list[str] | None: ...
    def new_lines(self, rel: str) -> list[str] | None: ...
    def region_diff(self, old_path: str, new_path: str) -> str: ...
    def grep_def(self, name: str, defs_only: bool = False) -> str | None: ...
    def reverse_applies(self, section: str) -> bool: ...


_NAME_RE = re.compile(
    r"^\s*(?:async\s+)?def\s+(\w+)|^\s*class\s+(\w+)|^([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)", re.M
)


# --------------------------------------------------------------------------- hunks


def place_hunks(lines: list[str], fc: FileChange, path: str | None = None) -> list[HunkReport]:
    """Each hunk of ``fc`` placed in ``lines`` as GNU patch would, in order (floor, carried offset)."""
    rows = []
    floor = shift = 0
    for i, hunk in enumerate(fc.pfile, 1):
        head = f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
        pl = _diagnose(lines, hunk, floor=floor, shift=shift)
        rows.append(
            HunkReport(
                path or fc.path,
                i,
                head,
                (hunk.section_header or "").strip(),
                pl.kind,
                pl.line,
                pl.delta,
                pl.fuzz,
            )
        )
        if pl.line is not None:
            floor = pl.line - 1 + hunk.source_length
            shift = pl.delta
        else:
            floor = max(floor, hunk_start(hunk))
    return rows


def retry_moved(fc: FileChange, rows: list[HunkReport], dests: list[tuple[str, list[str] | None]]) -> None:
    """A failing hunk of a file that still exists: is its context in a file its content went to?"""
    found = [(d, lines) for d, lines in dests if lines is not None]
    for row, hunk in zip(rows, fc.pfile):
        if row.kind != PlacementKind.FAILS:
            continue
        for dest, lines in found:
            pl = _diagnose(lines, hunk, start=0)
            if pl.line is not None:
                how = "exact lines" if not pl.fuzz else f"fuzz {pl.fuzz}"
                row.note = (
                    f"moved to {dest}:{pl.line} ({how}; git diff -M -C: content of {fc.path} went there)"
                )
                row.note_kind = HunkNote.MOVED_TO
                break
        else:
            if found:
                row.note = f"not in {', '.join(d for d, _ in found)} either (where git diff -M -C sees {fc.path}'s content go)"
                row.note_kind = HunkNote.NOT_IN_MOVED


def upstream_region(old: list[str], diff: str, hunk, new_path: str) -> UpstreamRegion:
    """Upstream's change of the hunk's region between the bases (``diff``: the file's diff), and
    the region's new line numbers."""
    pl = _diagnose(old, hunk)
    start = (pl.line - 1) if pl.line is not None else hunk_start(hunk)
    end = start + max(hunk.source_length, 1)
    pieces, shift = [], 0
    if diff.strip():
        for uh in PatchSet(diff)[0]:
            a, b = uh.source_start - 1, uh.source_start - 1 + uh.source_length
            if b < start:
                shift += uh.target_length - uh.source_length
            elif a <= end:
                pieces.append(str(uh))
    return UpstreamRegion(
        f"{start + 1}-{end}", f"{start + 1 + shift}-{end + shift}", new_path, "".join(pieces), bool(pieces)
    )


# --------------------------------------------------------------------------- obsolescence


def _significant(text: str) -> bool:
    s = text.strip()
    return len(s) >= 12 and not s.startswith("#") and any(c.isalnum() for c in s)


def _added(fc: FileChange) -> list[str]:
    return [ln.value.rstrip("\n") for h in fc.pfile for ln in h if ln.is_added]


def _already_upstream(hunk, old_text: set[str], new_text: set[str]) -> bool:
    added = [ln.value.strip() for ln in hunk if ln.is_added and _significant(ln.value)]
    return bool(added) and all(a in new_text and a not in old_text for a in added)


def _names(lines: list[str]) -> set[str]:
    return {next(g for g in m.groups() if g) for m in _NAME_RE.finditer("\n".join(lines))}


def _tokens(name: str) -> set[str]:
    return {t for t in name.lower().split("_") if t}


def obsolete_evidence(tree: BaseView, patch: Patch, sections: list[str]) -> tuple[list[Evidence], dict]:
    """Evidence that the new base already does what ``patch`` does; per-hunk 'already upstream' marks.

    - every modified file's hunks reverse-apply on the new base;
    - the names the patch adds (def/class/assignments, code files) are defined upstream,
      or a name upstream added in the same file has all of the name's words;
    - most of the patch's significant added code lines appeared upstream.
    """
    evidence: list[Evidence] = []
    marks: dict[tuple[str, int], bool] = {}
    code = [fc for fc in patch.files if not is_test_file(fc.path) and fc.path.endswith(".py")]
    modified = [s for fc, s in zip(patch.files, sections) if fc.kind == ChangeKind.MODIFY]
    if modified and all(tree.reverse_applies(s) for s in modified):
        evidence.append(
            Evidence(EvidenceKind.REVERSE_APPLIES, "reverse-applies: every hunk is already in the new base")
        )
    found, total = [], 0
    lines_in, lines_total = 0, 0
    for fc in code:
        old = tree.old_lines(fc.old or fc.path) or []
        new = tree.new_lines(fc.path) or []
        removed = [ln.value for h in fc.pfile for ln in h if ln.is_removed]
        added_names = _names(_added(fc)) - _names(old) - _names(removed)
        added_names = {n for n in added_names if len(n) > 3 and not n.startswith("_")}
        new_names = _names(new)
        upstream_new = new_names - _names(old)
        old_set, new_set = {x.strip() for x in old}, {x.strip() for x in new}
        for i, hunk in enumerate(fc.pfile, 1):
            if _already_upstream(hunk, old_set, new_set):
                marks[(fc.path, i)] = True
        for name in sorted(added_names):
            total += 1
            if name in new_names:
                found.append(f"{name} (defined in {fc.path})")
                continue
            hit = tree.grep_def(name, defs_only=True)  # a module variable elsewhere (logger) is no evidence
            if hit:
                found.append(f"{name} (defined in {hit})")
                continue
            similar = [m for m in upstream_new if _tokens(name) - {"plugin"} <= _tokens(m) and m != name]
            if similar:
                where = tree.grep_def(similar[0]) or fc.path
                found.append(f"{name} ~ {similar[0]} ({where}, new upstream)")
        sig = [a.strip() for a in _added(fc) if _significant(a)]
        lines_total += len(sig)
        lines_in += sum(1 for a in sig if a in new_set and a not in old_set)
    if found and len(found) * 2 >= total:
        evidence.append(
            Evidence(
                EvidenceKind.NAMES_UPSTREAM,
                f"{len(found)} of {total} names it adds are upstream: " + ", ".join(found),
            )
        )
    if lines_total and lines_in * 10 >= lines_total * 6:
        evidence.append(
            Evidence(
                EvidenceKind.LINES_UPSTREAM, f"{lines_in} of {lines_total} added code lines appeared upstream"
            )
        )
    return evidence, marks


# --------------------------------------------------------------------------- the patch's status


def decide(report: PatchReport, patch: Patch, by_slug: dict[str, PatchReport], failed_tests: dict) -> None:
    """The patch's status from its files, dependencies and evidence (hunks never contradict it).

    ``own`` is how the patch itself applied; ``status`` adds what the maintainer must know
    first: likely obsolete, blocked by a ``Depends-on`` patch that did not apply (or, for a
    patch failing only in test files, by the patch its test file needs: ``Test-depends-on``,
    or an earlier patch that failed in the same test file).
    """
    bad = [f for f in report.files if f.status not in FILE_APPLIED]
    code_bad = [f for f in bad if not f.test]
    report.conflicts = [f.path for f in report.files if f.status == FileStatus.CONFLICT]
    if not bad:
        exact = all(f.status == FileStatus.EXACT for f in report.files)
        report.own = PatchStatus.EXACT if exact else PatchStatus.THREE_WAY
        moved = [f for f in report.files if f.status == FileStatus.MOVED]
        if moved:
            report.note = "; ".join(f"{f.path}: {f.note}" for f in moved)
    else:
        report.own = PatchStatus.CONFLICT if code_bad else PatchStatus.TEST_ONLY
    report.status = report.own
    deps = [d for d in patch.header.depends_on if d in by_slug and not by_slug[d].applied]
    test_deps = [d for d in patch.header.test_depends_on if d in by_slug and not by_slug[d].applied]
    already = any(e.kind.already_there for e in report.evidence)
    if report.evidence and (bad or already):
        report.status = PatchStatus.OBSOLETE
    elif deps:
        report.status = PatchStatus.BLOCKED
        report.blocked_by = root_causes(deps, by_slug)
        report.note = f"Depends-on {', '.join(deps)} did not apply; on its own: {report.own}"
    elif bad and not code_bad:
        culprits = test_deps or [
            s for f in bad for s in failed_tests.get(f.path, []) if s != patch.header.slug
        ]
        if culprits:
            report.status = PatchStatus.BLOCKED
            report.blocked_by = sorted({by_slug[s].name[:4] for s in culprits})
            report.note = "test file only: " + ", ".join(f.path for f in bad)


def root_causes(deps: list[str], by_slug: dict[str, PatchReport]) -> list[str]:
    """The patches that failed themselves: a dependency that applied but was blocked passes on its causes."""
    causes: set[str] = set()
    for d in deps:
        dep = by_slug[d]
        if dep.status == PatchStatus.BLOCKED and dep.own in APPLIED and dep.blocked_by:
            causes.update(dep.blocked_by)
        else:
            causes.add(dep.name[:4])
    return sorted(causes)


def draft_verdict(r: PatchReport, reason: str) -> None:
    if r.status == PatchStatus.EXACT:
        r.verdict, r.reason = "still needed", f"applies exactly; {reason}"
    elif r.status == PatchStatus.THREE_WAY:
        r.verdict, r.reason = "still needed", f"{merged_how(r)}; {reason}"
    elif r.status == PatchStatus.OBSOLETE:
        r.verdict, r.reason = "likely obsolete", "upstream has it: " + "; ".join(r.obsolete)
    elif r.status == PatchStatus.BLOCKED:
        r.verdict = "blocked"
        r.reason = f"blocked by {', '.join(r.blocked_by)}" + (f" ({r.note})" if r.note else "")
    elif r.status == PatchStatus.TEST_ONLY:
        r.verdict, r.reason = (
            "still needed, fix tests",
            "only its test files conflict: " + ", ".join(r.conflicts),
        )
    else:
        r.verdict = "conflict → re-express"
        r.reason = "conflicts in " + ", ".join(
            r.conflicts or [f.path for f in r.files if f.status != FileStatus.EXACT]
        )


def merged_how(r: PatchReport) -> str:
    """How a patch that did not apply exactly went in: a 3-way merge, or the port's own steps."""
    kinds = {f.status for f in r.files}
    steps = [
        text
        for status, text in (
            (FileStatus.OFFSET, "placed with every hunk's full context where the 3-way merge conflicted"),
            (FileStatus.IMPORTS, "only imports conflicted: merged, sorted by the base's ruff"),
            (FileStatus.REPLAYED, "a resolution recorded before replayed"),
        )
        if status in kinds
    ]
    return "; ".join(steps) or "3-way merge onto the new base"


def first_sentence(text: str, limit: int = 120) -> str:
    first = re.split(r"(?<=[.;])\s", text, maxsplit=1)[0].rstrip(".;")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def by_file(patch: Patch, rows: list[HunkReport]):
    i = 0
    for fc in patch.files:
        n = len(fc.pfile)
        yield fc, rows[i : i + n]
        i += n
