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
from .patch import Header, parse_text
from .series import Queue, Series, patch_filename, read_series, write_series

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
    root: Path, queue: Queue, texts: dict[str, str], order: list[str], force: bool = False, again: str = ""
) -> list[Exported]:
    """Write ``texts`` as the queue at ``queue`` (and only there); refuse to delete a patch unless ``force``.

    Every patch keeps the header fields of the patch with the same slug already in the queue.
    """
    old = read_series(root, queue) if (root / queue.series).exists() else Series(root, [], queue)
    old_headers = {}
    for name in old.names:
        if old.path(name).exists():
            header = parse_text(old.path(name).read_text(), name).header
            old_headers[header.slug] = header
    gone = [n for n in old.names if n not in texts and old.path(n).exists()]
    if gone and not force:
        listing = "\n".join(f"    {old.path(n).relative_to(root)}" for n in gone)
        raise RefusedError(
            f"refresh would delete {len(gone)} patch(es) of {queue.series} that the tree has no commit for:\n"
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
            report.append(Exported(name, "unchanged"))
            continue
        status = "updated" if path.exists() else "added"
        report.append(Exported(name, status + (f" (kept {', '.join(kept)})" if kept else "")))
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=patches)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    for name in gone:
        old.path(name).unlink()
        report.append(Exported(name, "removed"))
    if old.names != order or not old.file.exists():
        write_series(root, order, queue)
    return report


def export_texts(tree: Path, base_commit: str) -> tuple[dict[str, str], list[str]]:
    """Canonical patch text per commit after ``base_commit``, named by position and slug."""
    texts: dict[str, str] = {}
    order: list[str] = []
    for k, commit in enumerate(commits_after_base(tree, base_commit), 1):
        text = format_commit(tree, commit)
        header = parse_text(text, f"commit {commit[:12]}").header
        name = patch_filename(k, header.slug)
        if name in texts:
            raise SeamError(f"two commits export to {name}: give them different subjects")
        texts[name] = text
        order.append(name)
    return texts, order


def refresh(root: Path, base: Base, tree: Path, force: bool = False) -> list[Exported]:
    """Export the tree's commits to ``base``'s own queue (bases.toml); refuse to lose work."""
    state = read_state(tree)
    if state is None:
        raise SeamError(f"{tree} is not a tree made by tkv-seam apply", hint="make apply")
    if state.get("base") != base.name:
        raise RefusedError(
            f"{tree} was applied on {state.get('base')}, not {base.name}: refresh would write "
            f"{state.get('base')}'s patches into {base.name}'s queue ({base.queue.series})",
            hint=f"tkv-seam refresh --base {state.get('base')} --tree {tree}",
        )
    dirty = git.status_porcelain(tree)
    if dirty:
        raise RefusedError(
            f"{tree} has uncommitted changes ({len(dirty)} paths); refresh exports commits only",
            hint=f"commit them (git -C {tree} commit -a) or stash them, then `make refresh BASE={base.name}`",
        )
    series = read_series(root, base.queue, base.name)
    if not force and inputs_digest(base, state["source"], series) != state["digest"]:
        raise RefusedError(
            f"{base.queue.patches}/ or {base.queue.series} changed since the tree was applied; "
            "refresh would overwrite those edits",
            hint=f"keep the patch edits: `make apply BASE={base.name} FORCE=1` (drops tree commits); "
            f"keep the tree commits: `make refresh BASE={base.name} FORCE=1`",
        )
    texts, order = export_texts(tree, state["base_commit"])
    report = write_queue(
        root, base.queue, texts, order, force, again=f"make refresh BASE={base.name} FORCE=1"
    )
    new_series = read_series(root, base.queue)
    applied = [
        AppliedPatch(n, c, git.out(tree, "diff-tree", "--no-commit-id", "--name-only", "-r", c).split())
        for n, c in zip(order, commits_after_base(tree, state["base_commit"]))
    ]
    result = ApplyResult(**{**state, "patches": applied})
    result.head = git.head(tree)
    result.digest = inputs_digest(base, state["source"], new_series)
    _write_state(tree, result)
    return report
