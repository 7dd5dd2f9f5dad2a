"""The tooling suite on every core (``make test-tooling``): pytest-xdist runs every test but the
check of the hints printed, a test file to a worker (``--dist loadfile``: a module's fixtures are
made once); then that check runs alone, reading the hints every worker printed into one log.

``TKV_SEAM_JOBS``: the workers (default: one per core). The exit code is the first run's when it
failed, else the second's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

LAST = "tests/tooling/cli/test_hints.py::test_every_hint_printed_is_a_command_that_runs"
LOG_ENV = "TKV_SEAM_HINT_LOG"  # tkvseam.hints.LOG_ENV (this file imports nothing of the tool)


def main(argv: list[str]) -> int:
    jobs = os.environ.get("TKV_SEAM_JOBS") or "auto"
    with tempfile.TemporaryDirectory(prefix="tkv-seam-hints-") as tmp:
        log = Path(tmp) / "hints.jsonl"
        log.touch()
        env = {**os.environ, LOG_ENV: str(log)}
        pytest = [sys.executable, "-m", "pytest", "-q", *argv]
        first = subprocess.run(
            [*pytest, "-n", jobs, "--dist", "loadfile", "tests/tooling", "--deselect", LAST], env=env
        )
        second = subprocess.run([*pytest, LAST], env=env)
    return first.returncode or second.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
