"""The port's analysis as a unit: decisions on data, no git, no port tree, no release.

A patch is parsed from text and the bases are a ``BaseView`` made of dicts, so each rule of
``findings.analysis`` (where a hunk lands, what counts as evidence of obsolescence, a patch's status
from its files and dependencies, the draft verdict) is checked on its own.
"""

from __future__ import annotations

from tkvseam.findings.analysis import decide, draft_verdict, obsolete_evidence, place_hunks
from tkvseam.findings.model import EvidenceKind, FileReport, FileStatus, PatchReport, PatchStatus
from tkvseam.queue.patch import parse_text

from ..fixtures.queue import HEADER_TRAILERS

OLD = [f"line {i}\n" for i in range(1, 21)]


def patch_text(slug: str = "cache-tweak", depends: str = "none", body: str | None = None) -> str:
    trailers = HEADER_TRAILERS.replace("Depends-on: none", f"Depends-on: {depends}")
    diff = body or (
        "diff --git a/vllm/a.py b/vllm/a.py\n"
        "--- a/vllm/a.py\n"
        "+++ b/vllm/a.py\n"
        "@@ -8,5 +8,6 @@\n"
        " line 8\n"
        " line 9\n"
        "-line 10\n"
        "+line 10 (seam)\n"
        "+def seam_helper_name():\n"
        " line 11\n"
        " line 12\n"
    )
    head = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@b.invalid>\n"
    return f"{head}Subject: [PATCH] {slug}: change\n\nChanges.\n\n{trailers}---\n{diff}"


class View:
    """Two bases as dicts of lines; ``defs``: names grep finds defined elsewhere."""

    def __init__(self, old, new, defs=(), reverse=False):
        self.old, self.new, self.defs, self.reverse = old, new, dict(defs), reverse

    def old_lines(self, rel):
        return self.old.get(rel)

    def new_lines(self, rel):
        return self.new.get(rel)

    def region_diff(self, old_path, new_path):
        return ""

    def grep_def(self, name, defs_only=False):
        return self.defs.get(name)

    def reverse_applies(self, section):
        return self.reverse


def test_a_hunk_lands_exactly_then_at_an_offset_then_not_at_all():
    fc = parse_text(patch_text(), "0001-cache-tweak.patch").files[0]
    assert [(r.kind, r.line, r.delta) for r in place_hunks(OLD, fc)] == [("exact", 8, 0)]
    shifted = ["new\n"] * 5 + OLD
    (row,) = place_hunks(shifted, fc)
    assert (row.line, row.delta) == (13, 5) and row.kind != "exact"
    edited = [ln.replace("line 8\n", "line eight\n") for ln in OLD]
    assert place_hunks(edited, fc)[0].fuzz == 1  # its outer context line changed: fuzz 1
    assert (
        place_hunks([ln for ln in OLD if ln != "line 10\n"], fc)[0].line is None
    )  # its removed line is gone


def test_a_name_the_patch_adds_that_upstream_defines_is_evidence_only_with_half_of_them():
    patch = parse_text(patch_text(), "0001-cache-tweak.patch")
    none, _ = obsolete_evidence(View({"vllm/a.py": OLD}, {"vllm/a.py": OLD}), patch, [""])
    assert none == []
    defined = View({"vllm/a.py": OLD}, {"vllm/a.py": OLD}, defs={"seam_helper_name": "vllm/b.py:3"})
    ev, _ = obsolete_evidence(defined, patch, [""])
    assert [e.kind for e in ev] == [EvidenceKind.NAMES_UPSTREAM] and "vllm/b.py:3" in ev[0].text


def test_reverse_applying_everywhere_is_evidence_of_its_own():
    patch = parse_text(patch_text(), "0001-cache-tweak.patch")
    view = View({"vllm/a.py": OLD}, {"vllm/a.py": OLD}, reverse=True)
    kinds = [e.kind for e in obsolete_evidence(view, patch, ["section"])[0]]
    assert EvidenceKind.REVERSE_APPLIES in kinds


def _report(name, *statuses, test=False):
    r = PatchReport(name=name, slug=name[5:].removesuffix(".patch"))
    r.files = [FileReport(path=f"vllm/f{i}.py", status=s, test=test) for i, s in enumerate(statuses)]
    return r


def test_status_from_files_then_dependencies_and_the_verdict_it_drafts():
    first = _report("0001-cache-tweak.patch", FileStatus.CONFLICT)
    decide(first, parse_text(patch_text(), first.name), {}, {})
    assert (first.own, first.status) == (PatchStatus.CONFLICT, PatchStatus.CONFLICT)
    second = _report("0002-add-mul.patch", FileStatus.EXACT)
    patch2 = parse_text(patch_text("add-mul", depends="cache-tweak"), second.name)
    decide(second, patch2, {"cache-tweak": first}, {})
    assert (second.own, second.status, second.blocked_by) == (
        PatchStatus.EXACT,
        PatchStatus.BLOCKED,
        ["0001"],
    )
    draft_verdict(second, "why")
    assert second.verdict == "blocked" and second.reason.startswith("blocked by 0001")
    clean = _report("0003-x.patch", FileStatus.EXACT, FileStatus.EXACT)
    decide(clean, parse_text(patch_text("x"), clean.name), {}, {})
    draft_verdict(clean, "still the seam")
    assert (clean.status, clean.verdict) == (PatchStatus.EXACT, "still needed")
