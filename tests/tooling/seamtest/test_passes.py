"""What passed is remembered: a lane step whose inputs passed before is not run again.

A synthetic base with three patches (patch k adds ``FEATURE_k`` to a vLLM file and its test
file ``tests/test_pk.py``), the real lanes (bisect, full) and a lane of the project's own test
files, on a real build tree; only the pytest processes are stood in for (a test passes when the
overlay holds its patch's feature), and each job they run is counted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tkvseam.errors import SeamError
from tkvseam.seamtest.bisect import BisectLane
from tkvseam.seamtest.full import FullLane
from tkvseam.seamtest.passes import PassBook
from tkvseam.seamtest.runner import LaneReport, run_lanes

from ..fixtures.seamrunner import PROJECT_TEST, ProjectLane, build_three_features, fake_pytest, open_runner
from ..fixtures.upstream import NAME


def run(project, monkeypatch, fresh: bool = False) -> tuple[list[str], list[LaneReport]]:
    r = open_runner(project, fresh)
    ran: list[str] = []
    monkeypatch.setattr(r, "run_job", fake_pytest(r, ran), raising=False)
    monkeypatch.setattr(r, "slot_python", lambda i: Path(sys.executable), raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    reports = run_lanes(r, [BisectLane(), FullLane(), ProjectLane()])
    assert all(rep.ok for rep in reports), [rep.lines for rep in reports]
    return sorted(ran), reports


ALL = sorted(
    ["bisect-at-00", "bisect-at-01", "bisect-at-02", "bisect-at-03", "full-series"]
    + ["project-stock", "project-patched"]
)


@pytest.fixture
def built(project):
    build_three_features(project)
    return project


def test_a_second_run_with_nothing_changed_runs_nothing_and_says_cached(built, monkeypatch):
    first, _ = run(built, monkeypatch)
    assert first == ALL
    second, reports = run(built, monkeypatch)
    assert second == []
    for i, rep in enumerate(reports, 1):
        assert re.match(rf"{i}/3 {rep.lane}: cached pass from \d{{4}}-\d\d-\d\dT", rep.notes[0]), rep.notes
    # the reports are the same as the first run's: the recorded outcomes stand in
    assert reports[0].data["rows"][0]["at_k"] == "passed"
    assert reports[0].data["rows"][0]["at_prev"] == "failed"


def test_changing_one_patch_reruns_the_steps_at_and_after_its_prefix_only(built, monkeypatch):
    run(built, monkeypatch)
    patch = next((built.root / "patches").glob("0002-*.patch"))
    text = patch.read_text()
    assert "+# note a\n" in text
    patch.write_text(text.replace("+# note a\n", "+# note b\n"))  # a test-only comment of patch 2
    built.apply()
    again, _ = run(built, monkeypatch)
    # step 1 runs patch 2's tests before it; steps 2, 3 and every full-series job hold it; a job
    # run in the project can read the patch file itself, its stock side too
    assert again == [
        "bisect-at-01",
        "bisect-at-02",
        "bisect-at-03",
        "full-series",
        "project-patched",
        "project-stock",
    ]


def test_changing_a_test_file_reruns_the_lanes_that_run_it(built, monkeypatch):
    run(built, monkeypatch)
    (built.root / PROJECT_TEST).write_text("def test_p():\n    assert True\n")
    again, _ = run(built, monkeypatch)
    assert again == ["project-patched", "project-stock"]


def test_fresh_runs_every_step_and_records_them_anew(built, monkeypatch):
    run(built, monkeypatch)
    again, reports = run(built, monkeypatch, fresh=True)
    assert again == ALL and not any("cached" in rep.notes[0] for rep in reports)
    monkeypatch.setenv("FRESH", "1")
    from tkvseam.seamtest.passes import fresh_from_env

    assert fresh_from_env()


def test_a_failed_step_records_nothing_and_runs_again(built, monkeypatch):
    r = open_runner(built)
    ran: list[str] = []
    real = fake_pytest(r, ran)

    def broken(job, slot):
        result = real(job, slot)
        if job.label == "bisect-at-02":
            result.rows = {n: {"nodeid": n, "outcome": "failed"} for n in result.rows}
        return result

    monkeypatch.setattr(r, "run_job", broken, raising=False)
    monkeypatch.setattr(r, "slot_python", lambda i: Path(sys.executable), raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    reports = run_lanes(r, [BisectLane(), FullLane(), ProjectLane()])
    assert not reports[0].ok and reports[0].notes[0].endswith("FAILED")
    again, _ = run(built, monkeypatch)
    assert again == ["bisect-at-02"]  # the other steps passed on their own and were recorded


KILL = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from tests.tooling.fixtures import seamrunner as t
from tests.tooling.fixtures.project import Project
from tkvseam.seamtest.bisect import BisectLane
from tkvseam.seamtest.full import FullLane
from tkvseam.seamtest.runner import run_lanes
project = Project(Path({root!r}), Path({cache!r}))
r = t.open_runner(project)
ran = []
real = t.fake_pytest(r, ran)
def run_job(job, slot):
    if len(ran) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(job, slot)
r.run_job = run_job
r.slot_python = lambda i: Path(sys.executable)
r.install = lambda slot, commit: None
run_lanes(r, [BisectLane(), FullLane(), t.ProjectLane()])
"""


def test_a_run_killed_mid_lane_records_no_pass(built, monkeypatch):
    tests = str(Path(__file__).resolve().parents[3])
    code = KILL.format(tests=tests, root=str(built.root), cache=str(built.cache))
    proc = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    )
    assert proc.returncode == -signal.SIGKILL
    records = [p for p in (built.root / "build/passes" / NAME).glob("*.json")]
    assert records == []
    again, _ = run(built, monkeypatch)
    assert again == ALL


# --------------------------------------------------------------------------- a lane that is one command


def lane(project, *command, fresh=False, reads=("tests/proj",)):
    argv = ["seamtest", "lane", "demo", *(a for r in reads for a in ("--reads", r))]
    if fresh:
        argv.append("--fresh")
    return project.cli(*argv, "--", *command, expect=None)


def test_a_command_lane_is_skipped_when_its_inputs_passed_and_runs_when_they_change(project):
    (project.root / PROJECT_TEST).parent.mkdir(parents=True)
    (project.root / PROJECT_TEST).write_text("x = 1\n")
    count = project.root.parent / "count"  # outside the project: what a lane reads is in its key
    cmd = [sys.executable, "-c", f"open({str(count)!r}, 'a').write('x')"]
    assert lane(project, *cmd).exit_code == 0 and count.read_text() == "x"
    second = lane(project, *cmd)
    assert second.exit_code == 0 and count.read_text() == "x"
    assert "lane demo: cached pass from " in second.stderr
    (project.root / PROJECT_TEST).write_text("x = 2\n")  # a file it reads
    assert lane(project, *cmd).exit_code == 0 and count.read_text() == "xx"
    assert lane(project, *cmd, fresh=True).exit_code == 0 and count.read_text() == "xxx"
    failed = lane(project, sys.executable, "-c", "raise SystemExit(3)")
    assert failed.exit_code == 9 and "nothing recorded" in failed.stderr
    assert lane(project, sys.executable, "-c", "raise SystemExit(3)").exit_code == 9  # ran again
    times = [
        json.loads(line)
        for line in (project.root / "build/passes/project/timings.jsonl").read_text().splitlines()
    ]
    assert [t["cached"] for t in times] == [False, True, False, False, False, False]
    assert {"load", "cores", "when", "seconds"} <= set(times[0])


def test_a_command_lane_killed_records_no_pass(project):
    (project.root / "tests").mkdir()
    argv = [
        sys.executable,
        "-m",
        "tkvseam",
        *project.argv("seamtest", "lane", "demo", "--reads", "tests", "--"),
    ]
    kill = [sys.executable, "-c", "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"]
    proc = subprocess.run([*argv, *kill])
    assert proc.returncode == -signal.SIGKILL
    assert not list((project.root / "build/passes/project").glob("*.json"))
    sleeper = subprocess.run(
        [*argv, sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    )
    assert sleeper.returncode != 0
    assert not list((project.root / "build/passes/project").glob("*.json"))


def test_old_records_of_a_name_go_and_a_longer_names_stay(tmp_path):
    book = PassBook(tmp_path, "v9.9.9")
    book.record("full-series-cuda-alike", "c" * 64, 1.0)
    for i in range(6):
        book.record("full-series", f"{i:x}" * 64, 1.0)
    assert book.lookup("full-series-cuda-alike", "c" * 64) is not None
    kept = [i for i in range(6) if book.lookup("full-series", f"{i:x}" * 64)]
    assert kept == [2, 3, 4, 5]


def _writes_counts(**counts) -> list[str]:
    body = f"import json, os; open(os.environ['TKV_SEAM_LANE_COUNTS'], 'w').write(json.dumps({counts!r}))"
    return [sys.executable, "-c", body]


def test_a_command_lane_whose_tests_all_skipped_records_no_pass(project):
    (project.root / "tests").mkdir()
    skipped = lane(project, *_writes_counts(passed=0, skipped=8), reads=("tests",))
    assert skipped.exit_code == 0 and "no test ran (8 skipped); nothing recorded" in skipped.stderr
    again = lane(project, *_writes_counts(passed=0, skipped=8), reads=("tests",))
    assert "cached pass" not in again.stderr  # it runs again: a skip is no pass
    some = lane(project, *_writes_counts(passed=3, skipped=1), reads=("tests",))
    assert some.exit_code == 0 and "passed in" in some.stderr and "1 skipped" in some.stderr
    cached = lane(project, *_writes_counts(passed=3, skipped=1), reads=("tests",))
    assert "cached pass from " in cached.stderr and "1 skipped" in cached.stderr


def test_the_projects_conftest_writes_the_counts_a_lane_reads(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\ndef test_a():\n    pass\n\ndef test_b():\n    pytest.skip('no engine')\n"
    )
    out = tmp_path / "counts.json"
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "TKV_SEAM_LANE_COUNTS": str(out), "PYTHONPATH": str(root)}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    subprocess.run([*args, str(tmp_path)], env=env, cwd=tmp_path, check=True, capture_output=True)
    assert json.loads(out.read_text()) == {"passed": 1, "failed": 0, "skipped": 1, "error": 0}


def test_a_bases_command_lane_stays_cached_when_the_bases_test_venv_appears(project):
    """In a fresh clone `make test` runs a base's series lane before it builds the base's test
    venv: the venv appearing (which the lane does not run under) leaves its key as it was, so
    the next `make test` finds the pass."""
    (project.root / PROJECT_TEST).parent.mkdir(parents=True)
    (project.root / PROJECT_TEST).write_text("x = 1\n")
    count = project.root.parent / "count"  # outside the project: what a lane reads is in its key
    cmd = [sys.executable, "-c", f"open({str(count)!r}, 'a').write('x')"]
    argv = ["seamtest", "lane", "demo", "--base", NAME, "--reads", "tests/proj", "--", *cmd]
    assert project.cli(*argv, expect=None).exit_code == 0 and count.read_text() == "x"
    venv = project.root / f".venv-vllm-{NAME}"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.7\n")
    second = project.cli(*argv, expect=None)
    assert second.exit_code == 0 and count.read_text() == "x"
    assert f"lane demo ({NAME}): cached pass from " in second.stderr


# --------------------------------------------------------------------------- a failure clears the pass


def test_a_step_that_fails_under_fresh_loses_its_pass_and_runs_again(built, monkeypatch):
    run(built, monkeypatch)
    r = open_runner(built, fresh=True)
    ran: list[str] = []
    real = fake_pytest(r, ran)

    def broken(job, slot):
        result = real(job, slot)
        if job.label in ("bisect-at-02", "full-series"):
            result.rows = {n: {"nodeid": n, "outcome": "failed"} for n in result.rows}
        return result

    monkeypatch.setattr(r, "run_job", broken, raising=False)
    monkeypatch.setattr(r, "slot_python", lambda i: Path(sys.executable), raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    run_lanes(r, [BisectLane(), FullLane(), ProjectLane()])
    again, _ = run(built, monkeypatch)
    assert again == ["bisect-at-02", "full-series"]  # no longer a pass under their keys


def test_a_job_whose_pytest_cannot_run_loses_its_pass(built, monkeypatch):
    run(built, monkeypatch)
    r = open_runner(built, fresh=True)
    real = fake_pytest(r, [])

    def broken(job, slot):
        if job.label == "full-series":
            raise SeamError("pytest could not run (full-series)")
        return real(job, slot)

    monkeypatch.setattr(r, "run_job", broken, raising=False)
    monkeypatch.setattr(r, "slot_python", lambda i: Path(sys.executable), raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    with pytest.raises(SeamError):
        run_lanes(r, [BisectLane(), FullLane(), ProjectLane()])
    again, _ = run(built, monkeypatch)
    assert again == ["full-series"]


def test_a_command_lane_that_fails_under_fresh_loses_its_pass(project, tmp_path):
    (project.root / "tests").mkdir()
    verdict, count = tmp_path / "verdict", tmp_path / "count"  # outside the project: not in its key
    code = f"open({str(count)!r}, 'a').write('x'); raise SystemExit(int(open({str(verdict)!r}).read()))"
    verdict.write_text("0")
    assert lane(project, sys.executable, "-c", code, reads=()).exit_code == 0
    verdict.write_text("1")
    failed = lane(project, sys.executable, "-c", code, reads=(), fresh=True)
    assert failed.exit_code == 9
    verdict.write_text("0")
    again = lane(project, sys.executable, "-c", code, reads=())
    assert again.exit_code == 0 and "cached pass" not in again.stderr and count.read_text() == "xxx"


# --------------------------------------------------------------------------- the queue, not the tree as it is


def test_a_seam_lane_run_directly_refuses_a_tree_that_is_not_the_queue(built):
    patch = next((built.root / "patches").glob("0002-*.patch"))
    patch.write_text(patch.read_text().replace("+# note a\n", "+# note b\n"))  # edited, not applied
    lane = ("seamtest", "full", "--base", NAME, "--python", sys.executable)
    refused = built.cli(*lane, expect=5)
    assert f"{patch.name} changed since it was applied" in refused.stderr
    assert f"next: make apply BASE={NAME}" in refused.stderr
    built.apply()
    built.commit_in_tree("vllm/extra.py", "x = 1\n", "extra: not refreshed\n")
    refused = built.cli(*lane, expect=5)
    assert "holds commits the queue does not" in refused.stderr
    assert f"next: make refresh BASE={NAME}" in refused.stderr


def test_times_says_a_lane_row_is_its_jobs_summed_time():
    """Issue 37: `make times` showed lane-bisect 819.7 for a lane of 2 slots with no word that it
    is job time, not wall time."""
    from tkvseam.seamtest.run import Times

    row = {"name": "lane-bisect", "base": "v0.31.0", "seconds": 819.7, "load": 2.0, "cores": 2, "when": "t"}
    said = Times([row]).lines()
    assert "819.7" in said[1] and "sum of its jobs' seconds" in said[-1]
    single = dict(row, name="image")
    assert len(Times([single]).lines()) == 2  # no lane row: no note


def test_bisecting_a_patch_without_tests_says_so_instead_of_nothing(built, monkeypatch):
    """`make bisect PATCH=<a doc patch>` ran no test and said only "0 passed, 0 failed"."""
    from tkvseam import git

    from ..fixtures.queue import message

    readme = built.tree / "README.md"
    readme.write_text(readme.read_text() + "docs\n")
    doc = message("doc-note").replace("Tests: tests/test_math.py::test_add\n", "")
    git.index.commit(built.tree, doc, "Seam Dev <dev@example.invalid>", paths=["README.md"])
    built.refresh()
    r = open_runner(built)
    monkeypatch.setattr(r, "run_job", fake_pytest(r, []), raising=False)
    monkeypatch.setattr(r, "slot_python", lambda i: Path(sys.executable), raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    [rep] = run_lanes(r, [BisectLane(only={4})])
    assert (
        rep.ok
        and "0004-doc-note.patch: no Tests: or Guard: in its header, so no test to bisect"
        in "\n".join(rep.lines)
    )
    [rep] = run_lanes(r, [BisectLane(only={3})])
    assert not any("no Tests:" in line for line in rep.lines)
    timings = r.passes.dir / "timings.jsonl"
    before = timings.read_text()
    assert '"lane-bisect"' in before
    run_lanes(r, [BisectLane(only={4})])  # no job: `make times` keeps the last real measurement
    assert timings.read_text() == before
