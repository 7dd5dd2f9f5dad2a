"""The tooling tests are in rooms: a test file lives in the room of the package it tests, and no
module of the tests imports a test module or a conftest (what tests share is in ``fixtures/``,
or in a room's conftest when only that room takes it).

Every import counts, lazy ones (inside a function) included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tkvseam

TOOLING = Path(__file__).resolve().parents[1]
PACKAGE = Path(tkvseam.__file__).parent
# A room per package of the tool; plumbing holds the tests of its plumbing and of the house rules.
ROOMS = {
    "bases",
    "cli",
    "edit",
    "findings",
    "image",
    "overlay",
    "port",
    "queue",
    "release",
    "seamtest",
    "tree",
    "plumbing",
}
SHARED = "fixtures"


def imports_of_tests(source: str, package: str) -> list[str]:
    """The test modules and conftests ``source`` (a module of ``package``) imports, lazily or not."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names = [module] if _is_test(module) else [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [name for name in names if _is_test(name)]
    return found


def _is_test(module: str) -> bool:
    return any(part.startswith("test_") or part == "conftest" for part in module.split("."))


def _package(path: Path) -> str:
    return ".".join(path.parent.relative_to(TOOLING.parents[1]).parts)


def test_every_test_file_is_in_a_room_named_for_a_package_of_the_tool():
    misplaced = [
        str(p.relative_to(TOOLING))
        for p in TOOLING.rglob("test_*.py")
        if p.parent == TOOLING or p.relative_to(TOOLING).parts[0] not in ROOMS
    ]
    assert misplaced == []
    rooms = {p.name for p in TOOLING.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms == ROOMS | {SHARED}
    assert [room for room in sorted(rooms) if not (TOOLING / room / "__init__.py").is_file()] == []
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(ROOMS - packages) == ["plumbing"]


def test_no_test_module_imports_a_test_module_or_a_conftest():
    imports = {
        str(p.relative_to(TOOLING)): imports_of_tests(p.read_text(), _package(p))
        for p in sorted(TOOLING.rglob("*.py"))
    }
    assert {path: found for path, found in imports.items() if found} == {}


def test_the_check_sees_every_kind_of_import_of_a_test_module():
    source = (
        "from .test_apply import make_two_patches\n"
        "from .. import conftest\n"
        "import tests.tooling.cli.test_hints\n"
        "from ..fixtures.upstream import NAME\n"
        "def helper():\n"
        "    from ..conftest import NAME\n"
    )
    assert imports_of_tests(source, "tests.tooling.edit") == [
        "tests.tooling.edit.test_apply",
        "tests.tooling.conftest",
        "tests.tooling.cli.test_hints",
        "tests.tooling.conftest",  # the lazy one
    ]


def _fixtures(path: Path) -> list[str]:
    """The names of the fixtures ``path`` defines (module-level functions under ``pytest.fixture``)."""
    body = ast.parse(path.read_text(), str(path)).body
    return [
        node.name
        for node in body
        if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list)
    ]


def test_a_fixture_name_is_defined_once():
    """One name per meaning: a fixture is defined in one place (``fixtures/``, a conftest or the one
    module that takes it), so ``releases`` or ``project`` means the same in every test that asks."""
    where: dict[str, list[str]] = {}
    for path in sorted(TOOLING.rglob("*.py")):
        for name in _fixtures(path):
            where.setdefault(name, []).append(str(path.relative_to(TOOLING)))
    assert len(where) > 30
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
