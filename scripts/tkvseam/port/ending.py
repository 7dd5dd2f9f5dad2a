"""An honest end: a ported queue is "carried" only with no lint or style problem, every run again.

``queue_problems`` lints the base's queue and runs its style gate in a tree that holds the
queue exactly as it is now (its patch files' digests recorded there by the port's finish or a
``refresh``, and HEAD where that left it): the port tree, else the base's build tree. When
neither holds it (the queue was edited since, and not applied), the style gate cannot run:
that is a problem too, with the command that makes a tree of it. ``carry`` runs it on each
re-run of a ported base, so a problem is said again until it is fixed.
"""

from __future__ import annotations

from pathlib import Path

from .. import git, hints, layout
from ..bases.pins import Base
from ..edit.stylecheck import stylecheck
from ..errors import SeamError
from ..queue.lint import lint
from ..queue.series import read_series
from ..tree.seamtree import SeamTree


def lint_and_style(root: Path, tree: Path, base: Base, cache: Path) -> list[str]:
    """``lint:`` and ``ruff …:`` problems of ``base``'s queue, the style gate run in ``tree``; one a line."""
    problems = [f"lint: {prob}" for prob in lint(root, base.queue)]
    try:
        problems += stylecheck(root, tree, base, cache)
    except SeamError as e:
        problems.append(f"stylecheck: {e.message}" + (f" (next: {e.hint})" if e.hint else ""))
    return problems


def holds_queue(root: Path, tree: Path, base: Base) -> bool:
    """``tree`` is a tree tkv-seam made of ``base`` whose commits are the queue as it is now."""
    state = SeamTree(tree, root).load() if tree.is_dir() else None
    if state is None or state.base != base.name or not state.inputs:
        return False
    if git.head(tree) != state.head:
        return False
    return state.inputs == read_series(root, base.queue, base.name).file_digests()


def queue_problems(root: Path, base: Base, cache: Path) -> tuple[list[str], Path | None]:
    """(the queue's problems, the tree its style gate ran in: None when no tree holds the queue)."""
    for tree in (layout.port_tree(root, base.name), layout.build_tree(root, base.name)):
        if holds_queue(root, tree, base):
            return lint_and_style(root, tree, base, cache), tree
    problems = [f"lint: {prob}" for prob in lint(root, base.queue)]
    files = any(p.files for p in read_series(root, base.queue, base.name).load())
    if files:
        problems.append(
            f"stylecheck: not run: no tree holds {base.name}'s queue as it is now (edited since it was "
            f"written); `{hints.make('lint-patches', BASE=base.name)}` applies it and runs the gate"
        )
    return problems, None
