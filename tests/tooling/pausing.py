"""Hold a real ``tkv-seam`` process at a named call, to run a second one against it (races).

``paused(target, *argv)`` starts ``tkv-seam *argv`` in a new process that stops at its first
call of ``target`` (``module.function`` or ``module:Class.method``, looked up there at call
time, as ``crash_at`` takes it), tells the test it got there, and goes on only when the test
says so: the second run meets the first exactly there, every time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

_PAUSER = r"""
import importlib, os, sys, time
from pathlib import Path
target, reached, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
module, _, attr = target.partition(":") if ":" in target else target.rpartition(".")
owner = importlib.import_module(module)
*path, name = attr.split(".")
for part in path:
    owner = getattr(owner, part)
real, seen = getattr(owner, name), [0]

def point(*args, **kwargs):
    seen[0] += 1
    if seen[0] == 1:
        reached.write_text(str(os.getpid()))
        deadline = time.monotonic() + 120
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return real(*args, **kwargs)

setattr(owner, name, point)
from tkvseam.cli.main import main
main(sys.argv[4:], prog_name="tkv-seam")
"""


class Paused:
    def __init__(self, proc: subprocess.Popen, reached: Path, go: Path):
        self.proc, self.reached, self.go = proc, reached, go

    def wait_reached(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not self.reached.exists():
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                raise AssertionError(
                    f"ended before its pause point (exit {self.proc.returncode}):\n{out}\n{err}"
                )
            assert time.monotonic() < deadline, "the pause point was not reached"
            time.sleep(0.02)

    def release(self, timeout: float = 300) -> subprocess.CompletedProcess:
        self.go.touch()
        out, err = self.proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)


@contextmanager
def paused(tmp: Path, target: str, *argv: str, cwd: Path | None = None):
    """A ``Paused`` run of ``tkv-seam *argv`` held at its first call of ``target``."""
    tmp.mkdir(parents=True, exist_ok=True)
    reached, go = tmp / "reached", tmp / "go"
    reached.unlink(missing_ok=True)
    go.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", _PAUSER, target, str(reached), str(go), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        cwd=cwd,
    )
    run = Paused(proc, reached, go)
    try:
        yield run
    finally:
        go.touch()
        if proc.poll() is None:
            try:
                proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def start(*argv: str, cwd: Path | None = None, stderr_to: Path | None = None) -> subprocess.Popen:
    """``tkv-seam *argv`` in a new process (its stderr into ``stderr_to`` when given, to read it
    while it runs)."""
    err = open(stderr_to, "w") if stderr_to else subprocess.PIPE  # noqa: SIM115 (closed by the child's end)
    return subprocess.Popen(
        [sys.executable, "-m", "tkvseam", *argv],
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        env=dict(os.environ),
        cwd=cwd,
    )


def wait_for_text(path: Path, text: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until ``text`` is in the file ``path`` (a running process's stderr)."""
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert proc.poll() is None, (
            f"ended (exit {proc.returncode}) without saying {text!r}: {path.read_text()}"
        )
        assert time.monotonic() < deadline, f"{text!r} never came: {path.read_text()}"
        time.sleep(0.05)
