"""``port report``'s files: the report kept beside the port tree, as Markdown and as JSON.

``build/port-report-<to>/report.md`` (the summary, the per-patch table and the draft verdict
table, as ``watch --report`` writes them, then every patch's hunks as the text report shows
them) and ``report.json`` (what ``port report --json`` prints). The directory is an output
directory (``outputs``): a previous report is replaced, anything else is refused and kept.
Written under the report's lock (``build/.port-report-<to>.lock``), so two reports onto
one base never mix their files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .. import hints, layout
from ..answer import Answer
from ..bases.pins import Base
from ..fsutil import atomic_write
from ..lock import locked
from ..outputs import replace_output_dir, seal_output_dir
from ..progress import QUIET, Progress
from . import render
from ..findings.model import PatchReport

KIND = "a port report"
NAMES = ("report.md", "report.json")


@dataclass
class ReportFiles:
    markdown: Path
    json: Path


@dataclass
class PortReported(Answer):
    """``port report``: every patch as it goes onto the new base, and where the report is kept.

    A report that ran is a success (exit 0), whatever it found: what it found is its summary
    (``--json``: ``summary.all_apply``, ``summary.by_status``), not an exit code."""

    root: Path
    from_name: str
    to_name: str
    reports: list[PatchReport]
    files: ReportFiles

    def lines(self) -> list[str]:
        # the per-hunk verdict table is report.md's (and --json's): the terminal gets the list only
        return [
            *render.report_lines(self.reports),
            render.summary_line(self.reports, self.from_name, self.to_name),
            f"report kept in {layout.shown(self.files.markdown, self.root)} (with the per-hunk verdict "
            f"table) and {layout.shown(self.files.json, self.root)}",
        ]

    def to_json(self) -> dict:
        return report_json(self.reports, self.from_name, self.to_name) | {
            "files": {"markdown": str(self.files.markdown), "json": str(self.files.json)}
        }


def report_dir(root: Path, to_name: str) -> Path:
    """Where ``port report --to <to>`` keeps its files (beside ``build/port-<to>``)."""
    return layout.port_report(root, to_name)


def report_json(reports: list[PatchReport], from_name: str, to_name: str) -> dict:
    """The report as ``port report --json`` prints it."""
    return {
        "from": from_name,
        "to": to_name,
        "summary": render.summary(reports),
        "patches": [r.to_json() for r in reports],
        "verdict_table": render.verdict_table(reports, from_name, to_name),
    }


def write_report(
    root: Path, from_base: Base, to_base: Base, reports: list[PatchReport], progress: Progress = QUIET
) -> ReportFiles:
    """Write the report's two files into ``report_dir`` (replacing a previous report only)."""
    out = report_dir(root, to_base.name)
    with locked(layout.lock_of(out), str(out), progress):
        replace_output_dir(out, KIND, NAMES, rerun=hints.port("report", to_base.name, BASE=from_base.name))
        details = "\n".join(render.report_lines(reports))
        markdown = (
            render.report_markdown(from_base, to_base, reports)
            + "\n### Per patch and hunk\n\n```\n"
            + details
            + "\n```\n"
        )
        files = ReportFiles(out / NAMES[0], out / NAMES[1])
        atomic_write(files.markdown, markdown)
        data = report_json(reports, from_base.name, to_base.name)
        atomic_write(files.json, json.dumps(data, indent=1, sort_keys=True) + "\n")
        seal_output_dir(out)
    return files
