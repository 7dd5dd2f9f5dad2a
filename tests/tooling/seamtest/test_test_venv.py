"""The CPU test venv the tool builds (``venv-vllm``): from the lock and the base's rules, kept when
up to date, the Triton stand-in where the rules ask for it, the canary, and what it never replaces.

The "vLLM" here is a tiny wheel: ``vllm.triton_utils.importing`` computes ``HAS_TRITON = False``
as PyPI's CUDA triton makes vLLM 0.34.0 do on a CPU, and ``EngineArgs.create_engine_config``
raises vLLM 0.34.0's words for an x86 CPU without Triton, so the canary and the stand-in are
checked end to end in a real venv (uv, offline, from a find-links directory).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tkvseam import layout
from tkvseam.lock import locked

from ..fixtures.carrying import wheel
from ..fixtures.upstream import NAME

IMPORTING = "HAS_TRITON = False  # PyPI's CUDA triton has no CPU backend\n"
ARG_UTILS = """\
import vllm.triton_utils.importing as importing


class EngineArgs:
    def __init__(self, **kw):
        self.kw = kw

    def create_engine_config(self):
        if not importing.HAS_TRITON:
            raise RuntimeError("vLLM on x86 CPUs requires Triton (triton-cpu).")
        return "config"
"""
VLLM_FILES = {
    "vllm/__init__.py": "",
    "vllm/triton_utils/__init__.py": "from vllm.triton_utils.importing import HAS_TRITON\n",
    "vllm/triton_utils/importing.py": IMPORTING,
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": ARG_UTILS,
}


@pytest.fixture(scope="module")
def links(tmp_path_factory) -> Path:
    here = tmp_path_factory.mktemp("links")
    wheel(here, "vllm", "9.9.9", files=VLLM_FILES)
    wheel(here, "tkv-helper-fake", "1.0")
    return here


@pytest.fixture
def vproject(project, links, monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("UV_OFFLINE", "1")
    (project.root / "ci").mkdir()
    (project.root / "ci" / f"lock-cpu-{NAME}.txt").write_text(
        "# made by hand for the test\ntkv-helper-fake==1.0\nvllm==9.9.9\n"
    )
    return project


def rules(project, triton: str = "") -> None:
    """Give the base a ["<base>".seam.cpu] table (triton: "stand-in" or "")."""
    extra = f', triton = "{triton}"' if triton else ""
    cpu = f'cpu = {{ torch = "local", exclude = [{{ name = "torchvision", why = "CUDA" }}]{extra} }}'
    bases = project.root / "bases.toml"
    bases.write_text(
        bases.read_text().replace('seam = { ruff = "0.14.0" }', f'seam = {{ ruff = "0.14.0", {cpu} }}')
    )


def has_triton(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import vllm.triton_utils as t; print(t.HAS_TRITON)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_the_venv_is_built_from_the_lock_and_kept_while_nothing_it_is_built_from_changed(vproject):
    rules(vproject)
    out = json.loads(vproject.cli("venv-vllm", NAME, "--json").output)
    venv = vproject.root / f".venv-vllm-{NAME}"
    assert out == {
        "ok": True,
        "base": NAME,
        "path": f".venv-vllm-{NAME}",
        "status": "built",
        "lock": f"ci/lock-cpu-{NAME}.txt",
        "triton": "",
        "canary": "",
    }
    assert has_triton(venv / "bin" / "python") == "False"  # no stand-in: vLLM as the lock installs it
    python = (venv / "bin" / "python").stat().st_mtime_ns
    again = json.loads(vproject.cli("venv-vllm", NAME, "--json").output)
    assert again["status"] == "up to date" and (venv / "bin" / "python").stat().st_mtime_ns == python
    lock = vproject.root / "ci" / f"lock-cpu-{NAME}.txt"
    lock.write_text(lock.read_text().replace("tkv-helper-fake==1.0\n", ""))  # the lock changed: built again
    assert json.loads(vproject.cli("venv-vllm", NAME, "--json").output)["status"] == "built"
    freeze = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.util as u; print(u.find_spec('tkv_helper_fake_fake'))",
        ],
        capture_output=True,
        text=True,
    )
    assert freeze.stdout.strip() == "None"  # the old venv is gone, not patched over


def test_the_triton_stand_in_tells_vllm_triton_is_present_and_the_canary_sees_it(vproject):
    rules(vproject)
    out = json.loads(vproject.cli("venv-vllm", NAME, "--check", "--json").output)
    assert out["canary"].endswith("RuntimeError: vLLM on x86 CPUs requires Triton (triton-cpu).")
    # the rule recorded in bases.toml, the venv built again with the stand-in, the canary passes
    out = json.loads(vproject.cli("venv-vllm", NAME, "--triton", "stand-in", "--check", "--json").output)
    assert (out["status"], out["triton"], out["canary"]) == ("built", "stand-in", "ok")
    assert 'triton = "stand-in"' in (vproject.root / "bases.toml").read_text()
    python = vproject.root / f".venv-vllm-{NAME}" / "bin" / "python"
    assert has_triton(python) == "True"
    # every process of the venv sees it (the .pth line), and nothing but HAS_TRITON changes
    said = subprocess.run(
        [str(python), "-c", "import vllm.triton_utils.importing as m; print(sorted(vars(m)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "HAS_TRITON" in said and "TritonPresent" not in said
    # the rule taken back: built again without it
    out = json.loads(vproject.cli("venv-vllm", NAME, "--triton", "none", "--json").output)
    assert out["status"] == "built" and has_triton(python) == "False"


def test_a_path_of_the_users_that_holds_anything_else_is_refused_and_left_as_it_is(vproject, tmp_path):
    rules(vproject)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    err = vproject.cli("venv-vllm", NAME, "--path", str(mine), expect=5).stderr
    assert "is not a venv tkv-seam built" in err and "nothing was changed" in err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    own = tmp_path / "own-venv"  # does not exist yet: built there, then kept as the tool's
    assert (
        json.loads(vproject.cli("venv-vllm", NAME, "--path", str(own), "--json").output)["status"] == "built"
    )
    assert (
        json.loads(vproject.cli("venv-vllm", NAME, "--path", str(own), "--json").output)["status"]
        == "up to date"
    )
    assert not list(tmp_path.glob(".*.lock"))  # its lock is under the project's build/locks/, not beside it


def test_a_second_build_of_the_same_venv_waits_for_the_first(vproject, monkeypatch):
    rules(vproject)
    venv = vproject.root / f".venv-vllm-{NAME}"
    monkeypatch.setenv("TKV_SEAM_LOCK_TIMEOUT", "0.5")
    with locked(layout.venv_lock(vproject.root, venv), "held by the test"):
        err = vproject.cli("venv-vllm", NAME, expect=10).stderr
    assert "the test venv" in err and not venv.exists()


def test_no_lock_names_the_command_that_makes_it(project):
    err = project.cli("venv-vllm", NAME, expect=1).stderr
    assert f"no CPU lock ci/lock-cpu-{NAME}.txt" in err and f"make lock-cpu BASE={NAME}" in err


def test_a_rebuild_waits_for_a_lane_running_its_tests_in_the_venv(vproject, monkeypatch):
    """A seam lane holds its venv (uv's .lock in it) from its overlay install to the end of its
    tests: a rebuild (the lock changed) never removes the venv under it (issue 34)."""
    from tkvseam.lock import venv_locked

    rules(vproject)
    vproject.cli("venv-vllm", NAME)
    venv = vproject.root / f".venv-vllm-{NAME}"
    lock = vproject.root / "ci" / f"lock-cpu-{NAME}.txt"
    lock.write_text(lock.read_text().replace("tkv-helper-fake==1.0\n", ""))
    monkeypatch.setenv("TKV_SEAM_LOCK_TIMEOUT", "0.5")
    with venv_locked(venv):  # as run_lanes holds it
        err = vproject.cli("venv-vllm", NAME, expect=10).stderr
    assert f"still holds the venv {venv}" in err and (venv / "bin" / "python").exists()
    assert json.loads(vproject.cli("venv-vllm", NAME, "--json").output)["status"] == "built"


@pytest.mark.parametrize(
    "point",
    [
        ("tkvseam.seamtest.testvenv._run", {"after": True, "when": "uv venv"}),  # made, not yet marked
        ("os.unlink", {"after": True, "when": "tkv-seam-venv.json"}),  # its record gone mid-removal
    ],
    ids=["after-uv-venv", "mid-removal"],
)
def test_a_build_killed_half_way_is_taken_up_by_the_next(vproject, crash_at, point, tmp_path):
    """A rebuild killed at any point leaves a venv path the next build still takes as the tool's,
    the project's own .venv-vllm-<base> and a --path alike: never refused as someone else's."""
    rules(vproject)
    target, how = point
    for venv, where in (
        (vproject.root / f".venv-vllm-{NAME}", ()),
        (tmp_path / "mine", ("--path", str(tmp_path / "mine"))),
    ):
        vproject.cli("venv-vllm", NAME, *where)
        lock = vproject.root / "ci" / f"lock-cpu-{NAME}.txt"
        lock.write_text(lock.read_text() + "\n")  # another lock: a rebuild
        crash_at(target, *vproject.argv("venv-vllm", NAME, *where), **how)
        assert venv.is_dir() and not (venv / "tkv-seam-venv.json").exists()
        out = json.loads(vproject.cli("venv-vllm", NAME, *where, "--json").output)
        assert out["status"] == "built" and (venv / "tkv-seam-venv.json").is_file()


def test_the_projects_venv_path_holding_something_else_names_a_command_that_keeps_it(vproject):
    rules(vproject)
    venv = vproject.root / f".venv-vllm-{NAME}"
    venv.mkdir()
    (venv / "notes.txt").write_text("mine")
    hint = json.loads(vproject.cli("venv-vllm", NAME, "--json", expect=5).stdout)["hint"]
    assert (
        hint
        == f"`mv .venv-vllm-{NAME} .venv-vllm-{NAME}.mine` (kept as it is), then make venv-vllm BASE={NAME}"
    )
    subprocess.run(["mv", venv.name, f"{venv.name}.mine"], cwd=vproject.root, check=True)
    assert json.loads(vproject.cli("venv-vllm", NAME, "--json").output)["status"] == "built"
    assert (vproject.root / f"{venv.name}.mine" / "notes.txt").read_text() == "mine"


def test_a_path_inside_a_git_directory_is_refused(vproject):
    rules(vproject)
    inside = vproject.root / ".git" / "refs" / "heads" / "venv"
    err = vproject.cli("venv-vllm", NAME, "--path", str(inside), expect=5).stderr
    assert "inside the git directory" in err and "choose another --path" in err and not inside.exists()


def test_a_failing_canary_runs_again_and_only_a_pass_is_kept(vproject, tmp_path, monkeypatch):
    """A canary that failed for what is not the venv's build (an environment variable, a machine so
    loaded it gave no answer in time) is run again by the next check, not said again from the
    record: nothing a rebuild would change (`make venv-vllm` keeps the venv up to date) could
    clear it. A pass is kept."""
    flaky = tmp_path / "links"
    flaky.mkdir()
    arg_utils = "import os\n\n\nclass EngineArgs:\n    def __init__(self, **kw):\n        pass\n\n" + (
        "    def create_engine_config(self):\n"
        "        if os.environ.get('TKV_TEST_CANARY_FAILS'):\n"
        "            raise RuntimeError('no answer in time')\n"
        "        return 'config'\n"
    )
    files = {"vllm/__init__.py": "", "vllm/engine/__init__.py": "", "vllm/engine/arg_utils.py": arg_utils}
    wheel(flaky, "vllm", "9.9.9", files=files)
    wheel(flaky, "tkv-helper-fake", "1.0")
    monkeypatch.setenv("PIP_FIND_LINKS", str(flaky))
    rules(vproject)
    monkeypatch.setenv("TKV_TEST_CANARY_FAILS", "1")
    out = json.loads(vproject.cli("venv-vllm", NAME, "--check", "--json").output)
    assert out["canary"].endswith("RuntimeError: no answer in time")
    monkeypatch.delenv("TKV_TEST_CANARY_FAILS")
    out = json.loads(vproject.cli("venv-vllm", NAME, "--check", "--json").output)
    assert (out["status"], out["canary"]) == ("up to date", "ok")
    monkeypatch.setenv("TKV_TEST_CANARY_FAILS", "1")  # a pass is kept: not run again
    assert json.loads(vproject.cli("venv-vllm", NAME, "--check", "--json").output)["canary"] == "ok"


def test_a_path_that_is_a_link_to_a_venv_the_tool_built_is_named_a_link(vproject, tmp_path):
    rules(vproject)
    real = tmp_path / "real"
    vproject.cli("venv-vllm", NAME, "--path", str(real))
    link = tmp_path / "link"
    link.symlink_to(real)
    lock = vproject.root / "ci" / f"lock-cpu-{NAME}.txt"
    lock.write_text(lock.read_text() + "\n")  # a rebuild is due
    err = vproject.cli("venv-vllm", NAME, "--path", str(link), expect=5).stderr
    assert f"{link} exists and is a symlink (to {real})" in err and "no tkv-seam-venv.json" not in err
    assert link.is_symlink() and (real / "tkv-seam-venv.json").is_file()
