"""carry proves each patch's own tests at its prefix when the base's test venv is there (issue 25).

The proving case (``fixtures/provecase.py``): 0002's test holds for v9.9.9's cache.py, not for
v9.10.0's. With ``.venv-vllm-v9.10.0`` the port stops at 0002 (``breaks``, exit 12) naming that
test id; fixed, the carry goes on and 0001 is listed as proven. Without the venv (``--no-prove``,
or none to be had) the gate goes on alone, and says so.
"""

from __future__ import annotations

import json

import pytest

from tkvseam import git

from ..fixtures.carry import carry, releases, wheels  # noqa: F401  (fixtures)
from ..fixtures.carrying import NEW_NAME, carrying_project, git_project
from ..fixtures.provecase import HEADER_NODE, fix_header_test, make_prove_queue, make_test_venv


@pytest.fixture
def pcase(tmp_path, releases, monkeypatch):  # noqa: F811
    with carrying_project(tmp_path, releases, monkeypatch) as (project, _):
        make_prove_queue(project)
        git_project(project.root)
        yield project


def test_a_patch_whose_own_test_fails_on_the_new_base_stops_there_with_its_id(pcase, releases, wheels):  # noqa: F811
    make_test_venv(pcase.root, NEW_NAME, releases[NEW_NAME].tarball)
    stop = carry(pcase, wheels, expect=12).stderr
    assert "port to v9.10.0 stopped at 0002-header-test.patch: breaks" in stop
    assert "its own tests fail on v9.10.0" in stop
    assert f"test {HEADER_NODE}: failed" in stop
    assert not (pcase.root / "patches" / NEW_NAME).exists()

    fix_header_test(pcase.root / "build" / f"port-{NEW_NAME}")
    out = json.loads(carry(pcase, wheels, "--json").output)
    assert out["carried"] and out["problems"] == []
    assert out["by_themselves"] == [
        {"name": "0001-cache-tweak.patch", "how": "3-way", "gate": "ok", "proven": True}
    ]


def test_without_a_test_venv_the_gate_goes_on_alone_and_says_so_once(pcase, wheels):  # noqa: F811
    """carry builds the venv itself (no make); one that cannot be built turns proving off, saying why."""
    out = json.loads(carry(pcase, wheels, "--json").output)
    assert out["carried"]
    [prove] = [s for s in out["steps"] if s["step"] == "prove"]
    assert prove["status"] == "off"
    assert prove["detail"].startswith(
        f"`make venv-vllm BASE={NEW_NAME}` failed: uv pip install -r ci/lock-cpu-{NEW_NAME}.txt failed (exit 1): "
    )
    assert "filelock-fake" in prove["detail"]  # uv's own words: what it could not install
    assert prove["detail"].endswith("; the patches' own tests are not run, the gate is")
    assert [r["proven"] for r in out["by_themselves"]] == [False, False]


def test_no_prove_runs_the_gate_alone(pcase, releases, wheels):  # noqa: F811
    make_test_venv(pcase.root, NEW_NAME, releases[NEW_NAME].tarball)
    out = json.loads(carry(pcase, wheels, "--json", "--no-prove").output)
    assert out["carried"] and not [s for s in out["steps"] if s["step"] == "prove"]


def test_a_resolution_is_proven_with_its_own_tests_line(pcase, releases, wheels):  # noqa: F811
    """The fix renames the test and the message's Tests: line: the renamed node is the one run."""
    make_test_venv(pcase.root, NEW_NAME, releases[NEW_NAME].tarball)
    carry(pcase, wheels, expect=12)
    tree = pcase.root / "build" / f"port-{NEW_NAME}"
    fix_header_test(tree)
    test = tree / "tests" / "test_cache_header.py"
    test.write_text(test.read_text().replace("def test_header", "def test_new_header"))
    git.run(tree, "add", "tests/test_cache_header.py")
    msg = tree / ".git" / "tkv-seam-port-msg"
    msg.write_text(
        msg.read_text().replace(
            f"Tests: {HEADER_NODE}", f"Tests: {HEADER_NODE.replace('test_header', 'test_new_header')}"
        )
    )
    out = json.loads(carry(pcase, wheels, "--json").output)
    assert out["carried"]
    record = json.loads((tree / ".git" / "tkv-seam-port-gate.json").read_text())
    assert record["0002-header-test.patch"] == {"how": "resolved", "gate": "ok", "proven": True}
