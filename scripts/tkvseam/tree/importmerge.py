"""Import-block conflicts merged by themselves: the statements 3-way, sorted by the base's own ruff.

A conflict in which both sides only add, drop or move imports (upstream moved an import onto
the line beside the patch's) needs no judgment: ``merge_conflicts`` takes the three sides of the
file (the old base's, the new base's and the patch's, as ``git apply --3way`` staged them),
merges them again with the base's lines in each conflict, and resolves a conflict region when
each of its three sides is nothing but import statements (blank lines allowed; a comment, a
star import or any other line and the region is not resolved). The region's imports are merged
as sets of one-name statements: kept when both sides keep them, added when either side adds
them, gone when either side drops them (a move is a drop and an add). Two statements binding
one name to different things are a real conflict. The file is then sorted by the base's own
ruff with its isort rules (``I``, the tree's configuration), which merges statements of one
module; only when the new base's own file is already sorted so, so that the sort changes
nothing of upstream's. A file with any region that is not imports alone is left as git left it.
The sort is given (``Sort``; ``port.fixers.Isort`` is the base's ruff).
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import git

Sort = Callable[[str, str], "str | None"]  # (path, text) -> the text sorted, None when it cannot be


@dataclass
class Region:
    ours: list[str]
    base: list[str]
    theirs: list[str]


def regions(text: str) -> list[tuple[int, int, Region]] | None:
    """The conflicts of a ``--diff3`` merge: (first line, line after, the three sides); None when
    a conflict has no base section (not a diff3 merge)."""
    lines = text.splitlines(keepends=True)
    out = []
    i = 0
    marks = (
        "<" * git.merge.MARKER_SIZE + " ",
        "|" * git.merge.MARKER_SIZE + " ",
        "=" * git.merge.MARKER_SIZE,
        ">" * git.merge.MARKER_SIZE + " ",
    )
    while i < len(lines):
        if not lines[i].startswith(marks[0]):
            i += 1
            continue
        start, sides, cur = i, {"ours": [], "base": [], "theirs": []}, "ours"
        i += 1
        while i < len(lines) and not lines[i].startswith(marks[3]):
            line = lines[i]
            if line.startswith(marks[1]):
                cur = "base"
            elif line.rstrip("\n") == marks[2]:
                if cur != "base":
                    return None
                cur = "theirs"
            else:
                sides[cur].append(line)
            i += 1
        if cur != "theirs" or i == len(lines):
            return None
        out.append((start, i + 1, Region(sides["ours"], sides["base"], sides["theirs"])))
        i += 1
    return out


def _statements(lines: list[str]) -> tuple[str, dict[str, str]] | None:
    """(the indentation, {one-name statement: the name it binds}) of lines that are only imports."""
    body = [ln for ln in lines if ln.strip()]
    if not body:
        return "", {}
    indent = body[0][: len(body[0]) - len(body[0].lstrip())]
    text = textwrap.dedent("".join(lines))
    try:
        if any(t.type == tokenize.COMMENT for t in tokenize.generate_tokens(io.StringIO(text).readline)):
            return None
        tree = ast.parse(text)
    except (SyntaxError, tokenize.TokenError, ValueError):
        return None
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:  # `import a.b` binds a
                found[f"import {a.name}" + (f" as {a.asname}" if a.asname else "")] = (
                    a.asname or a.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and all(a.name != "*" for a in node.names):
            module = "." * node.level + (node.module or "")
            for a in node.names:
                bound = a.asname or a.name
                found[f"from {module} import {a.name}" + (f" as {a.asname}" if a.asname else "")] = bound
        else:
            return None
    return indent, found


def merge_region(region: Region) -> tuple[list[str], list[str], list[str]] | None:
    """(the merged region's lines, the statements added, the statements dropped) when every side
    is imports alone and no name is bound twice; None otherwise."""
    sides = [_statements(s) for s in (region.ours, region.base, region.theirs)]
    if any(s is None for s in sides):
        return None
    (i_ours, ours), (i_base, base), (i_theirs, theirs) = sides  # type: ignore[misc]
    indents = {i for i, s in ((i_ours, ours), (i_base, base), (i_theirs, theirs)) if s}
    if len(indents) > 1:
        return None
    merged = {**{k: v for k, v in base.items() if k in ours and k in theirs}}
    merged |= {k: v for k, v in ours.items() if k not in base}
    merged |= {k: v for k, v in theirs.items() if k not in base}
    bound: dict[str, str] = {}  # a name: what binds it (a plain `import a`, `import a.b`: the package a)
    for stmt, name in merged.items():
        what = "package" if stmt.startswith("import ") and " as " not in stmt else stmt
        if bound.setdefault(name, what) != what:
            return None
    indent = indents.pop() if indents else ""
    added = sorted(k for k in merged if k not in ours)
    dropped = sorted(k for k in ours if k not in merged)
    return [f"{indent}{s}\n" for s in sorted(merged)], added, dropped


def merge_conflicts(repo: Path, path: str, sort: Sort) -> tuple[str, str] | None:
    """(the file merged, what was done) when every conflict of ``path`` (unmerged in ``repo``'s
    index) is an import-only conflict and the base's sort places the result; None otherwise."""
    sides = [git.repo.show(repo, f":{n}", path) for n in (2, 1, 3)]  # ours, base, theirs
    if any(s is None for s in sides):
        return None
    merged, clean = git.merge.merge_diff3(repo, *sides)  # type: ignore[arg-type]
    text = merged.decode("utf-8", "surrogateescape")
    found = regions(text) if not clean else None
    if not found:
        return None
    lines = text.splitlines(keepends=True)
    out, pos, added, dropped = [], 0, [], []
    for start, end, region in found:
        done = merge_region(region)
        if done is None:
            return None
        out += lines[pos:start] + done[0]
        added += done[1]
        dropped += done[2]
        pos = end
    result = "".join(out + lines[pos:])
    ours_text = sides[0].decode("utf-8", "surrogateescape")  # type: ignore[union-attr]
    if sort(path, ours_text) != ours_text:  # upstream's own file is not sorted so: the sort would change it
        return None
    sorted_text = sort(path, result)
    if sorted_text is None:
        return None
    what = (
        f"only imports conflicted ({len(found)} region(s)); upstream's kept, "
        + (f"the patch's added: {', '.join(added)}" if added else "nothing of the patch's to add")
        + (f"; dropped as one side dropped them: {', '.join(dropped)}" if dropped else "")
    )
    return sorted_text, what
