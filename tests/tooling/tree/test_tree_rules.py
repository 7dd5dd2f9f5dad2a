"""SeamTree owns every rule about a tree (issue 24): one layout, one usability check, one rebuild.

- every ``build/...`` path and tree name is spelled in ``tkvseam/layout.py`` only (checked on the
  source, as test_gateway checks the git gateway);
- "is this a usable tree of base B" is ``SeamTree.require``: refresh, the seam tests, the image,
  the stand-in and the overlay (stage, install) refuse the same trees with the same code (5), the
  same words and a ``next:`` (stylecheck too, any tree of the tool's: ``edit/test_next_steps.py``);
- apply and port start rebuild a tree through ``SeamTree.rebuild``: killed right before the swap,
  the old tree is as it was and the next run removes the scratch tree and goes on.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

import tkvseam
from tkvseam import git
from tkvseam.errors import RefusedError
from tkvseam.tree.seamtree import SeamTree
from tkvseam.tree.state import Kind

from ..fixtures.portcase import NEXT, port, port_tree
from ..fixtures.upstream import NAME


PACKAGE = Path(tkvseam.__file__).parent
LAYOUT = PACKAGE / "layout.py"
# "build" as a path: the word alone, or followed by "/" after the start or a separator
_BUILD = re.compile(r"(?:^|[\s(`'\"=:,])build(?:/|$)")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def build_spellings(path: Path, top: Path = PACKAGE) -> list[str]:
    """The string constants of a module (docstrings aside) that spell a ``build/`` path."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    return [
        f"{path.relative_to(top)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and (node.value == "build" or _BUILD.search(node.value))
    ]


def test_build_paths_are_spelled_only_in_the_layout_module():
    found = [hit for f in sorted(PACKAGE.rglob("*.py")) if f != LAYOUT for hit in build_spellings(f)]
    assert found == [], "spell these with tkvseam.layout:\n" + "\n".join(found)
    assert build_spellings(LAYOUT)  # the check sees the spellings where they are


def test_the_spelling_check_finds_a_path_in_code_and_in_a_message(tmp_path):
    bad = tmp_path / "probe.py"
    bad.write_text(
        '"""build/ in a docstring is fine."""\nP = root / "build" / "x"\nM = f"see build/vllm-{b}"\nOK = "rebuild"\n'
    )
    hits = build_spellings(bad, tmp_path)
    assert sorted(h.split(": ", 1)[1] for h in hits) == ["'build'", "'see build/vllm-'"]


# --------------------------------------------------------------------------- SeamTree.require


def _half_switched(project, crash_at) -> None:
    """Edit a patch of the case's queue and kill apply right before the switch moves a file."""
    p = project.root / "patches/0005-tail-append.patch"
    p.write_text(p.read_text().replace("+t_21 = 21", "+t_21 = 2100"))
    crash_at("tkvseam.git.index.switch_worktree", *project.argv("apply", "--base", NAME))


def _refuse(project, command: str, base: str, tree: Path):
    """Run ``command`` on ``tree`` as a tree of ``base``; return (exit code, message, hint)."""
    if command == "stand-in":  # its CLI wants the engine first: the library call, as the CLI makes it
        from tkvseam.bases.pins import load_bases
        from tkvseam.image.standin import make_stand_in

        bases = load_bases(project.root / "bases.toml", project.root)
        with pytest.raises(RefusedError) as e:
            make_stand_in(None, project.root, tree, bases[base], project.cache, installer="none")
        return e.value.exit_code, e.value.message, e.value.hint
    argv = {
        "refresh": ["refresh"],
        "seamtest": ["seamtest", "full", "--python", sys.executable],
        "image": ["image", "--turbo-attn", ""],
        "overlay stage": ["overlay", "stage"],
        "overlay install": ["overlay", "install", "--python", sys.executable],
    }[command]
    res = project.cli(*argv, "--base", base, "--tree", str(tree), "--json", expect=None)
    out = json.loads(res.stdout)
    return res.exit_code, out["error"], out["hint"]


COMMANDS = ["refresh", "seamtest", "image", "stand-in", "overlay stage", "overlay install"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_user_of_a_build_tree_refuses_the_same_unusable_trees_with_one_code(
    pproject, crash_at, command
):
    """No tree, a tree of another base, a port in progress, a half-switched tree: exit 5 from each
    command (refresh said 5, the seam tests 1, the image 2 before), naming why, with a next step."""
    root = pproject.root
    code, error, hint = _refuse(pproject, command, NAME, root / "build" / "nothing-here")
    assert (code, hint) == (
        5,
        f".venv/bin/tkv-seam apply --base {NAME} --tree {root / 'build' / 'nothing-here'}",
    )
    assert "is not a tree made by tkv-seam apply (nothing is there)" in error

    code, error, hint = _refuse(pproject, command, NEXT, pproject.tree)
    assert code == 5 and f"is a tree of {NAME}, not {NEXT}" in error
    assert hint.startswith(f"make apply BASE={NEXT}") and f"--base {NAME}" in hint

    port(pproject, "start", expect=12)
    code, error, hint = _refuse(pproject, command, NEXT, port_tree(pproject))
    assert code == 5 and f"is a port to {NEXT} in progress (stopped at 0001-add-mul.patch)" in error
    assert hint.startswith(f"make port VERB=status TO={NEXT}") and "PORT_TREE" not in hint

    _half_switched(pproject, crash_at)
    code, error, hint = _refuse(pproject, command, NAME, pproject.tree)
    assert (
        code == 5 and "half-switched" in error and hint == f"finish the switch first: make apply BASE={NAME}"
    )


def test_require_of_a_port_tree(pproject):
    root = pproject.root
    with pytest.raises(RefusedError, match="not a port tree made by tkv-seam port start") as e:
        SeamTree(port_tree(pproject), root).require(Kind.PORT, NEXT, "status")
    assert e.value.hint == f"make port VERB=start TO={NEXT}"
    with pytest.raises(RefusedError, match=f"is a tkv-seam apply tree of {NAME}, not a port"):
        SeamTree(pproject.tree, root).require(Kind.PORT, NAME, "status")
    port(pproject, "start", expect=12)
    state = SeamTree(port_tree(pproject), root).require(Kind.PORT, NEXT, "status")
    assert state.port.current == "0001-add-mul.patch"


# --------------------------------------------------------------------------- SeamTree.rebuild


@pytest.mark.parametrize("verb", ["apply", "port start"])
def test_a_rebuild_killed_before_the_swap_leaves_the_old_tree_and_the_next_run_goes_on(
    pproject, port_releases, crash_at, verb
):
    """apply (a new source: the tree is rebuilt) and port start (over a finished port, here a fresh
    start) go through SeamTree.rebuild: killed right before its swap, the tree at the path is the
    one there before (or none), a scratch tree is left, and the next run removes it and finishes."""
    root = pproject.root
    if verb == "apply":
        tree, argv = pproject.tree, ["apply", "--base", NAME, "--git", str(port_releases[NAME].root)]
        before = git.repo.head(tree)
    else:
        tree, argv = port_tree(pproject), ["port", "start", "--base", NAME, "--to", NEXT]
        before = None
    crash_at("tkvseam.tree.seamtree:SeamTree.swap_in", *pproject.argv(*argv))
    scratch = [p for p in (root / "build").glob(f".{tree.name}.tmp-*") if p.is_dir()]
    assert scratch, "the killed run built its tree aside"
    assert (git.repo.head(tree) if before else tree.exists()) == (before or False)
    res = pproject.cli(*argv, expect=None)
    assert res.exit_code == (0 if verb == "apply" else 12), res.stderr
    assert not [p for p in scratch if p.exists()]
    state = SeamTree(tree).load()
    assert state is not None and (state.source == "git" if verb == "apply" else state.port is not None)
