"""``port report``: walk a whole queue onto a newer base without stopping; keep nothing but the report.

The walk runs in a scratch port tree beside ``build/port-report-<to>`` under that name's lock
(one report per target at a time); a report killed mid-way leaves its scratch tree, which
the next report of that target removes before it starts. Each file of each patch is tried
strictly, then 3-way; what merged stays (later patches see it, as if merged), what
conflicts is left out.
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import InvalidVersion, Version

from .. import git, hints, layout
from ..bases.pins import Base
from ..bases.repo import base_repo
from ..errors import SeamError, UsageError
from ..progress import QUIET, Progress
from ..tree.seamtree import SeamTree
from ..queue.series import read_series
from ..tree.porttree import try_patch
from ..findings.model import MERGED, PatchReport, PatchStatus
from ..queue.patch import ChangeKind
from .fixers import Isort
from ..tree.porttree import PortTree


def refuse_direction(from_base: Base, to_base: Base, root: Path | None = None) -> None:
    """A port goes forward: onto another, newer base (a self-port or a backport is refused, exit 2).

    A backport's hint ports the older base's queue forward when it has one (in ``root``); else it
    names a newer base to port onto (the older one has nothing to port).
    """
    if from_base.name == to_base.name:
        raise UsageError(
            f"a port of {from_base.name}'s queue onto {to_base.name} itself: nothing to port "
            f"(it would rewrite {from_base.name}'s own queue)",
            hint=f"name a newer base: {hints.port('start', '<newer-base>', BASE=from_base.name)}",
        )
    try:
        older = Version(to_base.version) <= Version(from_base.version)
    except InvalidVersion as e:
        raise SeamError(
            f"bases.toml: the version of {from_base.name} ({from_base.version!r}) or of {to_base.name} "
            f"({to_base.version!r}) is not a PEP 440 version: {e}",
            hint="fix the version field in bases.toml",
        ) from e
    if older:
        if root is None or (root / to_base.queue.series).is_file():
            hint = f"port the older base's queue forward instead: {hints.port('start', from_base.name, BASE=to_base.name)}"
        elif not (root / from_base.queue.series).is_file():  # neither has a queue
            hint = f"{hints.tool('carried')}   (the bases with a queue: port one of them onto a newer base)"
        else:  # the older base has no queue: nothing of it to port forward
            hint = (
                f"port {from_base.name}'s queue onto a newer base: "
                f"{hints.port('start', '<newer-base>', BASE=from_base.name)} (`{hints.tool('bases')}` lists them)"
            )
        raise UsageError(
            f"{to_base.name} ({to_base.version}) is not newer than {from_base.name} ({from_base.version}): "
            "a port goes forward only (a backport onto an older base is not supported)",
            hint=hint,
        )


def report_tree(root: Path, to_name: str) -> SeamTree:
    """The name a report's scratch tree and lock go by (the tree itself never stays)."""
    return SeamTree(layout.port_report(root, to_name), root)


def report(
    root: Path, from_base: Base, to_base: Base, cache: Path, progress: Progress = QUIET
) -> list[PatchReport]:
    """Walk the whole queue of ``from_base`` onto ``to_base``; keep nothing but the report."""
    refuse_direction(from_base, to_base, root)
    patches = read_series(root, from_base.queue, from_base.name).load()
    old, _ = base_repo(from_base, cache, progress=progress)
    new, _ = base_repo(to_base, cache, progress=progress)
    seam = report_tree(root, to_base.name)
    with seam.locked(progress):
        with seam.scratch() as tmp:
            progress.step(f"report tree: {to_base.name} + objects of {from_base.name}")
            tree = PortTree.build(tmp / "tree", old, new)
            tree.isort = Isort(to_base, cache, tree.path, progress)  # import conflicts merged, as a port does
            moves = tree.moves(patches)
            reports: list[PatchReport] = []
            by_slug: dict[str, PatchReport] = {}
            failed_tests: dict[str, list[str]] = {}
            for k, patch in enumerate(patches, 1):
                progress.step(f"report [{k}/{len(patches)}] {patch.name}")
                r = try_patch(tree, patch, moves, by_slug, failed_tests)
                for f in r.files:
                    if f.test and f.status not in MERGED:
                        failed_tests.setdefault(f.path, []).append(patch.header.slug)
                if r.conflicts:
                    tree.resolve_ours(r.conflicts)
                git.index.commit(tree.path, patch.header.message, patch.header.author)
                reports.append(r)
                by_slug[patch.header.slug] = r
            _say_what_a_skip_leaves_out(patches, reports)
            return reports


def _say_what_a_skip_leaves_out(patches: list, reports: list[PatchReport]) -> None:
    """A likely obsolete patch (the report suggests skipping it) whose added files later patches
    change: say which, since skipping it leaves those patches without the file (they stop)."""
    for k, (patch, r) in enumerate(zip(patches, reports)):
        if r.status != PatchStatus.OBSOLETE:
            continue
        added = {fc.path for fc in patch.files if fc.kind == ChangeKind.ADD}
        later = [
            f"{q.name} ({', '.join(sorted(added & {fc.path for fc in q.files}))})"
            for q in patches[k + 1 :]
            if added & {fc.path for fc in q.files}
        ]
        if later:
            left = f"skipping it leaves out files later patches change: {'; '.join(later)}"
            r.note = f"{r.note}; {left}" if r.note else left
