"""Environment or patch: a proof never blames a patch for what fails on the pristine base too.

When a patch's own tests fail at its prefix (``prove.prove_patch``), two checks decide before
the port stops at it:

- the **canary**: the test venv with the pristine base's files (the stock overlay) imports vLLM
  and, where the release has ``EngineArgs``, builds the engine config of ``seamtest.testvenv``'s
  tiny model (a local ``config.json``) on CPU, in the proof's own environment (the canary
  ``carry`` runs when it builds the venv, on the venv the proof has now). When it fails, every
  failure is the environment's;
- **stock**: the failing nodes run again on the pristine base (the same test files, the stock
  overlay). A ``Guard:`` (stock behaviour kept) that fails there too, the same way (the same last
  line of its error), is the environment's; one that fails otherwise there (its fixture imports a
  name the queue adds: stock says ``ImportError``) stays the patch's. A ``Tests:`` node fails on
  stock by its contract, so it is only marked when stock fails it with the same message (it
  stays the patch's).

When pytest cannot start at all (a conftest importing what the venv lacks, a plugin missing:
``cannot_start``), the environment is the cause too, unless the nodes were not found or the
patch changed what pytest loads first (``STARTUP``).

An environment failure is said once, as its own stop kind (``environment``, exit 12, naming no
patch: the patch went in, gated, not proven), and recorded in the port tree
(``.git/tkv-seam-port-env.json``, with the venv's identity): later runs do not prove with that
venv (a warning says why) until it changes (``make venv-vllm`` rebuilt it) or the record goes.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .. import hints, layout
from ..errors import PortStopped
from ..fsutil import atomic_write
from ..seamtest.outcomes import PASSED, fold
from ..seamtest.runner import VLLM_TESTS_PLUGINS, Job, Root, Runner
from ..seamtest.testvenv import TINY_CONFIG

ENV_FILE = "tkv-seam-port-env.json"  # in the port tree's .git: the environment failure found
ENVIRONMENT = "environment"  # the stop kind
# the canary of seamtest.testvenv (a tiny local model's engine config), where the release has EngineArgs
CANARY = f"""
import importlib.util, json, os, tempfile

import vllm

if importlib.util.find_spec("vllm.engine.arg_utils") is not None:
    from vllm.engine import arg_utils

    if hasattr(arg_utils, "EngineArgs"):
        model = tempfile.mkdtemp(prefix="tkv-seam-canary-")
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump({TINY_CONFIG!r}, f)
        arg_utils.EngineArgs(model=model, skip_tokenizer_init=True).create_engine_config()
print("canary ok", vllm.__file__)
"""
CANARY_WHAT = "import vllm; a tiny model's engine config (EngineArgs.create_engine_config)"


class EnvironmentStop(PortStopped):
    """The port stopped for the environment, not a patch (exit 12, kind ``environment``)."""

    kind = "environment"


@dataclass
class Verdict:
    """What the checks found about a proof's failing nodes."""

    canary: str = ""  # the canary's error on stock ("" when it passed)
    environment: list[str] = field(default_factory=list)  # nodes that fail on stock too: not the patch's
    same_on_stock: dict[str, str] = field(default_factory=dict)  # Tests: nodes stock fails the same way

    @property
    def error(self) -> str:
        if self.canary:
            return f"{CANARY_WHAT} fails on stock: {self.canary}"
        return f"{len(self.environment)} test(s) fail on stock too: {', '.join(self.environment)}"


def canary(runner: Runner, base_commit: str) -> str:
    """The canary on the pristine base in slot 0: "" when it passes, else its last error line."""
    runner.install(0, base_commit)
    outcomes = runner.work / "outcomes" / "prove-canary.jsonl"
    outcomes.parent.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            [str(runner.slot_python(0)), "-c", CANARY],
            cwd=runner.work,  # not a tree: `import vllm` must be the venv's
            env=runner.env(outcomes),
            capture_output=True,
            text=True,
            timeout=runner.timeout,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {runner.timeout} s"
    log = runner.work / "logs" / "prove-canary.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode == 0:
        return ""
    lines = [x.strip() for x in proc.stderr.splitlines() if x.strip()]
    return (lines[-1] if lines else f"exit {proc.returncode}") + f" (log {log})"


def judge(
    runner: Runner,
    base_commit: str,
    snapshot: str,
    label: str,
    failing: list[str],
    guards: list[str],
    rows: dict,
    known_canary: str | None = None,
) -> Verdict:
    """Whose the failures of ``failing`` (node ids of the proof at ``snapshot``) are;
    ``known_canary``: the canary's result earlier in this run (not run again)."""
    verdict = Verdict(canary=canary(runner, base_commit) if known_canary is None else known_canary)
    if verdict.canary:
        verdict.environment = list(failing)
        return verdict
    job = Job(label, base_commit, Root(snapshot), tuple(failing), estimate=40.0, plugins=VLLM_TESTS_PLUGINS)
    stock = runner.run([job])[label].rows
    for node in failing:
        if fold(stock, node) == PASSED:
            continue
        same = _message(stock, node) == _message(rows, node)
        if node in guards and same:  # failing otherwise (the patch's own name missing): not the environment
            verdict.environment.append(node)
        elif node not in guards and same and _message(stock, node):
            verdict.same_on_stock[node] = _message(stock, node)
    return verdict


STARTUP = ("conftest.py", "tests/conftest.py", "pyproject.toml")  # what pytest loads before any test


def cannot_start(log: str, startup_changed: bool) -> str:
    """Why pytest could not start at all (a conftest importing what the venv lacks, a plugin
    missing): the environment's; "" when the nodes are the cause (not found) or the patch changed
    what pytest loads first (``STARTUP``)."""
    if startup_changed or "not found:" in log or "no match in any of" in log:
        return ""
    lines = [x.strip() for x in log.splitlines() if x.strip()]
    for pick in (
        lambda x: x.startswith("E ") and ("Error" in x or "Exception" in x),
        lambda x: "error:" in x.lower(),
    ):
        found = [x for x in lines if pick(x)]
        if found:
            return found[-1].removeprefix("E").strip()
    return lines[-1] if lines else "pytest exited before running a test"


def not_found(log: str, nodes: list[str]) -> set[str]:
    """The nodes pytest said it did not find (``ERROR: not found: <root>/<node>``)."""
    said = [
        x.removeprefix("ERROR: not found: ").strip()
        for x in log.splitlines()
        if x.startswith("ERROR: not found: ")
    ]
    return {node for node in nodes if any(x == node or x.endswith("/" + node) for x in said)}


def _message(rows: dict, node: str) -> str:
    """The last line of a node's failure (its exception), as the outcomes plugin kept it."""
    found = [r.get("message", "") for nid, r in rows.items() if nid == node or nid.startswith(node + "[")]
    lines = [x.strip() for m in found for x in m.splitlines() if x.strip()]
    return lines[-1] if lines else ""


# -- the record -------------------------------------------------------------------


def anew(root: Path, python: Path, base: str) -> str:
    """The command that builds the test venv anew (another venv: proving goes on): the old one
    moved aside (``make venv-vllm`` alone keeps an up-to-date venv as it is, and refuses one it did
    not build)."""
    venv = layout.shown(python.parent.parent, root)
    return f"{hints.shell('mv', venv, f'{venv}.old')} && {hints.make('venv-vllm', BASE=base)}"


def venv_identity(python: Path) -> str:
    """The test venv as it is now: rebuilt (``make venv-vllm``), it is another."""
    venv = python.parent.parent
    cfg = venv / "pyvenv.cfg"
    stat = cfg.stat() if cfg.exists() else None
    return f"{venv.resolve()} {stat.st_ino if stat else 0} {stat.st_mtime_ns if stat else 0}"


def recorded(tree: Path, python: Path) -> dict | None:
    """The environment failure recorded for this venv as it is, or None."""
    try:
        data = json.loads((tree / ".git" / ENV_FILE).read_text())
    except (OSError, ValueError):
        return None
    if (
        isinstance(data, dict)
        and data.get("venv") == venv_identity(python)
        and isinstance(data.get("error"), str)
    ):
        return data
    return None


def record(tree: Path, python: Path, patch: str, error: str) -> Path:
    path = tree / ".git" / ENV_FILE
    atomic_write(
        path, json.dumps({"venv": venv_identity(python), "patch": patch, "error": error}, indent=1) + "\n"
    )
    return path
