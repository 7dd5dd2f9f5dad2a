"""Files git ignores inside a build or port tree are the user's work (issue 26, item 1).

vLLM's own ``.gitignore`` names ``.env``, ``.venv``, ``venv/``, ``.vscode/``, ``*.log``, ``*.so``:
what a developer keeps in a checkout. Every step that drops a tree's files refuses them by name
without ``--force`` and keeps them (in a ref of the tree, or the bundle under ``build/dropped/``)
and lists them with it; a switch in place leaves them where they are. Each test but the guards
failed before: the files were gone, kept nowhere, and no refusal named them.
"""

from __future__ import annotations

import json
import subprocess


from tkvseam import git

from ..fixtures.carrying import NEW_NAME
from ..fixtures.portcase import NEXT, port, port_tree
from ..fixtures.queue import message
from ..fixtures.retire import carried_project  # noqa: F401  (a fixture)
from ..fixtures.upstream import bases_toml, NAME, NEXT_VERSION


IGNORES = ".env\n.venv\n.vscode/\n*.log\n"


def _with_gitignore(project) -> None:
    """The base's queue adds a .gitignore like vLLM's (the tree then ignores what it names)."""
    project.apply()
    project.commit_in_tree(".gitignore", IGNORES, message("ignores", "ignore what a developer keeps"))
    project.refresh()
    project.apply()


def _developer_files(tree) -> None:
    (tree / ".env").write_text("HF_TOKEN=x\n")
    (tree / ".vscode").mkdir()
    (tree / ".vscode" / "settings.json").write_text("{}\n")
    (tree / ".venv" / "bin").mkdir(parents=True)
    (tree / ".venv" / "bin" / "python").write_text("#!/bin/sh\n")
    (tree / "results.log").write_text("42 passed\n")


def _kept(tree, ref: str, path: str) -> str:
    return git.core.out(tree, "show", f"{ref}:{path}") + "\n"


def test_apply_force_lists_and_keeps_ignored_files_with_the_edits(project):
    _with_gitignore(project)
    tree = project.tree
    _developer_files(tree)
    (tree / "README.md").write_text((tree / "README.md").read_text() + "x\n")
    res = project.apply("--force", "--json")
    out, err = json.loads(res.stdout), res.stderr
    for shown in ("M README.md", "!! .env", "!! .vscode/", "!! .venv/", "!! results.log"):
        assert shown in err, (shown, err)
    assert len(out["dropped"]) == 2  # the edits, then the ignored files the rebuild drops
    kept = out["dropped"][-1]
    assert _kept(tree, kept, ".env") == "HF_TOKEN=x\n"
    assert _kept(tree, kept, ".vscode/settings.json") == "{}\n"
    assert _kept(tree, kept, "results.log") == "42 passed\n"
    assert _kept(tree, out["dropped"][0], "README.md").endswith("x\n")
    assert not (tree / ".env").exists()  # the rebuilt tree is the queue's, nothing else


def test_a_tree_rebuilt_for_a_new_source_refuses_ignored_files_then_keeps_them(project, upstream):
    _with_gitignore(project)
    tree = project.tree
    _developer_files(tree)
    head = git.repo.head(tree)
    err = project.apply("--git", str(upstream.root), expect=5).stderr  # no --force: refused
    assert "!! .venv/" in err and "!! results.log" in err and "!! .env" in err and "FORCE=1" in err
    assert git.repo.head(tree) == head and (tree / ".venv" / "bin" / "python").exists()
    res = project.apply("--git", str(upstream.root), "--force", "--json")
    (kept,) = json.loads(res.stdout)["dropped"]
    assert _kept(tree, kept, ".venv/bin/python") == "#!/bin/sh\n" and "!! .venv/" in res.stderr
    assert json.loads(project.apply("--git", str(upstream.root), "--json").output)["source"] == "git"


def test_the_refusal_over_edits_names_the_ignored_files_force_would_drop_too(project):
    """A tree with edits is rebuilt, so ``--force`` drops its ignored files as well (kept, listed):
    the refusal named only the edits, and the ignored files first showed in --force's warning."""
    _with_gitignore(project)
    tree = project.tree
    _developer_files(tree)
    (tree / "notes.txt").write_text("mine\n")
    err = project.apply(expect=5).stderr
    assert "?? notes.txt" in err and "!! .env" in err and "!! .venv/" in err and "FORCE=1" in err
    assert (tree / ".env").exists() and (tree / "notes.txt").exists()
    res = project.apply("--force", "--json")
    assert "!! .env" in res.stderr and all(
        _kept(tree, ref, ".env") for ref in json.loads(res.stdout)["dropped"][-1:]
    )


def test_a_switch_in_place_leaves_ignored_files_where_they_are(project):
    """Guard (it passed before too): same base, clean tree, a patch edited: only changed files move."""
    _with_gitignore(project)
    _developer_files(project.tree)
    p = project.root / "patches" / "0001-ignores.patch"
    p.write_text(p.read_text().replace("+.env\n", "+.env*\n"))
    out = json.loads(project.apply("--json").stdout)
    # the project is no git repository: the tree's commit (the patch as it was) is kept in a ref
    assert [r.startswith("refs/tkv-seam/dropped/") for r in out["dropped"]] == [True]
    assert (project.tree / ".env").read_text() == "HF_TOKEN=x\n"
    assert (project.tree / ".gitignore").read_text() == IGNORES.replace(".env", ".env*")
    assert (project.tree / ".venv" / "bin" / "python").exists() and (project.tree / "results.log").exists()


def test_a_git_repository_among_ignored_files_is_refused_even_with_force(project, upstream):
    """A ref or a bundle would hold only a link to it (its files and history lost)."""
    _with_gitignore(project)
    inner = project.tree / ".venv" / "src" / "mine"
    git.repo.init(inner)
    (inner / "work.py").write_text("precious = 1\n")
    git.index.commit(inner, "mine\n", "Me <me@example.invalid>", paths=["work.py"])
    err = project.apply("--git", str(upstream.root), "--force", expect=5).stderr
    assert ".venv/src/mine/" in err and "mv " in err
    assert (inner / "work.py").read_text() == "precious = 1\n"


# --------------------------------------------------------------------------- port trees


def _ignore_in(tree) -> None:
    (tree / ".git" / "info").mkdir(exist_ok=True)
    (tree / ".git" / "info" / "exclude").write_text(IGNORES)


def test_port_abort_keeps_ignored_files_in_its_bundle(pproject, tmp_path):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    _ignore_in(tree)
    _developer_files(tree)
    out = json.loads(port(pproject, "abort", "--json").output)
    assert not tree.exists()
    clone = tmp_path / "back"
    subprocess.run(["git", "clone", "-q", "--no-checkout", out["bundle"], str(clone)], check=True)
    ref = "refs/tkv-seam/kept/worktree"
    subprocess.run(["git", "-C", str(clone), "fetch", "-q", out["bundle"], f"{ref}:{ref}"], check=True)
    assert _kept(clone, ref, ".env") == "HF_TOKEN=x\n"
    assert _kept(clone, ref, ".venv/bin/python") == "#!/bin/sh\n"
    assert _kept(clone, ref, "results.log") == "42 passed\n"


def _two_bases(project, releases) -> str:
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[f"v{NEXT_VERSION}"], name=NEXT, version=NEXT_VERSION)
    )
    return NEXT


def test_port_start_over_a_finished_port_refuses_its_ignored_files(project, releases):
    to = _two_bases(project, releases)
    project.cli("port", "start", "--base", NAME, "--to", to)  # an empty queue: finished at once
    tree = project.root / "build" / f"port-{to}"
    _ignore_in(tree)
    (tree / "notes.log").write_text("what I found\n")
    err = project.cli("port", "start", "--base", NAME, "--to", to, expect=5).stderr
    assert "!! notes.log" in err and "move them out of the tree" in err
    assert (tree / "notes.log").read_text() == "what I found\n"


# --------------------------------------------------------------------------- retire


def test_retire_refuses_a_tree_holding_ignored_files_and_force_bundles_them(carried_project, tmp_path):  # noqa: F811
    tree = carried_project.root / "build" / f"vllm-{NEW_NAME}"
    _ignore_in(tree)
    (tree / ".env").write_text("HF_TOKEN=x\n")
    err = carried_project.cli("retire", NEW_NAME, expect=5).stderr
    assert "!! .env" in err and "FORCE=1" in err
    assert (tree / ".env").exists() and (carried_project.root / "patches" / NEW_NAME / "series").exists()
    out = json.loads(carried_project.cli("retire", NEW_NAME, "--force", "--json").output)
    (moved,) = out["moved"]
    bundle = carried_project.root / moved.partition(" -> ")[2]
    clone = tmp_path / "back"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(bundle), str(clone)], check=True)
    ref = "refs/tkv-seam/kept/worktree"
    subprocess.run(["git", "-C", str(clone), "fetch", "-q", str(bundle), f"{ref}:{ref}"], check=True)
    assert _kept(clone, ref, ".env") == "HF_TOKEN=x\n"
