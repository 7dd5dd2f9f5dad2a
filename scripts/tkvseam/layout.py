"""Where tkv-seam keeps what it makes: the names inside a tree and every path under ``build/``.

This module is the only place that spells them (``tests/tooling/test_tree_rules.py`` fails on a
``"build"`` path spelled anywhere else); what may be done with them is the tree layer's
(``tree.seamtree.SeamTree``) and ``outputs``'s.

Inside a tree the tool made:

- the branch ``seam`` (the patched commits) and the tag ``tkv-seam-base`` (the pristine base);
- ``refs/tkv-seam/dropped/<time>``: what a step dropped from the tree, kept (``SeamTree.keep_dropped``);
- ``refs/tkv-seam/kept/{index,worktree,files,stash/<n>}``: a removed tree's staged changes, work
  tree, the tool's own files and stash entries, in its bundle (``SeamTree.remove_keeping``);
- ``refs/tkv-seam/carry/``: what a rebuild carries over to the new tree, for the time it takes;
- ``.git/tkv-seam-dropped/<time>/``: files the tool set aside or backed up.

Under a project's ``build/`` (each entry ``E`` is guarded by the lock file ``.E.lock`` beside it):

==========================  ===========================================================
``vllm-<base>``             the build tree (``apply``)
``port-<to>``               the port tree (``port start``)
``port-report-<to>``        ``port report``'s files (its scratch tree goes by the name too)
``dropped/``                what the tool kept of what it dropped; the tool never removes it
``seamtest/<base>/``        the seam lanes' work: venv slots, stages, test roots, logs
``passes/<base>/``          what passed: one record per lane step and key, ``timings.jsonl``
``passes/project/``         the same for what no base owns (the tooling lane)
``bench/<base>/``           ``bench/bench.py``'s work
``drift/``                  ``watch --report``
``overlay-<base>/``         ``overlay stage``
``overlay-venv/``           the stage ``overlay install``/``restore`` work from
``image-<base>/``           the image's build context
``plugin/``                 the plugin wheels a lane downloads
``locks/``                  the locks of ``lock-cpu`` (one per base) and of ``venv-vllm`` (one per venv)
==========================  ===========================================================
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

BRANCH = "seam"
BASE_TAG = "tkv-seam-base"
DROPPED_REFS = "refs/tkv-seam/dropped"  # refs keeping what the tool dropped from a tree
KEPT_REFS = "refs/tkv-seam/kept"  # in a removed tree's bundle: its index, work tree, files, stash
CARRY_REFS = "refs/tkv-seam/carry"  # during a rebuild: the stash entries it carries over (then removed)
DROPPED_DIR = "tkv-seam-dropped"  # in the tree's .git: files the tool set aside or backed up

BUILD = "build"
DROPPED = "dropped"


def build(root: Path) -> Path:
    """The project's ``build/``."""
    return Path(root) / BUILD


def build_tree(root: Path, base: str) -> Path:
    return build(root) / f"vllm-{base}"


def port_tree(root: Path, to: str) -> Path:
    return build(root) / f"port-{to}"


def port_report(root: Path, to: str) -> Path:
    return build(root) / f"port-report-{to}"


def scratch(root: Path) -> Path:
    """Scratch directories of one run (removed by it; ``make clean`` removes what a killed run left)."""
    return build(root) / "scratch"


def port_resolutions(root: Path) -> Path:
    """The conflict resolutions ports recorded (git rerere's ``rr-cache``, the messages given):
    shared by every port of the project, so an aborted port started again replays them."""
    return build(root) / "port-resolutions"


def dropped(root: Path) -> Path:
    """``build/dropped/``: where whole trees (bundles) and copies of project files are kept."""
    return build(root) / DROPPED


def seamtest_work(root: Path, base: str) -> Path:
    return build(root) / "seamtest" / base


def passes(root: Path, base: str | None) -> Path:
    """``build/passes/<base>/`` (``project/`` for ``None``): the lanes' pass records and timings."""
    return build(root) / "passes" / (base or "project")


def bench_work(root: Path, base: str) -> Path:
    return build(root) / "bench" / base


def drift(root: Path) -> Path:
    return build(root) / "drift"


def overlay_stage(root: Path, base: str) -> Path:
    return build(root) / f"overlay-{base}"


def overlay_venv_stage(root: Path) -> Path:
    return build(root) / "overlay-venv"


def image_context(root: Path, base: str) -> Path:
    return build(root) / f"image-{base}"


def image_log(root: Path, base: str) -> Path:
    """The last image build's full log (not in its context: a file there would be sent)."""
    return build(root) / "image-logs" / f"{base}.log"


def plugin_dir(root: Path) -> Path:
    return build(root) / "plugin"


def cpu_lock_lock(root: Path, base: str) -> Path:
    return build(root) / "locks" / f"lock-cpu-{base}.lock"


def venv_lock(root: Path, venv: Path) -> Path:
    """The lock of a test venv ``venv-vllm`` builds: one per venv path (a ``--path`` outside the
    project included), under the project's ``build/locks/``, never beside the venv."""
    name = Path(os.path.abspath(venv))
    tag = hashlib.sha256(str(name).encode()).hexdigest()[:12]
    return build(root) / "locks" / f"venv-{name.name}-{tag}.lock"


def lock_of(path: Path) -> Path:
    """The lock file guarding ``path`` (a tree, an output directory, a file): ``.<name>.lock`` beside it."""
    return path.parent / f".{path.name}.lock"


def shown(path: Path, root: Path) -> str:
    """``path`` as a hint or help text spells it: relative to ``root`` when inside it."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def default(kind, placeholder: str = "<base>") -> str:
    """The default path ``kind`` (one of the functions above) as help text: ``build/vllm-<base>``."""
    return str(kind(Path(), placeholder))


def project_of(path: Path) -> Path | None:
    """The project whose ``build/`` ``path`` lies in (the directory above a ``build`` holding a
    ``bases.toml``), or None."""
    for parent in Path(os.path.abspath(path)).parents:
        if parent.name == BUILD and (parent.parent / "bases.toml").is_file():
            return parent.parent
    return None


def in_build(root: Path | None, path: Path) -> bool:
    """True when ``path`` is an entry of the project's ``build/`` (or below one), reached through no
    symlink and not ``build/dropped/`` itself: a directory the tool owns, so a hint may tell the
    user to move it aside. Anything else (``/etc``, ``$HOME``, the project, a ``--tree`` elsewhere)
    is never the tool's to move: a hint says to choose another path instead. ``root`` None: the
    project ``path`` lies in, if any (``project_of``)."""
    root = root if root is not None else project_of(path)
    if root is None:
        return False
    top = build(root)
    path = Path(os.path.abspath(path))
    if path == top or top not in path.parents or path == dropped(root):
        return False
    here = Path(root)
    for part in path.relative_to(root).parts[:-1]:
        here = here / part
        if here.is_symlink():
            return False
    cwd = Path(os.path.realpath(Path.cwd()))
    real = Path(os.path.realpath(path))
    return not (real == cwd or real in cwd.parents)
