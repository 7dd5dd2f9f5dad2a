"""A pytest plugin: optimized bytecode (``.opt-1.pyc``) for what ``python -O`` subprocesses import.

``-p tkvseam.seamtest.optimized_bytecode`` (stdlib + pytest only: it runs inside the
vLLM venv's pytest). Some of upstream's tests start ``python -O`` in a subprocess
with a timeout (v0.31.0's ``test_is_kv_cache_spec_uniform``: 60 s, importing
``vllm.v1.core.kv_cache_utils``). The venvs are installed without bytecode
(``uv``) and the test processes write only ``.pyc`` for optimization level 0, so
that subprocess compiles torch, transformers and vLLM from source: ~15 s of CPU,
over its timeout when the two cores are shared by several test processes. That
timeout is the machine's, not the code's: the plugin imports the same modules
once under ``-O`` before the session's tests (no timeout), which writes their
``.opt-1.pyc`` into the slot's venv, and skips that when they are already there.
Stock and patched sides load it alike, so their outcomes stay comparable.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

#: What upstream's ``python -O`` subprocesses import (the rest comes with it).
MODULES = ("vllm.v1.core.kv_cache_utils", "vllm.v1.kv_cache_interface")


def _warm(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return True  # nothing to compile (this base has no such module)
    return Path(importlib.util.cache_from_source(spec.origin, optimization=1)).exists()


def pytest_sessionstart(session) -> None:
    missing = [m for m in MODULES if not _warm(m)]
    if missing:
        code = "".join(f"import {m}\n" for m in missing)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # the point
        subprocess.run([sys.executable, "-O", "-c", code], env=env, check=False, capture_output=True)
