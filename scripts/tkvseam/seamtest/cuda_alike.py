"""A pytest plugin: the seam tests with the platform reporting a CUDA device (``-p tkvseam.seamtest.cuda_alike``).

The CPU lane resolves vLLM's platform to ``CpuPlatform``, so every branch vLLM
guards with ``current_platform.is_cuda_alike()`` or ``is_cuda()`` takes its CPU
side (e.g. ``Worker.determine_available_memory`` profiles CUDA graph memory only
on CUDA-like platforms). Upstream's GPU CI takes the other side. This plugin
makes the platform class answer ``True`` to both once collection is done (so
import-time choices, such as loading compiled CUDA extensions, stay the CPU
ones), and the seam tests run through the CUDA-only branches of the code under
test.

Only the two predicates change: the platform stays ``CpuPlatform`` (its
``get_attn_backend_cls``, device and memory queries are the CPU ones) and torch
stays the CPU build, so a branch that goes on to call CUDA itself still fails,
which is the point: such a test would fail on a GPU runner's platform checks
for a reason the CPU lane cannot see.
"""

from __future__ import annotations

import pytest

_PATCH = pytest.MonkeyPatch()
_KEY = pytest.StashKey[str]()

# Modules that choose CUDA-only imports at import time (e.g. fa_utils imports
# the compiled flash-attention extension when `is_cuda()`). They are imported
# with the real answers first; the predicates change only for running tests.
# A base that has no such module skips it (vLLM 0.34.0 removed the V1 GPU model
# runner, `gpu_model_runner`; Model Runner V2 is `gpu.model_runner`).
_IMPORT_FIRST = (
    "vllm.v1.attention.backends.fa_utils",
    "vllm.model_executor.layers.attention",
    "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.model_runner",
    "vllm.v1.worker.gpu_worker",
)


def _true(self) -> bool:
    return True


def _exists(name: str) -> bool:
    """Whether module ``name`` can be imported (its parent packages too)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def pytest_collection_finish(session: pytest.Session) -> None:
    """After every test module is imported: import the modules above, then
    make the platform class report a CUDA device."""
    import importlib

    from vllm.platforms import current_platform

    for name in _IMPORT_FIRST:
        if _exists(name):
            importlib.import_module(name)
    platform_cls = type(current_platform)
    _PATCH.setattr(platform_cls, "is_cuda_alike", _true)
    _PATCH.setattr(platform_cls, "is_cuda", _true)
    session.config.stash[_KEY] = platform_cls.__name__


def pytest_report_header(config: pytest.Config) -> str:
    return "tkvseam.seamtest.cuda_alike: the platform reports is_cuda_alike() and is_cuda() while tests run"


def pytest_unconfigure(config: pytest.Config) -> None:
    _PATCH.undo()
