"""vLLM's style gate on the patched files: ruff 0.14.0 with the tree's own pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .errors import SeamError
from .series import DEFAULT_QUEUE, Queue, read_series

RUFF_VERSION = "0.14.0"


def _ruff(explicit: str | None) -> str:
    candidates = [explicit, str(Path(sys.executable).with_name("ruff")), shutil.which("ruff")]
    for c in candidates:
        if c and Path(c).exists():
            version = subprocess.run([c, "--version"], capture_output=True, text=True).stdout.split()
            if version[-1:] != [RUFF_VERSION]:
                raise SeamError(
                    f"{c} is ruff {version[-1:]}; vLLM v0.31.0's gate is ruff {RUFF_VERSION}",
                    hint="make venv",
                )
            return c
    raise SeamError("ruff not found", hint="make venv")


def stylecheck(root: Path, tree: Path, ruff: str | None = None, queue: Queue = DEFAULT_QUEUE) -> list[str]:
    """Problems reported by ``ruff check`` and ``ruff format --check`` on the queue's .py files."""
    patches = read_series(root, queue).load()
    files = sorted({fc.path for p in patches for fc in p.files if fc.new and fc.path.endswith(".py")})
    if not files:
        return []
    exe = _ruff(ruff)
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
