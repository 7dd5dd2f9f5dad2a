"""A bases file that is not there (issue 26): a wrong ``--root`` or ``--bases`` is named, never
answered with ``git checkout -- /nonexistent/bases.toml``; one deleted from a checkout is got
back by the hint as written."""

from __future__ import annotations

import json
import subprocess

from click.testing import CliRunner

from tkvseam import git
from tkvseam.cli.main import main

from ..fixtures.hintcheck import problems


def hint_of(res) -> str:
    return res.stderr.split("next: ", 1)[1].strip()


def test_a_wrong_root_is_named_and_never_answered_with_git_checkout(tmp_path):
    empty = tmp_path / "not-the-project"
    for root in (empty, tmp_path / "nonexistent"):
        if root == empty:
            root.mkdir()
        res = CliRunner().invoke(main, ["--root", str(root), "carried", "--json"])
        assert res.exit_code == 1
        hint = json.loads(res.stdout)["hint"]
        assert "git checkout" not in hint and "--root" in hint and str(root) in hint
        assert problems(hint) == []
    res = CliRunner().invoke(main, ["--root", str(empty), "--bases", str(tmp_path / "b.toml"), "carried"])
    assert "--bases" in hint_of(res) and "git checkout" not in hint_of(res)


def test_a_deleted_bases_file_of_a_checkout_is_got_back_by_the_hint(project):
    git.repo.init(project.root)
    git.index.commit(project.root, "project\n", "A <a@example.invalid>", paths=["bases.toml", "series"])
    before = (project.root / "bases.toml").read_text()
    (project.root / "bases.toml").unlink()
    res = CliRunner().invoke(main, ["--root", str(project.root), "carried"])
    hint = hint_of(res)
    assert hint == f"git -C {project.root} checkout -- bases.toml"
    subprocess.run(hint, shell=True, check=True, cwd=project.root)
    assert (project.root / "bases.toml").read_text() == before


def test_a_system_file_given_as_bases_is_never_one_to_fix(project, tmp_path):
    """``--bases /etc/passwd`` said "read /etc/passwd and fix it" (issue 34)."""
    outside = tmp_path / "elsewhere.toml"  # not git-tracked, outside the project: the same case
    outside.write_text("not toml at all\n")
    for given in ("/etc/passwd", str(outside)):
        res = CliRunner().invoke(main, ["--root", str(project.root), "--bases", given, "carried"])
        assert res.exit_code == 1, res.output
        hint = hint_of(res)
        assert "fix it" not in hint and "give --bases the project's bases file" in hint, hint
        assert str(project.root / "bases.toml") in hint and problems(hint) == []
    (project.root / "bases.toml").write_text("not toml either\n")  # the project's own: fix it
    res = CliRunner().invoke(main, ["--root", str(project.root), "carried"])
    assert "fix it" in hint_of(res)
