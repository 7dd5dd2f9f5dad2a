"""Upstream's style gate on the patched files: the base's ruff pin with the tree's own pyproject.toml.

The ruff version is the base's (``bases.toml``: ``<base>.seam.ruff``, the rev of
ruff-pre-commit in upstream's .pre-commit-config.yaml). The ruff beside this Python
is used when it is that version; otherwise that version is installed once
(``uv pip install --target``) into the tkv-seam cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .bases import Base
from .errors import SeamError
from .series import read_series


def _version(exe: str) -> str:
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.split()
    return out[-1] if out else ""


def _ruff(version: str, cache: Path, explicit: str | None) -> str:
    if explicit:
        if _version(explicit) != version:
            raise SeamError(f"{explicit} is ruff {_version(explicit)}; the style gate is ruff {version}")
        return explicit
    for c in (str(Path(sys.executable).with_name("ruff")), shutil.which("ruff")):
        if c and Path(c).exists() and _version(c) == version:
            return c
    target = cache / "tools" / f"ruff-{version}"
    exe = target / "bin" / "ruff"
    if not exe.exists():
        uv = os.environ.get("UV") or str(Path(sys.executable).with_name("uv"))
        cmd = [uv if Path(uv).exists() else "uv", "pip", "install", "-q", "--target", str(target)]
        proc = subprocess.run([*cmd, f"ruff=={version}"], capture_output=True, text=True)
        if proc.returncode != 0 or not exe.exists():
            raise SeamError(f"cannot install ruff {version}: {proc.stderr.strip()}", hint="make venv")
    return str(exe)


def stylecheck(root: Path, tree: Path, base: Base, cache: Path, ruff: str | None = None) -> list[str]:
    """Problems reported by ``ruff check`` and ``ruff format --check`` on the series' .py files."""
    files = sorted(
        {
            fc.path
            for p in read_series(root, base.queue, base.name).load()
            for fc in p.files
            if fc.new and fc.path.endswith(".py")
        }
    )
    if not files:
        return []
    if not base.seam.ruff:
        raise SeamError(
            f"bases.toml pins no style-gate ruff for {base.name}", hint=f'["{base.name}".seam] ruff'
        )
    exe = _ruff(base.seam.ruff, cache, ruff)
    problems = []
    # --force-exclude: honour the tree's exclude lists for explicitly named files, as vLLM's pre-commit does.
    for args in (
        ["check", "--force-exclude", "--no-cache"],
        ["format", "--check", "--force-exclude", "--no-cache"],
    ):
        proc = subprocess.run([exe, *args, *files], cwd=tree, capture_output=True, text=True)
        if proc.returncode != 0:
            problems += [
                f"ruff {args[0]}: {line}" for line in (proc.stdout + proc.stderr).splitlines() if line.strip()
            ]
    return problems
