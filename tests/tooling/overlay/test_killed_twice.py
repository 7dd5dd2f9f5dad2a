"""Two overlay runs killed in a row leave a venv every later run can still repair.

An install killed after its first replace leaves that file as the new overlay's (the record's
``pending``); a restore (or another install) killed after it saved its own intent, before its
first replace, wrote a record whose ``pending`` named only its own files: the file the first run
had replaced was then neither pristine, nor installed, nor pending, and every install and restore
refused the venv for good ("base is not vLLM …: has sha256 <our own overlay's>"). Real processes,
killed with SIGKILL at the exact point (``sitecustomize`` in the venv).
"""

from __future__ import annotations

from ..fixtures.overlay import KILL_AFTER_FIRST_REPLACE, PATHS, make_venv, overlay

KILL_BEFORE_FIRST_REPLACE = """
import os, signal
_real = os.replace
def _replace(src, dst, *a, **kw):
    if str(dst).endswith(".py"):
        os.kill(os.getpid(), signal.SIGKILL)
    _real(src, dst, *a, **kw)
os.replace = _replace
"""


def test_an_install_then_a_restore_killed_still_restore_and_install(two, tmp_path, base_commit):
    venv = make_venv(tmp_path / "venv", two.tree, base_commit)
    killer = venv.site / "sitecustomize.py"
    killer.write_text(KILL_AFTER_FIRST_REPLACE)
    overlay(two, "install", venv, expect=1)  # killed: one file is the overlay's
    assert sum(venv.files()[p] != venv.pristine[p] for p in PATHS) == 1
    killer.write_text(KILL_BEFORE_FIRST_REPLACE)
    overlay(two, "restore", venv, expect=1)  # killed after its intent, before any replace
    assert venv.state()["pending"]
    killer.unlink()
    overlay(two, "restore", venv)
    assert venv.files() == venv.pristine and venv.state() is None
    overlay(two, "install", venv)
    assert "def mul" in (venv.site / PATHS[1]).read_text()


def test_two_installs_of_other_commits_killed_still_restore(two, tmp_path, base_commit):
    venv = make_venv(tmp_path / "venv", two.tree, base_commit)
    killer = venv.site / "sitecustomize.py"
    killer.write_text(KILL_AFTER_FIRST_REPLACE)
    overlay(two, "install", venv, expect=1)
    killer.write_text(KILL_BEFORE_FIRST_REPLACE)
    overlay(two, "install", venv, "--commit", "HEAD~2", expect=1)  # the base commit: every file back
    killer.unlink()
    overlay(two, "restore", venv)
    assert venv.files() == venv.pristine
