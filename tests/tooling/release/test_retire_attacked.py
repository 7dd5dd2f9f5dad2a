"""retire attacked: killed between the queue's files, and work directories that are symlinks.

- A run killed after the series went but before the patches it lists did left those patches
  behind for good: the next run, reading no series, took them for files that are "not part
  of the queue". The series goes last, so a run killed anywhere is finished by the next one.
- ``build/seamtest`` (or ``build/bench``) a symlink to a directory outside the project: retire
  deleted ``<there>/<base>`` and everything in it, kept nowhere. A work directory reached
  through a symlink below ``build/`` is left, and named.
"""

from __future__ import annotations

import json

from tkvseam.bases.pins import load_bases

from ..fixtures.carrying import NEW_NAME, status
from ..fixtures.retire import carry_new, carried_project  # noqa: F401

PATCHES = ("0001-cache-tweak.patch", "0002-add-mul.patch")


def with_patches(project) -> None:
    queue = project.root / "patches" / NEW_NAME
    (queue / "series").write_text("# the v9.10.0 queue\n" + "".join(f"{n}\n" for n in PATCHES))
    for name in PATCHES:
        (queue / name).write_text(f"{name}: a patch\n")


def test_a_retire_killed_between_the_queue_files_is_finished_by_the_next_run(carried_project, crash_at):  # noqa: F811
    with_patches(carried_project)
    queue = carried_project.root / "patches" / NEW_NAME
    argv = [
        "--root",
        str(carried_project.root),
        "--cache",
        str(carried_project.cache),
        "-q",
        "retire",
        NEW_NAME,
    ]
    crash_at("pathlib:Path.unlink", *argv, when=PATCHES[1])  # one patch gone, the other not yet
    assert (queue / PATCHES[1]).exists()
    out = json.loads(carried_project.cli("retire", NEW_NAME, "--json").output)
    assert [left for left in out["left"] if not left.startswith("cache: ")] == [], out["left"]
    assert not queue.exists()  # nothing of the queue is left behind
    assert NEW_NAME not in load_bases(carried_project.root / "bases.toml")


def test_work_directories_reached_through_a_symlink_are_left_and_named(carried_project, tmp_path):  # noqa: F811
    build = carried_project.root / "build"
    outside = tmp_path / "elsewhere"
    for name in ("seamtest", "bench"):
        mine = outside / name / NEW_NAME
        mine.mkdir(parents=True)
        (mine / "precious.txt").write_text("not the tool's\n")
        (build / name).symlink_to(outside / name)
    out = json.loads(carried_project.cli("retire", NEW_NAME, "--json").output)
    for name in ("seamtest", "bench"):
        assert (outside / name / NEW_NAME / "precious.txt").read_text() == "not the tool's\n"
        assert (
            f"build/{name}/{NEW_NAME}: reached through the symlink build/{name}, not removed" in out["left"]
        )
    assert NEW_NAME not in load_bases(carried_project.root / "bases.toml")  # the rest is retired
    assert not (carried_project.root / "patches" / NEW_NAME).exists()
    assert " M bases.toml" in status(carried_project.root)
