"""The upstream lane's ``optimized_bytecode`` plugin: ``python -O`` finds its bytecode compiled."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from tkvseam.seamtest import optimized_bytecode, upstream


def test_the_plugin_compiles_optimized_bytecode_once(tmp_path, monkeypatch):
    pkg = tmp_path / "warmpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(optimized_bytecode, "MODULES", ("warmpkg.mod", "warmpkg.absent"))
    opt1 = Path(importlib.util.cache_from_source(str(pkg / "mod.py"), optimization=1))
    assert not opt1.exists()

    optimized_bytecode.pytest_sessionstart(None)
    assert opt1.exists()  # written by a real `python -O` child

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    optimized_bytecode.pytest_sessionstart(None)
    assert calls == []  # already warm: no second child


def test_both_upstream_sides_load_it():
    assert "tkvseam.seamtest.optimized_bytecode" in upstream.PLUGINS
    assert sys.modules.get("tkvseam.seamtest.optimized_bytecode") is optimized_bytecode
