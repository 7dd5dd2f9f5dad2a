"""Per-node-id test outcomes: a pytest plugin writing them, and their folding.

The plugin (``-p tkvseam.seamtest.outcomes``, stdlib only: it runs inside the
vLLM venv's pytest) appends JSON lines to the file named by ``TKV_SEAM_OUTCOMES``:
one per test phase that did not simply pass, one per passed call, and one per
collection error. ``read_rows`` folds them per node id; ``fold`` gives one
outcome for a requested node id.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

PASSED, FAILED, ERROR, SKIPPED, MISSING = "passed", "failed", "error", "skipped", "missing"

_PATH = os.environ.get("TKV_SEAM_OUTCOMES")


def _write(row: dict) -> None:
    if _PATH:
        with open(_PATH, "a") as f:
            f.write(json.dumps(row) + "\n")


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        outcome = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
        _write(
            {
                "nodeid": report.nodeid,
                "when": report.when,
                "outcome": outcome,
                "message": str(report.longrepr)[-2000:] if report.failed else "",
            }
        )


def pytest_collectreport(report):
    if report.failed:
        _write(
            {
                "nodeid": report.nodeid,
                "when": "collect",
                "outcome": ERROR,
                "message": str(report.longrepr)[-2000:],
            }
        )


# --------------------------------------------------------------------------- reading


def read_rows(path: Path) -> dict[str, dict]:
    """{nodeid: row}; a later non-pass (teardown error) overrides a passed call."""
    rows: dict[str, dict] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        prev = rows.get(row["nodeid"])
        if prev is None or prev["outcome"] == PASSED:
            rows[row["nodeid"]] = row
    return rows


def fold(rows: dict[str, dict], node: str) -> str:
    """One outcome for a requested node id (parametrized instances folded; collection errors count)."""
    file = node.split("::", 1)[0]
    found = [r for nid, r in rows.items() if nid == node or nid.startswith(node + "[") or nid == file]
    if not found:
        return MISSING
    outcomes = {r["outcome"] for r in found}
    for bad in (ERROR, FAILED, SKIPPED):
        if bad in outcomes:
            return FAILED if bad == ERROR else bad
    return PASSED


def counts(rows: dict[str, dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in rows.values():
        out[row["outcome"]] = out.get(row["outcome"], 0) + 1
    return out


def failing(rows: dict[str, dict]) -> set[str]:
    return {nid for nid, row in rows.items() if row["outcome"] in (FAILED, ERROR)}
