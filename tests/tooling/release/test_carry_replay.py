"""A resolution given once comes back where the same conflict does (issue 33; git's rerere).

The gate case (``fixtures/gatecase.py``): 0002 conflicts on v9.10.0 and is resolved by hand
(``product()``, its Verdict changed). A carry aborted and started again replays that resolution
and its message, says so, and goes on to the next stop; turned off, it stops at 0002 again.
"""

from __future__ import annotations

import pytest

from tkvseam import git

from ..fixtures.carry import carry, releases, wheels  # noqa: F401  (fixtures)
from ..fixtures.carrying import NEW_NAME, carrying_project, git_project
from ..fixtures.gatecase import ARG_UTILS, make_gate_queue, resolve_as_product


@pytest.fixture
def gproject(tmp_path, releases, monkeypatch):  # noqa: F811
    with carrying_project(tmp_path, releases, monkeypatch) as (project, _):
        make_gate_queue(project)
        git_project(project.root)
        yield project


def _resolved_once_then_aborted(project, wheels) -> None:  # noqa: F811
    tree = project.root / "build" / f"port-{NEW_NAME}"
    assert "stopped at 0002-add-mul.patch: conflict" in carry(project, wheels, expect=12).stderr
    resolve_as_product(tree)
    stop = carry(project, wheels, "--verdict", "re-expressed", expect=12).stderr
    assert "stopped at 0003-use-mul.patch: breaks" in stop
    project.cli("port", "abort", "--to", NEW_NAME)
    assert not tree.exists()


def test_an_aborted_carry_started_again_replays_the_resolution_it_was_given(gproject, wheels):  # noqa: F811
    _resolved_once_then_aborted(gproject, wheels)
    stop = carry(gproject, wheels, expect=12).stderr  # a new port: 0002 conflicts again, and is replayed
    assert "stopped at 0003-use-mul.patch: breaks" in stop
    assert "before it, this run took in by itself (re-read them):" in stop
    assert (
        f"0002-add-mul.patch: replay: {ARG_UTILS}: the resolution recorded for this conflict, replayed"
        in stop
    )
    tree = gproject.root / "build" / f"port-{NEW_NAME}"
    commit = git.commit_info(tree, "HEAD")
    assert commit.subject.startswith("add-mul:") and "Verdict: re-expressed" in commit.message
    assert "def product(a, b):" in git.show(tree, "HEAD", ARG_UTILS).decode()


def test_replay_turned_off_stops_at_the_conflict_again(gproject, wheels):  # noqa: F811
    _resolved_once_then_aborted(gproject, wheels)
    stop = carry(gproject, wheels, "--no-replay", expect=12).stderr
    assert "stopped at 0002-add-mul.patch: conflict" in stop and "replay: " not in stop
