"""What the overlay tells a venv it cannot install into (issue 26): a venv without pip is not told
to run pip (uv's reinstall, uv pip show), one with pip is; a venv holding another carried
release is told that base's overlay."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ..fixtures.hintcheck import problems
from ..fixtures.overlay import make_venv
from ..fixtures.queue import make_one_patch
from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml

NEXT = f"v{NEXT_VERSION}"


def hint_of(res) -> str:
    return res.stderr.split("next: ", 1)[1].strip()


@pytest.fixture
def user_venv(project, tmp_path):
    """A venv of the user's (no pip) holding the base's vllm/; ``version``: it says it is that release."""
    make_one_patch(project)
    base_commit = json.loads((project.tree / ".git" / "tkv-seam.json").read_text())["base_commit"]

    def make(version: str | None = None) -> Path:
        venv = make_venv(tmp_path / "myvenv", project.tree, base_commit)
        if version:
            version_file = venv.site / "vllm" / "_version.py"
            version_file.write_text(version_file.read_text().replace("9.9.9", version))
            (venv.site / "vllm/config/cache.py").write_text(f"# vLLM {version}'s cache.py\n")
        return venv.python

    return make


def test_a_venv_without_pip_is_not_told_to_run_pip(project, user_venv):
    python = user_venv()
    site = next((python.parent.parent / "lib").glob("python*/site-packages"))
    (site / "vllm/config/cache.py").write_text("edited by hand\n")
    hint = json.loads(
        project.cli("overlay", "install", "--base", NAME, "--python", str(python), "--json", expect=4).stdout
    )["hint"]
    assert f".venv/bin/uv pip install --python {python} --reinstall --no-deps vllm=={NAME[1:]}" in hint
    assert "-m pip" not in hint
    (python.parent / "pip").write_text("#!/bin/sh\n")  # a venv with its own pip: pip's own words
    hint = json.loads(
        project.cli("overlay", "install", "--base", NAME, "--python", str(python), "--json", expect=4).stdout
    )["hint"]
    assert f"{python} -m pip install --force-reinstall --no-deps vllm=={NAME[1:]}" in hint


def test_a_venv_holding_another_carried_release_is_answered_with_that_base(project, releases, user_venv):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    (project.root / "patches" / NEXT).mkdir()
    (project.root / "patches" / NEXT / "series").write_text("")  # NEXT is carried (its queue exists)
    python = user_venv(NEXT_VERSION)
    for verb in ("install", "restore"):
        res = project.cli("overlay", verb, "--base", NAME, "--python", str(python), "--json", expect=4)
        hint = json.loads(res.stdout)["hint"]
        assert f"the venv holds vLLM {NEXT_VERSION}" in hint
        assert (
            f"make apply BASE={NEXT} && .venv/bin/tkv-seam overlay {verb} --base {NEXT} --python {python}"
            in hint
        )
        assert "pip" not in hint and problems(hint) == []


def test_a_venv_without_vllm_is_told_how_to_look_with_uv(project, user_venv):
    python = user_venv()
    site = next((python.parent.parent / "lib").glob("python*/site-packages"))
    shutil.rmtree(site / "vllm")
    res = project.cli("overlay", "install", "--base", NAME, "--python", str(python), expect=1)
    assert f".venv/bin/uv pip show --python {python} vllm" in hint_of(res)
