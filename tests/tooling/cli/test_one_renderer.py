"""One renderer (issue 24): a result renders itself as lines and as one JSON object (statuses the
values of enums, evidence records, never a sentence to parse back); ``cli.options.emit`` prints it."""

from __future__ import annotations

import json
from pathlib import Path

from tkvseam import git
from tkvseam.answer import Answer, plain
from tkvseam.queue.writer import Exported, ExportStatus

from ..fixtures.queue import make_one_patch
from ..fixtures.upstream import NAME


def test_refresh_json_is_one_object_and_kept_fields_are_a_list_not_part_of_the_status(project):
    make_one_patch(project)
    git.core.run(project.tree, "commit", "-q", "--amend", "-m", "cache-tweak: change things\n\nReworded.\n")
    res = project.refresh("--json")
    out = json.loads(res.stdout)  # an object, not a bare list
    assert out["base"] == NAME and out["series"] == "series" and out["patches"] == "patches"
    assert out["exported"] == [
        {
            "name": "0001-cache-tweak.patch",
            "status": "updated",
            "kept": ["Depends-on", "Reason", "Tests", "Upstream", "Verdict"],
        }
    ]
    assert out["changed"] == 1
    assert project.refresh().stdout == "1 unchanged, 0 changed\n"


def test_the_text_of_an_export_reads_as_before():
    e = Exported("0002-add-mul.patch", ExportStatus.UPDATED, ["Reason", "Verdict"])
    assert e.line("patches") == "updated (kept Reason, Verdict) patches/0002-add-mul.patch"
    assert (
        Exported("0001-x.patch", ExportStatus.ADDED).line("patches/v1") == "added     patches/v1/0001-x.patch"
    )
    assert plain(e) == {"name": "0002-add-mul.patch", "status": "updated", "kept": ["Reason", "Verdict"]}


def test_overlay_files_json_is_one_object(project):
    make_one_patch(project)
    out = json.loads(project.cli("overlay", "files", "--base", NAME, "--json").stdout)
    assert out == {"ok": True, "base": NAME, "files": ["vllm/config/cache.py"]}
    assert project.cli("overlay", "files", "--base", NAME).stdout == "vllm/config/cache.py\n"


def test_an_answer_is_plain_json():
    from dataclasses import dataclass
    from enum import StrEnum

    class Colour(StrEnum):
        RED = "red"

    @dataclass
    class Thing(Answer):
        colour: Colour
        where: Path
        names: tuple[str, ...]

    thing = Thing(Colour.RED, Path("/x"), ("a", "b"))
    assert thing.to_json() == {"colour": "red", "where": "/x", "names": ["a", "b"]}
    assert type(thing.to_json()["colour"]) is str
    assert thing.exit_code() == 0 and thing.notes() == []


def test_lint_answers_its_problems_as_found_and_ends_with_6(project):
    make_one_patch(project)
    (project.root / "patches/0001-cache-tweak.patch").write_text("not a patch\n")
    res = project.cli("lint", "--json", expect=6)
    out = json.loads(res.stdout)
    assert out["ok"] is False and out["problems"][0]["patch"] == "0001-cache-tweak.patch"
    assert (
        out["problems"][0]["message"] == "no 'diff --git' section (empty or not a patch)"
    )  # not cut from a sentence
    text = project.cli("lint", expect=6)
    assert (
        "0001-cache-tweak.patch: no 'diff --git' section" in text.stderr
        and "lint: 1 problem(s)" in text.stdout
    )
