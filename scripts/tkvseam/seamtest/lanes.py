"""The lanes of ``make test``'s seam checks, by name (``tkv-seam seamtest <name>``).

A lane is any object with ``name``, ``jobs(runner) -> [Job]`` and
``report(runner, done) -> LaneReport`` (``runner.Lane``); to add one, write its
module and register a factory here. ``seamtest all`` runs every lane of
``DEFAULT`` in one schedule.
"""

from __future__ import annotations

from collections.abc import Callable

from .bisect import BisectLane
from .differential import DifferentialLane
from .full import CudaAlikeLane, FullLane
from .plugin import PluginLane
from .runner import Lane
from .upstream import UpstreamLane

LANES: dict[str, Callable[[], Lane]] = {
    "bisect": BisectLane,
    "full": FullLane,
    "full-cuda": CudaAlikeLane,
    "upstream": UpstreamLane,
    "plugin": PluginLane,
    "differential": DifferentialLane,
}

#: What ``make test`` runs, in report order.
DEFAULT = ("bisect", "full", "full-cuda", "upstream", "plugin", "differential")
