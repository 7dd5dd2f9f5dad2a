"""Exclusive locks: one tkv-seam run at a time per build tree and per cache entry.

A lock is ``fcntl.flock`` on a small file beside what it guards (the kernel drops it
when the holder dies, so a killed run never leaves a stale lock). A second run waits,
saying so, up to ``TKV_SEAM_LOCK_TIMEOUT`` seconds (default 600), then gives up with
exit 10 (busy). The holder removes the file when it is done; a waiter that locked a
file removed meanwhile notices (inode changed) and locks the new one.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import BusyError, UsageError
from .progress import QUIET, Progress

TIMEOUT_ENV = "TKV_SEAM_LOCK_TIMEOUT"
DEFAULT_TIMEOUT = 600.0
POLL = 0.05


def lock_timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise UsageError(
            f"{TIMEOUT_ENV}={raw!r} is not a number of seconds", hint=f"export {TIMEOUT_ENV}=600"
        )
    return value


def tree_lock_path(tree: Path) -> Path:
    """The lock file of a build or port tree: ``.<name>.lock`` beside it."""
    return tree.parent / f".{tree.name}.lock"


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


def _try_lock(path: Path) -> int | None:
    """An fd holding the lock on the file now at ``path``, or None when another run holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    try:
        now = os.stat(path)
        same = (now.st_dev, now.st_ino) == (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
    except FileNotFoundError:
        same = False
    if not same:  # the previous holder removed it after we opened it: lock the new one
        os.close(fd)
        return _try_lock(path)
    return fd


@contextmanager
def locked(path: Path, what: str, progress: Progress = QUIET) -> Iterator[None]:
    """Hold the exclusive lock ``path`` guarding ``what`` (a tree or cache entry) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _try_lock(path)
    if fd is None:
        timeout = lock_timeout()
        progress.warn(
            f"waiting for another tkv-seam run on {what}{_holder(path)} (up to {timeout:g} s; {TIMEOUT_ENV})"
        )
        deadline = time.monotonic() + timeout
        while fd is None:
            if time.monotonic() >= deadline:
                raise BusyError(
                    f"another tkv-seam run{_holder(path)} still holds {what} after {timeout:g} s "
                    f"(lock {path})",
                    hint=f"let it finish, then run the command again (or wait longer: "
                    f"export {TIMEOUT_ENV}=1800)",
                )
            time.sleep(POLL)
            fd = _try_lock(path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        os.close(fd)
