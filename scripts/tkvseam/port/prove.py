"""Proving a patch of a port at its prefix: its own ``Tests:`` and ``Guard:``s pass on the new base.

With the new base's CPU test venv (``.venv-vllm-<base>``, ``make venv-vllm BASE=<base>`` from
the lock ``carry`` wrote), after a patch passes the gate (``gate``), what is staged is kept as a
commit on HEAD (no ref moves) and the patch's nodes run against it, as ``bisect`` runs them
(``seamtest.runner``: the overlay of that commit installed into the venv, pytest in that
commit's ``tests/``). Every node must pass; the ones that do not are the stop's problems.
A venv that cannot be used is said once and proving is off for the rest of the run (the gate
goes on alone). Before failing nodes blame the patch, ``environment.judge`` decides whether they
fail on the pristine base too (the environment's, said once as its own stop kind, never the
patch's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import git, layout
from ..errors import SeamError
from ..queue.message import message_header
from ..queue.patch import Patch
from ..seamtest.hfcache import build as hf_home
from ..seamtest.outcomes import PASSED, fold
from ..seamtest.runner import VLLM_TESTS_PLUGINS, Job, Root, Runner
from ..tree.state import TreeState
from . import environment


@dataclass
class Prover:
    """Prove each patch with ``python`` (the new base's test venv); ``off``: why proving stopped;
    ``environment``: an environment failure found and not yet said (``environment.EnvironmentStop``)."""

    python: Path
    off: str = ""
    environment: str = ""
    checked_record: bool = False
    canary: str | None = None  # the canary's result in this run ("" passed; None: not run yet)


@dataclass
class _PortRunner(Runner):
    """The runner on a port tree: the prefix's patches and commits given, not read from a queue."""

    port_patches: list[Patch] = field(default_factory=list)
    port_chain: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.patches = self.port_patches
        self.base_commit, self.commits = self.port_chain[0], self.port_chain[1:]
        # the overlay: what the prefix changed in vllm/ (a resolution may touch files the old patch did not)
        self.overlay = git.repo.changed_paths(
            self.tree, self.base_commit, self.commits[-1], ["vllm"], only="M"
        )


def prove_patch(
    session, state: TreeState, patch: Patch, prover: Prover, message: str | None = None
) -> list[str] | None:
    """The patch's nodes that do not pass at its prefix (``node: outcome``); None when not proven
    (no venv, or no node to run). ``message``: the commit message being continued with (its
    ``Tests:``/``Guard:`` lines are the resolution's, not the old patch's)."""
    h = message_header(patch, message) if message else patch.header
    nodes = list(dict.fromkeys(h.tests + h.guards))
    if not prover.checked_record:  # an environment failure an earlier run found: said, not proven
        prover.checked_record = True
        found = environment.recorded(session.path, prover.python)
        if found:
            prover.off = f"environment: {found['error']} (found at {found.get('patch', '?')})"
            session.progress.warn(
                f"not proving the port's patches with {prover.python.parent.parent} (the gate goes on alone): "
                f"{prover.off}; to prove again, once its cause is fixed, build it anew "
                f"(`{environment.anew(session.root, prover.python, session.to_base.name)}`)"
            )
    if prover.off or not nodes:
        return None
    p = state.port
    k = p.next + 1
    started = time.monotonic()
    session.progress.step(f"prove [{k}/{len(p.series)}] {patch.name}: {len(nodes)} test(s) on {state.base}")
    tree = session.path
    snapshot = git.index.snapshot_index(tree, f"tkv-seam prove {patch.name}\n")
    done = [session.journal.patch(p, i) for i, d in enumerate(p.done) if d.commit]
    chain = [state.base_commit, *git.repo.commits_after(tree, state.base_commit), snapshot]
    work = layout.seamtest_work(session.root, f"port-{state.base}")
    try:
        runner = _PortRunner(
            session.root,
            tree,
            prover.python,
            work,
            hf_home(work.parent, session.root / "tests" / "data" / "hf-configs"),
            session.to_base,
            session.cache,
            session.progress,
            slots=1,
            port_patches=[*done, patch],
            port_chain=chain,
        )
        job = Job(
            f"prove-{k:02d}",
            snapshot,
            Root(snapshot),
            tuple(nodes),
            estimate=40.0,
            plugins=VLLM_TESTS_PLUGINS,
        )
        with runner.held():  # the venv as a seam lane holds it: no overlay install beside
            result = runner.run([job])[job.label]
    except SeamError as e:
        if e.message.startswith("pytest could not run"):
            log = work / "logs" / f"prove-{k:02d}.log"
            text = log.read_text() if log.is_file() else ""
            changed = git.repo.changed_paths(tree, state.base_commit, snapshot, list(environment.STARTUP))
            why = environment.cannot_start(text, bool(changed))
            if not why:  # the nodes, not the venv: node ids not found, or the patch changed the conftest
                return _not_run(nodes, environment.not_found(text, nodes), log)
            error = f"pytest cannot start: {why} (log {log})"
            prover.environment, prover.off = error, f"environment: {error}"
            environment.record(tree, prover.python, patch.name, error)
            return None
        prover.off = e.message
        session.progress.warn(
            f"not proving the port's patches (the gate goes on alone): {e.message}"
            + (f" (next: {e.hint})" if e.hint else "")
        )
        return None
    bad = {node: outcome for node in nodes if (outcome := fold(result.rows, node)) != PASSED}
    seconds = time.monotonic() - started
    session.progress.step(
        f"prove [{k}/{len(p.series)}] {patch.name}: {len(nodes) - len(bad)} of {len(nodes)} passed "
        f"({seconds:.0f} s; log {result.log})"
    )
    if not bad:
        return []
    session.progress.step(
        f"prove [{k}/{len(p.series)}] {patch.name}: do they fail on stock {state.base} too?"
    )
    label = f"prove-{k:02d}-stock"
    verdict = environment.judge(
        runner, state.base_commit, snapshot, label, list(bad), h.guards, result.rows, prover.canary
    )
    prover.canary = verdict.canary
    if verdict.environment:
        prover.environment = verdict.error
        prover.off = f"environment: {verdict.error}"
        environment.record(tree, prover.python, patch.name, verdict.error)
    failing = []
    for node, outcome in bad.items():
        if node in verdict.environment:
            continue
        same = (
            f"; stock fails it the same way: {verdict.same_on_stock[node]}"
            if node in verdict.same_on_stock
            else ""
        )
        failing.append(f"{node}: {outcome} (log {result.log}{same})")
    return failing or None


def _not_run(nodes: list[str], missing: set[str], log: Path) -> list[str]:
    """The nodes of a pytest run that ran none: those it did not find (a ``Tests:``/``Guard:``
    line naming a test its file does not define), the others not run because of them."""
    if not missing:
        return [f"{node}: not run (pytest could not run them; log {log})" for node in nodes]
    return [
        f"{node}: not found (its file defines no such test; log {log})"
        if node in missing
        else f"{node}: not run (pytest ran none: a node was not found; log {log})"
        for node in nodes
    ]
