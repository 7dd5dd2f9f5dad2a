"""A patch that conflicts in two files keeps both conflicts, after an earlier stop too.

The port applies a patch file by file and parks each conflict (the file reset to the tree's
version) while the next file is merged. Once a stop has linked the port tree's ``.git/rr-cache``
to the recorded resolutions, git enables rerere by itself in that tree, and ``git apply --3way``
runs it after every conflict: the parked file, reset, was recorded as the conflict's resolution
and then "replayed", leaving the patch's side of it out (vLLM 0.34.0's 0005: its 1552 lines of
tests and its engine-core hook, reported as replayed). Here 0001 stops first, then 0002 meets
upstream's changes in two files: both stay conflicts, nothing is replayed.
"""

from __future__ import annotations

import json

import pytest

from tkvseam import git

from ..fixtures.index import serve_index
from ..fixtures.portcase import NEXT, NEXT_VERSION, SEAM_TESTS, case_message, commit_files, port, port_tree
from ..fixtures.project import Project
from ..fixtures.upstream import NAME, bases_toml

ARG_UTILS = "vllm/engine/arg_utils.py"
REGISTRY = "vllm/registry.py"
TESTS = "tests/test_seam.py"


@pytest.fixture
def two_conflicts_project(tmp_path, port_releases, monkeypatch):
    """The port case's releases, with a queue of two patches: 0001 appends to the test file
    (upstream appended there too: a test-only conflict), 0002 edits sub() and appends to the
    registry (upstream rewrote the one and appended to the other: two conflicting files)."""
    root = tmp_path / "proj"
    (root / "patches").mkdir(parents=True)
    (root / "series").write_text("")
    (root / "bases.toml").write_text(
        bases_toml(port_releases[NAME])
        + bases_toml(port_releases[NEXT], name=NEXT, version=NEXT_VERSION, queue=f"patches/{NEXT}")
    )
    with serve_index(port_releases, monkeypatch):
        project = Project(root, tmp_path / "cache")
        project.apply()
        t = project.tree
        commit_files(
            project,
            {TESTS: SEAM_TESTS + "\n\ndef test_mul():\n    assert 2 * 3 == 6\n"},
            case_message("seam-tests", "seam tests"),
        )
        commit_files(
            project,
            {
                ARG_UTILS: (t / ARG_UTILS)
                .read_text()
                .replace("    return a - b\n", "    return a - b  # checked\n"),
                REGISTRY: (t / REGISTRY).read_text() + "\n\ndef names():\n    return list(REG)\n",
            },
            case_message("two-files", "check sub(), list names"),
        )
        project.refresh()
        yield project


def test_a_later_patch_conflicting_in_two_files_stops_with_both_conflicts(two_conflicts_project):
    project = two_conflicts_project
    tree = port_tree(project)
    assert "stopped at 0001-seam-tests.patch" in port(project, "start", expect=12).stderr
    (tree / TESTS).write_text(
        SEAM_TESTS + "\n\ndef test_upstream():\n    assert 1\n\n\ndef test_mul():\n    assert 2 * 3 == 6\n"
    )
    git.core.run(tree, "add", TESTS)

    stop = port(project, "continue", expect=12).stderr  # 0001 through; 0002 conflicts in both files
    assert "stopped at 0002-two-files.patch: conflict" in stop
    assert "replay" not in stop
    status = json.loads(port(project, "status", "--json").stdout)
    assert sorted(status["unmerged"]) == [ARG_UTILS, REGISTRY]
    assert "return a - b  # checked" in (tree / ARG_UTILS).read_text()  # the patch's side, in markers
    assert "def names():" in (tree / REGISTRY).read_text()
