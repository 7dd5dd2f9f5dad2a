"""Where the tool writes: inside the directory it was given, never through a symlink, and
only over a directory it made itself.

An *output directory* (an overlay stage, the image's build context, ``build/drift``)
carries a marker file, ``.tkv-seam-made.json``: the kind of output, the top-level names
the step writes and, once the step is done (``seal_output_dir``), the sha256 of every
file in it. ``replace_output_dir`` creates the directory, or empties and reuses it only
when it is recognisably the same kind of output: sealed and unchanged since (no file
added, removed or edited), or unsealed (a step killed half-way) holding nothing but the
names the step writes. Anything else is refused (exit 5), naming what is there, and
nothing is deleted. A symlink is never followed: not as the output directory, not
inside it, not on the way from a project root to a path the tool writes.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from . import hints
from .errors import RefusedError, SeamError
from .fsutil import atomic_write, describe_dir, sha256_of

MARKER = ".tkv-seam-made.json"


def symlink_on_the_way(root: Path, path: Path) -> Path | None:
    """The first symlink among ``path`` and its parents below ``root``, or None.

    ``path`` must be ``root`` or below it lexically (``root / rel``); parts that do not
    exist yet are not links.
    """
    rel = Path(os.path.relpath(path, root))
    here = root
    for part in rel.parts:
        here = here / part
        if here.is_symlink():
            return here
    return None


def is_inside(root: Path, path: Path) -> bool:
    """True when ``path`` resolves (symlinks followed) to ``root`` or below it."""
    root, path = Path(os.path.realpath(root)), Path(os.path.realpath(path))
    return path == root or root in path.parents


def _walk(dest: Path) -> tuple[dict[str, Path], list[str]]:
    """The regular files below ``dest`` (marker excluded) by relative path, and what else is
    there (symlinks, devices, FIFOs) that no output step of the tool writes."""
    files, odd = {}, []
    for dirpath, dirnames, filenames in os.walk(dest):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(dest).as_posix()
            if p.is_symlink():
                odd.append(f"{rel} (a symlink)")
            elif p.is_file():
                if rel != MARKER:
                    files[rel] = p
            elif not p.is_dir():
                odd.append(f"{rel} (not a file or directory)")
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink()]
    return files, odd


def _read_marker(dest: Path) -> dict | None:
    try:
        data = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_marker(dest: Path, data: dict) -> None:
    atomic_write(dest / MARKER, json.dumps(data, indent=1, sort_keys=True) + "\n")


def _not_ours(dest: Path, kind: str) -> str | None:
    """Why ``dest`` (an existing real directory) is not a ``kind`` output the tool made, or None
    (an empty directory holds nothing to lose)."""
    marker = _read_marker(dest)
    if marker is None:  # decided without walking the directory (it may be someone's home)
        return None if next(dest.iterdir(), None) is None else f"no {MARKER}"
    if marker.get("kind") != kind:
        return f"it is {marker.get('kind')}"
    files, odd = _walk(dest)
    if odd:
        return f"it holds {', '.join(odd[:3])}"
    recorded = marker.get("files")
    if isinstance(recorded, dict):  # sealed: exactly the files written then, unchanged
        added = sorted(set(files) - set(recorded))
        if added:
            return f"added since the tool wrote it: {', '.join(added[:5])}"
        changed = sorted(rel for rel, p in files.items() if sha256_of(p) != recorded[rel])
        if changed:
            return f"edited since the tool wrote it: {', '.join(changed[:5])}"
        return None
    names = marker.get("names")  # unsealed (a step killed half-way): only the names it writes
    if isinstance(names, list):
        foreign = sorted({rel.split("/", 1)[0] for rel in files} - set(names) - {MARKER})
        if foreign:
            return f"the step writes only {', '.join(names)}; it also holds {', '.join(foreign[:5])}"
    return None


def output_kind(dest: Path) -> str | None:
    """The kind of output ``dest`` is by its marker (``an overlay stage``, ...), or None: not a
    real directory holding a marker the tool wrote."""
    if dest.is_symlink() or not dest.is_dir():
        return None
    marker = _read_marker(dest)
    kind = marker.get("kind") if marker else None
    return kind if isinstance(kind, str) else None


def removal_problem(dest: Path) -> str | None:
    """Why removing the output directory ``dest`` would lose something, or None: it holds exactly
    what the step wrote (sealed and unchanged, or unsealed holding only the step's names)."""
    kind = output_kind(dest)
    if kind is None:
        return f"no {MARKER}: not an output tkv-seam made"
    return _not_ours(dest, kind)


def replace_output_dir(
    dest: Path,
    kind: str,
    names: Iterable[str] | None = None,
    rerun: str = "run the command again",
) -> None:
    """Make ``dest`` an empty output directory of ``kind`` (created, or a previous output emptied).

    ``kind`` names the output with its article ("an overlay stage"), as messages say it.

    ``names``: the top-level entries the step writes (what an unsealed output may hold).
    Refuses (exit 5) a symlink, a file, or a directory the tool did not make (not empty, no
    marker), deleting nothing.
    """
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        what = "a symlink" if dest.is_symlink() else "a file"
        raise RefusedError(
            f"{dest} exists and is not {kind} tkv-seam made ({what}); nothing was written",
            hint=hints.aside(None, dest, rerun, option="path"),
        )
    marker = {"kind": kind, "names": sorted(set(names)) if names is not None else None, "files": None}
    if not dest.exists():
        dest.mkdir(parents=True)
        _write_marker(dest, marker)
        return
    problem = _not_ours(dest, kind)
    if problem:
        raise RefusedError(
            f"{dest} exists and is not {kind} tkv-seam made ({problem}); it holds: "
            f"{describe_dir(dest)}; nothing was deleted",
            hint=hints.aside(None, dest, rerun, option="path"),
        )
    _write_marker(dest, marker)  # unsealed first: a kill while emptying leaves a recognisable output
    for entry in sorted(dest.iterdir()):
        if entry.name == MARKER:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def seal_output_dir(dest: Path) -> None:
    """Record the sha256 of every file now in ``dest`` (the step is done)."""
    marker = _read_marker(dest)
    if marker is None:
        raise SeamError(f"{dest}: {MARKER} is missing; the output was not made by replace_output_dir")
    files, _ = _walk(dest)
    marker["files"] = {rel: sha256_of(p) for rel, p in sorted(files.items())}
    _write_marker(dest, marker)
