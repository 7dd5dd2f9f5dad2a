"""Upstream: vLLM's own test files on stock and on the full series; no failure stock does not show.

One pytest process per side (all files together). The stock side's outcomes are
a function of the base (its test files), the venv (the lock file, its installed state), the
offline HF cache, the tool's source and the run's options alone, so they are cached under
the tkv-seam cache keyed by a digest of exactly those: stock runs once per machine, and the
report says when a cached baseline was used; ``FRESH=1`` (``--fresh``) runs it again, as it
runs every lane (``passes``). Only a clean baseline (no stock
failure) is cached: a stock failure (a subprocess timing out under load) would
otherwise hide the same failure on the patched side in every later run.

Both sides load the same pytest plugins (``PLUGINS``), so the comparison stays
like for like: ``module_cleanup`` runs upstream's per-test global cleanup
(``cleanup_dist_env_and_memory()``, a full ``gc.collect()``) once per test file
instead of after each of the ~530 tests, through upstream's own
``skip_global_cleanup`` opt-out. That cleanup was ~90 % of a side's CPU time; the
per-node outcomes are the same with and without it (docs/speed.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import git
from ..fsutil import atomic_write, sha256_of
from . import keys
from .outcomes import counts, failing
from .inputs import HF_CONFIGS
from .runner import VLLM_TESTS_PLUGINS, Job, JobResult, LaneReport, Root, Runner

#: Bump when the way stock outcomes are produced changes (runner options, outcome format).
#: 2: the ``module_cleanup`` plugin (the baseline key also holds every plugin's source digest).
#: 3: the ``optimized_bytecode`` plugin.
#: 4: the tool's source and the venv's interpreter in the key (as every pass record's).
#: 5: the venv's installed state (``keys.venv_state``) in the key.
BASELINE_FORMAT = 5
#: pytest plugins both sides load (``-p``): whatever they do, stock and patched alike.
#: ``optimized_bytecode``: upstream's ``python -O`` subprocesses find their bytecode compiled.
PLUGINS = (*VLLM_TESTS_PLUGINS, "tkvseam.seamtest.optimized_bytecode")


@dataclass
class UpstreamResult:
    file: str
    stock: dict[str, int]
    patched: dict[str, int]
    regressions: list[str]

    def to_json(self) -> dict:
        return asdict(self)


def _plugin_digests(names: tuple[str, ...]) -> dict[str, str]:
    """{plugin: sha256 of its source}: a changed plugin may change the outcomes it yields."""
    out = {}
    for name in names:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, name
        out[name] = sha256_of(Path(spec.origin))
    return out


def _digest_dir(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(path).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


class UpstreamLane:
    name = "upstream"

    def __init__(self, files: tuple[str, ...] = (), use_cache: bool = True) -> None:
        self.files = files
        self.use_cache = use_cache
        self.cached: dict | None = None
        self.key = ""

    def _files(self, r: Runner) -> tuple[str, ...]:
        return self.files or r.base.seam.upstream_tests

    def baseline_key(self, r: Runner) -> dict:
        """What the stock outcomes depend on: base, its test files, the lock, the HF cache, the
        runner, the plugins both sides load."""
        return {
            "format": BASELINE_FORMAT,
            "base": r.base.name,
            "base_sdist_sha256": r.base.sdist.sha256,
            # git tree ids: a digest of every file under tests/ (conftests and helpers too)
            "tests_tree": git.repo.rev_parse(r.tree, f"{r.base_commit}:tests"),
            "pyproject": git.repo.rev_parse(r.tree, f"{r.base_commit}:pyproject.toml"),
            "files": list(self._files(r)),
            "lock_sha256": sha256_of(r.root / r.base.cpu_lock),
            "hf_configs": _digest_dir(r.root / HF_CONFIGS),
            "timeout": r.timeout,
            "plugins": _plugin_digests(PLUGINS),
            "tool": keys.tool_source(),
            "interpreter": keys.interpreter(r.python),
            "venv": r.inputs()["venv"],
        }

    def cache_file(self, r: Runner) -> Path:
        return r.cache / "seamtest" / f"upstream-stock-{r.base.name}-{self.key[:16]}.json"

    def jobs(self, r: Runner) -> list[Job]:
        files = self._files(r)
        if not files:
            return []
        key = self.baseline_key(r)
        self.key = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        path = self.cache_file(r)
        if self.use_cache and path.exists():
            data = json.loads(path.read_text())
            if data.get("key") == key:
                self.cached = data
        jobs = [Job("upstream-patched", r.head, Root(r.head), files, estimate=60.0, plugins=PLUGINS)]
        if self.cached is None:
            stock = Root(r.base_commit)
            jobs.append(Job("upstream-stock", r.base_commit, stock, files, estimate=55.0, plugins=PLUGINS))
        return jobs

    def report(self, r: Runner, done: Mapping[str, JobResult]) -> LaneReport:
        notes = []
        if self.cached is not None:
            stock = self.cached["rows"]
            notes.append(
                f"upstream: stock baseline from the cache ({self.cache_file(r)}, measured "
                f"{self.cached['measured']}); not re-run (--no-cache re-runs it)"
            )
        else:
            stock = done["upstream-stock"].rows if "upstream-stock" in done else {}
            if failing(stock):
                # A failure on stock (a timeout under load, say) would hide the same failure on
                # the patched side in every later run: only a clean baseline is cached.
                notes.append(f"upstream: stock baseline not cached: {len(failing(stock))} stock failure(s)")
            elif stock and self.use_cache:
                path = self.cache_file(r)
                path.parent.mkdir(parents=True, exist_ok=True)
                measured = done["upstream-stock"].log.stat().st_mtime
                atomic_write(
                    path,
                    json.dumps(
                        {"key": self.baseline_key(r), "measured": _iso(measured), "rows": stock}, indent=0
                    ),
                )
                notes.append(f"upstream: stock baseline measured now and cached in {path}")
        patched = done["upstream-patched"].rows if "upstream-patched" in done else {}
        results = []
        stock_failing = failing(stock)
        for f in self._files(r):
            s = {n: row for n, row in stock.items() if n.split("::", 1)[0] == f}
            p = {n: row for n, row in patched.items() if n.split("::", 1)[0] == f}
            regressions = sorted(failing(p) - stock_failing)
            results.append(UpstreamResult(f, counts(s), counts(p), regressions))
        bad = [res for res in results if res.regressions or not res.patched]
        lines = []
        for res in results:
            lines.append(f"{res.file}\n    stock:   {_fmt(res.stock)}\n    patched: {_fmt(res.patched)}")
            lines += [f"    NEW FAILURE: {nid}" for nid in res.regressions]
        baseline = "cached" if self.cached is not None else "measured now"
        lines.append(
            f"upstream: {len(results) - len(bad)} passed, {len(bad)} failed "
            f"(files without new failures; stock baseline {baseline})"
        )
        data = {
            "ok": not bad,
            "stock_baseline": baseline,
            "files": [res.to_json() for res in results],
        }
        return LaneReport(self.name, not bad, lines, data, notes)


def _fmt(c: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(c.items())) or "nothing ran"


def _iso(ts: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
