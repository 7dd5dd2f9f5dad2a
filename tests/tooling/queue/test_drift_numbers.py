"""``drift --diff`` takes a patch's number as its help says (issue 26): 1 and 0001 alike."""

from __future__ import annotations

import json
import shutil

import pytest

from ..fixtures.hintcheck import problems
from ..fixtures.queue import make_one_patch
from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml

NEXT = f"v{NEXT_VERSION}"


def hint_of(res) -> str:
    return res.stderr.split("next: ", 1)[1].strip()


def _two_queues(project, releases) -> None:
    """NAME's queue (one patch) and NEXT's, a copy of it: the patch is on two consecutive bases."""
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    make_one_patch(project)
    shutil.copytree(
        project.root / "patches", project.root / "patches" / NEXT, ignore=shutil.ignore_patterns(NEXT)
    )
    shutil.copy(project.root / "series", project.root / "patches" / NEXT / "series")


@pytest.mark.parametrize("number", ["1", "01", "0001"])
def test_drift_diff_takes_the_patch_number_as_its_help_says(project, releases, number):
    _two_queues(project, releases)
    out = json.loads(project.cli("drift", "--diff", number, "--json").stdout)
    assert out["slug"] == "cache-tweak" and [d["status"] for d in out["diffs"]] == ["same hunks"]


def test_drift_diff_of_a_number_no_queue_has_is_refused(project, releases):
    _two_queues(project, releases)
    res = project.cli("drift", "--diff", "8", expect=2)
    assert "no patch '8' in any queue" in res.stderr and problems(hint_of(res)) == []


def test_drift_diff_takes_ascii_digits_only(project, releases):
    _two_queues(project, releases)
    arabic_indic_one = "\u0661"  # str.isdigit() says yes; no patch is numbered so
    res = project.cli("drift", "--diff", arabic_indic_one, expect=2)
    assert f"no patch '{arabic_indic_one}' in any queue" in res.stderr


def test_drift_prints_its_matrix_once_with_a_legend_of_its_words(project, releases):
    """Issue 37: the matrix was printed twice (rows, then the table) and no word was explained."""
    _two_queues(project, releases)
    out = project.cli("drift").stdout.splitlines()
    assert [line for line in out if line.startswith("| patch |")] == [f"| patch | {NAME} | {NEXT} |"]
    assert "| cache-tweak | carried | same hunks |" in out
    legend = [line.strip().split(":")[0] for line in out if line.startswith("  ")]
    assert legend == ["carried", "same hunks"]  # the words the matrix uses, each explained once
    assert out[-1] == "one patch's change between two bases: make drift DIFF=<slug> BASE=<base>"
