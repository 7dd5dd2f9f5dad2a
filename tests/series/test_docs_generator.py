"""vLLM's generated attention-backend docs on the patched tree: stock's tables plus TURBO_ATTN.

docs/mkdocs/gen_files/generate_attention_backends.py parses the `return [...]`
lists of `_get_backend_priorities` (vllm/platforms/cuda.py) with `ast`; a list
built any other way drops out of the generated priority tables. The generator
runs here on the pristine base and on the patched tree (its mkdocs output step,
`generated_content.fill_markers`, replaced by a recorder), and the two outputs
must differ by exactly the one TURBO_ATTN candidate.

Runs after `make apply BASE=<base>` ($BASE, default v0.31.0: build/vllm-<base> and its pristine
base commit).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tkvseam import git
from tkvseam.tree.state import TreeState

from ..conftest import TREE

GENERATOR = Path("docs/mkdocs/gen_files/generate_attention_backends.py")


def _checkout(commit: str, dest: Path) -> Path:
    """The files the generator reads (vllm/ and the generator) at ``commit``."""
    data = git.core.run(TREE, "archive", "--format=tar", commit, "vllm", str(GENERATOR.parent)).stdout
    dest.mkdir()
    subprocess.run(["tar", "-x", "-C", str(dest)], input=data, check=True)
    return dest


def _run_generator(tree: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[types.ModuleType, dict[str, str]]:
    """Import the generator from ``tree``; return the module and the blocks it generated."""
    generated: dict[str, dict[str, str]] = {}
    stub = types.ModuleType("generated_content")
    stub.fill_markers = lambda doc_path, blocks: generated.setdefault(doc_path, blocks)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "generated_content", stub)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the generator inserts its own directory
    name = f"generate_attention_backends_{abs(hash(tree))}"
    spec = importlib.util.spec_from_file_location(name, tree / GENERATOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert list(generated) == ["design/attention_backends.md"]
    return module, generated["design/attention_backends.md"]


@pytest.fixture(scope="module")
def base_commit() -> str:
    state = TreeState.load(TREE)
    assert state is not None, f"{TREE} missing: run `make apply`"
    return state.base_commit


def test_generated_backend_docs_are_stock(tmp_path, monkeypatch, base_commit):
    head = git.core.out(TREE, "rev-parse", "HEAD")
    stock_module, stock = _run_generator(_checkout(base_commit, tmp_path / "stock"), monkeypatch)
    patched_module, patched = _run_generator(_checkout(head, tmp_path / "patched"), monkeypatch)

    # The parsed candidate lists are stock's: TURBO_ATTN, a candidate only for
    # plugin dtypes once registered, is no stock candidate.
    stock_lists = stock_module.parse_cuda_priority_lists()
    assert {"standard_sm100", "standard_default"} <= set(stock_lists)
    assert all(stock_lists.values())
    assert patched_module.parse_cuda_priority_lists() == stock_lists

    # The generated markdown: identical output.
    assert patched == stock
    assert not any("TURBO_ATTN" in block for block in patched.values())
