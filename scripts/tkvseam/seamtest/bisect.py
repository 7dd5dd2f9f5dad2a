"""Bisect: patch k's Tests pass at prefix k and fail at prefix k-1; its Guards pass at k.

One pytest process per prefix j runs patch j's nodes (expected to pass) and patch
j+1's nodes (expected to fail) together: 10 processes for 10 patches instead of
18. Each node must run in the test files of its own patch's commit. When patch
j+1 changes a test file patch j's nodes live in, commit j+1's version of that
file is added beside commit j's as ``<stem>__next.py`` (same directory: same
conftest, same imports) and its node ids are mapped back. When patch j+1
changes anything else under ``tests/`` (a conftest, a helper), the two groups
run in separate processes, as before. Every prefix byte-compiles, and every prefix
passes the base's style gate on its own (``stylecheck.prefix_problems``: the base's
ruff on the .py files patches 1..k touch, as they are at k), since a reviewer or a
bisecting user may stop at any prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from dataclasses import dataclass
from pathlib import PurePosixPath

from .. import git
from ..edit.stylecheck import gate_ruff, prefix_problems, problem_paths, ruff_fix
from .outcomes import FAILED, MISSING, PASSED, fold
from . import keys
from .passes import digest
from .runner import VLLM_TESTS_PLUGINS, Job, JobResult, LaneReport, Root, Runner

NEXT_SUFFIX = "__next"


@dataclass(frozen=True)
class Probe:
    """Patch ``patch``'s nodes run at prefix ``prefix`` (``patch`` itself or ``patch - 1``)."""

    patch: int
    prefix: int

    @property
    def before(self) -> bool:
        return self.prefix == self.patch - 1


class NodeKind(StrEnum):
    """What a patch's header says of a node: ``Tests:`` fail before it and pass with it, a
    ``Guard:`` passes with it."""

    TEST = "test"
    GUARD = "guard"


@dataclass
class BisectRow:
    k: int
    patch: str
    test: str
    kind: NodeKind
    at_k: str
    at_prev: str

    @property
    def ok(self) -> bool:
        if self.kind == NodeKind.GUARD:
            return self.at_k == PASSED
        return self.at_k == PASSED and self.at_prev == FAILED


def _file(node: str) -> str:
    return node.split("::", 1)[0]


def _next_name(path: str) -> str:
    p = PurePosixPath(path)
    return str(p.with_name(f"{p.stem}{NEXT_SUFFIX}{p.suffix}"))


def compile_errors(tree, commit: str, paths: list[str]) -> list[str]:
    """Byte-compile (in memory) every .py file ``paths`` names at ``commit``; return the failures."""
    errors = []
    for path in paths:
        if not path.endswith(".py"):
            continue
        data = git.repo.show(tree, commit, path)
        if data is None:
            continue  # not yet created at this prefix
        try:
            compile(data, path, "exec")
        except SyntaxError as e:
            errors.append(f"{path}:{e.lineno}: {e.msg}")
    return errors


class BisectLane:
    name = "bisect"

    def __init__(self, only: set[int] | None = None) -> None:
        self.only = only  # patch numbers (1-based) to bisect; None: all
        self.problems: list[str] = []  # prefixes that do not byte-compile
        self.style: list[str] = []  # prefixes that fail the base's style gate
        self._style_patch: int | None = None  # the patch that made the first of them
        # Probe -> (job label, {requested node id -> node id in that job's root})
        self._probes: dict[Probe, tuple[str, dict[str, str]]] = {}
        self._static: dict[int, str] = {}  # prefix -> key of its compile + style checks, run now
        self.static_cached: list[int] = []  # prefixes whose checks passed before with the same key

    def _nodes(self, r: Runner, k: int) -> list[str]:
        if not 1 <= k <= len(r.patches) or (self.only is not None and k not in self.only):
            return []
        h = r.patches[k - 1].header
        return list(dict.fromkeys(h.tests + h.guards))

    def _static_key(self, r: Runner, j: int, touched: list[str]) -> str:
        """What prefix j's compile and style checks read: the tree at j, the files patches 1..j
        touch, the base's ruff pin, the tool."""
        tree_id = git.repo.rev_parse(r.tree, f"{r.chain[j]}^{{tree}}")
        return digest(
            {"tool": keys.tool_source(), "tree": tree_id, "touched": touched, "ruff": r.base.seam.ruff}
        )

    def jobs(self, r: Runner) -> list[Job]:
        chain = r.chain
        touched: list[str] = []
        style_at = set(range(1, len(chain))) if self.only is None else set(self.only)
        for j in range(1, len(chain)):
            touched += [fc.path for fc in r.patches[j - 1].files]
            paths = sorted(set(touched))
            compiles = self.only is None or j in self.only or j + 1 in self.only
            if not (compiles or j in style_at):
                continue
            if r.passes is not None:
                key = self._static_key(r, j, paths)
                if r.passes.lookup(f"bisect-checks-at-{j:02d}", key):
                    self.static_cached.append(j)
                    style_at.discard(j)
                    continue
                self._static[j] = key
            if compiles:
                self.problems += [f"prefix {j}: {e}" for e in compile_errors(r.tree, chain[j], paths)]
        style = prefix_problems(r.tree, chain, r.patches, r.base, r.cache, style_at)
        self.style = [message for _, message in style]
        self._style_patch = style[0][0] if style else None
        jobs = []
        for j in range(len(chain)):
            here, nxt = self._nodes(r, j), self._nodes(r, j + 1)
            if not here and not nxt:
                continue
            label = f"bisect-at-{j:02d}"
            if here and nxt:
                merged = self._merge(r, j, here, nxt)
                if merged is None:  # patch j+1 changes shared test scaffolding: two processes
                    jobs.append(
                        self._job(r, f"{label}-patch-{j:02d}", j, Root(chain[j]), {Probe(j, j): here})
                    )
                    jobs.append(
                        self._job(
                            r, f"{label}-patch-{j + 1:02d}", j, Root(chain[j + 1]), {Probe(j + 1, j): nxt}
                        )
                    )
                else:
                    root, renamed = merged
                    jobs.append(
                        self._job(r, label, j, root, {Probe(j, j): here, Probe(j + 1, j): nxt}, renamed)
                    )
            elif here:
                jobs.append(self._job(r, label, j, Root(chain[j]), {Probe(j, j): here}))
            else:
                jobs.append(self._job(r, label, j, Root(chain[j + 1]), {Probe(j + 1, j): nxt}))
        return jobs

    def _merge(self, r: Runner, j: int, here: list[str], nxt: list[str]):
        """A root holding patch j's files at j and patch j+1's at j+1, or None when they cannot share one."""
        chain = r.chain
        changed = set(git.repo.changed_paths(r.tree, chain[j], chain[j + 1], ["tests", "pyproject.toml"]))
        next_files = {_file(n) for n in nxt}
        if not changed <= next_files:
            return None
        extra, renamed = [], {}
        for path in sorted(next_files & changed):
            existed = git.repo.exists_at(r.tree, chain[j], path)
            dest = _next_name(path) if existed else path
            extra.append((dest, chain[j + 1], path))
            renamed[path] = dest
        return Root(chain[j], tuple(extra)), renamed

    def _job(self, r, label, prefix, root, probes: dict[Probe, list[str]], renamed=None) -> Job:
        renamed = renamed or {}
        targets: list[str] = []
        for probe, nodes in probes.items():
            mapping = {}
            for node in nodes:
                f = _file(node)
                local = (
                    node if probe.prefix == probe.patch or f not in renamed else renamed[f] + node[len(f) :]
                )
                mapping[node] = local
                targets.append(local)
            self._probes[probe] = (label, mapping)
        return Job(
            label,
            r.chain[prefix],
            root,
            tuple(dict.fromkeys(targets)),
            estimate=40.0,
            plugins=VLLM_TESTS_PLUGINS,
        )

    def passed(self, r: Runner, done: Mapping[str, JobResult]) -> set[str]:
        """The jobs (prefixes) that passed on their own: each Tests node of the patch at k passed,
        of the patch k+1 failed; each Guard passed at k. A step's record is its own, so a change
        to patch k re-runs steps k-1 and on only. The compile and style checks of each prefix
        checked now are recorded too, when none of them found a problem."""
        good: dict[str, bool] = {}
        for probe, (label, mapping) in self._probes.items():
            h = r.patches[probe.patch - 1].header
            rows = done[label].rows if label in done else None
            ok = rows is not None
            for node, local in mapping.items():
                if not ok:
                    break
                got = fold(rows, local)
                if probe.before:
                    ok = node not in h.tests or got == FAILED
                else:
                    ok = got == PASSED
            good[label] = good.get(label, True) and ok
        if r.passes is not None and not self.problems and not self.style:
            for j, key in self._static.items():
                r.passes.record(f"bisect-checks-at-{j:02d}", key, 0.0)
        return {label for label, ok in good.items() if ok}

    def outcome(self, done: Mapping[str, JobResult], probe: Probe, node: str) -> str:
        if probe not in self._probes:
            return "not run"
        label, mapping = self._probes[probe]
        return fold(done[label].rows, mapping[node])

    def rows(self, r: Runner, done: Mapping[str, JobResult]) -> list[BisectRow]:
        rows = []
        for k, patch in enumerate(r.patches, 1):
            if self.only is not None and k not in self.only:
                continue
            h = patch.header
            for kind, nodes in ((NodeKind.TEST, h.tests), (NodeKind.GUARD, h.guards)):
                for node in nodes:
                    at_k = self.outcome(done, Probe(k, k), node)
                    at_prev = self.outcome(done, Probe(k, k - 1), node)
                    rows.append(BisectRow(k, patch.name, node, kind, at_k, at_prev))
        return rows

    def _stopped_at_collection(self, done: Mapping[str, JobResult]) -> list[str]:
        """Why a step's nodes are missing: pytest stops before running anything when a file it
        was asked for fails to import, and one step runs two patches' files in one process."""
        lines = []
        for label in dict.fromkeys(label for label, _ in self._probes.values()):
            result = done.get(label)
            if result is None:
                continue
            missing = [
                node
                for probe_label, mapping in self._probes.values()
                if probe_label == label
                for node in mapping.values()
                if fold(result.rows, node) == MISSING
            ]
            errors = [row for row in result.rows.values() if row.get("when") == "collect"]
            if not missing or not errors:
                continue
            for row in errors:
                last = (row.get("message") or "").strip().splitlines()[-1:] or ["?"]
                lines.append(f"collect: {label}: {row['nodeid']} does not import: {last[0]}")
            lines.append(
                f"collect: {label}: so pytest ran none of its {len(missing)} other test(s) (shown "
                f"missing); a patch's tests must import before that patch (`{NEXT_SUFFIX}` is the "
                "next patch's file run at this prefix): reach names the patch adds inside the tests"
            )
        return lines

    def report(self, r: Runner, done: Mapping[str, JobResult]) -> LaneReport:
        rows = self.rows(r, done)
        bad = [row for row in rows if not row.ok]
        lines = [f"{'k':>2}  {'kind':5}  {'at k':7}  {'at k-1':7}  test"] if rows else []
        for row in rows:
            mark = "" if row.ok else "   <-- NOT BISECTABLE"
            lines.append(f"{row.k:>2}  {row.kind:5}  {row.at_k:7}  {row.at_prev:7}  {row.test}{mark}")
        lines += self._stopped_at_collection(done)
        lines += [f"compile: {p}" for p in self.problems]
        lines += [f"style: {p}" for p in self.style]
        if self.style:
            tree = r.tree.relative_to(r.root) if r.tree.is_relative_to(r.root) else r.tree
            fix = ruff_fix(r.root, gate_ruff(r.base, r.cache), r.tree, problem_paths(self.style))
            lines.append(
                f"style: next: fix patch {self._style_patch:04d} in {tree} (the base's ruff {r.base.seam.ruff} "
                f"fixes what it can in the files as they are now: `{fix}`; git commit --fixup), "
                f"make refresh BASE={r.base.name}, then make bisect BASE={r.base.name} "
                f"PATCH={self._style_patch:04d}"
            )
        if self.static_cached:
            lines.append(
                f"compile, style: prefixes {', '.join(map(str, self.static_cached))} passed before "
                "with the same inputs (cached)"
            )
        for k in sorted(self.only or ()):
            if 1 <= k <= len(r.patches) and not self._nodes(r, k):
                name = r.patches[k - 1].name
                lines.append(
                    f"{name}: no Tests: or Guard: in its header, so no test to bisect (its prefix was "
                    "compiled and style-checked only)"
                )
        lines.append(f"bisect: {len(rows) - len(bad)} passed, {len(bad)} failed")
        ok = not bad and not self.problems and not self.style
        data = {
            "ok": ok,
            "problems": self.problems,
            "style": self.style,
            "rows": [dict(vars(row), ok=row.ok) for row in rows],
        }
        return LaneReport(self.name, ok, lines, data)
