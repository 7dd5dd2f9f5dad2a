"""overlay install/restore work from the venv's own record, whatever the queue is now (issue 26, item 4).

They worked from the current queue's file list: a patch dropped from the queue and the overlay
installed again left that patch's file patched, and ``restore`` said it was done (exit 0); put
back, install and restore both failed (exit 4) until vLLM was reinstalled. A queue patch adding a
``vllm/`` file blocked restore entirely. Two installs at once from two trees into one venv
wedged it. The venv now keeps, beside its record, a copy of each pristine file its overlay
replaced, and every overlay run takes the installed package's lock. Real venvs and real
processes: the installer paused (``sitecustomize``) right after its first replace while a
second project installs into the same venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..fixtures.pausing import wait_for_text
from ..fixtures.overlay import KILL_AFTER_FIRST_REPLACE, PATHS, STATE, make_venv, overlay
from ..fixtures.project import Project
from ..fixtures.queue import message
from ..fixtures.upstream import NAME

COPIES = ".tkv-seam-overlay-pristine"


def patched(v) -> dict[str, bool]:
    return {p: v.files()[p] != v.pristine[p] for p in PATHS}


def test_a_patch_dropped_from_the_queue_goes_back_and_can_come_back(two, venv):
    overlay(two, "install", venv)
    both = (two.root / "series").read_text().split()
    assert patched(venv) == {PATHS[0]: True, PATHS[1]: True}
    two.write_series(both[0])  # add-mul (arg_utils.py) leaves the queue
    two.apply()
    overlay(two, "install", venv)
    assert patched(venv) == {PATHS[0]: True, PATHS[1]: False}  # its file is the pristine one again
    assert set(venv.state()["files"]) == {PATHS[0]}
    two.write_series(*both)  # and comes back
    two.apply()
    overlay(two, "install", venv)
    assert patched(venv) == {PATHS[0]: True, PATHS[1]: True}
    overlay(two, "restore", venv)
    assert venv.files() == venv.pristine and venv.state() is None
    assert not (venv.site / "vllm" / COPIES).exists()  # nothing of the overlay is left


def test_restore_after_the_queue_lost_a_patch_puts_back_every_file_the_overlay_replaced(two, venv):
    overlay(two, "install", venv)
    two.write_series((two.root / "series").read_text().split()[0])
    out = overlay(two, "restore", venv).stdout
    assert venv.files() == venv.pristine, out
    assert "2 file(s) restored" in out and "replaced" not in out  # issue 37: a restore said "replaced"


def test_a_queue_patch_adding_a_vllm_file_does_not_block_restore(two, venv):
    overlay(two, "install", venv)
    two.commit_in_tree("vllm/brand_new.py", "x = 1\n", message("new-module"))
    two.refresh()
    err = overlay(two, "install", venv, expect=1).stderr  # the overlay replaces existing files only
    assert "vllm/brand_new.py: the overlay replaces existing files only" in err
    assert patched(venv) == {PATHS[0]: True, PATHS[1]: True}  # the install refused touched nothing
    overlay(two, "restore", venv)
    assert venv.files() == venv.pristine and venv.state() is None


def test_restore_needs_no_queue_at_all(two, venv):
    overlay(two, "install", venv)
    (two.root / "series").write_text("no-such.patch\n")
    overlay(two, "restore", venv)
    assert venv.files() == venv.pristine


# --------------------------------------------------------------------------- two installs at once

PAUSE_FIRST = """
import os, time
_real, _first = os.replace, []
def _replace(src, dst, *a, **kw):
    _real(src, dst, *a, **kw)
    if str(dst).endswith(".py") and not _first:
        try:
            os.close(os.open({flag!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            _first.append(True)
        except FileExistsError:
            _first.append(False)
        if _first[0]:
            open({reached!r}, "w").close()
            while not os.path.exists({go!r}):
                time.sleep(0.02)
os.replace = _replace
"""


def _installer_running(stage: Path) -> bool:
    wanted = str(stage / "overlay_install.py").encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if wanted in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def _wait(what, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_two_installs_from_two_projects_into_one_venv_take_turns(two, venv, tmp_path):
    other = Project(tmp_path / "other", two.cache)
    shutil.copytree(two.root, other.root, ignore=shutil.ignore_patterns("build"))
    other.apply()
    flag, reached, go = tmp_path / "first", tmp_path / "reached", tmp_path / "go"
    (venv.site / "sitecustomize.py").write_text(
        PAUSE_FIRST.format(flag=str(flag), reached=str(reached), go=str(go))
    )

    def install(project: Project, *extra: str, stderr=subprocess.PIPE) -> subprocess.Popen:
        argv = project.argv("overlay", "install", "--base", NAME, "--python", str(venv.python), *extra)
        return subprocess.Popen(
            [sys.executable, "-m", "tkvseam", *argv],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )

    first = install(two)  # the full overlay, paused after its first replace
    _wait(lambda: reached.exists() or first.poll() is not None)
    assert first.poll() is None, first.communicate()
    said = tmp_path / "second.err"
    with open(said, "w") as err:  # only cache-tweak: arg_utils.py pristine
        second = install(other, "--commit", "HEAD~1", stderr=err)
    # the second waits for the venv (its lock, held from the stage to the installer's end)
    wait_for_text(said, f"waiting for another tkv-seam run on the venv {venv.python.parent.parent}", second)
    assert not _installer_running(other.root / "build" / "overlay-venv")
    go.touch()
    out1, err1 = first.communicate(timeout=300)
    second.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, (err1, said.read_text())
    (venv.site / "sitecustomize.py").unlink()
    assert patched(venv) == {PATHS[0]: True, PATHS[1]: False}  # the second came last, whole
    assert set(venv.state()["files"]) == {PATHS[0]}
    overlay(two, "install", venv)
    overlay(other, "restore", venv)
    assert venv.files() == venv.pristine and venv.state() is None


# --------------------------------------------------------------------------- attacked by hand


def test_a_record_naming_a_path_outside_vllm_counts_as_none(two, venv, tmp_path):
    overlay(two, "install", venv)
    outside = venv.site / "outside.py"
    outside.write_text("mine\n")
    state = venv.state()
    state["files"]["vllm/../outside.py"] = "0" * 64
    state["pristine"]["vllm/../outside.py"] = "0" * 64
    (venv.site / "vllm" / STATE).write_text(json.dumps(state))
    err = overlay(two, "restore", venv, expect=4).stderr  # our files are then no overlay it knows
    assert "base is not vLLM" in err
    assert outside.read_text() == "mine\n"


def test_a_changed_copy_of_a_pristine_file_is_never_installed(two, venv):
    overlay(two, "install", venv)
    copy = venv.site / "vllm" / COPIES / f"{PATHS[1]}.pristine"
    assert copy.read_bytes() == venv.pristine[PATHS[1]]
    copy.write_text("def evil(): pass\n")
    two.write_series((two.root / "series").read_text().split()[0])
    err = overlay(two, "restore", venv, expect=4).stderr
    assert f"the venv's copy of the pristine {PATHS[1]}" in err and "nothing was replaced" in err
    assert patched(venv) == {PATHS[0]: True, PATHS[1]: True}


def test_the_copies_are_never_written_through_a_symlink(two, venv, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (venv.site / "vllm" / COPIES).symlink_to(elsewhere)
    err = overlay(two, "install", venv, expect=1).stderr
    assert "reached through a symlink" in err
    assert list(elsewhere.iterdir()) == [] and venv.files() == venv.pristine


@pytest.mark.parametrize("where", ["copy", "replace"])
def test_an_install_killed_copying_or_replacing_is_repaired(two, tmp_path, base_commit, where):
    victim = make_venv(tmp_path / "victim", two.tree, base_commit)
    overlay(two, "install", victim, "--commit", "HEAD~1")  # cache.py first: its copy exists
    suffix = ".pristine" if where == "copy" else ".py"
    kill = KILL_AFTER_FIRST_REPLACE.replace('.endswith(".py")', f'.endswith("{suffix}")')
    (victim.site / "sitecustomize.py").write_text(kill)
    overlay(two, "install", victim, expect=1)  # killed: arg_utils.py's copy made, or it is replaced
    (victim.site / "sitecustomize.py").unlink()
    two.write_series()  # the queue is empty now: restore goes by the record alone
    overlay(two, "restore", victim)
    assert victim.files() == victim.pristine and victim.state() is None
    assert not (victim.site / "vllm" / COPIES).exists()


def test_a_venv_an_older_tkv_seam_overlaid_is_still_restored_from_the_queue(two, venv):
    overlay(two, "install", venv)
    state = venv.state()
    del state["pristine"]  # the record of an older tkv-seam: no copies
    (venv.site / "vllm" / STATE).write_text(json.dumps(state))
    shutil.rmtree(venv.site / "vllm" / COPIES)
    overlay(two, "restore", venv)
    assert venv.files() == venv.pristine


def test_a_file_where_the_copies_go_is_an_error_and_nothing_is_replaced(two, venv):
    (venv.site / "vllm" / COPIES).write_text("not a directory\n")
    res = overlay(two, "install", venv, "--json", expect=1)
    assert f"cannot keep the pristine {PATHS[0]} in" in json.loads(res.stdout)["error"]
    assert "Traceback" not in res.stderr and venv.files() == venv.pristine
    assert (venv.site / "vllm" / COPIES).read_text() == "not a directory\n"


def test_a_venv_held_past_the_timeout_is_busy_and_nothing_is_replaced(two, venv, monkeypatch):
    import fcntl

    fd = os.open(venv.site / "vllm", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another overlay run holds the package
    monkeypatch.setenv("TKV_SEAM_LOCK_TIMEOUT", "0.5")
    try:
        res = overlay(two, "install", venv, "--json", expect=10)
    finally:
        os.close(fd)
    out = json.loads(res.stdout)
    assert "another overlay run still holds" in out["error"] and "nothing was replaced" in out["error"]
    assert out["hint"].startswith("let the other overlay run finish, then ")
    assert venv.files() == venv.pristine
    overlay(two, "install", venv)  # free again: goes through
