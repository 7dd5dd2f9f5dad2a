"""What passed: one record per lane (or lane step) that passed, keyed by a digest of what it read.

A record is written (atomically, once the lane's verdict is in) only for a step that passed;
a failed or interrupted step writes nothing, so the next run runs it again, and a step that ran
and failed removes the pass recorded before under its key (``FRESH=1`` failing, then a plain
run: it runs again). A run finds a step's
record by its key and skips the step, saying ``cached pass from <time>``; ``FRESH=1`` (the
environment; ``.ci/run`` sets it) or ``--fresh`` runs every step and records it anew.

The records live under the project's ``build/passes/`` (``layout.passes``): one directory per
base and ``project/`` for what no base owns (the tooling lane), one JSON file per step and key.
Each record keeps the step's wall time, the machine's load and core count and the date:
``timings.jsonl`` beside them holds one line per step run or skipped, the timing record the
docs' figures come from (``tkv-seam seamtest times``). Records are never read or written through
a symlink below ``build/`` (``build/passes`` or ``build/passes/<base>`` a link: no record).

The key's parts (``keys``): the tool's own source, the project's files (every one a step can
reach), the patched tree's tree id at the step's prefix, the base's sdist sha256, the venv
lock, the venv's installed state and, where the plugin is loaded, the plugin pin.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from .. import layout
from ..errors import UsageError
from ..fsutil import atomic_write
from ..outputs import symlink_on_the_way

#: Bump when what a record means changes.
FORMAT = 1
#: Records kept per step name (older keys are removed when a new one is written).
KEEP = 4
FRESH_ENV = "FRESH"


#: The one spelling of a yes/no variable (FRESH here; the Makefile's PROVE, FRESH, JSON, FORCE alike).
ON, OFF = ("1", "on", "yes", "true"), ("", "0", "off", "no", "false")


def switch(name: str, value: str | None) -> bool:
    """``value`` of the yes/no variable ``name``: 1/on/yes/true or 0/off/no/false (any case;
    unset or empty: off); anything else is a usage error (exit 2)."""
    word = (value or "").strip().lower()
    if word in ON or word in OFF:
        return word in ON
    raise UsageError(
        f"{name}={value!r} is neither on nor off (1/on/yes/true or 0/off/no/false, any case)",
        hint=f"export {name}=1",
    )


def fresh_from_env() -> bool:
    return switch(FRESH_ENV, os.environ.get(FRESH_ENV))


def digest(parts) -> str:
    """The sha256 of ``parts`` (any JSON value) in a canonical spelling."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def machine() -> dict:
    """What a timing depends on besides the work: cores and the load when it was taken."""
    try:
        load = round(os.getloadavg()[0], 1)
    except OSError:
        load = None
    return {"cores": os.cpu_count(), "load": load}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


@dataclass(frozen=True)
class Record:
    name: str
    key: str
    when: str  # when the pass was recorded (UTC)
    seconds: float
    data: dict

    @property
    def line(self) -> str:
        skipped = self.data.get("skipped") if isinstance(self.data, dict) else None
        also = f", {skipped} skipped" if skipped else ""
        return f"cached pass from {self.when} (took {self.seconds:.0f} s{also}; FRESH=1 runs it again)"


@dataclass
class PassBook:
    """The records of one base (or of the project: ``base=None``)."""

    root: Path
    base: str | None = None
    fresh: bool = False  # True: never read a record (every step runs); still write them

    @property
    def dir(self) -> Path:
        return layout.passes(self.root, self.base)

    @property
    def linked(self) -> Path | None:
        """The symlink on the way to the records below ``build/`` (``build/passes``,
        ``build/passes/<base>``), or None: through one, no record is read or written."""
        return symlink_on_the_way(layout.build(self.root), self.dir)

    def _file(self, name: str, key: str) -> Path:
        return self.dir / f"{_safe(name)}-{key[:24]}.json"

    def lookup(self, name: str, key: str) -> Record | None:
        """The recorded pass of ``name`` under ``key``; None when fresh or none was recorded.
        A record that is not a regular file the tool wrote (a symlink, a directory), one reached
        through a symlink below ``build/``, or whose fields are not what ``record`` writes counts
        as none: the step runs again."""
        if self.fresh or self.linked is not None:
            return None
        data = _read_record(self._file(name, key))
        if data is None or data.get("format") != FORMAT or data.get("key") != key or data.get("name") != name:
            return None
        when, seconds, kept = data.get("when"), data.get("seconds", 0.0), data.get("data", {})
        if not isinstance(when, str) or not _is_number(seconds) or not isinstance(kept, dict):
            return None
        return Record(name, key, when, float(seconds), kept)

    def record(self, name: str, key: str, seconds: float, data: dict | None = None) -> Record | None:
        """Record that ``name`` passed under ``key`` (atomically); drop its oldest records.
        None when the record cannot be written (its path is a directory, the disk is full): the
        pass stands, the step runs again next time."""
        rec = Record(name, key, now_iso(), round(seconds, 1), data or {})
        body = {
            "format": FORMAT,
            "name": name,
            "key": key,
            "when": rec.when,
            "seconds": rec.seconds,
            "machine": machine(),
            "data": rec.data,
        }
        if self.linked is not None:
            return None
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            if self.linked is not None:  # made a link meanwhile
                return None
            atomic_write(self._file(name, key), json.dumps(body, sort_keys=True) + "\n")
        except OSError:
            return None
        self._drop_old(name, key)
        return rec

    def forget(self, name: str, key: str) -> None:
        """``name`` ran under ``key`` and did not pass: remove its record under that key."""
        if self.linked is not None:
            return
        path = self._file(name, key)
        with contextlib.suppress(OSError):
            if stat.S_ISREG(path.lstat().st_mode):
                path.unlink()

    def _drop_old(self, name: str, key: str) -> None:
        """Remove all but the newest ``KEEP`` records of ``name``: only regular files named as
        ``record`` names them (not a longer name's); one another run removed first is skipped."""
        mine = re.compile(re.escape(_safe(name)) + r"-[0-9a-f]{24}\.json")
        found = []
        for path in self.dir.glob(f"{_safe(name)}-*.json"):
            try:
                st = path.lstat()
            except OSError:
                continue
            if mine.fullmatch(path.name) and stat.S_ISREG(st.st_mode):
                found.append((st.st_mtime_ns, path))
        for _, path in sorted(found)[:-KEEP]:
            if path != self._file(name, key):
                with contextlib.suppress(OSError):
                    path.unlink()

    def time(self, name: str, seconds: float, cached: bool, ok: bool = True) -> None:
        """One line of the timing record (``timings.jsonl``): a step run (or skipped as cached).
        Started on a line of its own (a killed run's cut-short line is not joined to it); not
        written through a symlink or into a directory (the record is a help, never a failure)."""
        line = {
            "name": name,
            "base": self.base,
            "seconds": round(seconds, 1),
            "cached": cached,
            "ok": ok,
            "when": now_iso(),
            **machine(),
        }
        text = json.dumps(line, sort_keys=True) + "\n"
        if self.linked is not None:
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(
                self.dir / "timings.jsonl", os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666
            )
        except OSError:
            return
        with os.fdopen(fd, "r+b") as f:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                text = "\n" + text
            with contextlib.suppress(OSError):
                f.write(text.encode())

    def last_seconds(self, name: str) -> float | None:
        """How long ``name`` took when it last ran (not skipped), from the timing record."""
        found = None
        if self.linked is not None:
            return None
        for row in read_timings(self.dir / "timings.jsonl"):
            if row["name"] == name and not row.get("cached"):
                found = float(row["seconds"])
        return found


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _read_record(path: Path) -> dict | None:
    """A record file's JSON object; None when it is not a regular file or not a JSON object."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_timings(path: Path) -> list[dict]:
    """The rows of a timing record that are rows ``PassBook.time`` writes (a name, seconds and
    when); a line cut short by a killed run, or one edited into something else, is skipped."""
    rows = []
    try:
        text = path.read_text()
    except (OSError, ValueError):
        return rows
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(row, dict)
            and isinstance(row.get("name"), str)
            and _is_number(row.get("seconds"))
            and isinstance(row.get("when"), str)
        ):
            rows.append(row)
    return rows


class Clock:
    """Wall seconds since it was made."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.start
