"""Refresh: turn the build tree's commits after the base back into the base's own queue.

The output is canonical ``git format-patch`` text, made byte-stable (``git.format_patch``
gives each flag's reason) with the ``Date:`` header dropped: no timestamps.
``write_queue`` writes a queue (only the one named) and is what ``port finish`` uses too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from .. import git, hints
from ..answer import Answer, plain
from .apply import inputs_digest
from .export import commits_after_base, export_texts
from ..bases.pins import Base
from ..errors import RefusedError
from ..fsutil import atomic_write
from ..queue.header import Header, PatchFormatError
from ..queue.patch import parse_text
from ..progress import QUIET, Progress
from ..layout import BASE_TAG
from ..tree.seamtree import SeamTree
from ..queue.series import Queue, Series, read_series, write_series
from ..tree.state import AppliedPatch, Kind, TreeState


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


@dataclass
class Refreshed(Answer):
    """``refresh``: the queue written from the tree's commits."""

    base: str
    series: str  # the queue's series file, project-relative
    patches: str  # its patch directory
    exported: list[Exported]

    @property
    def changed(self) -> list[Exported]:
        return [e for e in self.exported if e.status != ExportStatus.UNCHANGED]

    def lines(self) -> list[str]:
        changed = self.changed
        return [e.line(self.patches) for e in changed] + [
            f"{len(self.exported) - len(changed)} unchanged, {len(changed)} changed"
        ]

    def to_json(self) -> dict:
        return plain(self) | {"changed": len(self.changed)}


def edited_since_apply(state: TreeState, series: Series) -> list[str]:
    """The patch files (and series entries) that differ from what the tree was applied from."""
    now = series.file_digests()
    where = series.queue.patches
    edited = [f"{where}/{n}" for n, d in now.items() if state.inputs.get(n) != d]
    edited += [f"{where}/{n} (no longer in series)" for n in state.inputs if n not in now]
    return edited


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
    if git.toplevel(root) is None:
        return []
    return [(st.strip() or "??", p) for st, p in git.status_paths(root, [queue.series, queue.patches])]


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


def record_export(tree: Path, state: TreeState, base: Base, root: Path, order: list[str]) -> None:
    """Record in ``state`` what the queue now holds: its patches (name, commit, files), HEAD, digests."""
    series = read_series(root, base.queue)
    commits = commits_after_base(tree, state.base_commit)
    state.patches = [AppliedPatch(n, c, git.files_of(tree, c)) for n, c in zip(order, commits)]
    state.head = git.head(tree)
    state.digest = inputs_digest(base, state.source, series)
    state.inputs = series.file_digests()


def refresh(root: Path, base: Base, tree: Path, force: bool = False, progress: Progress = QUIET) -> Refreshed:
    """Export the tree's commits to ``base``'s own queue (bases.toml); refuse to lose work."""
    seam = SeamTree(tree, root)
    with seam.locked(progress):
        exported = _refresh(root, base, seam, force, progress)
    return Refreshed(base.name, base.queue.series, base.queue.patches, exported)


def fold_hint(tree: Path, state: TreeState, dirty: list[tuple[str, str]]) -> str:
    """How uncommitted edits of a build tree reach the queue: folded into their patch's commit
    (README.md, 'Edit a patch'), the patch named when every edited file is one patch's."""
    owner = {}  # path -> the slug of the last patch that touches it
    for applied in state.patches:
        slug = applied.name.removesuffix(".patch").split("-", 1)[-1]
        owner.update({path: slug for path in applied.files})
    slugs = {owner.get(path) for _, path in dirty}
    slug = slugs.pop() if len(slugs) == 1 and None not in slugs else "<slug>"
    fixup = f"--fixup=:/^{slug}:"
    if any(st.strip() in ("", "??") for st, _ in dirty):  # an untracked file: commit -a leaves it out
        fold = f"{hints.shell('git', '-C', tree, 'add', '-A')} && {hints.shell('git', '-C', tree, 'commit', fixup)}"
    else:
        fold = hints.shell("git", "-C", tree, "commit", "-a", fixup)
    squash = "GIT_SEQUENCE_EDITOR=: " + hints.shell(
        "git", "-C", tree, "rebase", "-i", "--autosquash", BASE_TAG
    )
    return (
        f"fold them into their patch's commit: `{fold}`, then "
        f"`{squash}` (a new patch: commit it with the subject '<slug>: <summary>'); or stash them "
        f"(`{hints.shell('git', '-C', tree, 'stash', '-u')}`); then refresh again"
    )


def _refresh(root: Path, base: Base, seam: SeamTree, force: bool, progress: Progress) -> list[Exported]:
    tree = seam.path
    state = seam.require(Kind.APPLY, base.name, f"refresh (into {base.queue.series})")
    dirty = git.status_paths(tree)
    if dirty:
        shown = "\n".join(f"    {st.strip() or '??'} {path}" for st, path in dirty[:10])
        raise RefusedError(
            f"{tree} has uncommitted changes ({len(dirty)} paths); refresh exports commits only:\n{shown}",
            hint=fold_hint(tree, state, dirty),
        )
    series = read_series(root, base.queue, base.name)
    if inputs_digest(base, state.source, series) != state.digest:
        edited = edited_since_apply(state, series) if state.inputs else []
        named = ("\n" + "\n".join(f"    {e}" for e in edited)) if edited else ""
        if not force:
            raise RefusedError(
                f"{base.queue.patches}/ or {base.queue.series} changed since the tree was applied; "
                f"refresh would overwrite those edits{':' if named else ''}{named}",
                hint=f"keep the patch edits: `{hints.rerun('apply', root, base.name, tree)}` (the tree made anew "
                f"from them; its commits kept in a ref, named); keep the tree commits: "
                f"`{hints.rerun('refresh', root, base.name, tree, force=True)}` (backs up the patch files first)",
            )
        keep = seam.back_up(queue_snapshot(root, base.queue))
        progress.warn(f"--force overwrites the edits to {base.queue.patches}/{named}\nbacked up in {keep}")
    texts, order = export_texts(tree, state.base_commit)
    report = write_queue(
        root, base.queue, texts, order, force, again=hints.rerun("refresh", root, base.name, tree, force=True)
    )
    record_export(tree, state, base, root, order)
    seam.save(state)
    return report
