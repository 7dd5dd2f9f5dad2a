"""Lint: series and patches/ agree, every patch parses and carries its header fields.

Every problem is collected (a maintainer fixes all at once); ``lint`` returns the list.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ..answer import Answer
from ..errors import EXIT_LINT
from .header import MULTI_TRAILERS, REQUIRED_TRAILERS, PatchFormatError
from .message import verdict_problem
from .patch import CONFLICT_MARKERS, Patch, parse_file
from .series import DEFAULT_QUEUE, Queue, parse_series_text, patch_filename

_NODEID_RE = re.compile(r"^[\w./-]+\.py(::[\w\[\]-]+)+$")
_FIELD_LINE_RE = re.compile(
    r"^\s*(%s):(\s|$)" % "|".join((*REQUIRED_TRAILERS, *MULTI_TRAILERS, "Remove-when"))
)


@dataclass
class Problem:
    patch: str  # patch file name, or "series"
    message: str
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = self.patch
        if self.file:
            where += f": {self.file}"
            if self.line:
                where += f":{self.line}"
        return f"{where}: {self.message}"

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Linted(Answer):
    """What ``lint`` found in one queue (exit 6 when anything)."""

    problems: list[Problem]

    @property
    def ok(self) -> bool:
        return not self.problems

    def notes(self) -> list[str]:
        return [str(p) for p in self.problems]

    def lines(self) -> list[str]:
        return [f"lint: {len(self.problems)} problem(s)" if self.problems else "lint: ok"]

    def to_json(self) -> dict:
        return {"ok": self.ok, "problems": [p.to_json() for p in self.problems]}

    def exit_code(self) -> int:
        return EXIT_LINT if self.problems else 0


def lint(root: Path, queue: Queue = DEFAULT_QUEUE) -> list[Problem]:
    """Problems of the queue at ``queue`` (default: the top-level v0.31.0 queue)."""
    problems: list[Problem] = []
    series_path = root / queue.series
    patches_dir = root / queue.patches
    if not series_path.exists():
        return [Problem("series", f"no {queue.series} file")]
    try:
        names = parse_series_text(series_path.read_text())
    except Exception as e:  # SeamError with the line
        return [Problem("series", str(e))]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            problems.append(Problem("series", f"{name} is listed twice"))
        seen.add(name)
    present = {p.name for p in patches_dir.glob("*.patch")} if patches_dir.exists() else set()
    for name in sorted(present - seen):
        problems.append(Problem(name, f"orphan: in {queue.patches}/ but not listed in {queue.series}"))
    slugs: list[str] = []
    for index, name in enumerate(names, 1):
        path = patches_dir / name
        if not path.exists():
            problems.append(Problem(name, f"listed in {queue.series} but missing from {queue.patches}/"))
            continue
        if path.is_symlink():
            problems.append(Problem(name, "is a symlink; patch files must be regular files"))
            continue
        try:
            patch = parse_file(path)
        except PatchFormatError as e:
            problems.append(Problem(name, e.detail))
            continue
        h = patch.header
        expected = patch_filename(index, h.slug)
        if name != expected:
            problems.append(
                Problem(name, f"file name does not match position and subject: expected {expected}")
            )
        if not h.description:
            problems.append(Problem(name, "header has no description paragraph"))
        problems.extend(Problem(name, message) for message in _trailer_problems(patch))
        for key in REQUIRED_TRAILERS:
            if not h.get(key):
                problems.append(Problem(name, f"header lacks the {key}: field"))
        for verdict in h.get("Verdict"):
            if verdict_problem(verdict):
                problems.append(Problem(name, f"header: {verdict_problem(verdict)}"))
        if not h.tests and not h.get("Checks"):
            problems.append(Problem(name, "header names no Tests: (or Checks: for a patch without tests)"))
        for node in h.tests + h.guards:
            if not _NODEID_RE.match(node):
                problems.append(Problem(name, f"Tests/Guard value is not a pytest node id: {node!r}"))
        for key, deps in (("Depends-on", h.depends_on), ("Test-depends-on", h.test_depends_on)):
            for dep in deps:
                if dep not in slugs:
                    problems.append(Problem(name, f"{key} {dep!r} is not an earlier patch of the series"))
        slugs.append(h.slug)
        for file, lineno, text in patch.added_lines():
            if text.startswith(CONFLICT_MARKERS):
                problems.append(Problem(name, f"conflict marker {text[:7]!r}", file, lineno))
    return problems


def _trailer_problems(patch: Patch) -> list[str]:
    """A header field given twice, or a field line above the trailer block (a stray copy).

    Only the message's last paragraph is the trailer block; a ``Verdict:``/``Reason:`` line
    above it reads as a field to a person but is description to git and to this tool, so the
    header would say two things where one is meant. Lines are the patch file's.
    """
    found = []
    for key, values in patch.header.trailers.items():
        if key not in MULTI_TRAILERS and len(values) > 1:
            found.append(f"header gives the {key}: field {len(values)} times (one is expected)")
    lines = patch.text.split("\n")
    start = lines.index("") + 1 if "" in lines else len(lines)  # the mail headers end
    end = next(
        (i for i in range(start, len(lines)) if lines[i] == "---" or lines[i].startswith("diff --git ")),
        len(lines),
    )
    while end > start and not lines[end - 1].strip():
        end -= 1
    blanks = [i for i in range(start, end) if not lines[i].strip()]
    block = blanks[-1] if blanks else start  # the trailer block: the last paragraph
    for i in range(start, block):
        m = _FIELD_LINE_RE.match(lines[i])
        if m:
            found.append(
                f"line {i + 1}: the {m.group(1)}: field outside the trailer block (the message's "
                "last paragraph); give each field there only"
            )
    return found
