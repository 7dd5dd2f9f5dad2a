"""What every test directory shares: the base under test, its build tree, crash points, test data.

Loaded by every pytest run of the project's tests, also inside a base's vLLM test venv
(``seamtest`` runs tests/plugin and tests/differential there), so it imports only the
standard library and pytest.

- ``BASE`` (``$BASE``, default v0.31.0), ``ROOT``, ``TREE`` (``build/vllm-<base>``): the real
  base the tests of tests/series, tests/plugin, tests/differential and tests/image check;
  ``base_name`` / ``build_tree`` are the same as fixtures.
- ``tiny_llama(**overrides)``: the tiny Llama ``config.json`` of ``tests/data/tiny-llama.json``.
- ``crash_at``: run ``tkv-seam`` in a fresh process that kills itself (SIGKILL) at an exact
  point of the code, for the crash-safety tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
BASE = os.environ.get("BASE") or "v0.31.0"
TREE = ROOT / "build" / f"vllm-{BASE}"


@pytest.fixture(scope="session")
def base_name() -> str:
    return BASE


@pytest.fixture(scope="session")
def build_tree() -> Path:
    return TREE


def tiny_llama(**overrides) -> dict:
    """The tiny Llama model config (no weights) the tests plan KV caches for; ``overrides`` change fields."""
    return {**json.loads((DATA / "tiny-llama.json").read_text()), **overrides}


# --------------------------------------------------------------------------- crash points

_KILLER = r"""
import importlib, os, signal, sys
target, after, nth, when = sys.argv[1], sys.argv[2] == "after", int(sys.argv[3]), sys.argv[4] or None
module, _, attr = target.partition(":") if ":" in target else target.rpartition(".")
owner = importlib.import_module(module)
*path, name = attr.split(".")
for part in path:
    owner = getattr(owner, part)
real, seen = getattr(owner, name), [0]

def point(*args, **kwargs):
    hit = when is None or when in repr((args, kwargs))
    if hit:
        seen[0] += 1
    if hit and seen[0] == nth and not after:
        os.kill(os.getpid(), signal.SIGKILL)
    result = real(*args, **kwargs)
    if hit and seen[0] == nth and after:
        os.kill(os.getpid(), signal.SIGKILL)
    return result

setattr(owner, name, point)
from tkvseam.cli.main import main
main(sys.argv[5:], prog_name="tkv-seam")
"""


class CrashAt:
    """``crash_at(target, *argv, after=False, nth=1, when=None)``: run ``tkv-seam *argv`` in a new
    process that is killed (SIGKILL, nothing runs after it) at the ``nth`` call of ``target``
    whose arguments' repr contains ``when``: before that call, or right after it returns.

    ``target`` is ``module.function`` (``tkvseam.git.index.commit``, ``os.replace``) or
    ``module:Class.method``; the code under test must look it up there at call time (the
    gateway's ``git.index.commit(...)``, not a name imported from elsewhere). Returns the finished
    process; asserts it was killed (the point was reached).
    """

    def __call__(self, target: str, *argv: str, after: bool = False, nth: int = 1, when: str | None = None):
        cmd = [
            sys.executable,
            "-c",
            _KILLER,
            target,
            "after" if after else "before",
            str(nth),
            when or "",
            *argv,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), timeout=600)
        assert proc.returncode == -signal.SIGKILL, (
            f"{target} was not reached (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
        return proc


@pytest.fixture
def crash_at() -> CrashAt:
    return CrashAt()


# --------------------------------------------------------------------------- lane counts


def pytest_sessionfinish(session, exitstatus):
    """Under ``tkv-seam seamtest lane`` (``$TKV_SEAM_LANE_COUNTS`` names a file): write how many
    tests passed, failed and were skipped, so a lane whose tests all skipped records no pass."""
    path = os.environ.get("TKV_SEAM_LANE_COUNTS")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not path or reporter is None:
        return
    counts = {k: len(reporter.stats.get(k, [])) for k in ("passed", "failed", "skipped", "error")}
    try:  # a lane that runs pytest twice (tests/tooling/run_all.py) counts both runs
        before = json.loads(Path(path).read_text() or "{}")
    except (OSError, ValueError):
        before = {}
    if isinstance(before, dict):
        counts = {k: n + (before.get(k) if isinstance(before.get(k), int) else 0) for k, n in counts.items()}
    Path(path).write_text(json.dumps(counts))
