"""One patch file: its header (``header``), the diff, and exact replay.

A patch file is ``git format-patch`` output (``From``/``Subject`` mail headers,
the commit message body, ``---``, then ``diff --git`` sections). ``unidiff``
parses the diff; it drops everything above the first ``diff --git``, so the
header is parsed by ``header.parse_header`` (its fields: ``header``'s docstring).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from .. import git, hints
from ..errors import ApplyError
from .header import Header, PatchFormatError, parse_header

_MODE_RE = re.compile(r"^(new file mode|deleted file mode|old mode|new mode) (\d{6})$")
CONFLICT_MARKERS = ("<<<<<<< ", ">>>>>>> ", "=======")


class ChangeKind(StrEnum):
    """What a patch does to one file."""

    ADD = "add"
    DELETE = "delete"
    MODIFY = "modify"


@dataclass
class FileChange:
    """One file of a patch: ``old``/``new`` are tree-relative paths (None for /dev/null)."""

    old: str | None
    new: str | None
    new_mode: str | None
    pfile: object  # unidiff PatchedFile

    @property
    def path(self) -> str:
        return self.new or self.old  # type: ignore[return-value]

    @property
    def kind(self) -> ChangeKind:
        if self.old is None:
            return ChangeKind.ADD
        if self.new is None:
            return ChangeKind.DELETE
        return ChangeKind.MODIFY


@dataclass
class Patch:
    name: str
    path: Path
    text: str
    header: Header
    files: list[FileChange]

    def added_lines(self) -> list[tuple[str, int, str]]:
        """(file, target line number, text) of every added line."""
        rows = []
        for fc in self.files:
            for hunk in fc.pfile:
                for line in hunk:
                    if line.is_added:
                        rows.append((fc.path, line.target_line_no, line.value.rstrip("\n")))
        return rows


# --------------------------------------------------------------------------- parsing


def strip_prefix(path: str, prefix: str, name: str = "patch") -> str | None:
    if path == "/dev/null":
        return None
    if not path.startswith(prefix):
        raise PatchFormatError(
            name,
            f"path {path!r} lacks the {prefix!r} prefix (patches are -p1)",
            hint=f"re-export {name} with `make refresh`, or fix its ---/+++ lines by hand",
        )
    return path[len(prefix) :]


def path_problem(path: str) -> str | None:
    """Why a patch path may not be used (leaves the tree, absolute, into .git), or None."""
    if not path or "\0" in path:
        return "empty path"
    p = PurePosixPath(path)
    if p.is_absolute() or path.startswith("\\") or re.match(r"^[A-Za-z]:", path):
        return "absolute path"
    if any(part == ".." for part in p.parts):
        return "path leaves the tree ('..')"
    if any(part == ".git" for part in p.parts):
        return "path into .git"
    return None


def parse_text(text: str, name: str, path: Path | None = None) -> Patch:
    """Parse a patch from text; raise PatchFormatError naming the patch on any problem."""
    idx = text.find("\ndiff --git ")
    if idx < 0:
        raise PatchFormatError(name, "no 'diff --git' section (empty or not a patch)")
    header = parse_header(text[: idx + 1], name)
    try:
        pset = PatchSet(text[idx + 1 :])
    except UnidiffParseError as e:
        raise PatchFormatError(name, f"corrupt or truncated diff: {e}", hint=_restore_hint(name, path)) from e
    if len(pset) == 0:
        raise PatchFormatError(name, "the diff holds no file")
    files = []
    for pfile in pset:
        if pfile.is_binary_file:
            raise PatchFormatError(name, f"{pfile.path}: binary hunks are not allowed")
        old = strip_prefix(pfile.source_file, "a/", name)
        new = strip_prefix(pfile.target_file, "b/", name)
        info = [str(x).rstrip("\n") for x in (pfile.patch_info or [])]
        if info and info[0].startswith("diff --git "):
            git_paths = info[0][len("diff --git ") :].split(" ")
            if len(git_paths) == 2 and (old or new) and git_paths[1] != f"b/{new or old}":
                raise PatchFormatError(name, "diff --git line disagrees with ---/+++ paths")
        if any(x.startswith(("rename from", "copy from")) for x in info):
            raise PatchFormatError(name, "renames/copies are not supported (export with --no-renames)")
        mode = None
        for x in info:
            m = _MODE_RE.match(x)
            if m and m.group(1) in ("new file mode", "new mode"):
                mode = m.group(2)
        for p in {old, new} - {None}:
            problem = path_problem(p)  # type: ignore[arg-type]
            if problem:
                raise PatchFormatError(name, f"{p}: {problem}: refused")
        if mode == "120000":
            raise PatchFormatError(name, f"{new}: symlinks are not allowed in patches")
        if old is None and new is None:
            raise PatchFormatError(name, "a file with neither source nor target")
        files.append(FileChange(old, new, mode, pfile))
    return Patch(name=name, path=path or Path(name), text=text, header=header, files=files)


def _restore_hint(name: str, path: Path | None) -> str:
    """How to get a damaged patch file back: from git when git tracks it (its own path, which runs
    from anywhere in the project), else by exporting it again from its build tree."""
    again = "re-export it from the build tree that holds its commit (`make refresh BASE=<base>`)"
    if path is not None and path.is_absolute() and git.index.toplevel(path.parent) is not None:
        if git.repo.exists_at(path.parent, "HEAD", f"./{path.name}"):
            return f"restore {name} from git (`{hints.shell('git', 'checkout', '--', path)}`), or {again}"
    return again


def parse_file(path: Path) -> Patch:
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError as e:
        raise PatchFormatError(path.name, "listed in series but missing from patches/") from e
    except UnicodeDecodeError as e:
        raise PatchFormatError(path.name, f"not UTF-8 text: {e}") from e
    return parse_text(text, path.name, path)


# --------------------------------------------------------------------------- replay


def split_lines(text: str) -> list[str]:
    """Split on '\\n' only, keeping line ends (str.splitlines also splits on \\f, \\x1c ...)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _hunk_sides(hunk) -> tuple[list[str], list[str]]:
    """Source and target lines of a hunk, honouring '\\ No newline at end of file'."""
    src: list[str] = []
    tgt: list[str] = []
    last = None
    for line in hunk:
        if line.line_type == "\\":
            for side in (src,) if last == "-" else (tgt,) if last == "+" else (src, tgt):
                side[-1] = side[-1].rstrip("\n")
            continue
        if line.line_type in (" ", "-"):
            src.append(line.value)
        if line.line_type in (" ", "+"):
            tgt.append(line.value)
        last = line.line_type
    return src, tgt


MAX_FUZZ = 2  # GNU patch's default --fuzz


class PlacementKind(StrEnum):
    EXACT = "exact"
    OFFSET = "offset"
    FUZZ = "fuzz"
    EOF = "eof"
    FAILS = "fails"


@dataclass
class Placement:
    """Where GNU patch would put a hunk: the structured finding that apply and port both render.

    ``kind``: ``exact`` (at the named line), ``offset`` (elsewhere, no fuzz), ``fuzz``
    (context lines ignored, ``delta`` may be non-zero too), ``eof`` (a hunk anchored at
    the end of the file, which moved: not an offset), ``fails`` (nowhere in the file).
    ``line`` is the 1-based line of the hunk's first line there; ``delta`` its distance
    from the named line; ``mismatch`` the first differing line at the named position.
    """

    kind: PlacementKind
    line: int | None
    delta: int = 0
    fuzz: int = 0
    mismatch: tuple[int, str, str | None] | None = None

    def __post_init__(self) -> None:
        self.kind = PlacementKind(self.kind)

    @property
    def status(self) -> str:
        return placement_text(self.kind, self.line, self.delta, self.fuzz)

    def explain(self) -> str:
        """The lines a strict-apply error shows under the hunk."""
        out = []
        if self.mismatch:
            lineno, want, have = self.mismatch
            out.append(f"  line {lineno}: expected {want!r}")
            out.append(
                f"  {' ' * len(str(lineno))}       found    "
                + (repr(have) if have is not None else "end of file")
            )
        if self.kind == PlacementKind.OFFSET:
            out.append(
                f"  the hunk's lines stand at line {self.line} (offset {self.delta:+d}): strict mode refuses offsets"
            )
        elif self.kind == PlacementKind.EOF:
            out.append(
                f"  the hunk appends at the end of the file, now line {self.line}: strict mode refuses it"
            )
        elif self.kind == PlacementKind.FUZZ:
            where = f" at line {self.line} (offset {self.delta:+d})" if self.delta else ""
            out.append(f"  the hunk would need fuzz {self.fuzz}{where}: strict mode refuses fuzz")
        elif self.kind == PlacementKind.FAILS and self.mismatch is None:
            out.append(
                "  the hunk's lines are there, but the hunk ends the file (no context after it) "
                "and the file goes on: patch and git apply refuse it too"
            )
        elif self.kind == PlacementKind.FAILS:
            out.append("  the hunk's lines are not found in the file")
        return "\n".join(out)


def placement_text(kind: PlacementKind, line: int | None, delta: int, fuzz: int) -> str:
    """A placement as a report says it: exact, offset +N, fuzz N, end of file (now line N), fails."""
    if kind in (PlacementKind.EXACT, PlacementKind.FAILS):
        return str(kind)
    if kind == PlacementKind.EOF:
        return f"end of file (now line {line})" + (f", fuzz {fuzz}" if fuzz else "")
    if kind == PlacementKind.OFFSET:
        return f"offset {delta:+d}"
    return f"fuzz {fuzz}" + (f", offset {delta:+d}" if delta else "")


def hunk_context(hunk) -> tuple[int, int]:
    """Leading and trailing context line counts of a unidiff hunk."""
    kinds = [line.line_type for line in hunk if line.line_type != "\\"]
    prefix = next((i for i, k in enumerate(kinds) if k != " "), len(kinds))
    suffix = next((i for i, k in enumerate(reversed(kinds)) if k != " "), len(kinds))
    return prefix, suffix


def hunk_start(hunk) -> int:
    """0-based index of the hunk's first source line in the file."""
    return hunk.source_start - 1 if hunk.source_length > 0 else hunk.source_start


def _matches(lines: list[str], src: list[str], pos: int, top: int, bottom: int) -> bool:
    n = len(src)
    if pos + top < 0 or pos + n - bottom > len(lines):
        return False
    return lines[pos + top : pos + n - bottom] == src[top : n - bottom]


def _diagnose(lines: list[str], hunk, start: int | None = None, floor: int = 0, shift: int = 0) -> Placement:
    """Where GNU patch (default fuzz 2) would place ``hunk`` in ``lines``, searched over the whole file.

    Follows patch's ``locate_hunk``: fuzz 0, 1, 2 in turn; at each, positions from the
    guess (named line + ``shift``, the offset of the hunk before) outwards, nearest
    first, never above ``floor`` (the end of the previous hunk); a hunk with less
    trailing than leading context can only match at the end of the file.
    """
    src, _ = _hunk_sides(hunk)
    start = hunk_start(hunk) if start is None else start
    n = len(src)
    mismatch = None
    for j, want in enumerate(src):
        have = lines[start + j] if start + j < len(lines) else None
        if have != want:
            mismatch = (start + j + 1, want.rstrip("\n"), have.rstrip("\n") if have is not None else None)
            break
    prefix, suffix = hunk_context(hunk)
    at_end = suffix < prefix  # patch and git apply anchor such a hunk at the end of the file
    if n == 0 or (mismatch is None and (not at_end or start + n == len(lines))):
        return Placement(PlacementKind.EXACT, start + 1)
    context = max(prefix, suffix)
    guess = start + shift
    for fuzz in range(0, min(MAX_FUZZ, context) + 1):
        top, bottom = fuzz + prefix - context, fuzz + suffix - context
        if top < 0 and hunk.source_start <= 1:  # can only match the start of the file
            if floor == 0 and _matches(lines, src, 0, 0, max(bottom, 0)):
                return _placed("fuzz" if fuzz else "offset", 0, start, fuzz, mismatch)
            continue
        top = max(top, 0)
        if bottom < 0:  # can only match the end of the file
            pos = len(lines) - n
            if pos >= floor - (prefix - top) and _matches(lines, src, pos, top, 0):
                return _placed("eof", pos, start, fuzz, mismatch)
            continue
        lo = floor - (prefix - top)
        hi = len(lines) - n + bottom
        for off in range(0, max(hi - guess, guess - lo, 0) + 1):
            for pos in (guess + off, guess - off) if off else (guess,):
                if lo <= pos <= hi and _matches(lines, src, pos, top, bottom):
                    return _placed("fuzz" if fuzz else "offset", pos, start, fuzz, mismatch)
    return Placement(PlacementKind.FAILS, None, mismatch=mismatch)


def _placed(kind: str, pos: int, start: int, fuzz: int, mismatch) -> Placement:
    if kind == "offset" and pos == start:
        kind = "exact"
    if kind == "eof" and pos == start and not fuzz:
        kind = "exact"
    return Placement(kind, pos + 1, pos - start, fuzz, mismatch)


def replay_file(patch: Patch, fc: FileChange, old_text: str | None) -> str | None:
    """Apply one file's hunks exactly at the lines they name; return the new text (None: deleted)."""
    if fc.kind == ChangeKind.ADD:
        if old_text is not None:
            raise ApplyError(f"{patch.name}: {fc.path}: the patch creates it, but it already exists")
        lines: list[str] = []
    else:
        if old_text is None:
            raise ApplyError(f"{patch.name}: {fc.path}: the patch modifies it, but it does not exist")
        lines = split_lines(old_text)
    out: list[str] = []
    pos = 0
    for i, hunk in enumerate(fc.pfile, 1):
        src, tgt = _hunk_sides(hunk)
        start = hunk_start(hunk)
        head = f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
        if start < pos:
            raise ApplyError(f"{patch.name}: {fc.path}: hunk {i} ({head}) overlaps the hunk before it")
        prefix, suffix = hunk_context(hunk)
        if lines[start : start + len(src)] != src or (
            suffix < prefix and src and start + len(src) != len(lines)
        ):
            raise ApplyError(
                f"{patch.name}: {fc.path}: hunk {i} ({head}) does not apply at line {start + 1}:\n"
                + _diagnose(lines, hunk, start, floor=pos).explain(),
                hint=f"rebase {patch.name}: edit the build tree, commit, `make refresh`; "
                "or report a forward-port with `make port`",
            )
        out += lines[pos:start] + tgt
        pos = start + len(src)
    out += lines[pos:]
    if fc.kind == ChangeKind.DELETE:
        if out:
            raise ApplyError(f"{patch.name}: {fc.path}: deleted, but lines remain after the hunks")
        return None
    return "".join(out)


def place_file(fc: FileChange, lines: list[str], starts: list[int]) -> str | None:
    """``fc``'s hunks applied with hunk i's source at 0-based line ``starts[i]`` of ``lines``; None
    when a hunk's whole source (context and removed lines) is not there, or hunks overlap."""
    out: list[str] = []
    pos = 0
    for hunk, start in zip(fc.pfile, starts, strict=True):
        src, tgt = _hunk_sides(hunk)
        if start < pos or lines[start : start + len(src)] != src:
            return None
        out += lines[pos:start] + tgt
        pos = start + len(src)
    return "".join(out + lines[pos:])


def file_sections(patch: Patch) -> list[str]:
    """The patch's text cut into one ``diff --git`` section per file (same order as ``patch.files``)."""
    body = patch.text[patch.text.find("\ndiff --git ") + 1 :]
    parts = re.split(r"(?m)^(?=diff --git )", body)
    return [p for p in parts if p.startswith("diff --git ")]
