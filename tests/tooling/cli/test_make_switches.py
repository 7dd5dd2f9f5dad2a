"""One spelling for PROVE, FRESH, JSON and FORCE (issue 34): 1/on/yes/true or 0/off/no/false in
any case; anything else stops make before any recipe runs, with exit 2 and a message.

``PROVE=off``, ``OFF``, ``False`` proved, ``PROVE=n`` and ``00`` proved without a word, ``FRESH=on``
was not fresh, ``JSON=False`` printed JSON. Real make on the project's Makefile, the tool replaced
by a recorder of its argv and of ``FRESH`` as the tool sees it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="GNU make not installed")
ON = ["1", "on", "ON", "yes", "Yes", "true", "TRUE", "tRuE"]
OFF = ["0", "off", "OFF", "no", "No", "false", "False"]
BAD = ["n", "y", "00", "2", "maybe", "yes no", "on,", "$(shell echo 1)"]


@pytest.fixture
def make_fresh(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".done").touch()  # newer than pyproject.toml: make builds no venv
    tool = tmp_path / "tool"
    record = tmp_path / "argv.json"
    tool.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"open({str(record)!r}, 'w').write(json.dumps([sys.argv[1:], os.environ.get('FRESH')]))\n"
    )
    tool.chmod(0o755)

    def run(*args: str):
        record.unlink(missing_ok=True)
        clean = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "FRESH", "BASE")}
        proc = subprocess.run(
            ["make", "--no-print-directory", "-C", str(ROOT), f"VENV={venv}", f"TOOL={tool}", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=clean,
        )
        argv, fresh = json.loads(record.read_text()) if record.exists() else (None, None)
        return proc, argv, fresh

    return run


@pytest.mark.parametrize("value", ON + OFF)
def test_force_is_on_or_off_in_every_spelling(make_fresh, value):
    proc, argv, _ = make_fresh("apply", "BASE=v0.32.0", f"FORCE={value}")
    assert proc.returncode == 0, proc.stderr
    assert ("--force" in argv) == (value in ON), argv


@pytest.mark.parametrize("value", ON + OFF)
def test_prove_is_on_or_off_in_every_spelling(make_fresh, value):
    proc, argv, _ = make_fresh("carry", "VERSION=0.34.0", f"PROVE={value}")
    assert proc.returncode == 0, proc.stderr
    assert ("--no-prove" in argv) == (value in OFF), argv
    proc, argv, _ = make_fresh("port", "VERB=start", "TO=v0.34.0", f"PROVE={value}")
    assert proc.returncode == 0, proc.stderr
    assert ("--prove" in argv) == (value in ON), argv


@pytest.mark.parametrize("value", ON + OFF)
def test_what_the_port_does_by_itself_is_on_or_off_in_every_spelling(make_fresh, value):
    proc, argv, _ = make_fresh(
        "carry", "VERSION=0.34.0", f"AUTORESOLVE={value}", f"FIX={value}", f"REPLAY={value}"
    )
    assert proc.returncode == 0, proc.stderr
    off = {"--no-autoresolve", "--no-fix", "--no-replay"}
    assert (off <= set(argv)) == (value in OFF) and (off & set(argv) == set()) == (value in ON), argv


def test_prove_left_out_is_each_targets_own_default(make_fresh):
    assert "--no-prove" not in make_fresh("carry", "VERSION=0.34.0")[1]  # carry proves
    assert "--prove" not in make_fresh("port", "VERB=start", "TO=v0.34.0")[1]  # a port does not


@pytest.mark.parametrize("value", ON + OFF)
def test_fresh_reaches_the_tool_as_one_or_zero(make_fresh, value):
    proc, argv, fresh = make_fresh("test-tooling", f"FRESH={value}")
    assert proc.returncode == 0, proc.stderr
    assert fresh == ("1" if value in ON else "0")


@pytest.mark.parametrize("value", ON + OFF)
def test_json_is_on_or_off_in_every_spelling(make_fresh, value):
    proc, argv, _ = make_fresh("times", f"JSON={value}")
    assert proc.returncode == 0, proc.stderr
    assert ("--json" in argv) == (value in ON), argv


@pytest.mark.parametrize("name", ["PROVE", "FRESH", "JSON", "FORCE", "AUTORESOLVE", "FIX", "REPLAY"])
@pytest.mark.parametrize("value", BAD)
def test_any_other_value_stops_make_before_any_recipe(make_fresh, name, value):
    proc, argv, _ = make_fresh("carry", "VERSION=0.34.0", f"{name}={value}")
    assert proc.returncode == 2 and argv is None, (proc.stdout, proc.stderr)
    assert f"{name}='{value}' is neither on nor off: give 1/on/yes/true or 0/off/no/false" in proc.stderr
    if name == "JSON":  # asked for JSON in some spelling: the error is the one object too
        assert json.loads(proc.stdout)["exit_code"] == 2
    else:
        assert proc.stdout == ""


@pytest.mark.parametrize("value", ["On", "TRUE", "yes"])
def test_the_tool_reads_fresh_by_the_same_rule(value, project, tmp_path, monkeypatch):
    (project.root / "tests").mkdir()
    count = tmp_path / "count"
    argv = ["seamtest", "lane", "demo", "--", sys.executable, "-c", f"open({str(count)!r}, 'a').write('x')"]
    project.cli(*argv)
    monkeypatch.setenv("FRESH", value)
    project.cli(*argv)
    assert count.read_text() == "xx"  # fresh: it ran again
    monkeypatch.setenv("FRESH", "Off")
    project.cli(*argv)
    assert count.read_text() == "xx"
    monkeypatch.setenv("FRESH", "maybe")
    refused = project.cli(*argv, expect=2)
    assert "FRESH='maybe' is neither on nor off" in refused.stderr
