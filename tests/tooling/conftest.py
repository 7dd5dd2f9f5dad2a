"""Fixtures for the tooling tests: a small synthetic upstream, served as an sdist and as git.

Everything is made inside the tests (``fixtures/``): a tiny vllm-like source tree, its tarball
(the "sdist"), a PEP 691 Simple API on 127.0.0.1 serving it, a git repository
with the release tag, and a bases.toml pinning both.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tkvseam import hints

from .fixtures.carrying import NEW, carrying_project, make_releases
from .fixtures.index import serve_index
from .fixtures.project import Project
from .fixtures.upstream import (
    FILES,
    NAME,
    NEXT_FILES,
    NEXT_VERSION,
    VERSION,
    Upstream,
    bases_toml,
    make_release,
)


@pytest.fixture(autouse=True)
def _no_base_from_the_caller(monkeypatch):
    """The tool defaults ``--base`` to ``$BASE`` (make passes it); ``make test BASE=…`` exports
    it to this process too. The tooling tests' bases are synthetic: a test that wants ``$BASE``
    sets it itself."""
    monkeypatch.delenv("BASE", raising=False)
    # FRESH=1 (make test FRESH=1, .ci/run) is for the lanes running these tests, not for the
    # synthetic lanes the tests run: a test that wants every step run sets it itself
    monkeypatch.delenv("FRESH", raising=False)
    # the make command the tool's hints repeat (`make test` runs this suite): a test that wants
    # the tool to see itself run from make sets them itself
    monkeypatch.delenv("TKV_SEAM_MAKE_GOAL", raising=False)
    monkeypatch.delenv("MAKEFLAGS", raising=False)


@pytest.fixture(scope="session")
def releases(tmp_path_factory) -> dict[str, Upstream]:
    """Two synthetic releases in one git repo: v9.9.9 and v9.10.0, each with its sdist."""
    top = tmp_path_factory.mktemp("upstream")
    return {
        NAME: make_release(top, VERSION, FILES),
        f"v{NEXT_VERSION}": make_release(top, NEXT_VERSION, NEXT_FILES),
    }


@pytest.fixture(scope="module")
def carrying_releases(tmp_path_factory) -> dict[str, Upstream]:
    """The carrying case's releases (``fixtures/carrying``): v9.9.9 carried, v9.10.0 to carry over
    to (upstream rewrote sub()); made once a module."""
    return make_releases(tmp_path_factory.mktemp("upstream"))


@pytest.fixture
def pinned_project(tmp_path, carrying_releases, monkeypatch):
    """The carrying project (v9.9.9 carried) with v9.10.0 pinned, nothing else of it made."""
    with carrying_project(tmp_path, carrying_releases, monkeypatch) as (project, _):
        project.cli("pin", NEW)
        yield project


@pytest.fixture(scope="session")
def upstream(releases) -> Upstream:
    return releases[NAME]


@pytest.fixture
def index(releases, monkeypatch):
    """The synthetic sdists served by a local PEP 691 index."""
    with serve_index(releases, monkeypatch) as handler:
        yield handler


@pytest.fixture
def project(tmp_path, upstream, index) -> Project:
    root = tmp_path / "proj"
    (root / "patches").mkdir(parents=True)
    (root / "series").write_text("")
    (root / "bases.toml").write_text(bases_toml(upstream))
    return Project(root, tmp_path / "cache")


# --------------------------------------------------------------------------- hints printed

LAST = "test_every_hint_printed_is_a_command_that_runs"  # cli/test_hints.py: runs after every other test


@pytest.fixture(scope="session", autouse=True)
def hint_log(tmp_path_factory) -> Path:
    """Every ``next:`` hint the tool prints during the session (its CLI runs, in this process or
    another), one JSON line each (``tkvseam.hints.record``). A log given in ``$TKV_SEAM_HINT_LOG``
    is the one: ``run_all.py`` gives its workers and the check that runs after them one log."""
    given = os.environ.get(hints.LOG_ENV)
    path = Path(given) if given else tmp_path_factory.mktemp("hints") / "hints.jsonl"
    path.touch()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(hints.LOG_ENV, str(path))
        yield path


def pytest_collection_modifyitems(items):
    """The check of every hint printed goes last, when the other tests have printed theirs."""
    items.sort(key=lambda item: item.name == LAST)
