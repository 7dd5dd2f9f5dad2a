"""Run the jobs of any set of lanes on venv slots, two (or more) at a time.

A *lane* (bisect, full, upstream, plugin, ...) is a check of ``make test``. It
turns the series into *jobs* (one pytest process each: which build-tree commit's
overlay the venv must hold, which test root, which node ids, which extra
environment) and, once they ran, the per-node-id outcomes into a report. Lanes
know nothing about processes or venvs; the runner knows nothing about lanes.

A *slot* is a venv holding stock vLLM: slot 0 is the test venv itself
(``.venv-vllm-<base>``), slot i > 0 a hard-linked copy of it under ``build/seamtest/<base>/`` (``layout.seamtest_work``)
(cheap: only the directory entries are new; the overlay installer replaces
files by rename, so a slot's overlaid files never touch another slot's). Each
slot runs one job at a time; the longest jobs start first (the previous run's
wall times, else the lane's estimate).

Bytecode: ``uv`` installs the venv without ``.pyc`` files. Test processes may
write them (the first one that imports a module compiles it once for every
later process of that slot), which more than halves the start-up of
``import vllm``; the overlay installer drops and rewrites the bytecode of the
files it replaces.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import queue
import shutil
import subprocess
import tarfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .. import git, hints
from ..bases.pins import Base
from ..errors import SeamError
from ..overlay.stage import install_into_venv, stage
from ..queue.footprint import overlay_paths
from ..queue.patch import Patch
from ..progress import QUIET, Progress
from ..queue.series import read_series
from ..tree.seamtree import SeamTree
from ..tree.state import Kind
from .outcomes import read_rows

OUTCOMES_PLUGIN = "tkvseam.seamtest.outcomes"
#: What every job running under vLLM's own ``tests/conftest.py`` loads: its global cleanup
#: once per test file instead of after every test (``module_cleanup``; same outcomes, measured).
VLLM_TESTS_PLUGINS = ("tkvseam.seamtest.module_cleanup",)


@dataclass(frozen=True)
class Root:
    """Where pytest runs: ``tests/`` + ``pyproject.toml`` of a build-tree commit (without ``vllm/``,
    so ``import vllm`` is the venv's), plus ``extra`` files ``(dest, commit, path)`` taken from
    other commits. ``commit=None`` is the project root (the project's own tests)."""

    commit: str | None = None
    extra: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Job:
    label: str  # unique across the lanes of one run; names the log and outcome files
    commit: str  # the build-tree commit whose overlay the slot's venv holds
    root: Root
    targets: tuple[str, ...]  # pytest node ids or files, relative to the root
    env: tuple[tuple[str, str | None], ...] = ()  # None unsets a variable the runner sets
    estimate: float = 30.0  # seconds; the previous run's wall time wins when known
    plugins: tuple[str, ...] = ()  # extra pytest plugins (``-p``), importable from scripts/


@dataclass
class JobResult:
    job: Job
    rows: dict[str, dict]  # nodeid -> {"outcome", "message", ...}
    seconds: float
    summary: str  # pytest's last line
    log: Path
    slot: int


@dataclass
class LaneReport:
    lane: str
    ok: bool
    lines: list[str]  # human-readable report
    data: dict  # --json
    notes: list[str] = field(default_factory=list)  # said on stderr (e.g. a cached baseline used)


class Lane(Protocol):
    """A check of ``make test``: jobs out, a report back. Register it in ``lanes.LANES``."""

    name: str

    def jobs(self, r: Runner) -> list[Job]: ...

    def report(self, r: Runner, done: Mapping[str, JobResult]) -> LaneReport: ...


@dataclass
class Runner:
    root: Path  # project root
    tree: Path  # build tree
    python: Path  # the vLLM test venv's python (slot 0)
    work: Path  # scratch directory (build/seamtest)
    hf_home: Path
    base: Base
    cache: Path  # the tkv-seam cache (TKV_SEAM_CACHE): cached stock baselines
    progress: Progress = QUIET
    timeout: int = 900
    slots: int = 2
    bytecode: bool = True  # let test processes write .pyc into the slot venvs
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _installed: dict[int, str] = field(default_factory=dict, repr=False)

    # -- the series -----------------------------------------------------------

    def __post_init__(self) -> None:
        state = SeamTree(self.tree, self.root).require(Kind.APPLY, self.base.name, "the seam tests")
        self.patches: list[Patch] = read_series(self.root, self.base.queue, self.base.name).load()
        self.paths = overlay_paths(self.patches)
        again = hints.rerun("apply", self.root, self.base.name, self.tree)
        self.commits = git.commits_after(self.tree, state.base_commit)
        self.base_commit = state.base_commit
        if len(self.commits) != len(self.patches):
            raise SeamError(
                f"{self.tree} has {len(self.commits)} commits for {len(self.patches)} patches",
                hint=again,
            )

    @property
    def chain(self) -> list[str]:
        """Prefix j of the series is ``chain[j]`` (0: the pristine base)."""
        return [self.base_commit, *self.commits]

    @property
    def head(self) -> str:
        return self.chain[-1]

    # -- slots ------------------------------------------------------------------

    def slot_python(self, i: int) -> Path:
        """The python of slot ``i``; slot i > 0 is (re)made as a hard-linked copy of slot 0's venv."""
        if i == 0:
            return self.python
        venv = self.python.parent.parent
        dest = self.work / "venvs" / f"slot-{i}"
        stamp = dest / ".tkv-seam-slot"
        cfg = (venv / "pyvenv.cfg").stat()
        identity = f"{venv.resolve()} {cfg.st_ino} {cfg.st_mtime_ns}\n"
        if not (stamp.exists() and stamp.read_text() == identity):
            self.progress.step(f"slot {i}: hard-linked copy of {venv} in {dest}")
            shutil.rmtree(dest, ignore_errors=True)
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-al", str(venv), str(tmp)], check=True)
            (tmp / ".tkv-seam-slot").write_text(identity)
            tmp.rename(dest)
        return dest / "bin" / self.python.name

    def install(self, slot: int, commit: str) -> None:
        """The overlay of ``commit`` into the slot's venv (each file checked pristine-or-ours first)."""
        if self._installed.get(slot) == commit:
            return
        stage_dir = self.work / "stage" / f"slot-{slot}"
        stage(self.tree, self.paths, stage_dir, commit)
        install_into_venv(self.slot_python(slot), stage_dir)
        self._installed[slot] = commit

    # -- test roots -------------------------------------------------------------

    def test_root(self, root: Root) -> Path:
        """The directory pytest runs in (cached per commit and extra files)."""
        if root.commit is None:
            return self.root
        name = root.commit[:12]
        if root.extra:
            name += "-" + hashlib.sha256(json.dumps(root.extra).encode()).hexdigest()[:8]
        dest = self.work / "roots" / name
        with self._lock:
            if dest.exists():
                return dest
            # pyproject.toml: pytest's configuration (every vLLM release has one; a tree without it runs bare)
            config = ["pyproject.toml"] if git.exists_at(self.tree, root.commit, "pyproject.toml") else []
            data = git.archive(self.tree, root.commit, ["tests", *config])
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                # git archive of a tree the tool made; Python < 3.11.4 has no filters
                safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tar.extractall(tmp, **safe)
            for path, commit, source in root.extra:
                out = tmp / path
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(git.show_required(self.tree, commit, source))
            tmp.rename(dest)
        return dest

    # -- one job ----------------------------------------------------------------

    def env(self, outcomes: Path, extra: Mapping[str, str | None] = {}) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            {
                "VLLM_TARGET_DEVICE": "cpu",
                "HF_HUB_OFFLINE": "1",
                "HF_HOME": str(self.hf_home),
                "VLLM_PLUGINS": "",
                "VLLM_CACHE_ROOT": str(self.work / "vllm-cache"),
                "TKV_SEAM_OUTCOMES": str(outcomes),
                # the base under test, for the project's tests that differ per base (tests/plugin,
                # tests/differential); set here, not inherited from make's command line
                "BASE": self.base.name,
                "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
                # humming (a vLLM dependency) starts two background CUDA builds per
                # importing process; on CPU they only fail, outlive the process and
                # double the load of every test run.
                "HUMMING_DISABLE_PARALLEL_BUILD": "1",
            }
        )
        if not self.bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        for key, value in extra.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def run_job(self, job: Job, slot: int) -> JobResult:
        self.install(slot, job.commit)
        cwd = self.test_root(job.root)
        outcomes = self.work / "outcomes" / f"{job.label}.jsonl"
        outcomes.parent.mkdir(parents=True, exist_ok=True)
        outcomes.unlink(missing_ok=True)
        cmd = [
            str(self.slot_python(slot)),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            OUTCOMES_PLUGIN,
            *(arg for name in job.plugins for arg in ("-p", name)),
            f"--timeout={self.timeout}",
            "-o",
            "addopts=",
            *job.targets,
        ]
        started = time.monotonic()
        proc = subprocess.run(
            cmd, cwd=cwd, env=self.env(outcomes, dict(job.env)), capture_output=True, text=True
        )
        seconds = time.monotonic() - started
        log = self.work / "logs" / f"{job.label}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(proc.stdout + proc.stderr)
        summary = (proc.stdout.strip().splitlines() or [""])[-1]
        rows = read_rows(outcomes)
        if not rows and proc.returncode not in (0, 5):
            raise SeamError(f"pytest could not run ({job.label}); see {log}")
        self.progress.step(f"[slot {slot}] {job.label}: {summary} ({seconds:.0f} s, log {log})")
        return JobResult(job, rows, seconds, summary, log, slot)

    # -- many jobs ----------------------------------------------------------------

    def run(self, jobs: list[Job]) -> dict[str, JobResult]:
        """Run ``jobs`` on up to ``slots`` slots, longest first; then slot 0 holds the full series."""
        labels = [j.label for j in jobs]
        if len(set(labels)) != len(labels):
            raise SeamError(f"duplicate job labels: {sorted(lb for lb in labels if labels.count(lb) > 1)}")
        times_file = self.work / "job-seconds.json"
        try:
            known = json.loads(times_file.read_text())
        except (OSError, ValueError):
            known = {}
        todo: queue.Queue[Job] = queue.Queue()
        for job in sorted(jobs, key=lambda j: -known.get(j.label, j.estimate)):
            todo.put(job)
        done: dict[str, JobResult] = {}
        errors: list[BaseException] = []

        def worker(slot: int) -> None:
            while not errors:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    result = self.run_job(job, slot)
                except BaseException as e:  # reported after the other slots finish their job
                    errors.append(e)
                    return
                with self._lock:
                    done[job.label] = result

        n = max(1, min(self.slots, len(jobs)))
        for i in range(n):  # make the slot copies before the threads start
            self.slot_python(i)
        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        self.install(0, self.head)
        known.update({label: round(r.seconds, 1) for label, r in done.items()})
        times_file.parent.mkdir(parents=True, exist_ok=True)
        times_file.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
        return done


def run_lanes(r: Runner, lanes: list[Lane]) -> list[LaneReport]:
    """All jobs of ``lanes`` in one schedule (both cores busy across lanes); one report per lane."""
    jobs = [job for lane in lanes for job in lane.jobs(r)]
    done = r.run(jobs) if jobs else {}
    return [lane.report(r, done) for lane in lanes]
