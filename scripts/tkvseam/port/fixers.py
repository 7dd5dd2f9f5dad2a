"""The base's own fixers, run before the gate fails a patch: what ruff fixes by itself is no stop.

On each ``.py`` file the patch touches (as staged in the port tree), with the base's ruff pin
and the tree's configuration: ``ruff check --fix`` (safe fixes: ``--no-unsafe-fixes``; never an
import removed, F401/F811: importing a module may register something); then,
rule by rule, a fix ruff marks unsafe only where it leaves the module's syntax tree as it was
(the same program: ISC004's parentheses around an implicit concatenation, a comment removed;
never a fix that changes what the code does); then ``ruff format``. A file they change is
written and staged; each change is a ``Did`` of kind ``fix`` (the file, the line and rule
fixed, or the lines formatting rewrote), shown in the stop or the end summary, and the patch
is listed to re-read. What they cannot fix stays a problem of the gate (``breaks``), as before.
"""

from __future__ import annotations

import ast
import difflib
import json
import subprocess
from collections import Counter
from pathlib import Path

from .. import git
from ..bases.pins import Base
from ..edit.stylecheck import config_args, gate_ruff
from ..errors import SeamError
from ..progress import Progress
from ..findings.auto import Did

_COMMON = ["--force-exclude", "--no-cache"]
# never fixed by itself, "safe" by ruff's rule or not: removing an import changes what importing the
# module does (vLLM's registries are filled by imports); F401 unused, F811 redefined while unused
KEPT_IMPORTS = ["--unfixable", "F401", "--unfixable", "F811"]


def _run(exe: str, tree: Path, args: list[str], path: str, text: str) -> subprocess.CompletedProcess:
    """ruff on ``text`` as ``path`` of ``tree``, with the tree's own configuration only, as the gate
    checks it (``config_args``: never a configuration found above the tree, the project's)."""
    return subprocess.run(
        [exe, *args, *config_args(tree), *_COMMON, "--stdin-filename", path, "-"],
        cwd=tree,
        input=text.encode("utf-8", "surrogateescape"),
        capture_output=True,
    )


def _diagnostics(exe: str, tree: Path, path: str, text: str) -> list[dict]:
    proc = _run(exe, tree, ["check", "--output-format", "json", "--exit-zero"], path, text)
    try:
        found = json.loads(proc.stdout or b"[]")
    except ValueError:
        return []
    return [d for d in found if isinstance(d, dict)]


def _fixed(exe: str, tree: Path, path: str, text: str) -> tuple[str, list[Did]]:
    """``ruff check --fix``: safe fixes, then unsafe ones that keep the syntax tree; the text
    after, and the diagnostics fixed."""
    before = _diagnostics(exe, tree, path, text)
    safe = [d for d in before if _applicability(d) == "safe"]
    did: list[Did] = []
    if safe:
        args = ["check", "--fix", "--no-unsafe-fixes", *KEPT_IMPORTS, "--exit-zero", "--quiet"]
        text, did = _apply(exe, tree, path, text, args, safe, "`ruff check --fix`")
    unsafe = [d for d in _diagnostics(exe, tree, path, text) if _applicability(d) == "unsafe"]
    for code in sorted({d.get("code") or "" for d in unsafe} - {""}):
        args = ["check", "--fix", "--unsafe-fixes", "--select", code, "--exit-zero", "--quiet"]
        mine = [d for d in unsafe if d.get("code") == code]
        how = f"`ruff check --fix --unsafe-fixes --select {code}` (unsafe by ruff's rule; the code's syntax tree is unchanged)"
        text, more = _apply(exe, tree, path, text, args, mine, how, same_program=True)
        did += more
    return text, did


def _applicability(d: dict) -> str:
    return str((d.get("fix") or {}).get("applicability") or "")


def _same_program(a: str, b: str) -> bool:
    try:
        return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except (SyntaxError, ValueError):
        return False


def _apply(
    exe: str,
    tree: Path,
    path: str,
    text: str,
    args: list[str],
    fixable: list[dict],
    how: str,
    same_program=False,
) -> tuple[str, list[Did]]:
    """One ruff fix run on ``text``: the text after (the old one when refused), the ``fixable``
    diagnostics it fixed. ``same_program``: refused unless the syntax tree stays as it was."""
    proc = _run(exe, tree, args, path, text)
    after = proc.stdout.decode("utf-8", "surrogateescape") if proc.returncode == 0 else text
    if after == text or (same_program and not _same_program(text, after)):
        return text, []
    left = Counter(d.get("code") for d in _diagnostics(exe, tree, path, after))
    did = []
    for d in fixable:
        code = d.get("code")
        if left[code] > 0:
            left[code] -= 1  # still there after the fix (the first ones found are taken as fixed)
            continue
        row = (d.get("location") or {}).get("row", "?")
        did.append(Did("fix", path, f"line {row} {code} fixed by {how}: {d.get('message', '')}"))
    return after, did


def _changed_lines(old: str, new: str) -> str:
    """The lines of ``old`` a rewrite to ``new`` changed, as ``12-14, 30``."""
    spans = []
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old.splitlines(), new.splitlines()).get_opcodes():
        if tag != "equal":
            spans.append(f"{i1 + 1}" if i2 <= i1 + 1 else f"{i1 + 1}-{i2}")
    return ", ".join(spans)


def _formatted(exe: str, tree: Path, path: str, text: str) -> tuple[str, list[Did]]:
    proc = _run(exe, tree, ["format"], path, text)
    new = proc.stdout.decode("utf-8", "surrogateescape") if proc.returncode == 0 else text
    if new == text:
        return text, []
    lines = _changed_lines(text, new)
    what = f"line {lines}" if lines.isdigit() else f"lines {lines}"
    return new, [Did("fix", path, f"{what} rewritten by `ruff format`")]


def run_fixers(exe: str, tree: Path, paths: list[str]) -> list[Did]:
    """Fix and format each staged file of ``paths`` in ``tree``; what changed, file by file."""
    did: list[Did] = []
    for path in paths:
        data = git.repo.show(tree, "", path)  # ":path": the index
        if data is None:
            continue
        text = data.decode("utf-8", "surrogateescape")
        fixed, by_check = _fixed(exe, tree, path, text)
        formatted, by_format = _formatted(exe, tree, path, fixed)
        if formatted == text:
            continue
        (tree / path).write_bytes(formatted.encode("utf-8", "surrogateescape"))
        git.index.stage(tree, [path])
        did += by_check + by_format
    return did


class Isort:
    """The base's own import sort: ``ruff check --select I --fix`` with the base's ruff pin and the
    tree's own configuration. The ruff is found on first use; without one (no pin) it sorts nothing."""

    def __init__(self, base: Base, cache: Path, tree: Path, progress: Progress):
        self.base, self.cache, self.tree, self.progress = base, cache, tree, progress
        self._exe: str | None = None
        self.off = ""  # why it cannot sort

    def exe(self) -> str | None:
        if self._exe is None and not self.off:
            try:
                self._exe = gate_ruff(self.base, self.cache)
            except SeamError as e:
                self.off = e.message
                self.progress.warn(f"import conflicts are not merged by themselves: {e.message}")
        return self._exe

    def version(self) -> str:
        return self.base.seam.ruff or "?"

    def __call__(self, path: str, text: str) -> str | None:
        exe = self.exe()
        if exe is None:
            return None
        proc = subprocess.run(
            [exe, "check", "--select", "I", "--fix", "--no-unsafe-fixes", "--exit-zero", "--quiet"]
            + [*config_args(self.tree), *_COMMON, "--stdin-filename", path, "-"],
            cwd=self.tree,
            input=text.encode("utf-8", "surrogateescape"),
            capture_output=True,
        )
        return proc.stdout.decode("utf-8", "surrogateescape") if proc.returncode == 0 else None
