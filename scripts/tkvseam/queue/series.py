"""A queue: its ``series`` file (quilt's: one patch name per line) and its patch directory.

Every base has its own queue; ``bases.toml`` says where (``queue = { series, patches }``).
The v0.31.0 queue is quilt's default layout: ``series`` and ``patches/`` at the top level.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import hints
from ..errors import RefusedError, SeamError
from ..fsutil import atomic_write
from .patch import Patch, parse_file

SERIES = "series"
PATCHES = "patches"
PORT_MD = "PORT.md"  # beside a ported queue's patches: each patch's port status, verdict and reason


@dataclass(frozen=True)
class Queue:
    """Where one base's queue lives, relative to the project root (QUILT_SERIES, QUILT_PATCHES)."""

    series: str = SERIES
    patches: str = PATCHES

    @property
    def port_md(self) -> str:
        """The verdict table a port wrote beside the patches (``PORT_MD``)."""
        return f"{self.patches}/{PORT_MD}"

    @classmethod
    def for_base(cls, name: str) -> Queue:
        """The layout of a base without a ``queue`` key: ``patches/<base>/`` holding its own series."""
        return cls(f"{PATCHES}/{name}/{SERIES}", f"{PATCHES}/{name}")


DEFAULT_QUEUE = Queue()


@dataclass
class Series:
    root: Path
    names: list[str]
    queue: Queue = field(default=DEFAULT_QUEUE)

    @property
    def patches_dir(self) -> Path:
        return self.root / self.queue.patches

    @property
    def file(self) -> Path:
        return self.root / self.queue.series

    def path(self, name: str) -> Path:
        return self.patches_dir / name

    def load(self) -> list[Patch]:
        """Parse every listed patch (raises on the first that cannot be parsed)."""
        return [parse_file(self.path(n)) for n in self.names]

    def file_digests(self) -> dict[str, str]:
        """sha256 of each listed patch file (to name the ones edited later)."""
        out = {}
        for name in self.names:
            p = self.path(name)
            out[name] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else ""
        return out

    def digest(self) -> str:
        """sha256 over the names and bytes of the listed patches: identifies the series' content."""
        h = hashlib.sha256()
        for name in self.names:
            h.update(name.encode() + b"\0")
            p = self.path(name)
            h.update(p.read_bytes() if p.exists() else b"<missing>")
            h.update(b"\0")
        return h.hexdigest()


def _entry(raw: str) -> str | None:
    """The patch name on a series line, or None for a comment or blank line."""
    line = raw.split("#", 1)[0].strip()
    return line.split()[0] if line else None


def parse_series_text(text: str) -> list[str]:
    """Names from series text: '#' comments and blank lines skipped; quilt's '-p1' accepted."""
    names = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) > 2 or (len(parts) == 2 and parts[1] != "-p1"):
            raise SeamError(
                f"series line {lineno}: {raw!r}: only '<name>' or '<name> -p1' is supported",
                hint="edit series, then make lint",
            )
        if "/" in parts[0] or parts[0].startswith("."):
            raise SeamError(
                f"series line {lineno}: {parts[0]!r}: patch names are plain file names",
                hint="edit series, then make lint",
            )
        names.append(parts[0])
    return names


def read_series(root: Path, queue: Queue = DEFAULT_QUEUE, base: str | None = None) -> Series:
    """The queue at ``queue`` (default: the top-level v0.31.0 queue)."""
    path = root / queue.series
    if not path.exists():
        if base is not None and queue != DEFAULT_QUEUE:
            raise SeamError(
                f"{base} has no queue yet: no {queue.series} (bases.toml: queue of {base})",
                hint=f"make carry VERSION={base.removeprefix('v')}   (or read first: make port VERB=report TO={base})",
            )
        raise SeamError(f"no {queue.series} file in {root}", hint="create it (one patch name per line)")
    names = parse_series_text(path.read_text())
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SeamError(
                f"{path}: {name} is listed twice (a patch applies once)",
                hint=f"remove the second '{name}' line from {path}, then run the command again",
            )
        seen.add(name)
        listed = root / queue.patches / name
        if listed.is_symlink():  # written over by refresh, read elsewhere: a queue's file is its own
            raise RefusedError(
                f"{listed}: a symlink (to {os.readlink(listed)}), not a patch file: a queue's patches are "
                "never reached through a symlink (refresh would replace the link, not write its target)",
                hint=f"put the file itself there (`{hints.shell('cp', '--remove-destination', os.path.realpath(listed), listed)}`), "
                "then run the command again",
            )
    return Series(root, names, queue)


def _slug(name: str) -> str:
    """``0003-foo.patch`` -> ``foo.patch``: a patch's identity across renumbering."""
    head, _, rest = name.partition("-")
    return rest if head.isdigit() and rest else name


def rewrite_series_text(text: str, order: list[str]) -> str:
    """``text`` with its entries replaced by ``order``, keeping comments, blank lines and
    each entry's ``-p1`` / trailing comment.

    An entry keeps its line when its patch (by slug: the name without its number) is
    still in ``order``; the kept lines take the names of ``order`` in turn; a new patch
    goes right after the entry before it (at the end when the series had none).
    """
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    old_names = [n for n in (_entry(raw) for raw in lines) if n]
    old_slugs = {_slug(n) for n in old_names}
    new_slugs = {_slug(n) for n in order}
    kept_names = [n for n in order if _slug(n) in old_slugs]
    if len(kept_names) != sum(_slug(n) in new_slugs for n in old_names):  # repeated slugs: no safe mapping
        return "".join(f"{n}\n" for n in order)
    kept = iter(kept_names)
    added_after: dict[str | None, list[str]] = {}
    previous = None
    for name in order:
        if _slug(name) not in old_slugs:
            added_after.setdefault(previous, []).append(name)
        previous = name
    out: list[str] = []
    placed_first = False
    for raw in lines:
        name = _entry(raw)
        if name is None:
            out.append(raw)
            continue
        if not placed_first:
            out += [f"{n}\n" for n in added_after.pop(None, [])]
            placed_first = True
        if _slug(name) not in new_slugs:
            continue  # a removed patch: its line goes
        new = next(kept)
        out.append(raw.replace(name, new, 1))
        out += [f"{n}\n" for n in added_after.pop(new, [])]
    for names in added_after.values():  # no entry line to follow (an empty or all-new series)
        out += [f"{n}\n" for n in names]
    return "".join(out)


def write_series(root: Path, names: list[str], queue: Queue = DEFAULT_QUEUE) -> None:
    """Rewrite the queue's series to list ``names``, keeping its comments, blank lines and ``-p1``."""
    path = root / queue.series
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    atomic_write(path, rewrite_series_text(old, names))


def patch_filename(index: int, slug: str) -> str:
    """``0001-kv-cache-dtype-registry.patch``: position in the series and the subject's slug."""
    return f"{index:04d}-{slug}.patch"
