"""watch: newer releases in PEP 440 order, pre-releases and yanked on request, drift reports."""

from __future__ import annotations

import json
import re
import tomllib

from tkvseam.port.render import summary
from tkvseam.release.watch import summary_line

from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml
from ..fixtures.queue import make_two_patches

NEXT = f"v{NEXT_VERSION}"


def add_listing(index, *files: str | tuple[str, str]) -> None:
    """Listing-only entries (nothing to download): a name, or (name, yank reason)."""
    for f in files:
        name, yanked = f if isinstance(f, tuple) else (f, False)
        index.listing["files"].insert(
            0, {"filename": name, "url": f"/files/{name}", "hashes": {"sha256": "0" * 64}, "yanked": yanked}
        )


def watch_json(project, *args: str, expect: int = 11) -> dict:
    return json.loads(project.cli("watch", *args, "--json", expect=expect).output)


def test_watch_lists_newer_releases_in_pep440_order(project, index):
    add_listing(
        index,
        "vllm-9.12.0-cp38-abi3-manylinux1_x86_64.whl",  # a release with wheels only still counts
        "vllm-9.9.10.tar.gz",
        ("vllm-9.10.1.tar.gz", "broken wheel metadata"),
        "vllm-9.11.0rc1.tar.gz",
        "vllm-9.8.0.tar.gz",  # older than the carried base
        "vllm-latest.tar.gz",  # not a version: ignored
        "other-10.0.tar.gz",  # another project: ignored
    )
    plain = watch_json(project)
    # 9.10.0 after 9.9.10 (PEP 440, not string order), nothing at or below 9.9.9
    assert [r["version"] for r in plain["releases"]] == ["9.9.10", "9.10.0", "9.12.0"]
    assert plain["since"] == NAME and plain["from_base"] == NAME
    assert [r["version"] for r in watch_json(project, "--pre")["releases"]] == [
        "9.9.10",
        "9.10.0",
        "9.11.0rc1",
        "9.12.0",
    ]
    yanked = watch_json(project, "--yanked")["releases"]
    assert [(r["version"], r["yanked"]) for r in yanked][1:3] == [("9.10.0", False), ("9.10.1", True)]
    out = project.cli("watch", "--since", "9.10.0", expect=11).output.splitlines()
    assert out == [
        "9.12.0: not pinned",
        "watch: 1 release(s) newer than 9.10.0 (9.10.0): 9.12.0",
    ]


def test_watch_orders_0_10_0_after_0_9_0_and_skips_rc_and_yanked_unless_asked(project, index):
    index.listing["files"] = []
    add_listing(
        index,
        "vllm-0.34.0rc1.tar.gz",
        "vllm-0.10.0.tar.gz",
        ("vllm-0.33.1.tar.gz", "bad build"),
        ("vllm-0.33.1-cp38-abi3-manylinux1_x86_64.whl", "bad build"),
        "vllm-0.33.0.tar.gz",
        "vllm-0.9.0.tar.gz",
        "vllm-0.8.0.tar.gz",
    )

    def versions(*flags: str) -> list[str]:
        return [r["version"] for r in watch_json(project, "--since", "0.8.0", *flags)["releases"]]

    assert versions() == ["0.9.0", "0.10.0", "0.33.0"]
    assert versions("--pre") == ["0.9.0", "0.10.0", "0.33.0", "0.34.0rc1"]
    assert versions("--yanked") == ["0.9.0", "0.10.0", "0.33.0", "0.33.1"]
    assert versions("--pre", "--yanked") == ["0.9.0", "0.10.0", "0.33.0", "0.33.1", "0.34.0rc1"]


def test_watch_with_no_newer_release_exits_0(project, index, releases):
    out = project.cli("watch", "--since", NEXT, expect=0).output
    assert out == f"watch: no release newer than {NEXT} ({NEXT_VERSION})\n"
    # the newest carried base is the default: a queue of its own for 9.10.0 makes it the reference
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    (project.root / "patches" / NEXT).mkdir()
    (project.root / "patches" / NEXT / "series").write_text("")
    assert watch_json(project, expect=0) | {"releases": []} == {
        "ok": True,
        "since": NEXT,
        "since_version": NEXT_VERSION,
        "from_base": NEXT,
        "releases": [],
        "errors": [],
    }
    assert not (project.root / "build" / "drift").exists()  # no report asked, nothing written


def test_watch_report_writes_parseable_files_into_a_scratch_pin(project, index, releases):
    make_two_patches(project)
    bases_before = (project.root / "bases.toml").read_bytes()
    res = project.cli("watch", "--report", expect=11)
    drift = project.root / "build" / "drift"
    line = (
        f"{NEXT_VERSION}: 1 of 2 patches apply: 0 exact, 1 3-way; 1 do not: 0 test-only conflict, 1 conflict, "
        f"0 blocked, 0 likely obsolete; 2 hunks: 0 exact, 1 offset/fuzz, 0 moved, 0 already upstream, 1 fails"
        f"  (build/drift/{NEXT_VERSION}.md)"
    )
    assert res.output.splitlines()[0] == line
    assert (drift / "summary.txt").read_text() == line + "\n"
    data = json.loads((drift / f"{NEXT_VERSION}.json").read_text())
    assert data["from"]["name"] == NAME and data["to"]["name"] == NEXT
    assert data["to"]["commit_prefix"] == releases[NEXT].commit[:9]
    assert [(p["name"], p["status"]) for p in data["patches"]] == [
        ("0001-cache-tweak.patch", "3-way"),
        ("0002-add-mul.patch", "conflict"),
    ]
    assert data["patches"][0]["hunks"][0]["status"] == "offset +2"
    md = (drift / f"{NEXT_VERSION}.md").read_text()
    assert line.split("  (")[0].replace(NEXT_VERSION, f"port {NAME} -> {NEXT}") in md.splitlines()
    assert "| 0001-cache-tweak.patch | 3-way | 1 offset/fuzz |  |" in md
    assert "| 0002-add-mul.patch | conflict | 1 fails |  |" in md
    # the draft verdict table from `port --report`, five cells in every row
    table = md[md.index("| file / hunk |") :].splitlines()
    assert table[0] == "| file / hunk | what it does | verdict | reason | evidence |"
    assert all(len(re.split(r"(?<!\\)\|", row)) == 7 for row in table if row.startswith("|"))
    assert (
        "| **0002 add-mul** | add mul() | conflict → re-express | conflicts in vllm/engine/arg_utils.py" in md
    )
    # pinned into the scratch copy only; the scratch port tree is gone
    assert (project.root / "bases.toml").read_bytes() == bases_before
    assert set(tomllib.loads((drift / "bases.toml").read_text())) == {NAME, NEXT}
    assert not list((project.root / "build").glob(".port-report-*"))
    assert json.loads((drift / "watch.json").read_text())["releases"][0]["pin"] == "added"
    # --write pins into bases.toml itself
    project.cli("watch", "--report", "--write", expect=11)
    assert set(tomllib.loads((project.root / "bases.toml").read_text())) == {NAME, NEXT}
    assert (project.root / "bases.toml").read_bytes().startswith(bases_before)


def test_watch_report_keeps_going_past_a_release_it_cannot_pin(project, index, releases):
    make_two_patches(project)
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME])
        + bases_toml(releases[NEXT], sha256="0" * 64, name=NEXT, version=NEXT_VERSION)
    )
    res = project.cli("watch", "--report", expect=4)
    assert res.output.startswith(f"{NEXT_VERSION}: no report: {NEXT} is already pinned")
    assert "sdist.sha256: bases file has 000" in res.stderr and "next: " in res.stderr
    summary = (project.root / "build/drift/summary.txt").read_text()
    assert summary.startswith(f"{NEXT_VERSION}: no report:")


def test_write_without_report_and_a_bad_since_are_usage_errors(project):
    assert "--write only makes sense with --report" in project.cli("watch", "--write", expect=2).stderr
    err = project.cli("watch", "--since", "latest", expect=2).stderr
    assert f"--since 'latest' is neither a base in the bases file ({NAME})" in err
    assert f"next: make watch SINCE={NAME}" in err


def test_the_summary_counts_each_patch_once_by_its_status_and_each_hunk_by_its_place():
    from tkvseam.queue.patch import PlacementKind
    from tkvseam.findings.model import HunkNote, HunkReport, PatchReport, PatchStatus

    def patch(status, own=None, hunks=()):
        rows = [
            HunkReport("f.py", i, "", "", kind, note_kind=note) for i, (kind, note) in enumerate(hunks, 1)
        ]
        return PatchReport("p", status=status, own=own or status, hunks=rows)

    exact, offset, fuzz = (
        (PlacementKind.EXACT, HunkNote.NONE),
        (PlacementKind.OFFSET, HunkNote.NONE),
        (PlacementKind.FUZZ, HunkNote.NONE),
    )
    fails = (PlacementKind.FAILS, HunkNote.NONE)
    reports = [
        patch(PatchStatus.EXACT, hunks=[exact]),
        patch(PatchStatus.THREE_WAY, hunks=[offset, fuzz, (PlacementKind.EOF, HunkNote.NONE)]),
        patch(PatchStatus.THREE_WAY, hunks=[(PlacementKind.EXACT, HunkNote.MOVED_FILE)]),  # a moved file
        patch(PatchStatus.CONFLICT, hunks=[fails, (PlacementKind.FAILS, HunkNote.MOVED_TO)]),  # found moved
        patch(PatchStatus.TEST_ONLY, hunks=[(PlacementKind.FAILS, HunkNote.MOVED_FILE)]),  # not found there
        patch(PatchStatus.OBSOLETE, hunks=[(PlacementKind.FAILS, HunkNote.ALREADY_UPSTREAM)]),
        patch(PatchStatus.BLOCKED, own=PatchStatus.EXACT),  # counted once: blocked (applies on its own)
        patch(PatchStatus.BLOCKED, own=PatchStatus.CONFLICT),
    ]
    counts = summary(reports)
    assert counts["by_status"] == {
        "exact": 1,
        "3-way": 2,
        "test-only conflict": 1,
        "conflict": 1,
        "blocked": 2,
        "likely obsolete": 1,
    }
    assert counts["hunks_by_place"] == {
        "exact": 1,
        "offset/fuzz": 3,
        "moved": 2,
        "already upstream": 1,
        "fails": 2,
    }
    assert summary_line("9.10.0", counts) == (
        "9.10.0: 3 of 8 patches apply: 1 exact, 2 3-way; 5 do not: 1 test-only conflict, 1 conflict, "
        "2 blocked (1 of them apply on their own), 1 likely obsolete; 9 hunks: 1 exact, 3 offset/fuzz, 2 moved, "
        "1 already upstream, 2 fails"
    )


def test_watch_write_pins_no_release_it_cannot_port_to(project, index, tmp_path):
    """--since 0: 9.9.8 is older than every carried queue; it got pinned into bases.toml (and its
    sdist downloaded) before the report said "no carried base is older"."""
    from ..fixtures.upstream import FILES, make_release

    older = make_release(tmp_path / "older", "9.9.8", FILES)
    data = older.tarball.read_bytes()
    index.files[f"/files/{older.tarball.name}"] = data
    index.listing["files"].append(
        {
            "filename": older.tarball.name,
            "url": f"/files/{older.tarball.name}",
            "size": len(data),
            "hashes": {"sha256": older.sha256},
        }
    )
    make_two_patches(project)
    res = project.cli("watch", "--report", "--write", "--since", "0", "--json", expect=2)
    rows = {r["version"]: r for r in json.loads(res.stdout)["releases"]}
    assert "no carried base is older than v9.9.8" in rows["9.9.8"]["line"]
    assert "pin" not in rows["9.9.8"] and "pin" in rows[NEXT_VERSION]
    assert set(tomllib.loads((project.root / "bases.toml").read_text())) == {NAME, NEXT}
    assert not (project.cache / "sdist" / older.tarball.name).exists()
