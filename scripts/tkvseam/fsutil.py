"""Filesystem plumbing: the one atomic write, a file's sha256, and names for what the tool keeps.

``atomic_write`` is how the tool writes every file a reader may see half written (patches,
series, PORT.md, bases.toml, state files, caches): a temporary file in the same directory,
flushed to disk, then renamed over the target, so a crash leaves the old file or the new
one. The new file keeps the mode of the file it replaces (``mkstemp`` alone would make it
0600), or gets the umask's mode when there was none.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import tempfile
import threading
import time
from pathlib import Path

_umask_lock = threading.Lock()
_counter = itertools.count(1)


def current_umask() -> int:
    """The process umask (read by setting it and putting it back, under a lock)."""
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def atomic_write(path: Path, data: bytes | str, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically; keep ``path``'s mode (else ``mode``, else 0666 & ~umask)."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        keep = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        keep = mode if mode is not None else 0o666 & ~current_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), keep)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256_of(path: Path) -> str:
    """The sha256 of the file at ``path``, in hex (read in chunks: an sdist may be large)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def stamp() -> str:
    """A name for something kept now: UTC time, pid and a per-process counter (never reused)."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-{next(_counter)}"


def describe_dir(path: Path, limit: int = 8) -> str:
    """The first entries of a directory, for a refusal that names what is there."""
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        return f"unreadable: {e.strerror}"
    shown = ", ".join(names[:limit]) + (f", … ({len(names)} entries)" if len(names) > limit else "")
    return shown or "empty"


def lexists(path: Path) -> bool:
    """True when something (a file, a directory, a dangling link) is at ``path``; never raises."""
    try:
        os.lstat(path)
    except (OSError, ValueError):
        return False
    return True
