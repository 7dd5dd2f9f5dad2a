"""CLI surface: help on every command, refresh refusals, exit codes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tkvseam.cli import main

from .conftest import message
from .test_apply import make_two_patches


@pytest.mark.parametrize("command", sorted(main.commands))
def test_every_command_has_help(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output
    assert main.commands[command].help


def test_refresh_refuses_uncommitted_work(project):
    make_two_patches(project)
    project.apply("--force")
    (project.tree / "vllm/engine/arg_utils.py").write_text("wip\n")
    before = (project.root / "patches/0002-add-mul.patch").read_bytes()
    err = project.refresh(expect=5).stderr
    assert "uncommitted changes" in err and "commit" in err
    assert (project.root / "patches/0002-add-mul.patch").read_bytes() == before


def test_refresh_refuses_to_overwrite_edited_patch_files(project):
    make_two_patches(project)
    p = project.root / "patches/0001-cache-tweak.patch"
    p.write_text(p.read_text().replace("Changes things.", "Edited by hand."))
    err = project.refresh(expect=5).stderr
    assert "patches/ or series changed since the tree was applied" in err
    assert "Edited by hand." in p.read_text()


def test_refresh_exports_a_new_commit_and_renames_nothing_else(project):
    make_two_patches(project)
    project.commit_in_tree("vllm/extra.py", "y = 2\n", message("extra-file", "add extra.py"))
    report = {r.split()[-1]: r.split()[0] for r in project.refresh().output.splitlines()[:-1]}
    assert report == {"patches/0003-extra-file.patch": "added"}
    assert (project.root / "series").read_text().split()[-1] == "0003-extra-file.patch"


def test_refresh_never_deletes_a_patch_without_force_and_lists_it(project):
    make_two_patches(project)
    from tkvseam import git

    git.run(project.tree, "reset", "--hard", "HEAD~1")
    err = project.refresh(expect=5).stderr
    assert "refresh would delete 1 patch(es)" in err and "patches/0002-add-mul.patch" in err
    assert "next:" in err and "FORCE=1" in err
    assert (project.root / "patches/0002-add-mul.patch").exists()
    out = project.refresh("--force").output
    assert "removed   patches/0002-add-mul.patch" in out
    assert not (project.root / "patches/0002-add-mul.patch").exists()
    assert (project.root / "series").read_text() == "0001-cache-tweak.patch\n"


def test_image_without_a_docker_engine_fails_with_one_clear_line(project, monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    res = project.cli("image", "--base", "v9.9.9", expect=7)
    assert res.stderr.strip().splitlines() == [
        f"Error: no Docker engine reachable at unix://{tmp_path}/no-such.sock: start dockerd or set "
        "DOCKER_HOST (README.md, 'Docker image')"
    ]


def test_refresh_keeps_header_fields_a_hand_made_commit_lost(project):
    make_two_patches(project)
    from tkvseam import git

    git.run(project.tree, "commit", "-q", "--amend", "-m", "add-mul: add mul()\n\nAdds mul(), reworded.\n")
    out = project.refresh().output
    assert "updated (kept Depends-on, Reason, Tests, Verdict) patches/0002-add-mul.patch" in out
    text = (project.root / "patches/0002-add-mul.patch").read_text()
    assert (
        "Adds mul(), reworded.\n\nVerdict: still needed\nReason: upstream lacks it\nDepends-on: cache-tweak\n"
        in text
    )
    assert "lint: ok" in project.cli("lint").output
