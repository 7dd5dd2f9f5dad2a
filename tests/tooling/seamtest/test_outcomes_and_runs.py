"""seamtest: how per-test outcomes are folded and what counts as bisectable."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tkvseam.errors import RefusedError

from tkvseam.seamtest.bisect import BisectRow
from tkvseam.seamtest.hfcache import SNAPSHOT, build
from tkvseam.seamtest.outcomes import fold

from ..fixtures.seamrunner import make_runner

F = "tests/v1/core/test_x.py"


def rows(*items):
    return {nid: {"nodeid": nid, "outcome": out} for nid, out in items}


def test_parametrized_instances_fold_to_the_worst_outcome():
    r = rows((f"{F}::test_a[1]", "passed"), (f"{F}::test_a[2]", "failed"), (f"{F}::test_b", "passed"))
    assert fold(r, f"{F}::test_a") == "failed"
    assert fold(r, f"{F}::test_b") == "passed"
    assert fold(r, f"{F}::test_c") == "missing"


def test_collection_error_fails_every_test_of_the_file_and_a_skip_is_not_a_pass():
    assert fold(rows((F, "error")), f"{F}::test_a") == "failed"
    assert fold(rows((f"{F}::test_a", "skipped")), f"{F}::test_a") == "skipped"
    assert fold(rows((f"{F}::test_ab", "passed")), f"{F}::test_a") == "missing"


def test_bisectable_means_pass_at_k_and_fail_before_guards_only_need_to_pass():
    assert BisectRow(1, "p", "t", "test", "passed", "failed").ok
    assert not BisectRow(1, "p", "t", "test", "passed", "passed").ok  # cannot fail: not proof
    assert not BisectRow(1, "p", "t", "test", "skipped", "failed").ok
    assert BisectRow(1, "p", "t", "guard", "passed", "passed").ok
    assert not BisectRow(1, "p", "t", "guard", "failed", "passed").ok


def test_offline_hf_cache_has_config_only_snapshots(tmp_path):
    configs = tmp_path / "cfg" / "Qwen--Qwen3-0.6B"
    configs.mkdir(parents=True)
    (configs / "config.json").write_text("{}")
    hub = build(tmp_path / "hf", tmp_path / "cfg") / "hub"
    repo = hub / "models--Qwen--Qwen3-0.6B"
    assert (repo / "refs/main").read_text() == SNAPSHOT
    assert sorted(p.name for p in (repo / "snapshots" / SNAPSHOT).iterdir()) == ["config.json"]
    assert (repo / ".no_exist" / SNAPSHOT / "tokenizer.json").exists()
    assert (hub / "models--dummy/refs/main").exists()


def _configs(tmp_path, text="{}"):
    cfg = tmp_path / "cfg" / "Qwen--Qwen3-0.6B"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.json").write_text(text)
    return tmp_path / "cfg"


def test_a_second_build_leaves_the_hub_a_running_lane_reads_in_place(tmp_path):
    """Lanes of two bases at once: the second run's build must not delete the first's hub (it did:
    every lane removed and rebuilt hf-home/hub as it started)."""
    configs = _configs(tmp_path)
    home = build(tmp_path / "hf", configs)
    held = home / "hub/models--Qwen--Qwen3-0.6B/snapshots" / SNAPSHOT / "config.json"
    before = held.stat().st_ino
    assert build(tmp_path / "hf", configs) == home
    assert held.stat().st_ino == before
    (configs / "Qwen--Qwen3-0.6B/config.json").write_text('{"x": 1}')  # new content: a new home
    other = build(tmp_path / "hf", configs)
    assert other != home and held.read_text() == "{}"
    assert (
        other / "hub/models--Qwen--Qwen3-0.6B/snapshots" / SNAPSHOT / "config.json"
    ).read_text() == '{"x": 1}'


def test_a_build_killed_before_its_rename_is_never_used_and_is_cleaned_next_time(tmp_path):
    import subprocess
    import sys

    configs = _configs(tmp_path)
    code = (
        "import os, signal, sys; from pathlib import Path; from tkvseam.seamtest import hfcache\n"
        "real = hfcache._fill\n"
        "def fill(hub, found):\n    real(hub, found); os.kill(os.getpid(), signal.SIGKILL)\n"
        "hfcache._fill = fill; hfcache.build(Path(sys.argv[1]), Path(sys.argv[2]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "hf"), str(configs)])
    assert proc.returncode == -9
    assert [p.name for p in (tmp_path / "hf").iterdir() if p.name.startswith("hf-home-")] == []
    (left,) = list((tmp_path / "hf").glob(".hf-home-*"))
    home = build(tmp_path / "hf", configs)
    assert (home / "hub/models--dummy/refs/main").exists() and not left.exists()


def test_next_version_of_a_test_file_sits_beside_it():
    from tkvseam.seamtest.bisect import _next_name

    assert _next_name("tests/v1/core/test_x.py") == "tests/v1/core/test_x__next.py"


def test_probe_names_the_prefix_a_patch_ran_at():
    from tkvseam.seamtest.bisect import Probe

    assert Probe(patch=3, prefix=2).before and not Probe(patch=3, prefix=3).before


def test_scheduler_runs_every_job_once_longest_first_and_reraises(tmp_path, monkeypatch):
    import pytest

    from tkvseam.errors import SeamError
    from tkvseam.seamtest.runner import Job, JobResult, Root

    r = make_runner(tmp_path, work=tmp_path, slots=1, commits=["c1"])  # run_job is replaced below
    monkeypatch.setattr(r, "slot_python", lambda i: tmp_path / f"py{i}", raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    order = []

    def run_job(job, slot):
        order.append(job.label)
        if job.label == "boom":
            raise SeamError("boom")
        return JobResult(job, {}, job.estimate, "", tmp_path / "log", slot)

    monkeypatch.setattr(r, "run_job", run_job, raising=False)
    jobs = [Job(name, "c1", Root(), (), estimate=est) for name, est in (("a", 1), ("b", 9), ("c", 5))]
    done = r.run(jobs)
    assert order == ["b", "c", "a"] and set(done) == {"a", "b", "c"}
    # the measured seconds order the next run
    assert (tmp_path / "job-seconds.json").exists()
    with pytest.raises(SeamError):
        r.run([Job("boom", "c1", Root(), ())])


def test_bases_carry_their_own_seam_pins():
    from pathlib import Path

    from tkvseam.bases.pins import load_bases

    b = load_bases(Path(__file__).resolve().parents[3] / "bases.toml")["v0.31.0"]
    assert b.seam.ruff and b.seam.upstream_tests
    req = b.seam.plugin.requirements_txt()
    assert req.startswith(b.seam.plugin.requirement + " --hash=sha256:")


def test_every_job_is_told_its_base_whatever_the_callers_environment(tmp_path, monkeypatch):
    """tests/plugin and tests/differential read $BASE; `make BASE=...` would export it, a
    direct `tkv-seam seamtest --base` does not: the runner sets it from the base under test."""
    from tkvseam.bases.pins import load_bases

    root = Path(__file__).resolve().parents[3]
    monkeypatch.setenv("BASE", "v0.31.0")
    r = make_runner(tmp_path, work=tmp_path, base=load_bases(root / "bases.toml")["v0.33.0"])
    env = r.env(tmp_path / "outcomes.jsonl", {"EXTRA": "1"})
    assert env["BASE"] == "v0.33.0" and env["EXTRA"] == "1" and env["VLLM_PLUGINS"] == ""


def test_every_prefix_passes_the_style_gate_on_its_own(tmp_path):
    """The bisect lane runs the base's ruff on every prefix: a file left unformatted by one patch
    (and fixed by the next) fails that prefix alone; a problem the later patches keep is reported
    for each prefix that holds it; the report names prefix, patch, file, line and rule."""
    import sys
    from types import SimpleNamespace

    from tkvseam import git
    from tkvseam.seamtest.bisect import BisectLane
    from tkvseam.edit.stylecheck import _version

    tree = tmp_path / "vllm"
    git.repo.init(tree)
    (tree / "pyproject.toml").write_text('[tool.ruff]\nline-length = 88\n[tool.ruff.lint]\nselect = ["F"]\n')
    (tree / "vllm").mkdir()
    (tree / "vllm/mod.py").write_text("def f():\n    return 1\n")
    author = "Up Stream <up@example.invalid>"
    chain = [git.index.commit(tree, "base\n", author)]
    steps = {  # patch -> files it writes
        "0001-a.patch": {
            "vllm/mod.py": "import os\n\n\ndef f():\n    return 1\n",  # F401, kept by 0002
            "vllm/a.py": "def g():\n    return 2\n\n\n",  # trailing blank lines, fixed by 0002
        },
        "0002-b.patch": {"vllm/a.py": "def g():\n    return 2\n"},
        "0003-c.patch": {"README.md": "not python\n"},
    }
    patches = []
    for name, files in steps.items():
        for path, text in files.items():
            (tree / path).write_text(text)
        chain.append(git.index.commit(tree, f"{name}\n", author))
        changes = [SimpleNamespace(path=p, new=p, old=p) for p in files]
        patches.append(SimpleNamespace(name=name, files=changes, header=SimpleNamespace(tests=[], guards=[])))

    ruff = _version(str(Path(sys.executable).with_name("ruff")))
    base = SimpleNamespace(name="v9.9.9", seam=SimpleNamespace(ruff=ruff))
    # a build tree without venvs: only the lane's own checks run
    r = make_runner(tmp_path, tree=tree, patches=patches, base_commit=chain[0], commits=chain[1:], base=base)

    lane = BisectLane()
    assert lane.jobs(r) == []
    assert lane.style == [
        "prefix 1 (0001-a.patch): ruff format: vllm/a.py:3: would delete lines 3-4 (2 blank lines)",
        "prefixes 1-3 (0001-a.patch): ruff check: vllm/mod.py:1:8: F401 [*] `os` imported but unused",
    ]
    report = lane.report(r, {})
    assert not report.ok and report.data["style"] == lane.style
    assert f"style: {lane.style[0]}" in report.lines
    assert report.lines[-2].endswith("make bisect BASE=v9.9.9 PATCH=0001")
    ruff_path = Path(sys.executable).with_name("ruff")  # the base's ruff: its command, runnable as written
    files = "vllm/vllm/a.py vllm/vllm/mod.py"  # the tree's files, from the root (tmp_path)
    own = "--config vllm/pyproject.toml"  # the tree's own configuration only (issue 34)
    assert f"`{ruff_path} check {own} --fix {files}; {ruff_path} format {own} {files}`" in report.lines[-2]

    # One patch's bisect (PATCH=0002) checks its own prefix only.
    lane = BisectLane(only={2})
    lane.jobs(r)
    assert lane.style == [
        "prefix 2 (0001-a.patch): ruff check: vllm/mod.py:1:8: F401 [*] `os` imported but unused"
    ]


def test_a_job_may_unset_what_the_runner_sets(tmp_path):
    """``None`` in a job's env removes the variable: the plugin lane's guard job runs with
    VLLM_PLUGINS unset (every installed plugin loads), where every other job has it empty."""
    from tkvseam.bases.pins import load_bases

    base = load_bases(Path(__file__).resolve().parents[3] / "bases.toml")["v0.31.0"]
    r = make_runner(tmp_path, work=tmp_path, base=base)  # no build tree: only the environment is made
    env = r.env(tmp_path / "outcomes.jsonl", {"VLLM_PLUGINS": None, "EXTRA": "1"})
    assert "VLLM_PLUGINS" not in env and env["EXTRA"] == "1"


def _plugin_runner(tmp_path, guards):
    from types import SimpleNamespace

    patches = [
        SimpleNamespace(header=SimpleNamespace(tests=["t.py::a"], guards=guards[:1])),
        SimpleNamespace(header=SimpleNamespace(tests=[], guards=guards[1:])),
    ]
    # no build tree: the lane only reads the headers and commits
    return make_runner(tmp_path, work=tmp_path, commits=["c1", "c2"], patches=patches)


def test_plugin_lane_runs_every_guard_with_the_plugin_loaded(tmp_path, monkeypatch):
    from tkvseam.seamtest import plugin
    from tkvseam.seamtest.runner import JobResult

    monkeypatch.setattr(plugin, "plugin_dir", lambda r: tmp_path / "turbo-attn")
    monkeypatch.setattr(plugin, "planner", lambda r: "vllm.v1.core.kv_cache_utils")
    r = _plugin_runner(tmp_path, ["g.py::x", "g.py::y"])
    lane = plugin.PluginLane()
    jobs = {job.label: job for job in lane.jobs(r)}
    assert set(jobs) == {"plugin-stock", "plugin-patched", plugin.GUARDS_JOB}
    guards = jobs[plugin.GUARDS_JOB]
    assert guards.commit == "c2" and guards.root.commit == "c2"
    assert guards.targets == ("g.py::x", "g.py::y")
    env = dict(guards.env)
    assert env["VLLM_PLUGINS"] is None
    assert env["PYTHONPATH"].split(":")[-1] == str(tmp_path / "turbo-attn")
    assert plugin.LOAD_PLUGINS in guards.plugins

    def result(label, rows):
        return JobResult(jobs[label], rows, 1.0, "", tmp_path / "log", 0)

    passed = {"nodeid": "n", "outcome": "passed"}
    done = {
        "plugin-stock": result("plugin-stock", {"s.py::a": passed}),
        "plugin-patched": result("plugin-patched", {"p.py::a": passed}),
    }
    # the guard job did not run: the lane fails, every guard reported missing
    report = lane.report(r, done)
    assert not report.ok
    assert report.data["results"]["guards"] == {"g.py::x": "missing", "g.py::y": "missing"}
    done[plugin.GUARDS_JOB] = result(
        plugin.GUARDS_JOB,
        {"g.py::x": passed, "g.py::y[1]": passed, "g.py::y[2]": {"nodeid": "n", "outcome": "error"}},
    )
    report = lane.report(r, done)
    assert not report.ok
    assert report.data["results"]["guards"] == {"g.py::x": "passed", "g.py::y": "failed"}
    done[plugin.GUARDS_JOB].rows["g.py::y[2]"] = passed
    assert lane.report(r, done).ok


@pytest.mark.parametrize("what", ["file", "dangling-link", "link-to-a-hub", "dir-without-hub"])
def test_a_home_the_tool_did_not_place_is_refused_naming_it(tmp_path, what):
    """hf-home-<digest> made by hand: a file or a dangling link failed with a bare 'Not a directory'
    (exit 1); a link to another directory holding an (empty) hub/ was used as the lanes' HF_HOME."""
    configs = _configs(tmp_path)
    home = build(tmp_path / "hf", configs)
    shutil.rmtree(home)
    if what == "file":
        home.write_text("x")
    elif what == "dangling-link":
        home.symlink_to(tmp_path / "nowhere")
    elif what == "link-to-a-hub":
        (tmp_path / "elsewhere/hub").mkdir(parents=True)
        home.symlink_to(tmp_path / "elsewhere")
    else:
        (home / "notes").mkdir(parents=True)
    with pytest.raises(RefusedError) as e:
        build(tmp_path / "hf", configs)
    assert str(home) in e.value.message and "mv " in e.value.hint
    assert not list((tmp_path / "hf").glob(".hf-home-*"))  # its own temporary directory is gone


def test_builds_at_once_in_real_processes_share_one_home(tmp_path):
    import subprocess
    import sys

    configs = _configs(tmp_path)
    code = (
        "import sys; from pathlib import Path; from tkvseam.seamtest.hfcache import build\n"
        "print(build(Path(sys.argv[1]), Path(sys.argv[2])))\n"
    )
    argv = [sys.executable, "-c", code, str(tmp_path / "hf"), str(configs)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(4)]
    homes = {p.communicate()[0].strip() for p in procs}
    assert [p.returncode for p in procs] == [0] * 4 and len(homes) == 1
    assert not list((tmp_path / "hf").glob(".hf-home-*"))


def test_a_temporary_home_of_a_live_build_is_left_and_of_a_dead_one_removed(tmp_path):
    import subprocess

    parent = tmp_path / "hf"
    parent.mkdir()
    live = subprocess.Popen(["sleep", "60"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        (parent / f".hf-home-{live.pid}-abcdefgh").mkdir()
        (parent / f".hf-home-{dead.pid}-abcdefgh").mkdir()
        build(parent, _configs(tmp_path))
        assert [p.name for p in parent.glob(".hf-home-*")] == [f".hf-home-{live.pid}-abcdefgh"]
    finally:
        live.kill()
        live.wait()


def test_a_next_file_that_does_not_import_is_named_as_why_a_steps_tests_are_missing(tmp_path):
    """One bisect step runs patch k's tests and patch k+1's (its `__next` file) in one pytest
    process; a `__next` file that raises on import stops pytest before any test runs. Patch k+1's
    tests count as failing at k (as they should), patch k's are missing, and the report says why,
    naming the file and its error, instead of leaving patch k to look unproven. (Patches 2 and 1
    are not run at 2 and 0 here: the report is not ok either way.)"""
    import os
    import subprocess
    import sys
    from types import SimpleNamespace

    from tkvseam.seamtest.bisect import BisectLane, Probe
    from tkvseam.seamtest.outcomes import read_rows
    from tkvseam.seamtest.runner import OUTCOMES_PLUGIN, JobResult

    (tmp_path / "t").mkdir()
    (tmp_path / "t/test_x.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "t/test_y.py").write_text("def test_b():\n    pass\n")
    (tmp_path / "t/test_y__next.py").write_text("HOOK = {}['on_new_hook']\n\n\ndef test_b():\n    pass\n")
    outcomes = tmp_path / "outcomes.jsonl"
    label = "bisect-at-01"

    def step() -> dict:  # the step's one pytest process, as the runner starts it
        outcomes.unlink(missing_ok=True)
        nodes = ["t/test_x.py::test_a", "t/test_y__next.py::test_b"]
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", OUTCOMES_PLUGIN]
        env = {**os.environ, "TKV_SEAM_OUTCOMES": str(outcomes)}
        subprocess.run([*cmd, *nodes], cwd=tmp_path, env=env, capture_output=True)
        return {label: JobResult(None, read_rows(outcomes), 0.0, "", tmp_path / "log", 0)}

    lane = BisectLane()
    lane._probes = {
        Probe(1, 1): (label, {"t/test_x.py::test_a": "t/test_x.py::test_a"}),
        Probe(2, 1): (label, {"t/test_y.py::test_b": "t/test_y__next.py::test_b"}),
    }
    done = step()
    header = SimpleNamespace
    r = SimpleNamespace(
        patches=[
            SimpleNamespace(name="0001-a.patch", header=header(tests=["t/test_x.py::test_a"], guards=[])),
            SimpleNamespace(name="0002-b.patch", header=header(tests=["t/test_y.py::test_b"], guards=[])),
        ]
    )
    assert lane.outcome(done, Probe(1, 1), "t/test_x.py::test_a") == "missing"
    assert lane.outcome(done, Probe(2, 1), "t/test_y.py::test_b") == "failed"
    report = lane.report(r, done)
    assert not report.ok
    collect = [line for line in report.lines if line.startswith("collect: ")]
    assert collect[0] == f"collect: {label}: t/test_y__next.py does not import: E   KeyError: 'on_new_hook'"
    assert collect[1].startswith(f"collect: {label}: so pytest ran none of its 1 other test(s)")
    assert len(collect) == 2

    # A step whose files all import says nothing of collection.
    (tmp_path / "t/test_y__next.py").write_text("def test_b():\n    assert False\n")
    done = step()
    assert lane.outcome(done, Probe(1, 1), "t/test_x.py::test_a") == "passed"
    assert lane.outcome(done, Probe(2, 1), "t/test_y.py::test_b") == "failed"
    assert not [line for line in lane.report(r, done).lines if line.startswith("collect: ")]


def test_a_lane_says_its_wall_time_and_labels_the_summed_job_time():
    """Issue 37: bisect said "1 min 03 s" (two jobs' times added) for a run of 37 s."""
    from tkvseam.seamtest.runner import JobResult, ran_for

    def ran(ended: float, seconds: float) -> JobResult:
        return JobResult(None, {}, seconds, "", Path("log"), 0, ended=ended)

    side_by_side = [ran(ended=137.0, seconds=37.0), ran(ended=130.0, seconds=26.0)]  # 100 to 137 s
    assert ran_for(side_by_side) == "in 37 s (job time 1 min 03 s)"
    assert ran_for([ran(ended=20.0, seconds=12.0)]) == "in 12 s"
