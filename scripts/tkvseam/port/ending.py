"""An honest end: a ported queue is "carried" only with no lint or style problem, every run again.

``queue_problems`` checks the queue as it is written in ``patches/<base>/``, as ``make test``
would take it, not the files of any tree: it lints the patch files, applies them strictly
(``tree.commits.commit_series``: every hunk at the line it names) onto the pristine base in a
scratch clone of the cache's base repository, checks the last patch's commit out there (ruff
reads the tree around a file: its configuration, packages, ``__init__.py`` files) and runs the
base's style gate (``stylecheck.tree_problems``: its ruff pin) on every ``.py`` file the queue
leaves, as ``make lint-patches`` does in a tree ``make apply`` made. An uncommitted fix in the
port tree, or one not yet refreshed into the queue, does not count. ``carry`` runs it on each
re-run of a ported base and at the end of the port, so a problem is said again until it is fixed.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .. import git, layout
from ..bases.pins import Base
from ..bases.repo import base_repo
from ..edit.stylecheck import gate_ruff, tree_problems
from ..errors import ApplyError, SeamError
from ..progress import QUIET, Progress
from ..queue.lint import lint
from ..queue.series import read_series
from ..tree.commits import commit_series


def queue_problems(root: Path, base: Base, cache: Path, progress: Progress = QUIET) -> list[str]:
    """``lint:``, ``apply:`` and ``ruff …:`` problems of ``base``'s queue as written; one a line."""
    problems = [f"lint: {prob}" for prob in lint(root, base.queue)]
    try:
        patches = read_series(root, base.queue, base.name).load()
    except SeamError as e:
        return problems + [f"apply: {e.message}"]
    files = sorted({fc.path for p in patches for fc in p.files if fc.new and fc.path.endswith(".py")})
    if not files:
        return problems
    try:
        exe = gate_ruff(base, cache)
        repo, _ = base_repo(base, cache, progress=progress)
    except SeamError as e:
        return problems + [f"stylecheck: {e.message}" + (f" (next: {e.hint})" if e.hint else "")]
    layout.scratch(root).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"written-{base.name}-", dir=layout.scratch(root)))
    try:
        clone = scratch / "repo"
        git.repo.clone_local(repo.path, clone)
        try:
            applied = commit_series(clone, repo.commit, patches, progress, origin=str(repo.path))
        except ApplyError as e:
            return problems + [f"apply: {e.message} (the queue does not apply strictly to {base.name})"]
        tip = applied[-1].commit if applied else repo.commit
        progress.step(
            f"style gate of {base.queue.patches}/ as written: {len(files)} file(s), ruff {base.seam.ruff}"
        )
        git.index.checkout_branch(clone, "written", tip)
        problems += tree_problems(exe, clone, files)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return problems
