"""Triton's stand-in for a CPU test venv: vLLM is told Triton is present (``HAS_TRITON = True``).

Installed into a base's test venv only where the base's rules say ``triton = "stand-in"``
(``["<base>".seam.cpu]`` in ``bases.toml``), as ``_tkv_seam_triton_standin.py`` with a ``.pth``
line that imports it at every interpreter start (so pytest, the plugin lane's subprocesses and
vLLM's own subprocesses all see the same vLLM). The standard library only: it runs inside the
test venv's Python, before anything of the project can be imported.

Why: vLLM 0.34.0 refuses an x86 CPU without Triton's CPU backend (``CpuPlatform.
check_and_update_config`` raises "vLLM on x86 CPUs requires Triton (triton-cpu)", and the GPU
``Worker`` raises "vLLM's model runner requires Triton."). triton-cpu comes only from a GitHub
release, which these machines cannot reach; the venv has PyPI's ``triton`` (the CUDA build), with
no CPU backend, so ``vllm.triton_utils.importing`` computes ``HAS_TRITON = False``.

What it changes, and nothing else: once ``vllm.triton_utils.importing`` has run, its
``HAS_TRITON`` is set to True, before any other module reads it. So ``vllm.triton_utils``
imports the installed triton (real ``triton.jit`` objects instead of placeholders) and the two
start checks pass. No Triton kernel can run: triton finds no active driver, and a launch fails
loudly. The seam's lanes run no forward pass (they build configs, plan KV caches, select
backends and call worker hooks with stand-in models), stock and patched sides alike, in the same
venv (docs/tests.md, "Triton on CPU").
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

TARGET = "vllm.triton_utils.importing"
MODULE = "_tkv_seam_triton_standin"  # the name it is installed under in site-packages
PTH = f"{MODULE}.pth"


class _TritonPresent(importlib.abc.MetaPathFinder):
    """Finds ``TARGET`` as the path finder would, and sets ``HAS_TRITON`` once it has run."""

    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.HAS_TRITON = True

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once per interpreter)."""
    if not any(isinstance(f, _TritonPresent) for f in sys.meta_path):
        sys.meta_path.insert(0, _TritonPresent())


if __name__ == MODULE:  # imported by the .pth line in a test venv (not as tkvseam's module)
    install()
