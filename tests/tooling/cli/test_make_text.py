"""What a user types into make is text: make evaluates none of it, the shell runs none of it.

Issue 26, item 7: ``make carry VERSION='$(shell touch x)9.10.0'`` ran the ``$(shell …)``
(make expands a command-line variable to export it to the recipe, whatever ``$(value)`` the
recipe takes it with), as did BASE on every target, PLUGIN, PATCH, EXCLUDE_NEWER, SINCE, DIFF,
FORCE and JSON; BASE went raw into recipe lines (``make retire BASE='x`touch y`'`` ran the
backticks, ``make apply BASE='v9.9.9 --force'`` passed ``--force``). Real make on the project's
Makefile, the tool replaced by a recorder of its argv and environment.
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
SEEN_ENV = ("DIFF", "BASE", "VLLM_GIT", "TKV_SEAM_CACHE", "TURBO_ATTN")


@pytest.fixture
def make_seen(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".done").touch()  # newer than pyproject.toml: make builds no venv
    tool = tmp_path / "tool"
    record = tmp_path / "argv.json"
    tool.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"env = {{k: os.environ[k] for k in {SEEN_ENV!r} if k in os.environ}}\n"
        f"open({str(record)!r}, 'w').write(json.dumps([sys.argv[1:], env]))\n"
    )
    tool.chmod(0o755)

    def run(*args: str, env: dict[str, str] | None = None):
        record.unlink(missing_ok=True)
        clean = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", *SEEN_ENV)}
        proc = subprocess.run(
            ["make", "--no-print-directory", "-C", str(ROOT), f"VENV={venv}", f"TOOL={tool}", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**clean, **(env or {})},
        )
        argv, seen = json.loads(record.read_text()) if record.exists() else (None, None)
        return proc, argv, seen

    return run


def hostile(mark: Path) -> str:
    return f"$(shell touch {mark})`touch {mark}`$$(touch {mark})"


@pytest.mark.parametrize(
    ("target", "assign", "argv"),
    [
        ("carry", "VERSION={v}9.10.0", ["carry", "{v}9.10.0"]),
        ("carry", "PLUGIN={v}", ["carry", "9.10.0", "--plugin", "{v}"]),
        ("pin", "VERSION={v}", ["pin", "{v}"]),
        ("seam-table", "PLUGIN={v}", ["seam-table", "v0.34.0", "--plugin", "{v}"]),
        ("lock-cpu", "EXCLUDE_NEWER={v}", ["lock-cpu", "v0.34.0", "--exclude-newer", "{v}"]),
        ("watch", "SINCE={v}", ["watch", "--since", "{v}"]),
        ("port", "REASON={v}", ["port", "skip", "--to", "v0.33.0", "--reason", "{v}"]),
    ],
)
def test_a_value_with_make_code_reaches_the_tool_as_written(make_seen, tmp_path, target, assign, argv):
    mark = tmp_path / "ran"
    value = hostile(mark)
    args = [target, assign.format(v=value)]
    if target == "carry" and not assign.startswith("VERSION"):
        args.append("VERSION=9.10.0")
    if target in ("seam-table", "lock-cpu"):
        args.append("BASE=v0.34.0")
    if target == "port":
        args += ["VERB=skip", "TO=v0.33.0"]
    proc, got, _ = make_seen(*args)
    assert proc.returncode == 0, proc.stderr
    assert got == [a.format(v=value) for a in argv]
    assert not mark.exists()


def test_a_patch_of_bisect_and_a_diff_of_drift_are_text(make_seen, tmp_path):
    mark = tmp_path / "ran"
    lock, venv = tmp_path / "lock.txt", tmp_path / "vllm-venv"
    lock.write_text("vllm==0.34.0\n")
    venv.mkdir()
    (venv / ".done").touch()
    os.utime(lock, (1, 1))
    proc, got, _ = make_seen(
        "bisect", f"PATCH={hostile(mark)}", "BASE=v0.34.0", f"LOCK={lock}", f"VLLM_VENV={venv}"
    )
    assert proc.returncode == 0, proc.stderr
    assert got == ["seamtest", "bisect", "--base", "v0.34.0", "--patch", hostile(mark)]
    proc, got, env = make_seen("drift", f"DIFF={hostile(mark)}", "JSON=1")
    assert proc.returncode == 0, proc.stderr
    assert got == ["drift", "--json"] and env["DIFF"] == hostile(mark)
    assert not mark.exists()
    # the line make says is the one that runs: DIFF and BASE in it (they reach the tool as env)
    proc, got, env = make_seen("drift", f"DIFF={hostile(mark)}", "BASE=v0.34.0")
    assert proc.returncode == 0, proc.stderr
    assert f"drift --diff '{hostile(mark)}' --base 'v0.34.0'" in proc.stderr and env["BASE"] == "v0.34.0"
    assert not mark.exists()


@pytest.mark.parametrize(
    "target", ["apply", "refresh", "retire", "lint-queue", "overlay", "image", "drift", "test"]
)
def test_a_base_that_is_no_base_name_stops_make_before_any_recipe(make_seen, tmp_path, target):
    mark = tmp_path / "ran"
    for base in (hostile(mark), "v9.9.9 --force", f"x`touch {mark}`", "-x", "v1;touch x"):
        proc, got, _ = make_seen(target, f"BASE={base}")
        assert proc.returncode == 2 and got is None, (base, proc.stdout, proc.stderr)
        assert f"BASE='{base}' is not a base name" in proc.stderr
        proc, got, _ = make_seen(target, env={"BASE": base})  # from the environment too
        assert proc.returncode == 2 and got is None and "is not a base name" in proc.stderr
    assert not mark.exists() and not (ROOT / "x").exists()


def test_force_json_and_the_tools_own_variables_are_text(make_seen, tmp_path):
    mark = tmp_path / "ran"
    proc, got, env = make_seen(
        "apply", "BASE=v0.32.0", f"VLLM_GIT={hostile(mark)}", f"TKV_SEAM_CACHE={hostile(mark)}"
    )
    assert proc.returncode == 0, proc.stderr
    assert got == ["apply", "--base", "v0.32.0"]
    assert env == {"BASE": "v0.32.0", "VLLM_GIT": hostile(mark), "TKV_SEAM_CACHE": hostile(mark)}
    # FORCE and JSON are on or off (test_make_switches.py): anything else stops make, as text
    proc, got, _ = make_seen("apply", "BASE=v0.32.0", f"FORCE={hostile(mark)}")
    assert proc.returncode == 2 and got is None and f"FORCE='{hostile(mark)}' is neither" in proc.stderr
    proc, got, _ = make_seen("image", "BASE=v0.32.0", f"JSON={hostile(mark)}", f"TURBO_ATTN={hostile(mark)}")
    assert proc.returncode == 2 and got is None
    proc, got, _ = make_seen("image", "BASE=v0.32.0", "JSON=1", f"TURBO_ATTN={hostile(mark)}")
    assert proc.returncode == 0 and got == ["image", "--base", "v0.32.0", "--json"]
    proc, got, _ = make_seen("apply", "BASE=v0.32.0", env={"FORCE": hostile(mark), "JSON": hostile(mark)})
    assert proc.returncode == 2 and got is None
    assert not mark.exists()


def test_the_ordinary_values_still_work(make_seen):
    proc, got, env = make_seen("retire", "BASE=v0.32.0", "FORCE=1")
    assert got == ["retire", "v0.32.0", "--force"] and env["BASE"] == "v0.32.0"
    proc, got, _ = make_seen("retire")
    assert proc.returncode == 2 and "usage: make retire BASE=v0.32.0" in proc.stderr and got is None
    proc, got, _ = make_seen("apply", "BASE=v0.33.0+local_1.rc-2")
    assert got == ["apply", "--base", "v0.33.0+local_1.rc-2"]
    proc, got, _ = make_seen("apply")
    assert got == ["apply", "--base", "v0.31.0"]


def test_a_tool_path_with_spaces_and_quotes_is_one_word(make_seen, tmp_path):
    odd = tmp_path / "it's a $dir"
    odd.mkdir()
    tool = odd / "tool"
    shutil.copy(tmp_path / "tool", tool)
    proc, got, _ = make_seen("apply", "BASE=v0.32.0", f"TOOL={tool}")
    assert proc.returncode == 0, proc.stderr
    assert got == ["apply", "--base", "v0.32.0"]


def test_a_committed_lock_is_up_to_date_for_make():
    """The rule that names the command making a missing lock checks the base with the tool first;
    the tool venv is only its order-only prerequisite, so a lock that exists is never remade."""
    lock = sorted((ROOT / "ci").glob("lock-cpu-*.txt"))[0]
    proc = subprocess.run(
        ["make", "-q", str(lock.relative_to(ROOT))], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
