"""Full: every Tests/Guard node of the series, on the full series, in one process."""

from __future__ import annotations

from collections.abc import Mapping

from .outcomes import PASSED, fold
from .runner import VLLM_TESTS_PLUGINS, Job, JobResult, LaneReport, Root, Runner


class FullLane:
    name = "full"
    label = "full-series"
    env: tuple[tuple[str, str], ...] = ()

    def nodes(self, r: Runner) -> list[str]:
        return sorted({n for p in r.patches for n in p.header.tests + p.header.guards})

    def jobs(self, r: Runner) -> list[Job]:
        nodes = self.nodes(r)
        if not nodes:
            return []
        return [Job(self.label, r.head, Root(r.head), tuple(nodes), self.env, 60.0, VLLM_TESTS_PLUGINS)]

    def report(self, r: Runner, done: Mapping[str, JobResult]) -> LaneReport:
        rows = done[self.label].rows if self.label in done else {}
        results = {n: fold(rows, n) for n in self.nodes(r)}
        bad = {n: o for n, o in results.items() if o != PASSED}
        lines = [f"{o:8} {n}" for n, o in results.items()]
        lines.append(f"seam tests: {len(results) - len(bad)} passed, {len(bad)} failed")
        return LaneReport(self.name, not bad, lines, {"ok": not bad, "results": results})


class CudaAlikeLane(FullLane):
    """The same seam tests with the platform reporting ``is_cuda_alike()``/``is_cuda()``
    (the ``tkvseam.seamtest.cuda_alike`` pytest plugin), so CUDA-only branches run on CPU too."""

    name = "full-cuda"
    label = "full-series-cuda-alike"
    env = (("PYTEST_PLUGINS", "tkvseam.seamtest.cuda_alike"),)
