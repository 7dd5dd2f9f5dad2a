"""A key cannot miss an input (issue 34): a change to any file a lane can read runs it again.

The seam lanes on a synthetic base (three patches; pytest stood in for, each job it runs
counted) with a real venv of their own; the command lanes with the very arguments the
Makefile gives them (real ``make``, the tool replaced by a recorder), run on a synthetic
project. Each input is changed one at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tkvseam.seamtest.bisect import BisectLane
from tkvseam.seamtest.full import FullLane
from tkvseam.seamtest.runner import run_lanes

from ..fixtures.make import make  # noqa: F401 (a fixture)
from ..fixtures.seamrunner import ProjectLane, build_three_features, fake_pytest, open_runner

ALL = sorted(
    ["bisect-at-00", "bisect-at-01", "bisect-at-02", "bisect-at-03", "full-series"]
    + ["project-stock", "project-patched"]
)
TREE_ROOTED = sorted(["bisect-at-00", "bisect-at-01", "bisect-at-02", "bisect-at-03", "full-series"])
PROJECT_ROOTED = ["project-patched", "project-stock"]


def a_venv(where: Path) -> Path:
    """A real venv (no pip) whose site-packages hold a vllm package of two files."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = where / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm" / "sampler.py").write_text("TEMPERATURE = 1.0\n")
    return where


@pytest.fixture
def built_with_data(project, tmp_path):
    build_three_features(project)
    (project.root / "tests" / "data").mkdir(parents=True)
    (project.root / "tests" / "data" / "tiny-llama.json").write_text('{"num_hidden_layers": 2}\n')
    (project.root / "tests" / "data" / "hf-configs").mkdir()
    (project.root / "tests" / "data" / "hf-configs" / "config.json").write_text("{}\n")
    (project.root / "tests" / "conftest.py").write_text("")
    project.venv = a_venv(tmp_path / "venv")
    return project


def run(project, monkeypatch) -> list[str]:
    r = open_runner(project)
    r.python = project.venv / "bin" / "python"
    ran: list[str] = []
    monkeypatch.setattr(r, "run_job", fake_pytest(r, ran), raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    reports = run_lanes(r, [BisectLane(), FullLane(), ProjectLane()])
    assert all(rep.ok for rep in reports), [rep.lines for rep in reports]
    return sorted(ran)


def site(project) -> Path:
    (found,) = project.venv.glob("lib/python*/site-packages")
    return found


def edit_in_place_keeping_times(path: Path, old: str, new: str) -> None:
    """The same size, the mtime put back: only the ctime tells (and the bytes)."""
    st = path.stat()
    with open(path, "r+") as f:
        text = f.read()
        assert len(old) == len(new) and old in text
        f.seek(0)
        f.write(text.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns


@pytest.mark.parametrize(
    "change",
    [
        lambda p: (p.root / "tests/data/tiny-llama.json").write_text('{"num_hidden_layers": 3}\n'),
        lambda p: (p.root / "tests/conftest.py").write_text("X = 1\n"),
        lambda p: (p.root / "tests/helpers.py").write_text("def helper():\n    pass\n"),
        lambda p: (p.root / "bases.toml").write_text((p.root / "bases.toml").read_text() + "\n# note\n"),
        lambda p: (p.root / "scratch.json").write_text("{}\n"),
    ],
    ids=["test-data", "conftest", "new-helper", "bases-file", "untracked-file-at-the-root"],
)
def test_a_project_file_change_reruns_every_job_run_in_the_project(built_with_data, monkeypatch, change):
    assert run(built_with_data, monkeypatch) == ALL
    assert run(built_with_data, monkeypatch) == []
    change(built_with_data)
    assert run(built_with_data, monkeypatch) == PROJECT_ROOTED  # a job run in a test root of the tree: cached


def test_the_hf_configs_a_job_home_is_made_from_rerun_every_job(built_with_data, monkeypatch):
    run(built_with_data, monkeypatch)
    (built_with_data.root / "tests/data/hf-configs/config.json").write_text('{"model_type": "llama"}\n')
    assert run(built_with_data, monkeypatch) == ALL


@pytest.mark.parametrize("where", ["docs/tests.md", "README.md", ".github/workflows/test.yml"])
def test_what_no_seam_test_reads_keeps_the_passes(built_with_data, monkeypatch, where):
    run(built_with_data, monkeypatch)
    (built_with_data.root / where).parent.mkdir(parents=True, exist_ok=True)
    (built_with_data.root / where).write_text("prose\n")
    assert run(built_with_data, monkeypatch) == []


def test_an_installed_file_edited_in_place_reruns_every_job(built_with_data, monkeypatch):
    run(built_with_data, monkeypatch)
    edit_in_place_keeping_times(site(built_with_data) / "vllm" / "sampler.py", "1.0", "2.0")
    assert run(built_with_data, monkeypatch) == ALL
    assert run(built_with_data, monkeypatch) == []


def test_a_package_installed_into_the_venv_reruns_every_job(built_with_data, monkeypatch):
    run(built_with_data, monkeypatch)
    (site(built_with_data) / "extra.pth").write_text("/somewhere\n")
    assert run(built_with_data, monkeypatch) == ALL


def test_bytecode_the_runs_write_keeps_the_passes(built_with_data, monkeypatch):
    run(built_with_data, monkeypatch)
    cache = site(built_with_data) / "vllm" / "__pycache__"
    cache.mkdir()
    (cache / "sampler.cpython-311.pyc").write_bytes(b"\0" * 16)
    assert run(built_with_data, monkeypatch) == []


# --------------------------------------------------------------------------- the Makefile's command lanes


def lane_argv(make, target: str) -> list[str]:  # noqa: F811
    proc, argv = make(target, "BASE=v0.31.0")
    assert proc.returncode == 0, proc.stderr
    assert argv[:2] == ["seamtest", "lane"], argv
    return argv


def as_run_on(project, argv: list[str], count: Path) -> list[str]:
    """The lane's own arguments (name, --reads, --env, --plugin; no --base: the synthetic project
    has no v0.31.0) with a command that counts its runs."""
    cut = argv.index("--")
    opts, skip = [], False
    for i, word in enumerate(argv[2:cut], 2):
        if skip:
            skip = False
        elif word == "--base":
            skip = True
        elif word != "--plugin":
            opts.append(word)
    return ["seamtest", "lane", *opts, "--", sys.executable, "-c", f"open({str(count)!r}, 'a').write('x')"]


@pytest.mark.parametrize(
    "target, edit",
    [
        ("test-tooling", "series"),
        ("test-tooling", "patches/0001-x.patch"),
        ("test-tooling", "docs/tests.md"),
        ("test-tooling", "README.md"),
        ("test-tooling", ".github/workflows/test.yml"),
        ("test-tooling", "LICENSE"),
        ("test-series", "tests/tooling/fixtures/helper.py"),
        ("test-series", "tests/data/tiny-llama.json"),
        ("test-series", "patches/0001-x.patch"),
        ("test-series", "Makefile"),
        ("test-image", "tests/image/fixtures.py"),
        ("test-image", "ci/lock-cpu-v9.9.9.txt"),
    ],
)
def test_the_makefiles_command_lanes_run_again_when_a_file_they_read_changes(project, make, target, edit):  # noqa: F811
    argv = as_run_on(project, lane_argv(make, target), count := project.root.parent / "count")
    assert project.cli(*argv, expect=None).exit_code == 0
    assert project.cli(*argv, expect=None).exit_code == 0 and count.read_text() == "x"
    (project.root / edit).parent.mkdir(parents=True, exist_ok=True)
    (project.root / edit).write_text("changed\n")
    assert project.cli(*argv, expect=None).exit_code == 0 and count.read_text() == "xx", edit


def test_a_command_lane_reruns_when_the_venv_it_names_changes(project, tmp_path):
    venv = a_venv(project.root / ".venv")
    count = tmp_path / "count"
    code = f"open({str(count)!r}, 'a').write('x')"
    argv = ["seamtest", "lane", "demo", "--", str(venv / "bin" / "python"), "-c", code]
    assert project.cli(*argv).exit_code == 0
    assert project.cli(*argv).exit_code == 0 and count.read_text() == "x"
    (found,) = venv.glob("lib/python*/site-packages")
    edit_in_place_keeping_times(found / "vllm" / "sampler.py", "1.0", "3.0")
    assert project.cli(*argv).exit_code == 0 and count.read_text() == "xx"


def test_a_command_lane_whose_inputs_change_while_it_runs_records_nothing(project, tmp_path):
    (project.root / "tests").mkdir()
    count = tmp_path / "count"
    code = f"open({str(count)!r}, 'a').write('x'); open({str(project.root / 'tests' / 'x.py')!r}, 'a').write('#')"
    argv = ["seamtest", "lane", "demo", "--", sys.executable, "-c", code]
    first = project.cli(*argv)
    assert "not recorded: what it reads changed while it ran" in first.stderr
    assert project.cli(*argv).exit_code == 0 and count.read_text() == "xx"


@pytest.mark.parametrize("name", ["VLLM_ATTENTION_BACKEND", "PYTHONHASHSEED", "PYTEST_ADDOPTS", "TORCH_LOGS"])
def test_a_variable_that_steers_the_stack_reruns_every_job(built_with_data, monkeypatch, name):
    run(built_with_data, monkeypatch)
    monkeypatch.setenv(name, "1")
    assert run(built_with_data, monkeypatch) == ALL


@pytest.mark.parametrize("name", ["TKV_SEAM_LOCK_TIMEOUT", "TERM", "SSH_AUTH_SOCK", "MAKEFLAGS"])
def test_a_variable_that_steers_nothing_keeps_the_passes(built_with_data, monkeypatch, name):
    run(built_with_data, monkeypatch)
    monkeypatch.setenv(name, "42")
    assert run(built_with_data, monkeypatch) == []


def test_a_command_lane_reruns_when_a_variable_that_steers_the_stack_changes(project, tmp_path, monkeypatch):
    (project.root / "tests").mkdir()
    count = tmp_path / "count"
    argv = ["seamtest", "lane", "demo", "--", sys.executable, "-c", f"open({str(count)!r}, 'a').write('x')"]
    project.cli(*argv)
    monkeypatch.setenv("PYTHONWARNINGS", "error")
    project.cli(*argv)
    assert count.read_text() == "xx"


def test_a_file_written_and_put_back_while_a_lane_runs_records_nothing(built_with_data, monkeypatch):
    """A test read the file while it was different: its outcome is not the pass of the bytes the
    key names, though they are the same again at the end."""
    data = built_with_data.root / "tests/data/tiny-llama.json"
    r = open_runner(built_with_data)
    r.python = built_with_data.venv / "bin" / "python"
    ran: list[str] = []
    real = fake_pytest(r, ran)

    def run_job(job, slot):
        if job.label == "project-patched":
            before = data.read_bytes()
            data.write_bytes(b'{"num_hidden_layers": 9}\n')  # what the test reads now ...
            data.write_bytes(before)  # ... put back as it was before the run ends
        return real(job, slot)

    monkeypatch.setattr(r, "run_job", run_job, raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    reports = run_lanes(r, [BisectLane(), FullLane(), ProjectLane()])
    assert any("nothing recorded: a file its jobs can read" in note for rep in reports for note in rep.notes)
    assert run(built_with_data, monkeypatch) == ALL


def test_an_installed_file_written_and_put_back_while_a_lane_runs_records_nothing(
    built_with_data, monkeypatch
):
    target = site(built_with_data) / "vllm" / "sampler.py"
    r = open_runner(built_with_data)
    r.python = built_with_data.venv / "bin" / "python"
    real = fake_pytest(r, [])

    def run_job(job, slot):
        if job.label == "full-series":
            edit_in_place_keeping_times(target, "1.0", "5.0")
            edit_in_place_keeping_times(target, "5.0", "1.0")
        return real(job, slot)

    monkeypatch.setattr(r, "run_job", run_job, raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    run_lanes(r, [BisectLane(), FullLane(), ProjectLane()])
    assert run(built_with_data, monkeypatch) == ALL


def test_a_command_lane_whose_input_is_written_and_put_back_records_nothing(project, tmp_path):
    (project.root / "tests").mkdir()
    (project.root / "tests" / "data.json").write_text("{}\n")
    data = project.root / "tests" / "data.json"
    code = f"import pathlib; p = pathlib.Path({str(data)!r}); b = p.read_bytes(); p.write_bytes(b'x'); p.write_bytes(b)"
    argv = ["seamtest", "lane", "demo", "--", sys.executable, "-c", code]
    assert "not recorded: what it reads changed while it ran" in project.cli(*argv).stderr


def test_another_venv_linking_the_same_files_keeps_the_passes(built_with_data, monkeypatch, tmp_path):
    """uv hard-links its cache's files into every venv: a venv made or removed elsewhere moves the
    link count, hence the ctime, of every file this one shares; the bytes are the same."""
    target = site(built_with_data) / "vllm" / "sampler.py"
    r = open_runner(built_with_data)
    r.python = built_with_data.venv / "bin" / "python"
    real = fake_pytest(r, [])

    def run_job(job, slot):
        if job.label == "full-series":  # while the lane runs, as well
            os.link(target, tmp_path / "other-venv-sampler.py")
        return real(job, slot)

    monkeypatch.setattr(r, "run_job", run_job, raising=False)
    monkeypatch.setattr(r, "install", lambda slot, commit: None, raising=False)
    reports = run_lanes(r, [BisectLane(), FullLane(), ProjectLane()])
    assert not any("nothing recorded" in note for rep in reports for note in rep.notes)
    (tmp_path / "other-venv-sampler.py").unlink()  # that venv removed
    assert run(built_with_data, monkeypatch) == []
