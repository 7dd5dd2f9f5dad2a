"""Two pins at once (issue 20, item 5): real processes, serialised by the tool's locks.

A lock held by the test stands for the other run, as in plumbing/test_one_run_at_a_time: both pins are started,
both must say they wait (on today's code neither waits), then the lock is released.
Nothing depends on timing.
"""

from __future__ import annotations

import json
import tomllib

from tkvseam.bases.pins import lock_file
from tkvseam.layout import lock_of
from tkvseam.lock import locked

from ..fixtures.upstream import NAME, NEXT_VERSION
from ..fixtures.processes import said, start

NEXT = f"v{NEXT_VERSION}"


def test_two_pins_of_different_releases_at_once_both_land(project, releases):
    bases = project.root / "bases.toml"
    bases.write_text("# two pins at once\n")
    with locked(lock_of(bases), "test"):
        runs = [start(project, "pin", v, "--json") for v in ("9.9.9", NEXT_VERSION)]
        for run in runs:
            assert "waiting for another tkv-seam run on the bases file" in said(run, "waiting for")
    outs = [(run.wait(), run.stdout.read()) for run in runs]
    assert [rc for rc, _ in outs] == [0, 0], outs
    assert sorted(json.loads(out)["status"] for _, out in outs) == ["added", "added"]
    assert set(tomllib.loads(bases.read_text())) == {NAME, NEXT}
    assert not list(project.root.glob(".*.lock"))


def test_two_pins_of_one_release_download_it_once(project, index):
    with locked(lock_file(project.cache, f"base-{NEXT}-sdist"), "test"):
        runs = [start(project, "pin", NEXT_VERSION, "--json") for _ in range(2)]
        for run in runs:
            assert f"waiting for another tkv-seam run on the cached base {NEXT}" in said(run, "waiting for")
    outs = [(run.wait(), run.stdout.read()) for run in runs]
    assert [rc for rc, _ in outs] == [0, 0], outs
    assert sorted(json.loads(out)["status"] for _, out in outs) == ["added", "unchanged"]
    assert [r for r in index.requests if r.startswith("/files/")] == [f"/files/vllm-{NEXT_VERSION}.tar.gz"]
    assert not list((project.cache / "sdist").glob("*.part"))
    text = (project.root / "bases.toml").read_text()
    assert text.count(f'["{NEXT}"]') == 1


def test_two_watch_reports_take_turns_on_build_drift(project, index):
    drift = project.root / "build" / "drift"
    with locked(lock_of(drift), "test"):
        run = start(project, "watch", "--report", "--json")
        assert f"waiting for another tkv-seam run on {drift}" in said(run, "waiting for")
    assert run.wait() == 11, run.stderr.read()
    assert json.loads(run.stdout.read())["releases"][0]["pin"] == "added"


def test_a_pin_killed_at_the_replace_leaves_no_stray_file_after_the_next_write(project, index, crash_at):
    """The killed run's `.bases.toml.<random>.tmp` stayed in the project root for good (git
    shows it untracked); the next writer, holding the file's lock, removes it, and nothing else."""
    bases = project.root / "bases.toml"
    mine = [project.root / ".bases.toml.swp", project.root / ".bases.toml.mine.tmp"]
    for path in mine:
        path.write_text("the user's\n")
    crash_at("os.replace", *project.argv("pin", NEXT_VERSION), when=".bases.toml.")
    assert len(list(project.root.glob(".bases.toml.*.tmp"))) == 2  # the killed run's and the user's
    assert NEXT not in tomllib.loads(bases.read_text())
    assert json.loads(project.cli("pin", NEXT_VERSION, "--json").stdout)["status"] == "added"
    assert sorted(project.root.glob(".bases.toml.*")) == sorted(mine)
