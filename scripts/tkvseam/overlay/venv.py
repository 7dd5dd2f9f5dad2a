"""The overlay commands' use cases: stage a build tree's commit, install it into a venv, restore one.

``refuse_stage_dir`` says where a stage never goes (over the project, inside a tree tkv-seam
made); ``stage_tree`` stages a commit of a base's build tree; ``install_overlay`` installs a
commit's overlay into a venv, or puts the pristine base's files back (``restore``), naming the
other carried bases' commands for a venv that holds another release.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import hints, layout
from ..bases.carried import carried_bases, queue_overlay_paths
from ..bases.pins import Base, load_bases
from ..errors import RefusedError
from ..progress import QUIET, Progress
from ..tree.seamtree import SeamTree
from ..tree.state import Kind, tree_above
from .stage import Installed, Staged, install_commit, restore_paths, stage_locked


def refuse_stage_dir(root: Path, base_name: str, out: Path) -> None:
    """A stage goes beside the project's trees, never over the project or into a tree tkv-seam made
    (refused, exit 5, nothing written)."""
    again = hints.tool(
        "overlay", "stage", "--base", base_name, "--out", layout.overlay_stage(Path(), base_name)
    )
    real = Path(os.path.realpath(out))
    if real == Path(os.path.realpath(root)) or real in Path(os.path.realpath(root)).parents:
        raise RefusedError(
            f"{out} exists and is not an overlay stage tkv-seam made: it is the project (or holds it); "
            "nothing was deleted",
            hint=again,
        )
    parent = tree_above(out, itself=True)
    if parent is not None:
        raise RefusedError(
            f"--out {out} is inside {parent}, a tree tkv-seam made: the stage would be files the tree "
            "does not hold (apply and refresh then refuse the tree)",
            hint=again,
        )


def stage_tree(
    root: Path, base: Base, tree: Path, commit: str, out: Path, progress: Progress = QUIET
) -> Staged:
    """``overlay stage``: the overlay of ``commit`` of ``base``'s build tree ``tree`` into ``out``."""
    SeamTree(tree, root).require(Kind.APPLY, base.name, "overlay stage")
    return stage_locked(tree, queue_overlay_paths(root, base), out, commit, progress)


def other_bases(root: Path, bases_file: Path, base_name: str, verb: str, python: Path) -> dict[str, str]:
    """vLLM version -> the command doing ``verb`` with that carried base's overlay in ``python``'s venv
    (a venv holding another carried release is answered with its own base)."""
    bases = load_bases(bases_file, root)
    out = {}
    for name in carried_bases(bases, root):
        if name == base_name:
            continue
        cmd = hints.tool("overlay", verb, "--base", name, "--python", python)
        if not layout.build_tree(root, name).is_dir():
            cmd = f"{hints.make('apply', BASE=name)} && {cmd}"
        out[bases[name].version] = cmd
    return out


def install_overlay(
    root: Path,
    bases_file: Path,
    base: Base,
    tree: Path,
    python: Path,
    own_venv: bool,
    commit: str | None = "HEAD",
    progress: Progress = QUIET,
) -> Installed:
    """``overlay install`` of ``commit`` of the build tree ``tree`` into ``python``'s venv; ``commit``
    None: ``overlay restore`` (the pristine base's files back). ``own_venv``: the venv is the base's
    test venv. The tree must be a tree of ``base`` whose commits are a queue's (not another base's,
    a port in progress, half-switched)."""
    verb = "restore" if commit is None else "install"
    state = SeamTree(tree, root).require(Kind.APPLY, base.name, f"overlay {verb}")
    if own_venv and tree == layout.build_tree(root, base.name):
        again = hints.make("overlay" if commit is not None else "overlay-restore", BASE=base.name)
    else:
        again = hints.tool("overlay", verb, "--base", base.name, "--tree", tree, "--python", python)
    # restore: what the venv's record says its overlay replaced (the queue's files only help a
    # venv an older tkv-seam overlaid); install: the queue's overlay set
    paths = queue_overlay_paths(root, base) if commit is not None else restore_paths(root, base)
    return install_commit(
        tree,
        paths,
        layout.overlay_venv_stage(root),
        commit if commit is not None else state.base_commit,
        python,
        own_venv,
        again,
        progress,
        others=other_bases(root, bases_file, base.name, verb, python),
        restore=commit is None,
    )
