"""A queue: its ``series`` file (quilt's: one patch name per line) and its patch directory.

Every base has its own queue; ``bases.toml`` says where (``queue = { series, patches }``).
The v0.31.0 queue is quilt's default layout: ``series`` and ``patches/`` at the top level.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SeamError
from .patch import Patch, parse_file

SERIES = "series"
PATCHES = "patches"


@dataclass(frozen=True)
class Queue:
    """Where one base's queue lives, relative to the project root (QUILT_SERIES, QUILT_PATCHES)."""

    series: str = SERIES
    patches: str = PATCHES

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

    def digest(self) -> str:
        """sha256 over the names and bytes of the listed patches: identifies the series' content."""
        h = hashlib.sha256()
        for name in self.names:
            h.update(name.encode() + b"\0")
            p = self.path(name)
            h.update(p.read_bytes() if p.exists() else b"<missing>")
            h.update(b"\0")
        return h.hexdigest()


def parse_series_text(text: str) -> list[str]:
    """Names from series text: '#' comments and blank lines skipped; quilt's '-p1' accepted."""
    names = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) > 2 or (len(parts) == 2 and parts[1] != "-p1"):
            raise SeamError(f"series line {lineno}: {raw!r}: only '<name>' or '<name> -p1' is supported")
        if "/" in parts[0] or parts[0].startswith("."):
            raise SeamError(f"series line {lineno}: {parts[0]!r}: patch names are plain file names")
        names.append(parts[0])
    return names


def read_series(root: Path, queue: Queue = DEFAULT_QUEUE, base: str | None = None) -> Series:
    """The queue at ``queue`` (default: the top-level v0.31.0 queue)."""
    path = root / queue.series
    if not path.exists():
        if base is not None and queue != DEFAULT_QUEUE:
            raise SeamError(
                f"{base} has no queue yet: no {queue.series} (bases.toml: queue of {base})",
                hint=f"tkv-seam port --to {base} --report   (then `tkv-seam port --to {base}`)",
            )
        raise SeamError(f"no {queue.series} file in {root}", hint="create it (one patch name per line)")
    return Series(root, parse_series_text(path.read_text()), queue)


def write_series(root: Path, names: list[str], queue: Queue = DEFAULT_QUEUE) -> None:
    path = root / queue.series
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{n}\n" for n in names))


def patch_filename(index: int, slug: str) -> str:
    """``0001-kv-cache-dtype-registry.patch``: position in the series and the subject's slug."""
    return f"{index:04d}-{slug}.patch"
