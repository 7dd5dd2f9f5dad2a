"""Writing a queue: a tree's patch texts as a queue's files, and what a writer reads of the queue first.

``write_queue`` writes the patch texts as the queue (only the one named), keeping the header
fields each commit message lost (``keep_header``) and refusing to delete a patch unless forced;
``queue_snapshot`` is what a writer may replace (kept before it writes), ``queue_digest`` what a
port found at its start, ``queue_edits`` the queue's uncommitted changes in the project's git.
``refresh`` (a build tree) and ``port finish`` (a port tree) both write through here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from .. import git
from ..errors import RefusedError
from ..fsutil import atomic_write
from .header import Header, PatchFormatError
from .patch import parse_text
from .series import Queue, Series, read_series, write_series


class ExportStatus(StrEnum):
    """What writing a queue did to one patch file."""

    UNCHANGED = "unchanged"
    UPDATED = "updated"
    ADDED = "added"
    REMOVED = "removed"


@dataclass
class Exported:
    """One patch file of a written queue: what happened to it, and the header fields its commit
    message had lost that were put back from the patch it replaced (``keep_header``)."""

    name: str
    status: ExportStatus
    kept: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``updated (kept Reason, Verdict)``: the status as a person reads it."""
        return self.status + (f" (kept {', '.join(self.kept)})" if self.kept else "")

    def line(self, patches: str) -> str:
        return f"{self.label:9} {patches}/{self.name}"


def queue_snapshot(root: Path, queue: Queue) -> dict[str, bytes]:
    """The files of a queue a writer may replace (its series, its ``*.patch``, its PORT.md):
    project-relative path -> bytes."""
    files = [root / queue.series, root / queue.port_md]
    patches = root / queue.patches
    if patches.is_dir():
        files += sorted(patches.glob("*.patch"))
    return {str(p.relative_to(root)): p.read_bytes() for p in files if p.is_file() and not p.is_symlink()}


def queue_digest(root: Path, queue: Queue) -> str:
    """sha256 over a queue's files (``absent`` when it has none): what a port finds at its start."""
    files = queue_snapshot(root, queue)
    if not files:
        return "absent"
    h = hashlib.sha256()
    for rel, data in sorted(files.items()):
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).hexdigest().encode() + b"\0")
    return h.hexdigest()


def queue_edits(root: Path, queue: Queue) -> list[tuple[str, str]]:
    """Uncommitted changes (and untracked files) of the queue in the project's git; none when the
    project is not a git repository."""
    if git.index.toplevel(root) is None:
        return []
    return [(st.strip() or "??", p) for st, p in git.index.status_paths(root, [queue.series, queue.patches])]


def changed_files(before: dict[str, bytes], root: Path) -> dict[str, bytes]:
    """The files of ``before`` (a snapshot) whose bytes are no longer at their path."""
    out = {}
    for rel, data in before.items():
        p = root / rel
        if not p.is_file() or p.read_bytes() != data:
            out[rel] = data
    return out


def keep_header(text: str, old: Header | None) -> tuple[str, list[str]]:
    """``text`` with the header fields of ``old`` (same patch) that its commit message lost put back.

    A commit made by hand (a resolved port, ``git commit -m``) may carry a shorter message
    than the patch it came from; the patch's Verdict, Reason, Depends-on, Tests... stay.
    """
    if old is None:
        return text, []
    new = parse_text(text, "export").header
    missing = [(k, v) for k in old.trailers if not new.get(k) for v in old.trailers[k]]
    if not missing:
        return text, []
    idx = text.find("\ndiff --git ") + 1
    head, diff = text[:idx].rstrip("\n"), text[idx:]
    sep = "\n" if new.trailers else "\n\n"
    head += sep + "\n".join(f"{k}: {v}" for k, v in missing) + "\n\n"
    return head + diff, sorted({k for k, _ in missing})


def write_queue(
    root: Path,
    queue: Queue,
    texts: dict[str, str],
    order: list[str],
    force: bool = False,
    again: str = "",
    verb: str = "refresh",
) -> list[Exported]:
    """Write ``texts`` as the queue at ``queue`` (and only there); refuse to delete a patch unless ``force``.

    Every patch keeps the header fields of the patch with the same slug already in the queue.
    """
    old = read_series(root, queue) if (root / queue.series).exists() else Series(root, [], queue)
    old_headers = {}
    for name in old.names:
        if old.path(name).is_file():
            try:
                header = parse_text(old.path(name).read_text(), name).header
            except (PatchFormatError, UnicodeDecodeError):
                continue  # not a patch (its bytes are kept by the caller's backup): no header to keep
            old_headers[header.slug] = header
    gone = [n for n in old.names if n not in texts and old.path(n).exists()]
    if gone and not force:
        listing = "\n".join(f"    {old.path(n).relative_to(root)}" for n in gone)
        raise RefusedError(
            f"{verb} would delete {len(gone)} patch(es) of {queue.series} that the tree has no commit for:\n"
            + listing,
            hint="keep them: add their commits back to the tree; delete them: "
            + (again or "run it again with --force"),
        )
    report: list[Exported] = []
    patches = old.patches_dir
    patches.mkdir(parents=True, exist_ok=True)
    for name in order:
        text, kept = keep_header(texts[name], old_headers.get(parse_text(texts[name], name).header.slug))
        path = patches / name
        data = text.encode("utf-8")
        if path.exists() and path.read_bytes() == data:
            report.append(Exported(name, ExportStatus.UNCHANGED))
            continue
        status = ExportStatus.UPDATED if path.exists() else ExportStatus.ADDED
        report.append(Exported(name, status, kept))
        atomic_write(path, data)
    for name in gone:
        old.path(name).unlink()
        report.append(Exported(name, ExportStatus.REMOVED))
    if old.names != order or not old.file.exists():
        write_series(root, order, queue)
    return report
