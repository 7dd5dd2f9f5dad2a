"""Refresh: turn the build tree's commits after the base back into the base's own queue.

The output is canonical ``git format-patch`` text, made byte-stable (``git.repo.format_patch``
gives each flag's reason) with the ``Date:`` header dropped: no timestamps.
The queue is written by ``queue.writer.write_queue``, as ``port finish`` writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import git, hints
from ..answer import Answer, plain
from ..tree.export import export_texts, inputs_digest, record_export
from ..bases.pins import Base
from ..errors import RefusedError
from ..progress import QUIET, Progress
from ..layout import BASE_TAG
from ..tree.seamtree import SeamTree
from ..queue.series import Series, read_series
from ..queue.writer import Exported, ExportStatus, queue_snapshot, write_queue
from ..tree.state import Kind, TreeState


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
    edited = [
        f"{where}/{n}" + ("" if d else " (deleted, still in series)")
        for n, d in now.items()
        if state.inputs.get(n) != d
    ]
    edited += [f"{where}/{n} (no longer in series)" for n in state.inputs if n not in now]
    return edited


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
    dirty = git.index.status_paths(tree)
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
        missing = [n for n in series.names if not series.path(n).exists()]
        if missing and not force:  # no apply can make a tree of a series whose files are gone
            gone = [f"{base.queue.patches}/{n}" for n in missing]
            back = (
                f"`{hints.shell('git', 'checkout', '--', *gone)}`"
                if git.index.toplevel(root) is not None
                else f"into {base.queue.patches}/, or take them out of {base.queue.series}"
            )
            raise RefusedError(
                f"{base.queue.patches}/ or {base.queue.series} changed since the tree was applied, and "
                f"{base.queue.series} lists patch files that are gone:{named}",
                hint=f"put them back: {back}; or keep the tree commits: "
                f"`{hints.rerun('refresh', root, base.name, tree, force=True)}` (writes every patch file "
                f"anew, backing up the queue first)",
            )
        if not force:
            # commits made in the tree since it was applied are work a plain apply refuses to drop
            moved = git.repo.head(tree) != state.head
            apply = hints.rerun("apply", root, base.name, tree, force=moved)
            kept = (
                "its commits since the apply kept in a ref, named"
                if moved
                else "its commits kept in a ref, named, unless the project's git holds each as a patch file already"
            )
            raise RefusedError(
                f"{base.queue.patches}/ or {base.queue.series} changed since the tree was applied; "
                f"refresh would overwrite those edits{':' if named else ''}{named}",
                hint=f"keep the patch edits: `{apply}` (the tree made anew from them; {kept}); keep the tree "
                f"commits: `{hints.rerun('refresh', root, base.name, tree, force=True)}` (backs up the patch "
                f"files first)",
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
