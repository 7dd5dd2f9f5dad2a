"""``JSON=1`` on a make target prints exactly one JSON object on stdout.

make echoed the recipe on stdout (``make drift JSON=1``) and ``make image JSON=1`` printed the
prerequisite apply's summary there. Real make on the project's Makefile and the real tool on a
synthetic project (``--root`` it, through a wrapper given as ``TOOL=``): every target the
Makefile documents with ``JSON=1`` (its ``make help`` line) runs, and its stdout must parse as
one JSON object, whether the command succeeds or fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..fixtures.upstream import NAME, NEXT_VERSION, VERSION

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="GNU make not installed")

#: The variables each documented JSON=1 target is run with here (what makes it do its work).
ARGS = {
    "carry": [f"VERSION={VERSION}"],
    "port": ["VERB=status", f"TO=v{NEXT_VERSION}"],
    "drift": [],
    "image": ["STAND_IN=1", "DOCKER_HOST=unix:///nonexistent/docker.sock"],
    "standin": ["DOCKER_HOST=unix:///nonexistent/docker.sock"],
    "times": [],
}


def documented_json_targets() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    return sorted(set(re.findall(r"^([a-z-]+):[^\n]*## [^\n]*\bJSON=1", text, re.M)))


def test_every_documented_json_target_is_run_here():
    assert documented_json_targets() == sorted(ARGS)


def make_json(project, tmp_path, target: str, *args: str) -> subprocess.CompletedProcess:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".done").touch()  # newer than pyproject.toml: make builds no venv
    tool = tmp_path / "tool"
    real = [sys.executable, "-m", "tkvseam", *project.argv()]
    tool.write_text(f"#!{sys.executable}\nimport os, sys\nos.execv({real[0]!r}, {real!r} + sys.argv[1:])\n")
    tool.chmod(0o755)
    env = {
        k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "BASE", "JSON")
    }
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    proc = subprocess.run(
        [
            "make",
            f"VENV={venv}",
            f"TOOL={tool}",
            f"BASE={NAME}",
            target,
            "JSON=1",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    return proc


def one_object(target: str, proc) -> dict:
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(
            f"make {target} JSON=1: stdout is not one JSON object:\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    assert isinstance(data, dict), proc.stdout
    return data


@pytest.mark.parametrize("target", sorted(ARGS))
def test_json_on_a_make_target_is_one_object_on_stdout(target, project, tmp_path):
    proc = make_json(project, tmp_path, target, *ARGS[target])
    one_object(target, proc)
    # no recipe echo: the tool's command line is not said, nor a prerequisite's whole JSON object
    assert "tkvseam" not in proc.stderr and "tool " not in proc.stderr and '"ok"' not in proc.stderr, (
        proc.stderr
    )


#: A documented JSON=1 target's usage errors (the recipe's own, before the tool runs).
USAGE = {
    "carry without VERSION": ("carry", []),
    "port without VERB": ("port", [f"TO=v{NEXT_VERSION}"]),
    "port with an unknown VERB": ("port", ["VERB=bogus", f"TO=v{NEXT_VERSION}"]),
    "port without TO": ("port", ["VERB=start"]),
    "port with an old variable": ("port", ["STATUS=1", f"TO=v{NEXT_VERSION}"]),
}


@pytest.mark.parametrize("case", sorted(USAGE))
def test_a_usage_error_of_a_json_target_is_one_object_too(case, project, tmp_path):
    target, args = USAGE[case]
    proc = make_json(project, tmp_path, target, *args)
    assert proc.returncode == 2, proc.stderr
    data = one_object(target, proc)
    assert (
        data["ok"] is False
        and data["exit_code"] == 2
        and data["error"].startswith(("usage:", "make port:", "no port verb"))  # a mistyped verb: the tool's
    )
    assert data["error"] in proc.stderr  # the same words as without JSON=1


@pytest.mark.parametrize("off", ["0", "no", "false"])
def test_json_0_is_off_as_prove_0_is(off, project, tmp_path):
    proc = make_json(project, tmp_path, "times", f"JSON={off}")
    assert proc.returncode == 0, proc.stderr
    assert "no timing recorded yet (make test records one)" in proc.stdout, proc.stdout
    assert not proc.stdout.lstrip().startswith("{")


@pytest.mark.parametrize("target", ["image", "standin"])
def test_a_failed_prerequisite_of_a_json_target_is_its_one_object(target, project, tmp_path):
    proc = make_json(project, tmp_path, target, *ARGS[target], "BASE=v0.99.0")  # apply fails first
    assert proc.returncode == 2, proc.stderr
    data = one_object(target, proc)
    assert data["ok"] is False and "unknown base 'v0.99.0'" in data["error"], data


@pytest.mark.parametrize("target", sorted(ARGS))
def test_a_tool_venv_that_cannot_be_made_is_the_one_object(target, project, tmp_path):
    proc = make_json(
        project, tmp_path, target, *ARGS[target], f"VENV={tmp_path / 'none'}", "PYTHON=/nonexistent/python3"
    )
    assert proc.returncode == 2, proc.stderr
    data = one_object(target, proc)
    assert data["ok"] is False and data["hint"] == "make venv", data


@pytest.mark.parametrize("target", sorted(ARGS))
@pytest.mark.parametrize("base", ["v0 x", "v1;touch x", "-x"])
def test_a_malformed_base_under_json_is_one_object(target, base, project, tmp_path):
    proc = make_json(project, tmp_path, target, *ARGS[target], f"BASE={base}")
    assert proc.returncode == 2
    data = one_object(target, proc)
    assert data == {
        "ok": False,
        "exit_code": 2,
        "error": data["error"],
        "hint": ".venv/bin/tkv-seam bases",
    } and data["error"].startswith("BASE is not a base name")
    assert f"BASE='{base}' is not a base name" in proc.stderr


def test_port_status_without_to_says_every_port_in_progress_none_here(project, tmp_path):
    """`make port VERB=status` alone is an answer (exit 0), as `git status` is: no port here."""
    proc = make_json(project, tmp_path, "port", "VERB=status")
    assert proc.returncode == 0, proc.stderr
    data = one_object("port", proc)
    assert data["ok"] is True and data["ports"] == [] and data["next_step"].startswith("make watch")
