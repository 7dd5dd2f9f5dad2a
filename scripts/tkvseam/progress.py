"""Progress reporting for long steps, decoupled from the CLI.

Library functions take a ``Progress``; the CLI passes one that writes to
stderr, tests pass ``QUIET``. Warnings are printed to stderr by every sink:
``--quiet`` and ``--json`` silence progress, never what is dropped or waited for.

A long step runs under ``heartbeat(progress, status)``: every ``HEARTBEAT`` seconds (10) it
prints one line, ``status()`` (what runs, how long it has run, the estimate from its last
recorded duration). The same one plain line per 10 s on a terminal and in a CI log (stderr
not a terminal): no line is rewritten in place, so a log reads as the terminal did.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable

#: Seconds between two heartbeat lines of a long step.
HEARTBEAT = 10.0


class Progress:
    """Silent progress sink; subclasses print."""

    def step(self, message: str) -> None:
        """A named step starts."""

    def bytes(self, label: str, done: int, total: int) -> None:
        """``done`` of ``total`` bytes of ``label`` are through."""

    def tick(self, message: str) -> None:
        """A heartbeat of a long step: it still runs (``message``: what, elapsed, estimate)."""

    def warn(self, message: str) -> None:
        """Something the user must see even with ``--quiet`` (what --force drops, waiting for a lock)."""
        print(f"warning: {message}", file=sys.stderr, flush=True)


QUIET = Progress()


class StderrProgress(Progress):
    """Writes steps as lines and byte counts as a throttled one-line meter."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self._last = 0.0

    def step(self, message: str) -> None:
        print(f"==> {message}", file=self.stream, flush=True)

    def tick(self, message: str) -> None:
        print(f"    ... {message}", file=self.stream, flush=True)

    def bytes(self, label: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < 0.5:
            return
        self._last = now
        pct = 100.0 * done / total if total else 100.0
        end = "\n" if done >= total else "\r"
        print(
            f"    {label}: {done / 1e6:.1f} / {total / 1e6:.1f} MB ({pct:.0f}%)",
            end=end,
            file=self.stream,
            flush=True,
        )


def took(seconds: float) -> str:
    """``seconds`` as a progress line spells them: ``42 s``, ``3 min 05 s``."""
    seconds = int(round(seconds))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


def eta(elapsed: float, estimate: float | None) -> str:
    """``12 s`` or ``12 s of ~40 s`` (the estimate: the step's last recorded duration)."""
    if not estimate:
        return took(elapsed)
    return f"{took(elapsed)} of ~{took(estimate)}"


@contextlib.contextmanager
def heartbeat(progress: Progress, status: Callable[[], str], every: float = HEARTBEAT):
    """While the block runs: ``progress.tick(status())`` every ``every`` seconds."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            progress.tick(status())

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_with_heartbeat(progress: Progress, label: str, fn, estimate: float | None = None):
    """``fn()`` with a heartbeat naming ``label``, its elapsed time and ``estimate``."""
    start = time.monotonic()
    with heartbeat(progress, lambda: f"{label}: {eta(time.monotonic() - start, estimate)}"):
        return fn()
