"""carry proves each patch's own tests at its prefix when the base's test venv is there (issue 25).

The proving case (``fixtures/provecase.py``): 0002's test holds for v9.9.9's cache.py, not for
v9.10.0's. With ``.venv-vllm-v9.10.0`` the port stops at 0002 (``breaks``, exit 12) naming that
test id; fixed, the carry goes on and 0001 is listed as proven. Without the venv (``--no-prove``,
or none to be had) the gate goes on alone, and says so.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tkvseam import git

from ..fixtures.carry import carry, wheels  # noqa: F401  (fixtures)
from ..fixtures.carrying import NEW, NEW_NAME, carrying_project, git_project, make_wheels
from ..fixtures.hintcheck import ROOT, problems
from ..fixtures.provecase import HEADER_NODE, fix_header_test, make_prove_queue, make_test_venv
from ..fixtures.queue import message


@pytest.fixture
def pcase(tmp_path, carrying_releases, monkeypatch):
    with carrying_project(tmp_path, carrying_releases, monkeypatch) as (project, _):
        make_prove_queue(project)
        git_project(project.root)
        yield project


def test_a_patch_whose_own_test_fails_on_the_new_base_stops_there_with_its_id(
    pcase,
    carrying_releases,
    wheels,  # noqa: F811
):
    make_test_venv(pcase.root, NEW_NAME, carrying_releases[NEW_NAME].tarball)
    stop = carry(pcase, wheels, expect=12).stderr
    assert "port to v9.10.0 stopped at 0002-header-test.patch: breaks" in stop
    assert "its own tests fail on v9.10.0" in stop
    assert f"test {HEADER_NODE}: failed" in stop
    assert not (pcase.root / "patches" / NEW_NAME).exists()

    fix_header_test(pcase.root / "build" / f"port-{NEW_NAME}")
    out = json.loads(carry(pcase, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == []
    assert out["by_themselves"] == [
        {"name": "0001-cache-tweak.patch", "how": "3-way", "gate": "ok", "proven": True}
    ]


@pytest.fixture(scope="module")
def broken_wheels(tmp_path_factory):
    """The fake release's wheels, its vllm a placeholder module: no vLLM starts from them."""
    return make_wheels(
        tmp_path_factory.mktemp("index"), tmp_path_factory.mktemp("cpu"), NEW, {"vllm_fake.py": ""}
    )


def test_a_venv_in_which_stock_vllm_does_not_start_stops_as_the_environment_naming_no_patch(
    pcase, broken_wheels
):
    """carry builds the venv itself (no make) from the lock it wrote; the fake vllm there has no
    engine, so the canary fails: the carry stops before any patch is proven or blamed."""
    err = json.loads(carry(pcase, broken_wheels, "--json", expect=12).stdout)
    assert err["error"].startswith(
        f"{NEW_NAME}: environment: stock vLLM 9.10.0 does not start in its test venv .venv-vllm-{NEW_NAME} "
        "(no patch is applied there): "
    )
    assert "No module named 'vllm'" in err["error"] and ".patch" not in err["error"]
    assert err["kind"] == "environment" and "patch" not in err  # for scripts: no patch blamed
    assert err["hint"].endswith("or carry with the gate alone: make carry VERSION=9.10.0 PROVE=0")
    assert problems(err["hint"]) == []
    assert not (pcase.root / "build" / f"port-{NEW_NAME}").exists()  # no port started
    again = json.loads(carry(pcase, broken_wheels, "--json", expect=12).stdout)  # recorded: said again
    assert again["error"] == err["error"]
    out = json.loads(carry(pcase, broken_wheels, "--json", "--no-prove").stdout)
    assert out["carried"] and not [s for s in out["steps"] if s["step"] == "prove"]


def test_the_triton_refusal_names_the_stand_in():
    from tkvseam.bases.pins import load_bases
    from tkvseam.release.carry import environment_stop

    base = load_bases(ROOT / "bases.toml")["v0.33.0"]
    stop = environment_stop(base, "RuntimeError: vLLM on x86 CPUs requires Triton (triton-cpu).")
    assert stop.exit_code == 12 and "environment" in stop.message
    assert stop.hint.startswith("make venv-vllm BASE=v0.33.0 TRITON=stand-in ")
    assert problems(stop.hint) == []


def test_a_venv_that_cannot_be_built_turns_proving_off_and_says_why(pcase, wheels):  # noqa: F811
    mine = pcase.root / f".venv-vllm-{NEW_NAME}"
    mine.mkdir()
    (mine / "notes.txt").write_text("not a venv")  # not the tool's: never replaced
    out = json.loads(carry(pcase, wheels, "--json").stdout)
    assert out["carried"]
    [prove] = [s for s in out["steps"] if s["step"] == "prove"]
    assert prove["status"] == "off"
    assert prove["detail"].startswith(
        f"`make venv-vllm BASE={NEW_NAME}` failed: .venv-vllm-{NEW_NAME} exists and is not"
    )
    assert prove["detail"].endswith("; the patches' own tests are not run, the gate is")
    assert [r["proven"] for r in out["by_themselves"]] == [False, False]
    assert (mine / "notes.txt").read_text() == "not a venv"


def test_no_prove_runs_the_gate_alone(pcase, carrying_releases, wheels):  # noqa: F811
    make_test_venv(pcase.root, NEW_NAME, carrying_releases[NEW_NAME].tarball)
    out = json.loads(carry(pcase, wheels, "--json", "--no-prove").stdout)
    assert out["carried"] and not [s for s in out["steps"] if s["step"] == "prove"]


def test_a_resolution_is_proven_with_its_own_tests_line(pcase, carrying_releases, wheels):  # noqa: F811
    """The fix renames the test and the message's Tests: line: the renamed node is the one run."""
    make_test_venv(pcase.root, NEW_NAME, carrying_releases[NEW_NAME].tarball)
    carry(pcase, wheels, expect=12)
    tree = pcase.root / "build" / f"port-{NEW_NAME}"
    fix_header_test(tree)
    test = tree / "tests" / "test_cache_header.py"
    test.write_text(test.read_text().replace("def test_header", "def test_new_header"))
    git.core.run(tree, "add", "tests/test_cache_header.py")
    msg = tree / ".git" / "tkv-seam-port-msg"
    msg.write_text(
        msg.read_text().replace(
            f"Tests: {HEADER_NODE}", f"Tests: {HEADER_NODE.replace('test_header', 'test_new_header')}"
        )
    )
    out = json.loads(carry(pcase, wheels, "--json").stdout)
    assert out["carried"]
    record = json.loads((tree / ".git" / "tkv-seam-port-gate.json").read_text())
    entry = record["0002-header-test.patch"]
    assert {k: entry[k] for k in ("how", "gate", "proven", "did")} == {
        "how": "resolved",
        "gate": "ok",
        "proven": True,
        "did": [],
    }


def test_a_tests_line_naming_no_test_of_its_file_is_said_as_such(pcase, releases, wheels):  # noqa: F811
    """The message's Tests: names a test the file does not define (a resolution's message kept
    from another version of the patch): pytest stops before any test, and the stop names that
    node as not found, the others as not run because of it (vLLM 0.34.0's 0004, replayed with
    the reviewed message over the old test file: 14 nodes "not run", 3 of them not found)."""
    make_test_venv(pcase.root, NEW_NAME, releases[NEW_NAME].tarball)
    carry(pcase, wheels, expect=12)
    tree = pcase.root / "build" / f"port-{NEW_NAME}"
    fix_header_test(tree)
    msg = tree / ".git" / "tkv-seam-port-msg"
    renamed = HEADER_NODE.replace("test_header", "test_no_such")
    msg.write_text(
        msg.read_text().replace(f"Tests: {HEADER_NODE}", f"Tests: {HEADER_NODE}\nTests: {renamed}")
    )
    stop = carry(pcase, wheels, expect=12).stderr
    assert f"test {renamed}: not found (its file defines no such test; log " in stop
    assert f"test {HEADER_NODE}: not run (pytest ran none: a node was not found; log " in stop
    assert "environment" not in stop


TRITON = "vLLM on x86 CPUs requires Triton (triton-cpu)"


def _break_venv(python) -> None:
    """The venv's own vLLM raises on import, as 0.34.0 did without triton-cpu: stock fails too."""
    init = next(python.parent.parent.glob("lib/python*/site-packages/vllm/__init__.py"))
    init.write_text(f"raise RuntimeError({TRITON!r})\n")


def test_tests_that_fail_on_stock_too_stop_once_as_the_environment_naming_no_patch(
    pcase,
    carrying_releases,
    wheels,  # noqa: F811
):
    _break_venv(make_test_venv(pcase.root, NEW_NAME, carrying_releases[NEW_NAME].tarball))
    stop = carry(pcase, wheels, expect=12).stderr
    assert "port to v9.10.0 stopped: environment (not a patch's fault)" in stop
    assert TRITON in stop and "import vllm" in stop
    assert "stopped at" not in stop and "breaks" not in stop
    assert "found while proving 0001-cache-tweak.patch, which went in and passed the gate" in stop
    status = json.loads(pcase.cli("port", "status", "--to", NEW_NAME, "--json").output)
    assert status["current"] is None and [d["name"] for d in status["done"]] == ["0001-cache-tweak.patch"]

    # said once: the next run goes on with the gate alone and says why, never blaming 0002
    res = carry(pcase, wheels, "--json")
    assert "not proving the port's patches" in res.stderr and TRITON in res.stderr
    out = json.loads(res.stdout)
    assert out["carried"]
    proven = {row["name"]: row["proven"] for row in out["by_themselves"]}
    assert proven == {
        "0001-cache-tweak.patch": "not proven (environment)",
        "0002-header-test.patch": "not proven (environment)",
    }


def test_a_venv_in_which_pytest_cannot_start_is_the_environment_too(pcase, carrying_releases, wheels):  # noqa: F811
    """The venv lacks a pytest plugin the runner needs (its --timeout): no test can run, stock's neither."""
    python = make_test_venv(pcase.root, NEW_NAME, carrying_releases[NEW_NAME].tarball)
    shutil.rmtree(next(python.parent.parent.glob("lib/python*/site-packages/fake_timeout-1.0.dist-info")))
    stop = carry(pcase, wheels, expect=12).stderr
    assert "stopped: environment (not a patch's fault)" in stop and "stopped at" not in stop
    assert "pytest cannot start" in stop and "unrecognized arguments: --timeout" in stop


GUARD = "tests/test_guard_env.py"
GUARD_TEXT = (
    'import os\n\n\ndef test_needs_env():\n    assert os.environ.get("TKV_SEAM_NO_SUCH_SETUP") == "1"\n'
)


@pytest.fixture
def guard_case(tmp_path, carrying_releases, monkeypatch):
    """0001 adds a Guard that no venv here passes, stock's neither (it needs a setup none has)."""
    with carrying_project(tmp_path, carrying_releases, monkeypatch) as (project, _):
        project.apply()
        guard = f"Tests: tests/test_math.py::test_add\nGuard: {GUARD}::test_needs_env"
        project.commit_in_tree(
            GUARD, GUARD_TEXT, message("env-guard").replace("Tests: tests/test_math.py::test_add", guard)
        )
        project.refresh()
        git_project(project.root)
        yield project


def test_a_guard_that_fails_on_stock_too_is_the_environment_not_the_patch(
    guard_case,
    carrying_releases,
    wheels,  # noqa: F811
):
    make_test_venv(
        guard_case.root, NEW_NAME, carrying_releases[NEW_NAME].tarball
    )  # vLLM imports: the canary passes
    stop = carry(guard_case, wheels, expect=12).stderr
    assert "stopped: environment (not a patch's fault)" in stop and "stopped at" not in stop
    assert f"1 test(s) fail on stock too: {GUARD}::test_needs_env" in stop


STALE = "tests/test_cache_mark.py"
STALE_TEXT = """import pytest

import vllm.config.cache as cache


@pytest.fixture
def mark():
    from vllm.config.cache import SEAM_MARK  # the patch's own name: stock has none

    return SEAM_MARK


def test_header_kept(mark):
    with open(cache.__file__) as f:
        assert f.readline() == "# line 1\\n"
"""


@pytest.fixture
def stale_guard_case(tmp_path, carrying_releases, monkeypatch):  # noqa: F811
    """0001 adds SEAM_MARK to cache.py and a Guard that needs it (its fixture imports it) and
    expects v9.9.9's first line: on v9.10.0 the guard is stale (it fails, the patch's); on stock
    it errors otherwise (the ImportError of the patch's own name), which is no environment."""
    with carrying_project(tmp_path, carrying_releases, monkeypatch) as (project, _):
        project.apply()
        cache = project.tree / "vllm/config/cache.py"
        (cache).write_text(cache.read_text().replace("# line 10\n", "# line 10\nSEAM_MARK = 1\n"))
        (project.tree / STALE).write_text(STALE_TEXT)
        guard = f"Tests: tests/test_math.py::test_add\nGuard: {STALE}::test_header_kept"
        git.index.commit(
            project.tree,
            message("seam-mark").replace("Tests: tests/test_math.py::test_add", guard),
            "Seam Dev <dev@example.invalid>",
            paths=["vllm/config/cache.py", STALE],
        )
        project.refresh()
        git_project(project.root)
        yield project


def test_a_guard_that_fails_otherwise_on_stock_is_the_patchs(stale_guard_case, carrying_releases, wheels):  # noqa: F811
    """Stock failing a Guard is the environment's only when it fails it the same way: here the
    guard fails its assertion with the patch and errors on stock for want of the patch's name
    (vLLM 0.34.0's 0007: a guard stale since v0.34.0 moved the CPU MLA gather was called the
    environment, and proving went off for the rest of the port)."""
    make_test_venv(stale_guard_case.root, NEW_NAME, carrying_releases[NEW_NAME].tarball)
    stop = carry(stale_guard_case, wheels, expect=12).stderr
    assert "stopped at 0001-seam-mark.patch: breaks" in stop
    assert f"test {STALE}::test_header_kept: failed" in stop
    assert "environment" not in stop
    tree = stale_guard_case.root / "build" / f"port-{NEW_NAME}"
    assert not (tree / ".git" / "tkv-seam-port-env.json").exists()  # proving stays on


def test_the_environment_stop_names_a_command_that_brings_proving_back(pcase, carrying_releases, wheels):  # noqa: F811
    """`make venv-vllm` alone keeps an up-to-date venv (and refuses this one, which it did not
    build): proving stayed off. The hint moves the venv aside and builds it anew."""
    _break_venv(make_test_venv(pcase.root, NEW_NAME, carrying_releases[NEW_NAME].tarball))
    stop = carry(pcase, wheels, expect=12).stderr
    venv = f".venv-vllm-{NEW_NAME}"
    assert f"build the venv anew (`mv {venv} {venv}.old && make venv-vllm BASE={NEW_NAME}`)" in stop
    assert pcase.cli("venv-vllm", NEW_NAME, expect=5)  # what the hint said before: refused
    subprocess.run(["mv", venv, f"{venv}.old"], cwd=pcase.root, check=True)
    make_test_venv(
        pcase.root, NEW_NAME, carrying_releases[NEW_NAME].tarball
    )  # the venv anew, its cause fixed
    res = carry(pcase, wheels, expect=12)  # 0002's own test fails on v9.10.0: proven again, a breaks stop
    assert "not proving" not in res.stderr and "stopped at 0002-header-test.patch: breaks" in res.stderr
