"""A status is an enum, and the code compares it with the enum's members, never with a string
literal: ``fc.kind == "modify"`` passes today because ``StrEnum`` equals its value, and goes on
passing when the member is renamed or its text changes, while the branch it guards stops being
taken.

The check reads the package: every ``Enum``/``StrEnum`` class, the attributes annotated with one
of them (dataclass fields, ``status: PatchStatus``) and the properties returning one
(``FileChange.kind``); then every comparison (``==``, ``!=``, ``in``) of such an attribute with a
string literal, or a tuple of them, whose text is a value of one of those enums.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tkvseam

PACKAGE = Path(tkvseam.__file__).parent
ENUM_BASES = {"Enum", "StrEnum", "IntEnum"}


def enums(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Enum class name -> the string values of its members."""
    out: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and {ast.unparse(b) for b in node.bases} & ENUM_BASES:
                out[node.name] = {
                    b.value.value
                    for b in node.body
                    if isinstance(b, ast.Assign)
                    and isinstance(b.value, ast.Constant)
                    and isinstance(b.value.value, str)
                }
    return out


def enum_attributes(trees: dict[str, ast.Module], known: dict[str, set[str]]) -> dict[str, set[str]]:
    """Attribute name -> the values of the enums it is annotated with (or a property returns)."""
    out: dict[str, set[str]] = {}

    def add(name: str, annotation: ast.expr | None) -> None:
        if annotation is None:
            return
        for part in ast.unparse(annotation).replace('"', "").split("|"):
            if part.strip() in known:
                out.setdefault(name, set()).update(known[part.strip()])

    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        add(item.target.id, item.annotation)
                    elif isinstance(item, ast.FunctionDef) and any(
                        ast.unparse(d) == "property" for d in item.decorator_list
                    ):
                        add(item.name, item.returns)
    return out


def literals(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def compared_with_literals(trees: dict[str, ast.Module]) -> list[str]:
    known = enums(trees)
    typed = enum_attributes(trees, known)
    found = []
    for path, tree in sorted(trees.items()):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            attrs = [s.attr for s in sides if isinstance(s, ast.Attribute) and s.attr in typed]
            texts = [t for s in sides for t in literals(s)]
            if any(t in typed[a] for a in attrs for t in texts):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def _package() -> dict[str, ast.Module]:
    return {str(p.relative_to(PACKAGE)): ast.parse(p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_enum_is_compared_with_a_string_literal():
    assert compared_with_literals(_package()) == []


def test_the_check_sees_a_member_compared_with_its_text():
    """Seen through a dataclass field, a property and a tuple; a plain string field, or a literal
    that is no value of the enum, is not flagged."""
    source = """
from dataclasses import dataclass
from enum import StrEnum

class Kind(StrEnum):
    ADD = "add"
    MODIFY = "modify"

@dataclass
class Row:
    kind: Kind
    name: str

    @property
    def again(self) -> Kind:
        return self.kind

def f(row):
    a = row.kind == "add"
    b = row.again in ("modify", "other")
    c = row.name == "add"
    d = row.kind == "something else"
    e = row.kind == Kind.ADD
"""
    found = compared_with_literals({"m.py": ast.parse(source)})
    assert [line.split(": ", 1)[1] for line in found] == [
        "row.kind == 'add'",
        "row.again in ('modify', 'other')",
    ]
