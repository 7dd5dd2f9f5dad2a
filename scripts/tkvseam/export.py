"""Refresh: turn the build tree's commits after the base back into the base's own queue.

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
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import git
from .apply import BASE_TAG, inputs_digest
from .bases import Base
from .errors import TOOL, RefusedError, SeamError
from .lock import locked, tree_lock_path
from .patch import Header, parse_text
from .progress import QUIET, Progress
from .series import Queue, Series, patch_filename, read_series, write_series
from .state import AppliedPatch, TreeState

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
    data = git.run(tree, *FORMAT_PATCH_ARGS, commit).stdout
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise SeamError(
            f"{tree}: commit {commit[:12]}: its patch text is not UTF-8 (byte {data[e.start]:#04x} on "
            f"line {line} of `git format-patch`); patches are UTF-8 text",
            hint=f"re-encode the file in UTF-8 and amend the commit (git -C {tree} show {commit[:12]} "
            "shows it), then refresh again",
        ) from e
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


def edited_since_apply(state: TreeState, series: Series) -> list[str]:
    """The patch files (and series entries) that differ from what the tree was applied from."""
    now = series.file_digests()
    where = series.queue.patches
    edited = [f"{where}/{n}" for n, d in now.items() if state.inputs.get(n) != d]
    edited += [f"{where}/{n} (no longer in series)" for n in state.inputs if n not in now]
    return edited


def _back_up(tree: Path, series: Series, edited: list[str]) -> Path:
    """Copy the edited patch files into the tree's ``.git/tkv-seam-dropped/<time>/``."""
    keep = (
        tree / ".git" / "tkv-seam-dropped" / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    )
    (keep / "patches").mkdir(parents=True, exist_ok=True)
    for name in series.names:
        if series.path(name).exists():
            shutil.copy2(series.path(name), keep / "patches" / name)
    if series.file.exists():
        shutil.copy2(series.file, keep / "series")
    return keep


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
            raise SeamError(
                f"{tree}: two commits export to {name}: give them different subjects",
                hint=f"git -C {tree} rebase -i {BASE_TAG} (reword one), then refresh again",
            )
        texts[name] = text
        order.append(name)
    return texts, order


def refresh(
    root: Path, base: Base, tree: Path, force: bool = False, progress: Progress = QUIET
) -> list[Exported]:
    """Export the tree's commits to ``base``'s own queue (bases.toml); refuse to lose work."""
    with locked(tree_lock_path(tree), str(tree), progress):
        return _refresh(root, base, tree, force, progress)


def _refresh(root: Path, base: Base, tree: Path, force: bool, progress: Progress) -> list[Exported]:
    state = TreeState.load(tree)
    if state is None:
        raise SeamError(f"{tree} is not a tree made by tkv-seam apply", hint="make apply")
    if state.base != base.name:
        raise RefusedError(
            f"{tree} was applied on {state.base}, not {base.name}: refresh would write "
            f"{state.base}'s patches into {base.name}'s queue ({base.queue.series})",
            hint=f"{TOOL} refresh --base {state.base} --tree {tree}",
        )
    if state.pending:
        raise RefusedError(
            f"{tree}: an interrupted apply left it half-switched to {state.head[:12]}; its commits "
            "are not what the queue was applied from, so refresh writes nothing",
            hint=f"finish the switch first: {TOOL} apply --base {state.base} --tree {tree}",
        )
    dirty = git.status_paths(tree)
    if dirty:
        shown = "\n".join(f"    {st.strip() or '??'} {path}" for st, path in dirty[:10])
        raise RefusedError(
            f"{tree} has uncommitted changes ({len(dirty)} paths); refresh exports commits only:\n{shown}",
            hint=f"commit them (git -C {tree} add -A && git -C {tree} commit) or stash them "
            f"(git -C {tree} stash -u), then refresh again",
        )
    series = read_series(root, base.queue, base.name)
    if inputs_digest(base, state.source, series) != state.digest:
        edited = edited_since_apply(state, series) if state.inputs else []
        named = ("\n" + "\n".join(f"    {e}" for e in edited)) if edited else ""
        if not force:
            raise RefusedError(
                f"{base.queue.patches}/ or {base.queue.series} changed since the tree was applied; "
                f"refresh would overwrite those edits{':' if named else ''}{named}",
                hint=f"keep the patch edits: `make apply BASE={base.name} FORCE=1` (keeps the tree's "
                f"commits in a ref); keep the tree commits: `make refresh BASE={base.name} FORCE=1` "
                "(backs up the patch files first)",
            )
        keep = _back_up(tree, series, edited)
        progress.warn(f"--force overwrites the edits to {base.queue.patches}/{named}\nbacked up in {keep}")
    commits = commits_after_base(tree, state.base_commit)
    texts, order = export_texts(tree, state.base_commit)
    report = write_queue(
        root, base.queue, texts, order, force, again=f"make refresh BASE={base.name} FORCE=1"
    )
    new_series = read_series(root, base.queue)
    state.patches = [
        AppliedPatch(n, c, git.out(tree, "diff-tree", "--no-commit-id", "--name-only", "-r", c).split())
        for n, c in zip(order, commits)
    ]
    state.head = git.head(tree)
    state.digest = inputs_digest(base, state.source, new_series)
    state.inputs = new_series.file_digests()
    state.save(tree)
    return report
