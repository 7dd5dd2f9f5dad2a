"""A build tree's commits as the queue's patch files: the canonical text of each commit.

``refresh`` writes these texts into the queue; ``apply`` compares the texts of a tree it replaces
with what the project's git holds, so nothing it replaces is lost.
"""

from __future__ import annotations

from pathlib import Path

from .. import git, hints
from ..errors import SeamError
from ..layout import BASE_TAG
from ..queue.header import PatchFormatError
from ..queue.patch import parse_text
from ..queue.series import patch_filename


def format_commit(tree: Path, commit: str) -> str:
    """One commit as canonical patch text."""
    data = git.format_patch(tree, commit)
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
    merges = git.merges_after(tree, base_commit)
    if merges:
        raise SeamError(
            f"{tree}: merge commits after the base cannot be exported: {merges[0][:12]}",
            hint=f"linearise the branch (`{hints.shell('git', '-C', tree, 'rebase', BASE_TAG)}`) and refresh again",
        )
    return git.commits_after(tree, base_commit)


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
