"""Edits of the bases file (``bases.toml``) that keep every other byte: tomlkit, written atomically.

The file lists the bases in release order (PEP 440), whatever order they are pinned in:
``insert_base`` puts a new table before the first newer release. ``set_seam`` writes a base's
``["<base>".seam]`` table; ``remove_base`` drops a base's tables. Both hold the file's lock
(``.bases.toml.lock`` beside it) from reading to writing, so two runs never lose each other's edit.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path

import tomlkit
from packaging.version import InvalidVersion, Version
from tomlkit.items import Table

from .. import hints
from ..errors import RefusedError, SeamError
from ..fsutil import atomic_write
from ..layout import lock_of
from ..lock import locked
from .pins import CpuVenv


def read(path: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(path.read_text())
    except (OSError, UnicodeDecodeError, tomlkit.exceptions.ParseError) as e:
        raise SeamError(f"cannot read bases file {path}: {e}", hint=f"git diff -- {path.name}") from e


def _temporary(path: Path, name: str) -> bool:
    """``name`` is one of ``atomic_write``'s temporary files for ``path`` (``mkstemp``'s 8 characters)."""
    return re.fullmatch(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp", name) is not None


def refuse_link(path: Path) -> None:
    """A bases file given as a symlink is refused (exit 5) before anything is written: the atomic
    write would replace the link by a plain file (the file it names left as it was), and writing
    through it would edit a file of another checkout. ``--bases <the file itself>`` writes it."""
    if path.is_symlink():
        target = path.resolve()
        raise RefusedError(
            f"{path} is a symlink (to {os.readlink(path)}): tkv-seam never replaces the link by a plain file "
            "nor writes through it; nothing was changed",
            hint=f"name the file itself with --bases {hints.quote(target)} (`{hints.tool('--bases', target, 'bases')}` lists it), "
            "or make the link a file of this project",
        )


def write(path: Path, doc: tomlkit.TOMLDocument) -> None:
    """Replace ``path`` with ``doc`` atomically (a crash leaves the old file or the new one).

    The caller holds the file's lock, so a temporary file of this writer's shape beside it is
    one a killed run left: it is removed (nothing else is). A symlink is refused (``refuse_link``).
    """
    refuse_link(path)
    for entry in path.parent.iterdir():
        if _temporary(path, entry.name) and entry.is_file() and not entry.is_symlink():
            entry.unlink()
    atomic_write(path, tomlkit.dumps(doc))


def inline_table(values: dict) -> tomlkit.items.InlineTable:
    """An inline table spaced like the hand-written ones: ``{ a = 1, b = 2 }``."""
    table = tomlkit.inline_table()
    table.update(values)
    keys = list(table)
    table.item(keys[0]).trivia.indent = " "
    table.item(keys[-1]).trivia.trail = " "
    return table


def _version(table: object) -> Version | None:
    try:
        return Version(str(table["version"]))  # type: ignore[index]
    except (KeyError, TypeError, InvalidVersion):
        return None


def insert_base(doc: tomlkit.TOMLDocument, name: str, table: Table) -> None:
    """Add ``name``'s table before the first base of a newer release (else at the end)."""
    new = _version(table)
    for index, (key, item) in enumerate(doc.body):
        if key is None or not isinstance(item, Table):
            continue
        old = _version(item)
        if new is not None and old is not None and old > new:
            table.add(tomlkit.nl())  # a blank line before the next table
            doc._insert_at(index, name, table)  # tomlkit's positional insert (no public one)
            return
    doc.add(name, table)


def set_seam(path: Path, name: str, seam: Table, check: Callable[[], bool] | None = None) -> bool:
    """Write ``seam`` as ``["<name>".seam]`` (replacing an existing one) into the bases file.

    ``check``, called holding the file's lock before it is read: False leaves the file as it is
    (it decides on the file as it is now, not as it was when the table was derived).
    """
    with locked(lock_of(path), f"the bases file {path}"):
        if check is not None and not check():
            return False
        doc = read(path)
        if name not in doc:
            raise SeamError(
                f"{path}: no [{name!r}] table to add a seam table to",
                hint=f"make pin VERSION={name.removeprefix('v')}",
            )
        base = doc[name]
        if "seam" in base:
            del base["seam"]
        base.add("seam", seam)
        write(path, doc)
    return True


def cpu_table(cpu: CpuVenv, comment: str = "") -> Table:
    """``["<base>".seam.cpu]`` as the hand-written ones look: one exclusion per line."""
    out = tomlkit.table()
    if comment:
        out.add(tomlkit.comment(comment))
    if cpu.torch:
        out.add("torch", cpu.torch)
    exclude = tomlkit.array()
    for e in cpu.exclude:
        exclude.append(inline_table({"name": e.name, "why": e.why}))
    out.add("exclude", exclude.multiline(True))
    if cpu.triton:
        out.add("triton", cpu.triton)
    return out


def set_cpu(path: Path, name: str, cpu: CpuVenv) -> None:
    """Write ``cpu`` as ``["<name>".seam.cpu]`` (the rest of the seam table kept, created empty
    when the base has none yet), holding the file's lock."""
    with locked(lock_of(path), f"the bases file {path}"):
        doc = read(path)
        if name not in doc:
            raise SeamError(
                f"{path}: no [{name!r}] table to add CPU test venv rules to",
                hint=f"make pin VERSION={name.removeprefix('v')}",
            )
        base = doc[name]
        if "seam" not in base:
            base.add("seam", tomlkit.table())
        seam = base["seam"]
        if isinstance(seam, tomlkit.items.InlineTable):  # seam = { ... } on one line: cpu too
            new = cpu_table(cpu)
            seam["cpu"] = inline_table({key: new[key] for key in new})
        elif "cpu" not in seam:
            seam.add("cpu", cpu_table(cpu))
        else:  # key by key, so the table's comments stay
            table, new = seam["cpu"], cpu_table(cpu)
            for key in ("torch", "exclude", "triton"):
                if key in new:
                    table[key] = new[key]
                elif key in table:
                    del table[key]
        write(path, doc)


def remove_base(path: Path, name: str, held: bool = False) -> bool:
    """Drop ``name``'s table (and its ``.seam`` table); False when the file has none.

    ``held``: the caller holds the file's lock already (``retire`` holds it for its whole run).
    """
    with contextlib.nullcontext() if held else locked(lock_of(path), f"the bases file {path}"):
        doc = read(path)
        if name not in doc:
            return False
        doc.remove(name)
        write(path, doc)
    return True
