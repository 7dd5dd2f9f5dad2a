"""Differential: the project's tests comparing patched vLLM modules with pristine ones.

``tests/differential`` runs in the venv holding the full series' overlay; it reads the
pristine modules from the build tree's base commit (``TKV_SEAM_TREE``) and imports
them under another name, then compares results on seeded random inputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..bases.carried import PLANNER_ENV, planner_module
from .outcomes import PASSED, fold
from .runner import Job, JobResult, LaneReport, Root, Runner

DIFFERENTIAL_TESTS = "tests/differential"


class DifferentialLane:
    name = "differential"
    label = "differential"

    def jobs(self, r: Runner) -> list[Job]:
        env = (("TKV_SEAM_TREE", str(r.tree)), (PLANNER_ENV, planner_module(r.root, r.base)))
        return [Job(self.label, r.head, Root(None), (DIFFERENTIAL_TESTS,), env, estimate=60.0)]

    def report(self, r: Runner, done: Mapping[str, JobResult]) -> LaneReport:
        rows = done[self.label].rows if self.label in done else {}
        results = {nid: fold(rows, nid) for nid in sorted(rows)}
        bad = {n: o for n, o in results.items() if o != PASSED}
        ok = bool(results) and not bad
        lines = [f"{o:8} {n}" for n, o in results.items()]
        if not results:
            lines.append(f"differential: no test ran in {DIFFERENTIAL_TESTS}")
        lines.append(f"differential: {len(results) - len(bad)} passed, {len(bad)} failed")
        return LaneReport(self.name, ok, lines, {"ok": ok, "results": results})
