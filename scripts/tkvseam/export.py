"""Refresh: turn the build tree's commits after the base back into ``patches/`` + ``series``.

The output is canonical ``git format-patch`` text, made byte-stable:

- ``--zero-commit``: the ``From <id>`` line is all zeros, so ids never churn;
- ``--full-index``: full blob ids on ``index`` lines, so ``git am -3`` / a later
  3-way forward-port finds the preimages;
- ``--no-signature``: no git-version trailer that changes with the git release;
- ``--no-stat``: no diffstat, whose layout varies between git versions;
- ``--no-renames``: plain deletions/additions that every tool (quilt, unidiff) reads;
- ``-N``: ``[PATCH]`` without ``n/m`` numbering, which would change on every insertion;
- the ``Date:`` header is dropped: no timestamps.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import git
from .apply import BASE_TAG, AppliedPatch, ApplyResult, _write_state, inputs_digest, read_state
from .bases import Base
from .errors import RefusedError, SeamError
from .patch import parse_text
from .series import Series, patch_filename, read_series, write_series

FORMAT_PATCH_ARGS = (
    "format-patch",
    "-1",
    "--stdout",
    "--zero-commit",
    "--full-index",
    "--no-signature",
    "--no-stat",
    "--no-renames",
    "-N",
    "--encoding=UTF-8",
)


@dataclass
class Exported:
    name: str
    status: str  # "unchanged", "updated", "added", "removed"


def format_commit(tree: Path, commit: str) -> str:
    """One commit as canonical patch text."""
    text = git.run(tree, *FORMAT_PATCH_ARGS, commit).stdout.decode("utf-8")
    lines = text.split("\n")
    head_end = lines.index("") if "" in lines else 0
    kept = [line for i, line in enumerate(lines) if not (i < head_end and line.startswith("Date: "))]
    return "\n".join(kept)


def commits_after_base(tree: Path, base_commit: str) -> list[str]:
    merges = git.out(tree, "rev-list", "--merges", f"{base_commit}..HEAD")
    if merges:
        raise SeamError(
            f"{tree}: merge commits after the base cannot be exported: {merges.split()[0][:12]}",
            hint=f"linearise the branch (git -C {tree} rebase {BASE_TAG}) and refresh again",
        )
    out = git.out(tree, "rev-list", "--reverse", f"{base_commit}..HEAD")
    return out.split() if out else []


def refresh(root: Path, base: Base, tree: Path, force: bool = False) -> list[Exported]:
    """Export the tree's commits to ``root``'s patches and series; refuse to lose work."""
    state = read_state(tree)
    if state is None:
        raise SeamError(f"{tree} is not a tree made by tkv-seam apply", hint="make apply")
    dirty = git.status_porcelain(tree)
    if dirty:
        raise RefusedError(
            f"{tree} has uncommitted changes ({len(dirty)} paths); refresh exports commits only",
            hint=f"commit them (git -C {tree} commit -a) or stash them, then `make refresh`",
        )
    series = read_series(root)
    if not force and inputs_digest(base, state["source"], series) != state["digest"]:
        raise RefusedError(
            "patches/ or series changed since the tree was applied; refresh would overwrite those edits",
            hint="keep the patch edits: `make apply FORCE=1` (drops tree commits); "
            "keep the tree commits: `make refresh FORCE=1`",
        )
    texts: dict[str, str] = {}
    order: list[str] = []
    for k, commit in enumerate(commits_after_base(tree, state["base_commit"]), 1):
        text = format_commit(tree, commit)
        header = parse_text(text, f"commit {commit[:12]}").header
        name = patch_filename(k, header.slug)
        if name in texts:
            raise SeamError(f"two commits export to {name}: give them different subjects")
        texts[name] = text
        order.append(name)
    report: list[Exported] = []
    patches = series.patches_dir
    patches.mkdir(exist_ok=True)
    for name in order:
        path = patches / name
        data = texts[name].encode("utf-8")
        if path.exists() and path.read_bytes() == data:
            report.append(Exported(name, "unchanged"))
            continue
        report.append(Exported(name, "updated" if path.exists() else "added"))
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=patches)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    for name in series.names:
        if name not in texts and (patches / name).exists():
            (patches / name).unlink()
            report.append(Exported(name, "removed"))
    if series.names != order:
        write_series(root, order)
    new_series = Series(root, order)
    applied = [
        AppliedPatch(n, c, git.out(tree, "diff-tree", "--no-commit-id", "--name-only", "-r", c).split())
        for n, c in zip(order, commits_after_base(tree, state["base_commit"]))
    ]
    result = ApplyResult(**{**state, "patches": applied})
    result.head = git.head(tree)
    result.digest = inputs_digest(base, state["source"], new_series)
    _write_state(tree, result)
    return report
