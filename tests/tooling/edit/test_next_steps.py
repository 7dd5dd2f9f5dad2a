"""The next steps of refresh and stylecheck (issue 26): refresh over uncommitted edits names the
README's recipe (a fixup commit, then the autosquash rebase) and it runs as written; stylecheck
without its tree says how to make one, never ``ls -ld build``."""

from __future__ import annotations

import json
import subprocess

import pytest

from tkvseam import git

from ..fixtures.hintcheck import commands, problems
from ..fixtures.queue import make_one_patch, message
from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml

NEXT = f"v{NEXT_VERSION}"


def hint_of(res) -> str:
    return res.stderr.split("next: ", 1)[1].strip()


def test_stylecheck_without_its_tree_says_to_make_the_tree(project):
    """SeamTree.require's refusal (exit 5, as every command needing a tree): the base's own tree is
    made by make apply, then the gate runs; never ``ls -ld build``."""
    res = project.cli("stylecheck", "--base", NAME, "--json", expect=5)
    out = json.loads(res.stdout)
    assert "is not a tree made by tkv-seam" in out["error"] and out["exit_code"] == 5
    assert out["hint"] == f"`make apply BASE={NAME}`, then `make lint-patches BASE={NAME}`"
    assert "ls -ld" not in out["hint"] and problems(out["hint"]) == []
    other = project.root.parent / "elsewhere"
    res = project.cli(
        "stylecheck", "--base", NAME, "--tree", str(other), expect=5
    )  # no tree there yet: make it there
    assert hint_of(res) == (
        f"`.venv/bin/tkv-seam apply --base {NAME} --tree {other}`, then "
        f"`.venv/bin/tkv-seam stylecheck --base {NAME} --tree {other}`"
    )
    other.mkdir()  # a directory of the user's: never the place to apply into
    hint = hint_of(project.cli("stylecheck", "--base", NAME, "--tree", str(other), expect=5))
    assert "--tree" in hint and "choose another --tree" in hint and f"make apply BASE={NAME}" in hint
    assert "mv " not in hint and problems(hint) == []


def test_stylecheck_of_a_tree_of_another_base_names_that_base(project, releases):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    project.apply()
    res = project.cli("stylecheck", "--base", NEXT, "--tree", str(project.tree), expect=5)
    assert f"is a tree of {NAME}, not {NEXT}" in res.stderr
    hint = hint_of(res)
    assert hint.startswith(f"make apply BASE={NEXT}") and f"--base {NAME}, the tree's own" in hint


def test_stylecheck_of_a_half_switched_tree_is_refused_as_every_use_is(project):
    """The gate reads the tree's files: a switch an interrupted apply left half done is refused (exit
    5), by the same rule as refresh and the seam tests (the gate's own copy of the rule took it)."""
    from tkvseam.tree.seamtree import SeamTree

    project.apply()
    seam = SeamTree(project.tree, project.root)
    state = seam.load()
    state.pending = True
    seam.save(state)
    res = project.cli("stylecheck", "--base", NAME, expect=5)
    assert (
        "half-switched" in res.stderr
        and f"next: finish the switch first: make apply BASE={NAME}" in res.stderr
    )


@pytest.mark.parametrize("untracked", [False, True], ids=["edited", "new-file"])
def test_refresh_over_uncommitted_edits_hints_the_fixup_recipe_and_it_runs(project, untracked):
    make_one_patch(project)
    cache = project.tree / "vllm/config/cache.py"
    cache.write_text(cache.read_text().replace("line 20\n", "line 20 (seam)\n"))
    if untracked:
        (project.tree / "vllm/config/extra.py").write_text("EXTRA = 1\n")
    res = project.refresh(expect=5)
    hint = hint_of(res)
    assert "--fixup=:/^" in hint and "--autosquash" in hint and problems(hint) == []
    if not untracked:  # every edited file is one patch's: the hint names it
        assert "'--fixup=:/^cache-tweak:'" in hint and "commit -a" in hint
    else:  # a new file no patch has: commit -a would leave it out, and the patch is for you to name
        assert "add -A" in hint and "<slug>" in hint
        return
    fold, squash = commands(hint)[:2]
    for cmd in (fold, squash):
        subprocess.run(cmd, shell=True, check=True, cwd=project.root, capture_output=True)
    assert "1 changed" in project.refresh().stdout
    assert "+# line 20 (seam)" in (project.root / "patches/0001-cache-tweak.patch").read_text()


def test_the_fixup_hint_runs_as_written_for_a_tree_at_an_odd_path(project):
    tree = project.root / "build" / "my 'odd' tree"
    project.cli("apply", "--base", NAME, "--tree", str(tree))
    cache = tree / "vllm/config/cache.py"
    cache.write_text(cache.read_text().replace("line 10\n", "line 10 (seam)\n"))
    git.index.commit(
        tree, message("cache-tweak"), "Seam Dev <dev@example.invalid>", paths=["vllm/config/cache.py"]
    )
    project.cli("refresh", "--base", NAME, "--tree", str(tree))
    cache.write_text(cache.read_text().replace("line 30\n", "line 30 (seam)\n"))
    res = project.cli("refresh", "--base", NAME, "--tree", str(tree), "--json", expect=5)
    hint = json.loads(res.stdout)["hint"]
    for cmd in commands(hint)[:2]:
        subprocess.run(cmd, shell=True, check=True, cwd=project.root, capture_output=True)
    assert (
        json.loads(project.cli("refresh", "--base", NAME, "--tree", str(tree), "--json").stdout)["changed"]
        == 1
    )
    assert "+# line 30 (seam)" in (project.root / "patches/0001-cache-tweak.patch").read_text()


@pytest.mark.parametrize("odd", ["symlink", "binary", "empty", "no slug"])
def test_refresh_of_a_commit_that_cannot_be_a_patch_says_to_change_that_commit(project, odd):
    """A tree commit that is no patch (a symlink, a binary file, no change, a subject without a
    slug) is the tree's to change: the hint was `make lint`, which checks the unchanged queue and
    passes. Nothing is written."""
    make_one_patch(project)
    tree = project.tree
    patches = {p.name: p.read_bytes() for p in (project.root / "patches").iterdir()}
    if odd == "symlink":
        (tree / "vllm/link.py").symlink_to("config/cache.py")
    elif odd == "binary":
        (tree / "vllm/blob.bin").write_bytes(b"\0\1\2")
    subject = "Fix stuff" if odd == "no slug" else message("odd")
    if odd == "no slug":
        (tree / "vllm/x.py").write_text("x = 1\n")
    git.core.out(tree, "add", "-A")
    git.core.out(
        tree,
        "-c",
        "user.name=Seam Dev",
        "-c",
        "user.email=dev@example.invalid",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        subject,
    )
    res = project.refresh(expect=1)
    hint = hint_of(res)
    commit = git.repo.head(tree)[:12]
    assert f"commit {commit}" in res.stderr and "nothing was written" in res.stderr
    assert "make lint" not in hint and f"git -C {tree} rebase -i tkv-seam-base" in hint
    assert problems(hint) == []
    assert {p.name: p.read_bytes() for p in (project.root / "patches").iterdir()} == patches


@pytest.mark.parametrize("ruff", ["missing", "a directory", "not ruff"])
def test_stylecheck_with_a_ruff_that_is_not_one_says_so(project, tmp_path, ruff):
    """``--ruff`` naming nothing, a directory or another program: a usage error saying what is there
    and the way on (it was exit 1, "is ruff Meyering." for /bin/false, ``ls -ld`` hints for a path)."""
    make_one_patch(project)
    exe = {"missing": tmp_path / "nowhere" / "ruff", "a directory": tmp_path, "not ruff": tmp_path / "ruff"}[
        ruff
    ]
    if ruff == "not ruff":
        exe.write_text("#!/bin/sh\necho 'false (GNU coreutils) 9.1'\n")
        exe.chmod(0o755)
    out = json.loads(project.cli("stylecheck", "--base", NAME, "--ruff", str(exe), "--json", expect=2).stdout)
    said = "`--version` says 'false (GNU coreutils) 9.1'" if ruff == "not ruff" else "no executable there"
    assert said in out["error"] and out["hint"].startswith("leave out --ruff"), out
