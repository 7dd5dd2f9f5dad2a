"""The git gateway: every git call of the tool goes through a named function of ``tkvseam.git``."""

from __future__ import annotations

import ast
from pathlib import Path

import tkvseam

PACKAGE = Path(tkvseam.__file__).parent


def _raw_git_calls(path: Path) -> list[str]:
    """``git.core.run``/``git.core.out`` uses (or ``git.run``), imports of them, and subprocess calls
    of git, in one module."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("run", "out"):
            owner = ast.unparse(node.value)
            if owner in ("git", "git.core"):
                found.append(f"{path.name}:{node.lineno}: {owner}.{node.attr}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] in ("git", "core"):
            names = {a.name for a in node.names}
            if names & {"run", "out"}:
                found.append(
                    f"{path.name}:{node.lineno}: from {node.module} import {sorted(names & {'run', 'out'})}"
                )
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            first = node.args[0].elts[:1]
            if first and isinstance(first[0], ast.Constant) and first[0].value == "git":
                found.append(f"{path.name}:{node.lineno}: a git command run by hand")
    return found


def test_no_module_outside_the_git_package_runs_git_itself():
    modules = [p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "git"]
    assert len(modules) > 20
    assert [hit for p in sorted(modules) for hit in _raw_git_calls(p)] == []


def test_the_check_sees_a_raw_call(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import subprocess\nfrom . import git\nfrom .git import run\n\n"
        "def f(t):\n    subprocess.run(['git', 'log'])\n    git.core.run(t, 'gc')\n    return git.out(t, 'log')\n"
    )
    assert sorted(h.split(": ", 1)[1] for h in _raw_git_calls(bad)) == [
        "a git command run by hand",
        "from git import ['run']",
        "git.core.run",
        "git.out",
    ]


def test_no_module_of_the_tool_is_over_500_lines():
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 550} == {}
