"""apply: make the build tree the pristine base commit plus one commit per patch of the base's queue.

Strict: every hunk must match at exactly the line it names (``patch.replay_file``).

Crash safety and the rules are the tree's (``seamtree.SeamTree``): the run holds the tree's
lock from its first look to its last write; what may be replaced is ``check_replaceable``'s
one rule (it finishes a switch an interrupted run left first); the commits are made first with
plumbing only (``commits.commit_series``), so a crash or a failing patch before the tree moves
leaves it as it was. The tree then moves in place (same base, clean tree: recorded as pending
first, finished by the next run if interrupted; the files git ignores stay) or is rebuilt
aside and swapped in (``SeamTree.rebuild``: files git ignores in the old tree are the user's,
refused without ``--force``). ``--force`` drops user work only after listing it and keeping it
in ``refs/tkv-seam/dropped/<time>`` of the tree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import git, hints
from ..answer import Answer, plain
from ..bases.pins import Base
from ..bases.repo import base_repo
from ..tree.commits import CorruptObject, commit_series
from ..errors import VerifyError
from ..queue.patch import Patch
from ..layout import BASE_TAG, BRANCH
from ..progress import QUIET, Progress
from ..tree.seamtree import SeamTree
from ..queue.series import read_series
from ..tree.state import AppliedPatch, Kind, TreeState
from ..tree.work import UserWork
from ..tree.export import export_texts, inputs_digest


@dataclass
class ApplyResult(Answer):
    """What ``apply`` made, or found up to date: the tree's state as recorded, and how the run went."""

    tree: str
    state: TreeState
    up_to_date: bool = False
    fetched_bytes: int = 0
    seconds: float = 0.0
    dropped: list[str] = field(default_factory=list)  # refs keeping what --force dropped
    upstream_commit_prefix: str = ""  # the pin's longest prefix of the upstream commit

    def to_json(self) -> dict:
        s = self.state
        return {
            "tree": self.tree,
            "base": s.base,
            "source": s.source,
            "base_commit": s.base_commit,
            "upstream_commit": s.upstream_commit,
            "head": s.head,
            "digest": s.digest,
            "up_to_date": self.up_to_date,
            "fetched_bytes": self.fetched_bytes,
            "seconds": self.seconds,
            "patches": plain(s.patches),
            "dropped": self.dropped,
            "upstream_commit_prefix": self.upstream_commit_prefix,
        }

    def lines(self) -> list[str]:
        s = self.state
        done = "up to date" if self.up_to_date else "applied"
        return [
            f"{self.tree}: {done}: {len(s.patches)} patches on {s.base} (upstream vLLM commit "
            f"{self.upstream_commit_prefix}; local base commit {s.base_commit[:12]}), HEAD {s.head[:12]} "
            f"({self.seconds:.1f} s)"
        ]


def build_tree(
    scratch: Path, repo_path: Path, base_commit: str, patches: list[Patch], progress: Progress
) -> tuple[Path, list[AppliedPatch], dict[str, str]]:
    """Clone the base into ``scratch/tree`` and commit every patch; return the tree, its commits
    and the refs the clone brought (the cached repository's branch, a git source's tags and
    branches: name -> commit, recorded so that they are never taken for the user's)."""
    progress.step(f"clone the pristine base {base_commit[:12]}")
    tree = scratch / "tree"
    git.repo.clone_local(repo_path, tree)
    cloned = {ref: git.repo.rev_parse(tree, ref) for ref in git.repo.refs(tree, "refs/")}
    git.repo.tag(tree, BASE_TAG, base_commit)
    applied = commit_series(tree, base_commit, patches, progress, origin=f"the cached base {repo_path}")
    progress.step("check out the patched tree")
    git.index.checkout_branch(tree, BRANCH, applied[-1].commit if applied else base_commit)
    return tree, applied, cloned


def keep_superseded(
    root: Path, seam: SeamTree, state: TreeState, base: Base, progress: Progress
) -> list[str]:
    """The tree's commits are the queue as it was last applied or refreshed, and the queue changed
    since (a patch file edited, reverted by hand, pulled). When the project's git does not hold
    every patch file those commits make (a refresh reverted by hand: nowhere else), they are kept
    in a ref of the tree before the queue replaces them (said, and returned for ``dropped``)."""
    head = git.repo.head(seam.path)
    if head != state.head or head == state.base_commit:  # moved: the user's work, judged before
        return []
    project = git.index.toplevel(root)
    texts, _ = export_texts(seam.path, state.base_commit)
    if project is not None and all(git.index.holds_blob(project, t.encode()) for t in texts.values()):
        # each is in the project's git (a commit, the index, a stash): nothing to lose; said
        progress.warn(
            f"{base.queue.patches}/ or {base.queue.series} changed since {seam.path} was applied or refreshed; "
            f"its {len(texts)} commit(s) are in the project's git as patch files already (`git log -p -- "
            f"{base.queue.patches}`), so the tree is made anew from the queue without keeping them in a ref"
        )
        return []
    ref = seam.keep_dropped(UserWork(seam.path), "apply (the queue changed since the tree was applied)")
    progress.warn(
        f"{base.queue.patches}/ or {base.queue.series} changed since {seam.path} was applied or refreshed, "
        f"and the project's git does not hold its commits as patch files: they are kept in {ref} "
        f"(`{hints.shell('git', '-C', seam.path, 'log', '--oneline', f'{BASE_TAG}..{ref}')}`)"
    )
    return [ref]


def apply_series(
    root: Path,
    base: Base,
    tree: Path,
    cache: Path,
    git_url: str | None = None,
    index_url: str | None = None,
    force: bool = False,
    progress: Progress = QUIET,
) -> ApplyResult:
    """Make ``tree`` the base plus the series of ``root``; quick no-op when nothing changed."""
    started = time.monotonic()
    series = read_series(root, base.queue, base.name)  # the base's own queue (bases.toml)
    patches = series.load()  # every patch parses before anything is touched
    source = "git" if git_url else "sdist"
    digest = inputs_digest(base, source, series)
    seam = SeamTree(tree, root)
    rerun = hints.rerun("apply", root, base.name, tree)
    force_hint = f"`{hints.rerun('apply', root, base.name, tree, force=True)}`"
    with seam.locked(progress):
        # Files git ignores: a switch in place leaves them, a rebuild judges them (below). A tree with
        # edits is rebuilt, so the refusal names them with the edits: --force would drop them too.
        before = seam.load()
        rebuilt = (
            not force and before is not None and not before.pending and bool(git.index.status_paths(tree))
        )
        state, dropped = seam.check_replaceable(
            (Kind.APPLY, Kind.PORT),
            "tkv-seam apply",
            force,
            rerun=rerun,
            force_hint=force_hint,
            progress=progress,
            ignored=rebuilt,
            finish_switch=True,
        )
        if state and state.digest == digest and not force:
            seconds = time.monotonic() - started
            return ApplyResult(
                str(tree), state, True, seconds=seconds, upstream_commit_prefix=base.commit_prefix
            )
        if state and not dropped and state.inputs and state.inputs != series.file_digests():
            dropped += keep_superseded(root, seam, state, base, progress)
        repo, fetched = base_repo(base, cache, git_url, index_url, progress)

        def result_for(applied: list[AppliedPatch], cloned: dict[str, str]) -> ApplyResult:
            made = TreeState(
                kind=Kind.APPLY,
                base=base.name,
                source=source,
                base_commit=repo.commit,
                upstream_commit=repo.upstream_commit,
                head=applied[-1].commit if applied else repo.commit,
                digest=digest,
                patches=applied,
                inputs=series.file_digests(),
                clone_refs=cloned,
            )
            return ApplyResult(
                str(tree),
                made,
                fetched_bytes=fetched,
                dropped=dropped,
                upstream_commit_prefix=base.commit_prefix,
            )

        if state and state.base_commit == repo.commit and not git.index.status_paths(tree):
            # Same base, clean tree: build the commits in its object store, then move the
            # tree to them; a failing patch leaves it exactly as it was.
            result = result_for(commit_series(tree, repo.commit, patches, progress), state.clone_refs)
            progress.step(f"switch {tree} to {result.state.head[:12]}")
            seam.switch_in_place(result.state, force, progress)
        else:
            # No tree (or a dirty one under --force, or another base): rebuilt aside, swapped in.
            built: list[ApplyResult] = []

            def build(scratch: Path) -> tuple[Path, TreeState]:
                try:
                    new, applied, cloned = build_tree(scratch, repo.path, repo.commit, patches, progress)
                except CorruptObject as e:
                    raise VerifyError(
                        f"the cached base {repo.path} is damaged: {e.message}",
                        hint=f"check and rebuild it: {hints.tool('fetch', '--base', base.name)}, then run the "
                        "command again",
                    ) from e
                built.append(result_for(applied, cloned))
                return new, built[0].state

            _, ref = seam.rebuild(state, build, force, force_hint, rerun, progress)
            result = built[0]
            result.dropped += [ref] if ref else []
    result.seconds = time.monotonic() - started
    return result
