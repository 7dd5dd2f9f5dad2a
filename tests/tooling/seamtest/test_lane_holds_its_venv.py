"""Nothing changes under a running lane (issue 34): two at once, in real processes.

A seam lane (``seamtest full``, real pytest) is held in its job between its overlay install and
its pytest (``fixtures/pausing.py``) while an overlay restore, a second lane on the same venv and
``uv``'s lock of the venv meet it: each waits for it (``TKV_SEAM_LOCK_TIMEOUT``) and gives up
with exit 10, the venv untouched; the lane goes on, passes and records its pass.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import sysconfig

import pytest

from ..fixtures.overlay import PATHS, make_venv
from ..fixtures.overlay import two  # noqa: F401 (a fixture)
from ..fixtures.pausing import paused, wait_for_text
from ..fixtures.upstream import NAME

FAKE_TIMEOUT = "def pytest_addoption(parser):\n    parser.addoption('--timeout')\n"


@pytest.fixture
def lane_venv(two, tmp_path):  # noqa: F811
    """A real venv holding the base's vllm/, pytest from the tool's own venv (a .pth) and a stand-in
    for pytest-timeout (the runner passes --timeout)."""
    base_commit = (two.tree / ".git" / "tkv-seam.json").read_text().split('"base_commit": "')[1][:40]
    v = make_venv(tmp_path / "venv", two.tree, base_commit)
    (v.site / "tool.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (v.site / "fake_timeout.py").write_text(FAKE_TIMEOUT)
    dist = v.site / "fake_timeout-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-timeout\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\ntimeout = fake_timeout\n")
    return v


def tool(project, *argv: str, timeout: str = "1") -> subprocess.CompletedProcess:
    env = {**os.environ, "TKV_SEAM_LOCK_TIMEOUT": timeout}
    return subprocess.run(
        [sys.executable, "-m", "tkvseam", *project.argv(*argv)], capture_output=True, text=True, env=env
    )


def test_a_lane_holds_its_venv_from_its_overlay_install_to_the_end_of_its_tests(two, lane_venv, tmp_path):  # noqa: F811
    lane = ("seamtest", "full", "--base", NAME, "--python", str(lane_venv.python), "-j", "1")
    target = "tkvseam.seamtest.runner:Runner.test_root"  # after the overlay install, before pytest
    with paused(tmp_path / "pause", target, *two.argv(*lane)) as first:
        first.wait_reached()
        installed = lane_venv.files()
        assert installed != lane_venv.pristine  # the full series' overlay is in

        restore = tool(two, "overlay", "restore", "--base", NAME, "--python", str(lane_venv.python))
        assert restore.returncode == 10, restore.stderr
        assert f"still holds the venv {lane_venv.python.parent.parent}" in restore.stderr
        install = tool(
            two, "overlay", "install", "--base", NAME, "--python", str(lane_venv.python), "--commit", "HEAD~1"
        )
        assert install.returncode == 10, install.stderr
        second = tool(two, *lane)
        assert second.returncode == 10, second.stderr
        assert lane_venv.files() == installed  # none of them touched the venv

        fd = os.open(lane_venv.python.parent.parent / ".lock", os.O_RDWR)  # uv's lock of the venv
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(fd)

        done = first.release()
    assert done.returncode == 0, done.stderr
    assert "full: 1 job(s) ran" in done.stderr
    again = tool(two, *lane)
    assert again.returncode == 0 and "full: cached pass from" in again.stderr, again.stderr
    assert tool(two, "overlay", "restore", "--base", NAME, "--python", str(lane_venv.python)).returncode == 0
    assert lane_venv.files() == lane_venv.pristine


def test_a_second_lane_waits_for_the_first_and_then_runs(two, lane_venv, tmp_path):  # noqa: F811
    lane = ("seamtest", "full", "--base", NAME, "--python", str(lane_venv.python), "-j", "1", "--fresh")
    target = "tkvseam.seamtest.runner:Runner.test_root"
    with paused(tmp_path / "pause", target, *two.argv(*lane)) as first:
        first.wait_reached()
        err = tmp_path / "second.err"
        with open(err, "w") as f:
            env = {**os.environ, "TKV_SEAM_LOCK_TIMEOUT": "120"}
            second = subprocess.Popen(
                [sys.executable, "-m", "tkvseam", *two.argv(*lane)], stderr=f, stdout=subprocess.PIPE, env=env
            )
        wait_for_text(err, "waiting for another tkv-seam run on", second)
        assert first.release().returncode == 0
    second.communicate(timeout=300)
    assert second.returncode == 0, err.read_text()
    assert "full: 1 job(s) ran" in err.read_text()  # after the first, whole: FRESH=1 ran it again
    assert (lane_venv.site / PATHS[0]).read_bytes() != lane_venv.pristine[PATHS[0]]  # the overlay it left
