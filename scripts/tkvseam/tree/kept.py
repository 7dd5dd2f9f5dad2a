"""Copies of what a step replaces or removes, kept under ``build/dropped/<time>-<why>/``.

A destructive step of ``seam-table --force``, ``lock-cpu`` or ``retire`` first copies what
it is about to change, at the same project-relative paths, and says where
(``cp -a build/dropped/<dir>/<path> <path>`` puts a file back). ``build/dropped/`` is where
the tool keeps what it drops (``port abort``'s bundles too); ``make clean`` leaves it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ..fsutil import stamp


KEPT = Path("build") / "dropped"


def keep(root: Path, paths: list[Path], why: str) -> Path:
    """Copy each of ``paths`` (files or directories inside ``root``) into a new kept directory.

    Symlinks are copied as symlinks (never followed); a file outside the project goes to ``_outside/``.
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", why).strip("-") or "kept"
    dest = root / KEPT / f"{stamp()}-{slug}"
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
