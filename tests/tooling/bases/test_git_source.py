"""A local ``VLLM_GIT`` is the project root's (issue 34): resolved before use and before its mirror
is named.

A relative ``VLLM_GIT=../vllm`` worked once (the clone ran from the project root), then every
fetch ran inside the cache's mirror, where ``../vllm`` is another directory, and failed; and two
projects' ``../vllm`` shared one mirror, named by the text. Real git, the synthetic upstream.
"""

from __future__ import annotations

import shutil

from tkvseam.bases.repo import git_source

from ..fixtures.project import Project
from ..fixtures.upstream import NAME, bases_toml


def test_a_relative_vllm_git_is_the_project_roots_on_every_run(project, upstream, monkeypatch, tmp_path):
    shutil.copytree(upstream.root, project.root.parent / "vllm")
    monkeypatch.setenv("VLLM_GIT", "../vllm")
    monkeypatch.chdir(project.root)  # as make runs it
    for _ in range(2):  # the clone, then a fetch into the mirror
        project.cli("fetch", "--base", NAME)
    monkeypatch.chdir(tmp_path)  # and from anywhere else
    project.cli("fetch", "--base", NAME)
    project.apply()
    assert (project.tree / "vllm").is_dir()


def test_two_projects_relative_vllm_git_are_two_mirrors(upstream, index, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("VLLM_GIT", "../vllm")
    for name in ("a", "b"):
        project = Project(tmp_path / name / "proj", cache)
        (project.root / "patches").mkdir(parents=True)
        (project.root / "series").write_text("")
        (project.root / "bases.toml").write_text(bases_toml(upstream))
        shutil.copytree(upstream.root, project.root.parent / "vllm")
        monkeypatch.chdir(project.root)
        project.cli("fetch", "--base", NAME)
    mirrors = sorted(p.name for p in (cache / "git").glob("*.git"))
    assert len(mirrors) == 2 and "_a_vllm" in mirrors[0] and "_b_vllm" in mirrors[1], mirrors


def test_what_git_takes_for_a_url_stays_as_it_is(tmp_path):
    for url in ("https://github.com/vllm-project/vllm.git", "git@github.com:vllm-project/vllm", "host:repo"):
        assert git_source(tmp_path, url) == url
    assert git_source(tmp_path, "./x:y") == str(tmp_path / "x:y")  # a slash before the colon: a path
    assert git_source(tmp_path, "../vllm") == str(tmp_path.parent / "vllm")
    assert git_source(tmp_path, "/srv/git/../vllm") == "/srv/vllm"
