"""apply, refresh and overlay staging against trees and paths a user chose badly (each failed before its fix)."""

from __future__ import annotations

import sys

import pytest

from ..fixtures.upstream import NAME, bases_toml
from ..fixtures.portcase import NEXT, NEXT_VERSION


@pytest.mark.parametrize(
    "where",
    [".", "..", "build/vllm-v9.9.9/vllm/stage", "build/vllm-v9.9.9"],
    ids=["project", "parent", "in-tree", "the-tree"],
)
def test_a_stage_over_the_project_or_inside_a_tree_is_refused_and_writes_nothing(project, where, monkeypatch):
    project.apply()
    monkeypatch.chdir(project.root)
    before = sorted(
        str(p.relative_to(project.root)) for p in project.root.rglob("*") if ".git" not in p.parts
    )
    res = project.cli("overlay", "stage", "--base", NAME, "--out", where, expect=None)
    assert res.exit_code in (2, 5), res.output
    assert "mv " not in res.stderr  # never "move your project (or its tree) aside"
    assert f"--out build/overlay-{NAME}" in res.stderr
    after = sorted(str(p.relative_to(project.root)) for p in project.root.rglob("*") if ".git" not in p.parts)
    assert after == before
    project.apply()  # the tree holds nothing new


def test_seamtest_refuses_a_tree_of_another_base(project, releases):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    (project.root / "patches" / NEXT).mkdir()
    (project.root / "patches" / NEXT / "series").write_text("")
    project.cli("apply", "--base", NEXT)
    other = project.root / "build" / f"vllm-{NEXT}"
    err = project.cli(
        "seamtest", "full", "--base", NAME, "--tree", str(other), "--python", sys.executable, expect=5
    ).stderr  # SeamTree.require's one code (it was 1)
    assert f"is a tree of {NEXT}, not {NAME}" in err and f"next: make apply BASE={NAME}" in err


@pytest.mark.parametrize("where", [".", ".."], ids=["project", "parent"])
def test_a_tree_given_as_the_project_is_refused_without_telling_to_move_it(project, where, monkeypatch):
    monkeypatch.chdir(project.root)
    err = project.apply("--tree", where, expect=5).stderr
    assert "holds a project" in err and "mv " not in err, err


def test_a_tree_inside_a_tree_tkv_seam_made_is_refused(project):
    project.apply()
    inner = project.tree / "vllm" / "nested"
    err = project.apply("--tree", str(inner), expect=5).stderr
    assert f"is inside {project.tree}, a tree tkv-seam made" in err
    assert not inner.exists()
    project.apply()  # the outer tree holds nothing new
