"""The ``module_cleanup`` pytest plugin on a synthetic tests dir shaped like vLLM's.

The conftest mimics upstream's ``should_do_global_cleanup_after_test`` /
``cleanup_fixture`` pair (tests/conftest.py of v0.31.0); its "cleanup" appends the
test's node id to a log, so the tests see after which tests it ran.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = "tkvseam.seamtest.module_cleanup"
SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"

CONFTEST = """\
import os

import pytest


@pytest.fixture()
def should_do_global_cleanup_after_test(request) -> bool:
    return not request.node.get_closest_marker("skip_global_cleanup")


@pytest.fixture(autouse=True)
def cleanup_fixture(should_do_global_cleanup_after_test: bool, request):
    yield
    if should_do_global_cleanup_after_test:  # upstream: cleanup_dist_env_and_memory()
        with open(os.environ["CLEANUP_LOG"], "a") as f:
            f.write(request.node.nodeid + "\\n")
"""

FILES = {
    "test_a.py": "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n\n\ndef test_three():\n    pass\n",
    "test_b.py": (
        "import pytest\n\n\n@pytest.mark.parametrize('n', [1, 2])\ndef test_p(n):\n    pass\n\n\n"
        "def test_last_run():\n    pass\n\n\n"
        "@pytest.mark.skip(reason='never sets up fixtures')\ndef test_skipped():\n    pass\n"
    ),
}


def cleanups(tmp_path: Path, *args: str) -> list[str]:
    """Run pytest on the synthetic dir; the node ids the cleanup ran after, in order."""
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "conftest.py").write_text(CONFTEST)
    for name, text in FILES.items():
        (tests / name).write_text(text)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    skip_global_cleanup\n")
    log = tmp_path / "cleanup.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "CLEANUP_LOG": str(log), "PYTHONPATH": str(SCRIPTS)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *args, "tests"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return log.read_text().splitlines() if log.exists() else []


def test_without_the_plugin_upstream_cleans_up_after_every_test_that_runs(tmp_path):
    assert cleanups(tmp_path) == [
        "tests/test_a.py::test_one",
        "tests/test_a.py::test_two",
        "tests/test_a.py::test_three",
        "tests/test_b.py::test_p[1]",
        "tests/test_b.py::test_p[2]",
        "tests/test_b.py::test_last_run",
    ]


def test_with_the_plugin_it_cleans_up_once_per_file_after_its_last_test_that_runs(tmp_path):
    # test_b's last test is skipped (no fixtures, no cleanup): the test before it cleans up
    assert cleanups(tmp_path, "-p", PLUGIN) == [
        "tests/test_a.py::test_three",
        "tests/test_b.py::test_last_run",
    ]


@pytest.mark.parametrize(
    ("select", "expected"),
    [
        ("not three", ["tests/test_a.py::test_two", "tests/test_b.py::test_last_run"]),
        ("test_one or test_p", ["tests/test_a.py::test_one", "tests/test_b.py::test_p[2]"]),
    ],
)
def test_deselected_tests_do_not_take_the_cleanup_with_them(tmp_path, select, expected):
    assert cleanups(tmp_path, "-p", PLUGIN, "-k", select) == expected


def test_both_upstream_sides_load_it_and_the_stock_baseline_key_holds_its_source():
    from tkvseam.seamtest import module_cleanup, upstream

    assert PLUGIN in upstream.PLUGINS
    digest = upstream._plugin_digests(upstream.PLUGINS)[PLUGIN]
    assert digest == hashlib.sha256(Path(module_cleanup.__file__).read_bytes()).hexdigest()
