"""A pytest plugin recording each test's outcome as JSON lines (``-p tkvseam.pytest_outcomes``).

The file is named by the ``TKV_SEAM_OUTCOMES`` environment variable. One line per
test phase that did not simply pass, plus one per passed call, plus collection
errors; ``seamtest`` folds them into one outcome per node id.
"""

from __future__ import annotations

import json
import os

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
                "outcome": "error",
                "message": str(report.longrepr)[-2000:],
            }
        )
