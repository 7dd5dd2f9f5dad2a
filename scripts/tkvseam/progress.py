"""Progress reporting for long steps, decoupled from the CLI.

Library functions take a ``Progress``; the CLI passes one that writes to
stderr, tests pass ``QUIET``. Warnings are printed to stderr by every sink:
``--quiet`` silences progress, never what is dropped or waited for.
"""

from __future__ import annotations

import sys
import time


class Progress:
    """Silent progress sink; subclasses print."""

    def step(self, message: str) -> None:
        """A named step starts."""

    def bytes(self, label: str, done: int, total: int) -> None:
        """``done`` of ``total`` bytes of ``label`` are through."""

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
