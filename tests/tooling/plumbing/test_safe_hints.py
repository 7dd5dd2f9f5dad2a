"""Hints that are safe to run as written (issue 26, item 6).

Refusals suggested ``mv /etc /etc.mine``, ``mv $HOME …``, ``mv /usr …``, ``mv /tmp …`` or moving
the directory that holds the project, then running the command again on that path. For a
directory that is not the tool's the hint now says "choose another --tree/--out" only, and no
command in it names that path again; nothing is written beside it either (no lock file). A path
of the project's build/ (the tool's own place) may still be moved aside. These failed before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ..fixtures.portcase import NEXT
from ..fixtures.upstream import NAME


SYSTEM = {"etc": Path("/etc"), "usr": Path("/usr"), "tmp": Path("/tmp"), "home": Path.home()}


def _commands(project, where: Path) -> list[tuple[str, ...]]:
    return [
        ("apply", "--base", NAME, "--tree", str(where)),
        ("refresh", "--base", NAME, "--tree", str(where)),
        ("overlay", "stage", "--base", NAME, "--out", str(where)),
        ("port", "start", "--base", NAME, "--to", NEXT, "--tree", str(where)),
        ("port", "status", "--to", NEXT, "--tree", str(where)),
        ("port", "continue", "--to", NEXT, "--tree", str(where)),
    ]


def _never_moved_nor_reused(hint: str, where: Path) -> None:
    assert "mv " not in hint, hint
    for option in ("--tree", "--out", "PORT_TREE="):
        assert f"{option} {where}" not in hint and f"{option}{where}" not in hint, hint


@pytest.mark.parametrize("name", sorted(SYSTEM))
def test_a_system_directory_is_never_to_be_moved_nor_written_beside(pproject, name):
    where = SYSTEM[name]
    before = sorted(os.listdir(where.parent))
    for argv in _commands(pproject, where):
        res = pproject.cli(*argv, "--json", expect=None)
        assert res.exit_code in (1, 5), (argv, res.output)
        out = json.loads(res.stdout)
        _never_moved_nor_reused(out["hint"], where)
        assert "choose another" in out["hint"] or "the project" in out["error"], (argv, out)
    assert sorted(os.listdir(where.parent)) == before  # no lock file (nor anything) beside it


def test_the_directory_holding_the_project_is_never_to_be_moved(pproject, monkeypatch):
    monkeypatch.chdir(pproject.root)
    for where in (pproject.root, pproject.root.parent, pproject.root / "build"):
        for argv in _commands(pproject, where):
            res = pproject.cli(*argv, "--json", expect=None)
            assert res.exit_code in (1, 5), (argv, res.output)
            _never_moved_nor_reused(json.loads(res.stdout)["hint"], where)


def test_a_directory_of_the_projects_build_may_still_be_moved_aside(pproject):
    mine = pproject.root / "build" / f"port-{NEXT}"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    err = pproject.cli("port", "start", "--base", NAME, "--to", NEXT, expect=5).stderr
    assert f"mv {mine} {mine}.mine" in err
    assert (mine / "notes.txt").read_text() == "mine\n"
