"""What one run of the seam lanes reads of the project and of its venvs, held and checked.

``read`` is what every job key of a run holds besides the job's own parts (``runner.job_key``):
the whole project (``keys.project``: a job run in the project can read any of it), what a job
run in a test root of the build tree reaches of the project (its ``PYTHONPATH``, the tool's
``scripts/``, and the HF configs its HF home is made from) and the test venv's installed state
(``keys.venv_state``). ``changed`` reads them again at the end: a run records its passes only
when they are still what it started from. ``held`` holds the work directory and the test venv
for the whole run; ``require_queue`` refuses a build tree whose commits are not the queue's;
``own_config`` keeps pytest in a test root of the tree to that root's own configuration.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .. import git, hints, layout
from ..errors import RefusedError
from ..lock import locked, venv_locked
from . import keys

#: The offline Hugging Face configs every job's HF home is made from (``hfcache``).
HF_CONFIGS = "tests/data/hf-configs"
#: What every job imports the tool's pytest plugins from (its ``PYTHONPATH``).
SCRIPTS = Path(__file__).resolve().parents[2]


def read(r) -> dict:
    """The project, what a job in a test root of the tree reaches of it, the venv's state, now."""
    return {
        "project": keys.project(r.root),
        "reach": [keys.files(SCRIPTS.parent, [SCRIPTS.name]), keys.files(r.root, [HF_CONFIGS])],
        "venv": r.venv_state(r.python.parent.parent),
    }


def touched(r) -> tuple[list[str], list[dict]]:
    """The same files as ``read``, and the slots in use, by inode, size, mode and times: taken
    when the first job starts and again at the end, a file written meanwhile (its bytes put back
    or not) shows, so a test that read it while it was different records nothing."""
    venvs = [r.python.parent.parent, *(r.work / "venvs" / f"slot-{i}" for i in sorted(r._slots_checked))]
    project = [
        keys.project(r.root, touched=True),
        keys.files(SCRIPTS.parent, [SCRIPTS.name], touched=True),
        keys.files(r.root, [HF_CONFIGS], touched=True),
    ]
    return project, [keys.venv_touched(v, r.paths) for v in venvs]


def _same(before, after) -> bool:
    return before[0] == after[0] and all(map(keys.untouched, before[1], after[1]))


def changed(r) -> list[str]:
    """What changed since the run read its inputs: the project, the venv, a slot's copy of it,
    a file written while the jobs ran."""
    if r._inputs is None:
        return []
    now = read(r)
    found = [name for name in ("project", "reach", "venv") if now[name] != r._inputs[name]]
    for i in sorted(r._slots_checked):
        if r.venv_state(r.work / "venvs" / f"slot-{i}") != r._inputs["venv"]:
            found.append(f"slot {i}")
    if not found and r._touched is not None and not _same(r._touched, touched(r)):
        found.append("a file its jobs can read (written, whether put back or not)")
    if r._hashes is not None:
        r._hashes.save()
    return found


@contextlib.contextmanager
def held(r):
    """The run's work directory (slots, stages, roots) and its test venv (uv's lock file), held:
    an overlay install or restore, another lane or a second ``make test`` on them waits."""
    with locked(layout.lock_of(r.work), str(r.work), r.progress):
        with venv_locked(r.python.parent.parent, r.progress):
            yield


def require_queue(root: Path, tree: Path, base: str, state, digests: dict[str, str]) -> None:
    """The tree's commits are the queue as it is now (what ``make`` applies before each lane; the
    tool alone does not): its HEAD is the one apply or refresh recorded, and the patch files it
    was made from are the queue's, byte for byte and in order. Else RefusedError (exit 5)."""
    if git.repo.head(tree) != state.head:
        raise RefusedError(
            f"{tree} holds commits the queue does not (HEAD {git.repo.head(tree)[:12]}, recorded "
            f"{state.head[:12]}): the seam tests test the queue, refused",
            hint=f"{hints.rerun('refresh', root, base, tree)}   (the commits into the queue), then the lane again",
        )
    if list(state.inputs.items()) != list(digests.items()):
        edited = sorted({n for n in {*state.inputs, *digests} if state.inputs.get(n) != digests.get(n)})
        raise RefusedError(
            f"{tree} is not the queue as it is now ({', '.join(edited) or 'the order of its series'} "
            "changed since it was applied): the seam tests test the queue, refused",
            hint=f"{hints.rerun('apply', root, base, tree)}   (then the lane again)",
        )


def own_config(cwd: Path) -> list[str]:
    """pytest's options in a test root of the tree: its own configuration only (its
    pyproject.toml, else none), rooted there; never the project's, found above it (node ids
    would be the project's ``build/…`` paths, and every test "missing")."""
    config = cwd / "pyproject.toml"
    return [f"--rootdir={cwd}", "-c", str(config) if config.is_file() else os.devnull]
