"""overlay install/restore on a venv (issue 20, item 4; issue 18's overlay items).

The venv is a real one (``python -m venv --without-pip``) whose site-packages hold the base's
pristine ``vllm/``. Faults are real: the installer process is killed
(SIGKILL) right after its first file replace; a read-only directory is read-only for a
process without CAP_DAC_OVERRIDE (the tests run as root here).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys

import pytest

from ..fixtures.upstream import NAME
from ..fixtures.overlay import KILL_AFTER_FIRST_REPLACE, PATHS, STATE, make_venv, overlay


def without_dac_override() -> None:
    """preexec_fn: drop CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH, so root meets permission bits too."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run_tool(project, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tkvseam", "--root", str(project.root), "--cache", str(project.cache), "-q"]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, preexec_fn=without_dac_override, cwd=project.root
    )


def test_install_killed_after_its_first_replace_can_be_restored_and_installed(two, tmp_path, base_commit):
    victim = make_venv(tmp_path / "venv", two.tree, base_commit)
    killer = victim.site
    (killer / "sitecustomize.py").write_text(KILL_AFTER_FIRST_REPLACE)
    err = overlay(two, "install", victim, expect=1).stderr
    assert "the overlay installer failed (exit -9)" in err
    files = victim.files()
    assert sum(files[p] != victim.pristine[p] for p in PATHS) == 1  # killed half-way
    assert victim.state()["pending"]  # the intent was recorded before the replace
    (killer / "sitecustomize.py").unlink()  # the next runs are not killed
    overlay(two, "restore", victim)
    assert victim.files() == victim.pristine and victim.state() is None
    overlay(two, "install", victim)
    (killer / "sitecustomize.py").write_text(KILL_AFTER_FIRST_REPLACE)
    overlay(two, "install", victim, "--commit", "HEAD~1", expect=1)  # killed switching overlays
    (killer / "sitecustomize.py").unlink()
    out = overlay(two, "install", victim).stdout
    assert "replacing the overlay installed in" in out
    assert "line 10 (seam)" in (victim.site / PATHS[0]).read_text()
    assert "def mul" in (victim.site / PATHS[1]).read_text()


def test_a_read_only_directory_is_an_error_with_a_next_step_and_nothing_is_replaced(two, venv):
    ro = venv.site / "vllm" / "engine"
    ro.chmod(0o555)
    try:
        proc = run_tool(two, "overlay", "install", "--base", NAME, "--python", str(venv.python))
        as_json = run_tool(two, "overlay", "install", "--base", NAME, "--python", str(venv.python), "--json")
    finally:
        ro.chmod(0o755)
    assert proc.returncode == 1, proc.stderr
    assert f"cannot write {ro}: permission denied; nothing was replaced" in proc.stderr
    assert f"next: ls -ld {ro}" in proc.stderr and "Traceback" not in proc.stderr
    assert venv.files() == venv.pristine
    assert json.loads(as_json.stdout)["exit_code"] == 1
    overlay(two, "install", venv)  # writable again: goes through
    overlay(two, "restore", venv)
    assert venv.files() == venv.pristine


def test_a_write_failing_half_way_leaves_a_venv_restore_can_repair(two, venv):
    """The second target cannot be replaced (immutable), after the first was."""
    if shutil.which("chattr") is None or os.geteuid() != 0:
        pytest.skip("needs chattr and root; the killed-install test covers the record")
    victim = venv.site / PATHS[1]
    if subprocess.run(["chattr", "+i", str(victim)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable flag")
    try:
        res = overlay(two, "install", venv, expect=1)
    finally:
        subprocess.run(["chattr", "-i", str(victim)], check=True)
    assert "1 of 2 file(s) were replaced before it (recorded: restore puts them back)" in res.stderr
    assert "next: ls -ld" in res.stderr
    overlay(two, "restore", venv)
    assert venv.files() == venv.pristine


def test_an_install_over_the_same_overlay_says_so(two, venv):
    first = overlay(two, "install", venv).stdout
    assert "2 file(s) replaced" in first
    state = venv.state()
    again = overlay(two, "install", venv).stdout
    assert f"already installed in {venv.site / 'vllm'} (series {state['series_digest'][:12]}" in again
    assert "0 file(s) replaced" in again
    assert json.loads(overlay(two, "install", venv, "--json").stdout)["replaced"] == []


def test_a_foreign_vllm_names_its_version_and_the_users_venv_is_never_removed(two, venv):
    version_file = venv.site / "vllm" / "_version.py"
    version_file.write_text(version_file.read_text().replace("9.9.9", "9.10.0"))
    (venv.site / PATHS[0]).write_text("# vLLM 9.10.0's cache.py\n")
    err = overlay(two, "install", venv, expect=4).stderr
    assert f"base is not vLLM {NAME}: {PATHS[0]} has sha256" in err
    assert "is version 9.10.0)" in err
    hint = err.split("next: ", 1)[1]
    assert "rm " not in hint and "--reinstall --no-deps vllm==9.9.9" in hint  # uv's: the venv has no pip
    assert str(venv.python) in hint
    assert json.loads(overlay(two, "install", venv, "--json", expect=4).stdout)["hint"] == hint.strip()
    assert venv.files()[PATHS[1]] == venv.pristine[PATHS[1]]


def test_the_projects_own_venv_gets_the_recreate_hint(two, base_commit):
    own = make_venv(two.root / f".venv-vllm-{NAME}", two.tree, base_commit)
    (own.site / PATHS[1]).write_text("edited\n")
    err = overlay(two, "install", None, expect=4).stderr
    assert f"next: recreate the test venv: rm -rf {two.root / f'.venv-vllm-{NAME}'} && make venv-vllm" in err


# --------------------------------------------------------------------------- attacked by hand


def test_a_symlink_planted_at_the_installers_temporary_name_is_not_followed(two, venv, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("keep\n")
    (venv.site / "vllm/config/.cache.py.tkv-seam-tmp").symlink_to(outside)
    overlay(two, "install", venv)
    assert outside.read_text() == "keep\n"
    assert "line 10 (seam)" in (venv.site / PATHS[0]).read_text()


def test_a_record_that_is_not_ours_counts_as_none(two, venv):
    (venv.site / "vllm" / STATE).write_text(json.dumps({"files": "everything", "pending": [1]}))
    overlay(two, "install", venv)
    assert venv.state()["files"].keys() == set(PATHS)


def test_a_stage_whose_manifest_leaves_vllm_is_refused(two, venv, tmp_path):
    from tkvseam.overlay.stage import stage

    out = tmp_path / "stage"
    stage(two.tree, PATHS, out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"][0]["path"] = "vllm/../../evil.py"
    (out / "manifest.json").write_text(json.dumps(manifest))
    proc = subprocess.run(
        [str(venv.python), str(out / "overlay_install.py"), str(out), "--keep-state"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "names 'vllm/../../evil.py': not a file inside vllm/" in proc.stderr
    assert venv.files() == venv.pristine


def test_a_python_that_is_not_a_python_is_a_plain_error(two, tmp_path):
    sh = tmp_path / "notpython"
    sh.write_text("#!/bin/sh\necho 'not python' >&2\nexit 3\n")
    sh.chmod(0o755)
    res = overlay(two, "install", None, "--python", str(sh), "--json", expect=1)
    assert "the overlay installer failed (exit 3): not python" in res.stderr
    assert "--version" in json.loads(res.stdout)["hint"]


def test_a_vllm_outside_the_venv_is_never_patched_through_it(two, venv, tmp_path, base_commit, monkeypatch):
    """A vllm the venv only sees (a .pth to elsewhere, as --system-site-packages does), or one
    the tool's own PYTHONPATH points at, is not the venv's: nothing outside it is written."""
    other = make_venv(tmp_path / "other", two.tree, base_commit)
    shutil.rmtree(venv.site / "vllm")
    (venv.site / "elsewhere.pth").write_text(f"{other.site}\n")
    err = overlay(two, "install", venv, expect=1).stderr
    assert f"the vllm this Python imports ({other.site / 'vllm'}) is not inside its environment" in err
    assert other.files() == other.pristine
    (venv.site / "elsewhere.pth").unlink()
    err = overlay(two, "install", venv, expect=1).stderr
    assert "has no vllm package" in err and f"uv pip show --python {venv.python} vllm" in err
    monkeypatch.setenv("PYTHONPATH", str(other.site))
    overlay(two, "install", venv, expect=1)  # still the venv's own (none), not PYTHONPATH's
    assert other.files() == other.pristine


def test_restore_in_json_says_restored_not_replaced(two, venv):
    """The installer's words are an overlay's ("replaced"); a restore's --json output says what it did."""
    overlay(two, "install", venv)
    out = json.loads(overlay(two, "restore", venv, "--json").stdout)
    assert out["restored"] is True and venv.files() == venv.pristine
    assert f"restored {out['put_back'][0]}" in out["output"] and "file(s) restored," in out["output"]
    assert "replaced" not in out["output"] and "replaced" not in out, out
    assert out["already_pristine"] is False
    again = json.loads(overlay(two, "restore", venv, "--json").stdout)  # nothing left to put back
    assert again["restored"] is True and again["put_back"] == [] and again["already_pristine"] is True
