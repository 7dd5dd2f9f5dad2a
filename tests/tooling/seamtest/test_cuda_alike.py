"""The ``cuda_alike`` pytest plugin on a synthetic vllm package: the modules that
choose CUDA-only imports are imported with the platform's real answers, those a
base does not have are skipped, and the tests then see a CUDA-like platform."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PLUGIN = "tkvseam.seamtest.cuda_alike"
SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"

PLATFORM = """\
class CpuPlatform:
    def is_cuda_alike(self):
        return False

    def is_cuda(self):
        return False


current_platform = CpuPlatform()
"""

# Imported before the predicates change: it records what it saw.
IMPORT_TIME_CHOICE = """\
from vllm.platforms import current_platform

CHOSE_CUDA = current_platform.is_cuda()
"""

TEST = """\
from vllm.platforms import current_platform


def test_platform_reports_cuda():
    from vllm.model_executor.layers import attention

    assert current_platform.is_cuda_alike() and current_platform.is_cuda()
    assert attention.CHOSE_CUDA is False
"""


def _package(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        for parent in path.relative_to(root).parents:
            if parent != Path("."):
                (root / parent / "__init__.py").touch()


def test_a_base_without_the_v1_gpu_model_runner(tmp_path: Path) -> None:
    """vLLM 0.34.0 has no `vllm.v1.worker.gpu_model_runner` (nor, here, the other
    modules of the list but one): the plugin imports what exists and the tests
    run with the platform reporting CUDA."""
    site = tmp_path / "site"
    _package(
        site,
        {
            "vllm/platforms/__init__.py": PLATFORM,
            "vllm/model_executor/layers/attention/__init__.py": IMPORT_TIME_CHOICE,
        },
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_platform.py").write_text(TEST)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SCRIPTS), str(site)])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN, "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
