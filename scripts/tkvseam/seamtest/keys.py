"""The parts of a pass record's key (``passes``): digests of what a lane step reads.

- ``tool_source``: every file of the tool's package (``scripts/tkvseam``), the pytest plugins
  the lanes load included;
- ``files``: project files or directories (test files, conftests, the Makefile), by content;
- ``interpreter``: a venv's ``pyvenv.cfg`` (its Python's version) or this process's version;
- ``base_inputs``: the base's sdist sha256, its CPU lock's sha256 and its test venv;
- ``queue``: the base's own series and patch files.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

#: What a digest of project files skips: bytecode and caches the runs themselves write.
SKIP_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache"}


def _walk(path: Path):
    """The files under ``path`` in a fixed order, through symlinked directories (a command
    reads through them; each real directory once, so a link loop ends)."""
    if not path.is_dir():
        yield path
        return
    seen = set()
    for top, dirs, names in os.walk(path, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_PARTS)
        yield from (Path(top) / n for n in sorted(names) if not n.endswith(".pyc"))


def _content(path: Path) -> bytes:
    """A file's sha256; what stands instead for a link to nothing or a file not readable."""
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError as e:
        return f"unreadable {type(e).__name__}".encode()


def files(root: Path, paths) -> str:
    """A digest of the files ``paths`` (relative to ``root``; directories recursively, through
    symlinked ones) name: each file's path and bytes; a missing path counts as missing."""
    h = hashlib.sha256()
    for rel in sorted(set(paths)):
        top = Path(root) / rel
        if not top.exists():
            h.update(f"missing {rel}\0".encode())
            continue
        for p in _walk(top):
            h.update(os.path.relpath(p, root).encode() + b"\0")
            h.update(_content(p))
    return h.hexdigest()


@functools.cache
def tool_source() -> str:
    """A digest of the tool's own package (read once per process)."""
    package = Path(__file__).resolve().parents[1]
    return files(package.parent, [package.name])


def interpreter(python: Path | None = None) -> str:
    """The Python a step runs under: a venv's ``pyvenv.cfg`` (version, base interpreter), else
    this process's version."""
    if python is not None:
        cfg = Path(python).parent.parent / "pyvenv.cfg"
        try:
            return cfg.read_text()
        except OSError:
            return f"missing {cfg}"
    return sys.version


def lock_sha256(root: Path, lock: str) -> str:
    try:
        return hashlib.sha256((Path(root) / lock).read_bytes()).hexdigest()
    except OSError:
        return "missing"


def queue(root: Path, base) -> str:
    """A digest of the base's own queue: its series file and the files of its patches directory
    (not the directories in it: another base's queue lives in ``patches/<base>/``)."""
    top = Path(root) / base.queue.patches
    names = [base.queue.series]
    if top.is_dir():
        names += [p.relative_to(root).as_posix() for p in sorted(top.iterdir()) if p.is_file()]
    return files(root, names)


def base_inputs(root: Path, base) -> dict:
    """What every step of a base reads of the base: its sdist, its lock, its test venv."""
    return {
        "base": base.name,
        "sdist_sha256": base.sdist.sha256,
        "lock_sha256": lock_sha256(root, base.cpu_lock),
        "interpreter": interpreter(Path(root) / base.test_venv / "bin" / "python"),
    }
