"""A tree's commits as the queue's patch files: the canonical text of each commit, and what a
tree records of the queue it was exported to.

``refresh`` and ``port finish`` write these texts into a queue (``queue.writer``) and record
it in the tree's state (``record_export``); ``apply`` compares the texts of a tree it replaces
with what the project's git holds, so nothing it replaces is lost. ``inputs_digest`` is what
a tree was made from (its base, source and series), as its state records it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .. import git, hints
from ..bases.pins import Base
from ..errors import SeamError
from ..layout import BASE_TAG
from ..queue.header import PatchFormatError
from ..queue.patch import parse_text
from ..queue.series import Series, patch_filename, read_series
from .state import AppliedPatch, TreeState


def format_commit(tree: Path, commit: str) -> str:
    """One commit as canonical patch text."""
    data = git.repo.format_patch(tree, commit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise SeamError(
            f"{tree}: commit {commit[:12]}: its patch text is not UTF-8 (byte {data[e.start]:#04x} on "
            f"line {line} of `git format-patch`); patches are UTF-8 text",
            hint=f"re-encode the file in UTF-8 and amend the commit (`{hints.shell('git', '-C', tree, 'show', commit[:12])}` "
            "shows it), then refresh again",
        ) from e
    lines = text.split("\n")
    head_end = lines.index("") if "" in lines else 0
    kept = [line for i, line in enumerate(lines) if not (i < head_end and line.startswith("Date: "))]
    return "\n".join(kept)


def commits_after_base(tree: Path, base_commit: str) -> list[str]:
    merges = git.repo.merges_after(tree, base_commit)
    if merges:
        raise SeamError(
            f"{tree}: merge commits after the base cannot be exported: {merges[0][:12]}",
            hint=f"linearise the branch (`{hints.shell('git', '-C', tree, 'rebase', BASE_TAG)}`) and refresh again",
        )
    return git.repo.commits_after(tree, base_commit)


def export_texts(tree: Path, base_commit: str) -> tuple[dict[str, str], list[str]]:
    """Canonical patch text per commit after ``base_commit``, named by position and slug."""
    texts: dict[str, str] = {}
    order: list[str] = []
    for k, commit in enumerate(commits_after_base(tree, base_commit), 1):
        text = format_commit(tree, commit)
        try:
            header = parse_text(text, f"commit {commit[:12]}").header
        except PatchFormatError as e:  # the tree's commit is what to change: the queue is not written
            raise SeamError(
                f"{tree}: {e.message}; a commit of the tree becomes one patch file, and this one cannot "
                "be (nothing was written)",
                hint=f"change that commit (`{hints.shell('git', '-C', tree, 'rebase', '-i', BASE_TAG)}`: mark it "
                "reword, edit or drop), then refresh again",
            ) from e
        name = patch_filename(k, header.slug)
        if name in texts:
            raise SeamError(
                f"{tree}: two commits export to {name}: give them different subjects",
                hint=f"{hints.shell('git', '-C', tree, 'rebase', '-i', BASE_TAG)}  (reword one), then refresh again",
            )
        texts[name] = text
        order.append(name)
    return texts, order


def inputs_digest(base: Base, source: str, series: Series) -> str:
    h = hashlib.sha256()
    h.update(f"{base.name}\0{source}\0{base.sdist.sha256}\0{base.commit_prefix}\0".encode())
    h.update(series.digest().encode())
    return h.hexdigest()


def record_export(tree: Path, state: TreeState, base: Base, root: Path, order: list[str]) -> None:
    """Record in ``state`` what the queue now holds: its patches (name, commit, files), HEAD, digests."""
    series = read_series(root, base.queue)
    commits = commits_after_base(tree, state.base_commit)
    state.patches = [AppliedPatch(n, c, git.repo.files_of(tree, c)) for n, c in zip(order, commits)]
    state.head = git.repo.head(tree)
    state.digest = inputs_digest(base, state.source, series)
    state.inputs = series.file_digests()
