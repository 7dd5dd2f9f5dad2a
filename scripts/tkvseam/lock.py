"""Exclusive locks: one tkv-seam run at a time per build tree and per cache entry.

A lock is ``fcntl.flock`` on a small file beside what it guards (the kernel drops it
when the holder dies, so a killed run never leaves a stale lock). A second run waits,
saying so, up to ``TKV_SEAM_LOCK_TIMEOUT`` seconds (default 600), then gives up with
exit 10 (busy). The holder removes the file when it is done; a waiter that locked a
file removed meanwhile notices (inode changed) and locks the new one.

A venv is held through its own ``.lock`` (``venv_locked``): the file uv locks while it installs
into the venv, so a lane, an overlay install or restore and ``uv pip install`` into one venv take
turns. That file is uv's: it is never removed.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import BusyError, SeamError, UsageError
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


def _wait(path: Path, what: str, progress: Progress, try_lock, holder: str = "") -> int:
    """``try_lock()`` until it gives an fd; a warning first, exit 10 after ``TKV_SEAM_LOCK_TIMEOUT``."""
    fd = try_lock()
    if fd is None:
        timeout = lock_timeout()
        progress.warn(
            f"waiting for another tkv-seam run on {what}{holder} (up to {timeout:g} s; {TIMEOUT_ENV})"
        )
        deadline = time.monotonic() + timeout
        while fd is None:
            if time.monotonic() >= deadline:
                raise BusyError(
                    f"another tkv-seam run{holder} still holds {what} after {timeout:g} s (lock {path})",
                    hint=f"let it finish, then run the command again (or wait longer: "
                    f"export {TIMEOUT_ENV}=1800)",
                )
            time.sleep(POLL)
            fd = try_lock()
    return fd


@contextmanager
def locked(path: Path, what: str, progress: Progress = QUIET) -> Iterator[None]:
    """Hold the exclusive lock ``path`` guarding ``what`` (a tree or cache entry) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _wait(path, what, progress, lambda: _try_lock(path), _holder(path))
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


def _try_flock(path: Path) -> int | None:
    """An fd holding the lock of the file now at ``path`` (a venv removed and made again while
    this run waited has a new one: that is locked), or None when another run holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    try:
        same = os.path.samestat(os.stat(path), os.fstat(fd))
    except FileNotFoundError:
        same = False
    if not same:
        os.close(fd)
        return _try_flock(path)
    return fd


@contextmanager
def venv_locked(venv: Path, progress: Progress = QUIET) -> Iterator[None]:
    """Hold the venv ``venv`` (a directory holding ``pyvenv.cfg``) for the block: its ``.lock``,
    the file uv locks while it installs into it (created when missing, never removed). Anything
    else (no venv there) is not locked: the command using it says what is wrong."""
    venv = Path(venv)
    if not (venv / "pyvenv.cfg").is_file():
        yield
        return
    path = venv / ".lock"
    try:
        fd = _wait(path, f"the venv {venv}", progress, lambda: _try_flock(path))
    except OSError as e:  # a link planted there, a venv this user cannot write: never run unheld
        raise SeamError(
            f"cannot lock the venv {venv}: {path}: {e.strerror or e} (a run holds the venv from its "
            "first overlay install to the end of its tests)",
            hint=f"ls -l {shlex.quote(str(path))}   (a file of yours? move it away; a venv you cannot write: use your own)",
        ) from e
    try:
        yield
    finally:
        os.close(fd)
