"""port report: placement, blocked-by, test-only overlaps, obsolescence, moves (the case of ``portcase``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from ..fixtures.upstream import NAME
from ..fixtures.portcase import NEXT, NEXT_FILES, hunks, report_json


@pytest.fixture(scope="module")
def report(pproject_once):
    return report_json(pproject_once)


def test_report_dependency_aware_blocked_by(report):
    assert report["0001"]["status"] == "conflict" and report["0001"]["own"] == "conflict"
    assert set(report["0001"]["conflicts"]) == {"vllm/engine/arg_utils.py", "tests/test_seam.py"}
    use = report["0002"]
    assert use["status"] == "blocked" and use["blocked_by"] == ["0001"]
    assert use["own"] == "3-way" and "on its own: 3-way" in use["note"]


def test_report_test_file_only_overlap_is_not_a_code_conflict(report):
    more = report["0003"]
    assert more["own"] == "test-only conflict" and more["status"] == "blocked"
    assert more["blocked_by"] == ["0001"] and more["note"] == "test file only: tests/test_seam.py"
    assert [f["status"] for f in more["files"] if f["path"] == "vllm/config/cache.py"] == ["3-way"]
    seam = report["0008"]  # names its test prerequisite in Test-depends-on
    assert seam["status"] == "blocked" and seam["blocked_by"] == ["0001"]


def test_report_offset_and_fuzz_searched_over_the_whole_file(report):
    [use] = hunks(report["0002"], "vllm/config/cache.py")
    assert (use["kind"], use["delta"], use["status"]) == ("offset", 120, "offset +120")
    [far] = hunks(report["0004"], "vllm/config/cache.py")
    assert (far["kind"], far["fuzz"], far["delta"]) == ("fuzz", 1, 120)
    assert far["status"] == "fuzz 1, offset +120" and report["0004"]["status"] == "3-way"


@pytest.mark.skipif(not shutil.which("patch"), reason="GNU patch not installed")
def test_placement_agrees_with_gnu_patch(pproject_once, tmp_path):
    """The same hunks through GNU patch --dry-run: same offset and fuzz."""
    target = tmp_path / "cache.py"
    target.write_text(NEXT_FILES["vllm/config/cache.py"])
    for name, expected in (
        ("0002-use-mul.patch", "(offset 120 lines)"),
        ("0004-fuzz-far.patch", "with fuzz 1 (offset 120 lines)"),
    ):
        text = (pproject_once.root / "patches" / name).read_text()
        diff = text[text.index("diff --git") :]
        out = subprocess.run(
            ["patch", "--dry-run", str(target)], input=diff, capture_output=True, text=True
        ).stdout
        assert expected in out, out


def test_report_end_of_file_append_is_not_an_offset(report):
    [tail] = hunks(report["0005"], "vllm/tail.py")
    assert tail["kind"] == "eof" and tail["status"] == "end of file (now line 58)"
    assert report["0005"]["status"] == "3-way"


def test_report_likely_obsolete_with_evidence(report):
    reg = report["0006"]
    assert reg["status"] == "likely obsolete"
    assert any(e.startswith("reverse-applies") for e in reg["obsolete"])
    assert any("register (defined in vllm/registry.py)" in e for e in reg["obsolete"])
    assert "| likely obsolete |" in report["table"]  # the status word, not another


def test_report_move_retries_the_hunk_where_the_file_went(report):
    mod = report["0007"]
    [f] = mod["files"]
    assert (
        f["status"] == "moved" and f["moved_to"] == "vllm/new_mod.py" and "retried there: 3-way" in f["note"]
    )
    assert mod["status"] == "3-way"
    [h] = mod["hunks"]
    assert h["file"] == "vllm/new_mod.py" and h["kind"] == "exact" and h["note"].startswith("moved")


def test_report_failing_hunk_shows_the_upstream_change_and_new_lines(report):
    [h] = hunks(report["0001"], "vllm/engine/arg_utils.py")
    assert h["kind"] == "fails" and h["upstream"]["changed"]
    assert "+    return -(b - a)" in h["upstream"]["diff"] and h["upstream"]["new_lines"] == "3-6"


def test_report_statuses_never_contradict_and_keep_nothing(pproject_once, report):
    for name, p in report.items():
        if name in ("summary", "table"):
            continue
        if p["own"] == "exact":
            assert all(h["kind"] == "exact" for h in p["hunks"]), name
        if any(h["kind"] != "exact" for h in p["hunks"]):
            assert p["own"] != "exact", name
    assert report["summary"]["patches"] == 8 and report["summary"]["applied"] == 3
    assert not (pproject_once.root / "build" / f"port-{NEXT}").exists()
    # nothing but the build tree and the report's own files (build/port-report-<to>/)
    assert sorted(x.name for x in (pproject_once.root / "build").iterdir()) == [
        f"port-report-{NEXT}",
        f"vllm-{NAME}",
    ]
    assert "| file / hunk | what it does | verdict | reason | evidence |" in report["table"]


def test_blocked_by_names_the_root_cause_not_the_chain():
    from tkvseam.findings.model import PatchReport
    from tkvseam.findings.analysis import root_causes

    by_slug = {
        "slot": PatchReport("0002-slot.patch", "slot", status="conflict", own="conflict"),
        "cuda": PatchReport("0003-cuda.patch", "cuda", status="blocked", own="exact", blocked_by=["0002"]),
        "gone": PatchReport("0005-gone.patch", "gone", status="blocked", own="conflict", blocked_by=["0002"]),
    }
    assert root_causes(["cuda"], by_slug) == ["0002"]  # applies itself: its cause is the cause
    assert root_causes(["cuda", "gone"], by_slug) == ["0002", "0005"]  # fails itself: a cause too


def test_the_text_report_names_each_patch_hunk_and_the_summary(pproject_once):
    out = pproject_once.cli("port", "report", "--base", NAME, "--to", NEXT).output  # ran: exit 0
    lines = out.splitlines()
    assert lines[0].split() == ["conflict", "0001-add-mul.patch"]
    assert "blocked            0002-use-mul.patch  blocked by 0001" in out
    assert "vllm/config/cache.py: 3-way" in out and ": offset/fuzz: offset +120" in out  # the place, then how
    # the per-hunk table is report.md's: the terminal does not print the same patches twice
    assert "| file / hunk | what it does | verdict | reason | evidence |" not in out
    assert lines[-2].startswith(f"port {NAME} -> {NEXT}: 3 of 8 patches apply:")
    assert lines[-1] == (
        f"report kept in build/port-report-{NEXT}/report.md (with the per-hunk verdict table) and "
        f"build/port-report-{NEXT}/report.json"
    )


def test_a_patchs_removal_condition_is_shown_beside_its_verdict():
    """A header's ``Remove-when`` reaches the text report and the draft verdict table."""
    from tkvseam.findings.model import PatchReport
    from tkvseam.port.render import report_lines, verdict_table

    shim = PatchReport("0009-shim.patch", "shim", status="exact", own="exact", verdict="still needed")
    shim.reason, shim.remove_when = "applies exactly; a shim", "the plugin emits a spec per layer"
    plain = PatchReport("0001-plain.patch", "plain", status="exact", own="exact", reason="applies exactly")
    lines = report_lines([plain, shim])
    assert lines == [
        "exact              0001-plain.patch",
        "exact              0009-shim.patch",
        f"{'':21}remove when: the plugin emits a spec per layer",
    ]
    table = verdict_table([plain, shim], "v1", "v2")
    assert "| applies exactly; a shim (remove when: the plugin emits a spec per layer) |" in table
    assert "| applies exactly |" in table


STATUSES = ("exact", "3-way", "test-only conflict", "conflict", "blocked", "likely obsolete")
PLACES = ("exact", "offset/fuzz", "moved", "already upstream", "fails")


def said_counts(line: str) -> tuple[dict[str, int], dict[str, int]]:
    """The patch and hunk counts a summary line says (every status and place is named once)."""
    patches, hunks = line.split(" hunks: ")
    by_status = {
        w: int(n) for n, w in re.findall(rf"(\d+) ({'|'.join(sorted(STATUSES, key=len)[::-1])})\b", patches)
    }
    by_place = {w: int(n) for n, w in re.findall(rf"(\d+) ({'|'.join(PLACES)})\b", hunks)}
    return by_status, by_place


def test_terminal_markdown_and_json_say_the_same_statuses_and_counts(pproject_once):
    """Issue 37: the terminal said "2 3-way, 4 blocked, 2 conflict, 1 exact" while report.md said
    "2 exact, 2 offset/fuzz, 0 3-way, 5 conflict … 0 moved" and its own table listed 3-way patches
    and moved hunks. One status per patch, one place per hunk, counted once, said three ways."""
    text = pproject_once.cli("port", "report", "--base", NAME, "--to", NEXT).output
    data = json.loads(pproject_once.cli("port", "report", "--base", NAME, "--to", NEXT, "--json").output)
    md = (pproject_once.root / "build" / f"port-report-{NEXT}" / "report.md").read_text()
    statuses = {p["name"]: p["status"] for p in data["patches"]}
    summary = data["summary"]
    assert summary["by_status"] == {s: list(statuses.values()).count(s) for s in STATUSES}
    places = [h["place"] for p in data["patches"] for h in p["hunks"]]
    assert summary["hunks_by_place"] == {p: places.count(p) for p in PLACES} and summary["hunks"] == len(
        places
    )
    assert summary["applied"] == 3 and summary["all_apply"] is False
    # the terminal: each patch's status first, then the one summary line
    shown = {
        line[19:].split()[0]: line[:19].strip()
        for line in text.splitlines()
        if re.match(r"^\S.* \d{4}-\S+\.patch", line)
    }
    assert shown == statuses
    terminal_line = next(line for line in text.splitlines() if line.startswith(f"port {NAME} -> {NEXT}:"))
    assert said_counts(terminal_line) == (summary["by_status"], summary["hunks_by_place"])
    # report.md: the same line, one row per patch with that status, each hunk's verdict by its place
    md_lines = [line for line in md.splitlines() if line.startswith(f"port {NAME} -> {NEXT}:")]
    assert md_lines == [terminal_line]
    rows = {
        cells[1].strip(): cells[2].strip()
        for cells in (r.split("|") for r in md.splitlines())
        if len(cells) == 6 and cells[1].strip() in statuses
    }
    assert rows == statuses
    verdicts = {  # each begins with the word the summary counts it by
        "offset/fuzz: still needed": "offset/fuzz",
        "moved: still needed, re-anchor": "moved",
        "already upstream: likely obsolete": "already upstream",
        "fails: resolve or re-express": "fails",
    }
    table = md[md.index("| file / hunk |") : md.index("### Per patch and hunk")]
    cells = [re.split(r"(?<!\\)\|", row) for row in table.splitlines()[2:] if row.startswith("| ")]
    hunk_rows = [c[3].strip() for c in cells if not c[1].startswith(" **")]
    assert {p: sum(verdicts[v] == p for v in hunk_rows) for p in PLACES if p != "exact"} == {
        p: n for p, n in summary["hunks_by_place"].items() if p != "exact"
    }
    assert "offset/fuzz" not in [statuses[n] for n in statuses]  # a patch's word is its status only


def test_a_likely_obsolete_patch_says_which_later_patches_need_the_files_it_adds():
    """The walkthrough skipped 0001 as the report suggested; the port then stopped at 0002, whose
    test file 0001 creates. The report says so where it suggests the skip."""
    from types import SimpleNamespace

    from tkvseam.findings.model import PatchReport, PatchStatus
    from tkvseam.port.report import _say_what_a_skip_leaves_out
    from tkvseam.queue.patch import ChangeKind

    def patch(name, *files):
        return SimpleNamespace(name=name, files=[SimpleNamespace(path=p, kind=k) for p, k in files])

    patches = [
        patch("0001-a.patch", ("tests/test_seam.py", ChangeKind.ADD), ("vllm/a.py", ChangeKind.MODIFY)),
        patch("0002-b.patch", ("tests/test_seam.py", ChangeKind.MODIFY)),
        patch("0003-c.patch", ("vllm/a.py", ChangeKind.MODIFY)),
    ]
    reports = [PatchReport(p.name, status=PatchStatus.OBSOLETE) for p in patches[:1]]
    reports += [PatchReport(p.name, status=PatchStatus.EXACT) for p in patches[1:]]
    _say_what_a_skip_leaves_out(patches, reports)
    assert (
        reports[0].note
        == "skipping it leaves out files later patches change: 0002-b.patch (tests/test_seam.py)"
    )
    assert reports[1].note == reports[2].note == ""


def test_a_stop_suggests_skipping_as_obsolete_only_a_patch_the_report_finds_likely_obsolete(tmp_path):
    """The walkthrough's stop at a patch blocked on a test file (the report: still needed) offered
    `VERDICT=obsolete`; a patch that is not likely obsolete is offered `VERDICT=dropped`."""
    from tkvseam.port.render import stop_hint

    tree, msg = tmp_path / "port", tmp_path / "port" / "msg"
    assert "VERDICT=obsolete" in stop_hint("v9.10.0", tree, msg, tree, obsolete=True)
    needed = stop_hint("v9.10.0", tree, msg, tree)
    assert "VERDICT=dropped" in needed and "obsolete" not in needed
