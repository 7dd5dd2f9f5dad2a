"""Copies of what a step replaces or removes, kept under ``build/kept/<time>-<why>/``.

A destructive step of ``seam-table --force``, ``lock-cpu`` or ``retire`` first copies what
it is about to change, at the same project-relative paths, and says where
(``cp -a build/kept/<dir>/<path> <path>`` puts a file back).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path


KEPT = Path("build") / "kept"


def keep(root: Path, paths: list[Path], why: str) -> Path:
    """Copy each of ``paths`` (files or directories inside ``root``) into a new kept directory.

    Symlinks are copied as symlinks (never followed); a path outside the project is refused.
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", why).strip("-") or "kept"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = root / KEPT / f"{stamp}-{slug}-{os.getpid()}"
    dest.mkdir(parents=True, exist_ok=False)
    for path in paths:
        rel = _inside(root, path)
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            shutil.copytree(path, out, symlinks=True)
        else:
            shutil.copy2(path, out, follow_symlinks=False)
    return dest


def _inside(root: Path, path: Path) -> Path:
    """Where a copy of ``path`` goes: its project-relative path, or ``_outside/<absolute path>``
    for a file elsewhere (a ``--bases`` file outside the project)."""
    real = path.parent.resolve() / path.name
    try:
        return real.relative_to(root.resolve())
    except ValueError:
        return Path("_outside", *real.parts[1:])
