"""retire removes only what the project owns, and only a base it names (issue 26, items 3, 5, 10).

- ``bases.toml`` spelling the top-level queue another way (``./series``, ``patches/``, which every
  other command reads as ``series`` and ``patches``): retire took it for another base's queue and
  deleted ``series``, every top-level patch, the lock and the pin. It compares the paths resolved,
  and their normalised names.
- ``retire 0001-cache-tweak.patch`` (no such base) said "retired", exit 0: an unknown base is a
  usage error (exit 2), whatever lies at ``patches/<name>``.
- The base's entries in the per-user cache (``bases/<base>-sdist``, the stock baselines) are shared
  by every checkout and every run using that cache: retire leaves them, and says so.
- A run killed after the lock went and run again printed a ``git add -A`` without the lock: the
  lock's deletion was never staged. What to commit is what git sees changed.
- A port carrying the base's queue forward, started while retire ran, ended as a port tree from a
  base no longer pinned: retire holds the bases file's lock and every port tree's for its whole
  run, so it meets such a port once it is in place, and refuses.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest

from tkvseam import git
from tkvseam.bases.pins import load_bases

from ..fixtures.carrying import NEW_NAME, OLD_NAME, carrying_project, git_project, status
from ..fixtures.pausing import paused, start, wait_for_text
from ..fixtures.project import Project
from ..fixtures.queue import make_two_patches
from ..fixtures.retire import carry_new
from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml


@pytest.fixture
def carried_with_patches(tmp_path, carrying_releases, monkeypatch):
    with carrying_project(tmp_path, carrying_releases, monkeypatch) as (project, _):
        carry_new(project)
        for name in ("0001-cache-tweak.patch", "0002-add-mul.patch"):  # the top-level queue holds patches
            (project.root / "patches" / name).write_text(f"{name}\n")
        (project.root / "series").write_text("0001-cache-tweak.patch\n0002-add-mul.patch\n")
        git_project(project.root)
        yield project


def argv(project: Project, *args: str) -> list[str]:
    return ["--root", str(project.root), "--cache", str(project.cache), "-q", *args]


@pytest.mark.parametrize(
    "spelling",
    [
        '{ series = "./series", patches = "patches/" }',
        '{ series = "series", patches = "./patches" }',
        '{ series = "./series", patches = "patches/." }',
        '{ series = "patches/../series", patches = "patches" }',
    ],
)
def test_the_top_level_queue_spelt_another_way_is_refused(carried_with_patches, spelling):
    bases = carried_with_patches.root / "bases.toml"
    text = bases.read_text().replace(
        'queue = { series = "series", patches = "patches" }', f"queue = {spelling}"
    )
    bases.write_text(text)
    git.core.run(
        carried_with_patches.root,
        "commit",
        "-qam",
        "respelt",
        env={"GIT_AUTHOR_NAME": "D", "GIT_AUTHOR_EMAIL": "d@x"},
    )
    res = carried_with_patches.cli("retire", OLD_NAME, "--json", expect=None)
    if "patches/.." in spelling:  # the bases file itself refuses a queue path leaving its directory
        assert res.exit_code == 1 and "must be a path inside the project" in res.stderr
    else:
        assert res.exit_code == 5, res.output
        assert f"{OLD_NAME}'s queue is the top-level one" in json.loads(res.stdout)["error"]
    assert status(carried_with_patches.root) == []  # series, the patches, the lock and the pin: all there
    assert (carried_with_patches.root / "patches" / "0002-add-mul.patch").exists()
    assert not (carried_with_patches.root / "build" / "dropped").exists()


def test_a_name_that_is_no_base_is_a_usage_error_whatever_is_at_its_queue_path(carried_with_patches):
    for name in ("0001-cache-tweak.patch", "9.9.9", "v8.0.0"):
        res = carried_with_patches.cli("retire", name, "--json", expect=2)
        assert json.loads(res.stdout)["error"].startswith(f"unknown base {name!r}")
    (carried_with_patches.root / "patches" / "v8.0.0").mkdir()  # a queue directory with no pin: not a base
    (carried_with_patches.root / "patches" / "v8.0.0" / "series").write_text("x.patch\n")
    (carried_with_patches.root / "ci" / "lock-cpu-v8.0.0.txt").write_text("vllm==8.0.0\n")
    err = carried_with_patches.cli("retire", "v8.0.0", expect=2).stderr
    assert "unknown base 'v8.0.0'" in err and "patches/v8.0.0" in err
    assert (carried_with_patches.root / "patches" / "v8.0.0" / "series").exists()
    assert (carried_with_patches.root / "ci" / "lock-cpu-v8.0.0.txt").exists()
    assert (
        carried_with_patches.root / "patches" / "0001-cache-tweak.patch"
    ).read_text() == "0001-cache-tweak.patch\n"
    assert not (carried_with_patches.root / "build" / "dropped").exists()


def test_the_shared_cache_is_left_for_the_other_checkouts(carried_with_patches, tmp_path, carrying_releases):
    cache = carried_with_patches.cache
    entry = cache / "bases" / f"{NEW_NAME}-sdist"
    baseline = cache / "seamtest" / f"upstream-stock-{NEW_NAME}-0123.json"
    baseline.parent.mkdir(parents=True)
    baseline.write_text("{}")
    before = sorted(p.relative_to(cache) for p in entry.rglob("*"))
    # another checkout on the machine carrying the same base, with the same cache
    other = Project(tmp_path / "other", cache)
    shutil.copytree(carried_with_patches.root, other.root, ignore=shutil.ignore_patterns("build"))
    out = json.loads(carried_with_patches.cli("retire", NEW_NAME, "--json").output)
    assert sorted(p.relative_to(cache) for p in entry.rglob("*")) == before and baseline.exists()
    assert any(line.startswith(f"cache: bases/{NEW_NAME}-sdist") and "shared" in line for line in out["left"])
    assert not [r for r in out["removed"] if r.startswith("cache:")]
    apply = other.cli("apply", "--base", NEW_NAME, "--json")  # no rebuild: the pristine repo is there
    assert json.loads(apply.output)["base"] == NEW_NAME


def test_a_recovered_retire_says_to_commit_the_lock_it_deleted_before(carried_with_patches, crash_at):
    crash_at("tkvseam.bases.file.remove_base", *argv(carried_with_patches, "retire", NEW_NAME))
    assert not (
        carried_with_patches.root / "ci" / f"lock-cpu-{NEW_NAME}.txt"
    ).exists()  # gone in the killed run
    text = carried_with_patches.cli("retire", NEW_NAME).output
    command = text.split("commit it: ", 1)[1].strip()
    assert f"ci/lock-cpu-{NEW_NAME}.txt" in command
    subprocess.run(shlex.split(command), cwd=carried_with_patches.root, check=True)
    assert sorted(status(carried_with_patches.root)) == sorted(
        [
            "M  bases.toml",
            f"D  ci/lock-cpu-{NEW_NAME}.txt",
            f"D  patches/{NEW_NAME}/PORT.md",
            f"D  patches/{NEW_NAME}/series",
        ]
    )


# --------------------------------------------------------------------------- a port racing a retire


@pytest.fixture
def fromproject(tmp_path, releases, index):
    """v9.9.9 carried with a queue of its own (patches/v9.9.9: 0002 stops a port onto v9.10.0),
    v9.10.0 pinned, not carried yet."""
    root = tmp_path / "proj"
    (root / "patches").mkdir(parents=True)
    (root / "series").write_text("")
    (root / "bases.toml").write_text(bases_toml(releases[NAME]))
    project = Project(root, tmp_path / "cache")
    make_two_patches(project)
    queue = root / "patches" / NAME
    queue.mkdir()
    for p in [root / "series", *sorted((root / "patches").glob("*.patch"))]:
        p.rename(queue / p.name)
    (root / "series").write_text("")
    shutil.rmtree(project.tree)
    (root / "bases.toml").write_text(bases_toml(releases[NAME], queue=f"patches/{NAME}"))
    project.cli("pin", NEXT_VERSION)
    return project


def test_a_port_from_the_base_started_while_retire_runs_is_met_and_refused(fromproject, tmp_path):
    project = fromproject
    port = ["port", "start", "--to", f"v{NEXT_VERSION}", "--base", NAME]
    with paused(tmp_path / "pause", "tkvseam.port.session.base_repo", *argv(project, *port)) as porting:
        porting.wait_reached()  # the port holds its tree's lock and has read v9.9.9's queue
        err = tmp_path / "retire.err"
        retiring = start(*argv(project, "retire", NAME), stderr_to=err)
        wait_for_text(err, "waiting for another tkv-seam run on", retiring)
        ported = porting.release()
    out, _ = retiring.communicate(timeout=300)
    assert ported.returncode == 12, ported.stderr  # stopped at 0002: a port in progress
    assert retiring.returncode == 5, err.read_text()
    assert f"build/port-v{NEXT_VERSION}: a port from {NAME}'s queue is in progress" in err.read_text()
    assert NAME in load_bases(project.root / "bases.toml")
    assert (project.root / "patches" / NAME / "series").exists()


# --------------------------------------------------------------------------- attacked by hand


def _respell_new_queue(project: Project, series: str, patches: str) -> None:
    bases = project.root / "bases.toml"
    text = bases.read_text()
    old = f'queue = {{ series = "patches/{NEW_NAME}/series", patches = "patches/{NEW_NAME}" }}'
    if old not in text:  # pin wrote no queue key: the default layout
        text = text.replace(f'["{NEW_NAME}"]\n', f'["{NEW_NAME}"]\n{old}\n', 1)
    bases.write_text(text.replace(old, f'queue = {{ series = "{series}", patches = "{patches}" }}'))


def test_a_series_outside_its_queue_directory_is_kept_too(carried_with_patches):
    queue = carried_with_patches.root / "patches" / NEW_NAME
    (carried_with_patches.root / "ci" / "series-new").write_text("0001-x.patch\n")
    (queue / "0001-x.patch").write_text("x\n")
    _respell_new_queue(carried_with_patches, "ci/series-new", f"patches/{NEW_NAME}")
    out = json.loads(carried_with_patches.cli("retire", NEW_NAME, "--json").output)
    assert not (carried_with_patches.root / "ci" / "series-new").exists()
    kept = carried_with_patches.root / out["kept"]
    assert (kept / "ci" / "series-new").read_text() == "0001-x.patch\n"
    assert (kept / "patches" / NEW_NAME / "0001-x.patch").read_text() == "x\n"


def test_a_series_listing_itself_is_retired_once(carried_with_patches):
    (carried_with_patches.root / "patches" / NEW_NAME / "series").write_text("series\nPORT.md\n")
    out = json.loads(carried_with_patches.cli("retire", NEW_NAME, "--json").output)
    assert not (carried_with_patches.root / "patches" / NEW_NAME).exists()
    assert NEW_NAME not in load_bases(carried_with_patches.root / "bases.toml") and out["left"][
        -1
    ].startswith("cache: ")


def test_the_commit_hint_of_a_queue_path_with_a_space_runs_as_written(carried_with_patches):
    old, new = (
        carried_with_patches.root / "patches" / NEW_NAME,
        carried_with_patches.root / "patches" / "my queue",
    )
    old.rename(new)
    _respell_new_queue(carried_with_patches, "patches/my queue/series", "patches/my queue")
    git.core.run(carried_with_patches.root, "add", "-A", ".")
    git.core.run(
        carried_with_patches.root,
        "commit",
        "-qm",
        "moved",
        env={"GIT_AUTHOR_NAME": "D", "GIT_AUTHOR_EMAIL": "d@x"},
    )
    text = carried_with_patches.cli("retire", NEW_NAME).output
    command = text.split("commit it: ", 1)[1].strip()
    subprocess.run(shlex.split(command), cwd=carried_with_patches.root, check=True)
    assert not [s for s in status(carried_with_patches.root) if s[1] != " "], status(
        carried_with_patches.root
    )  # all staged


def test_a_bases_file_outside_the_project_is_kept_and_edited(carried_with_patches, tmp_path):
    outside = tmp_path / "elsewhere" / "bases.toml"
    outside.parent.mkdir()
    shutil.copy(carried_with_patches.root / "bases.toml", outside)
    out = json.loads(carried_with_patches.cli("--bases", str(outside), "retire", NEW_NAME, "--json").output)
    assert NEW_NAME not in load_bases(outside, carried_with_patches.root)
    assert (carried_with_patches.root / out["kept"] / "_outside").is_dir()


def test_two_retires_at_once_retire_once(carried_with_patches, tmp_path):
    runs = [start(*argv(carried_with_patches, "retire", NEW_NAME, "--json")) for _ in range(2)]
    results = [(r.wait(timeout=300), r.communicate()) for r in runs]
    assert sorted(code for code, _ in results) == [0, 2], results
    assert len(list((carried_with_patches.root / "build" / "dropped").iterdir())) == 1
    assert NEW_NAME not in load_bases(carried_with_patches.root / "bases.toml")
