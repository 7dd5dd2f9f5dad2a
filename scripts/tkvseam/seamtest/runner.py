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

Nothing changes under a run: ``run_lanes`` holds the work directory and the test venv from its
first key to its last record, and records a pass only when what it read is as it started
(``inputs``).

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

from .. import git, hints, layout
from ..bases.pins import Base
from ..errors import SeamError
from ..overlay.stage import install_into_venv, stage
from ..queue.footprint import overlay_paths
from ..queue.patch import Patch
from ..progress import QUIET, Progress, eta, heartbeat, took
from ..queue.series import read_series
from ..tree.seamtree import SeamTree
from ..tree.state import Kind
from . import inputs, keys
from .outcomes import read_rows
from .passes import PassBook, digest

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
    cached: str | None = None  # a recorded pass stood in for the run: when it was recorded
    ended: float = 0.0  # time.monotonic() when the job ended (its start: ended - seconds)


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
    """The lanes' runner on one base's build tree. ``Runner.open`` reads the series and the
    tree's commits (what the CLI does); the constructor takes them as given (tests, tools)."""

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
    patches: list[Patch] = field(default_factory=list)
    base_commit: str = ""
    commits: list[str] = field(default_factory=list)
    passes: PassBook | None = None  # what passed (None: nothing remembered, every job runs)
    overlay: list[str] | None = None  # the vllm/ files staged into a slot (None: the patches' own)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _installed: dict[int, str] = field(default_factory=dict, repr=False)
    _keys: dict[str, str] = field(default_factory=dict, repr=False)  # job label -> key at its start
    _inputs: dict | None = field(default=None, repr=False)  # what the keys hold of project and venv
    _slots_checked: set[int] = field(default_factory=set, repr=False)
    _hashes: keys.HashCache | None = field(default=None, repr=False)
    _touched: tuple | None = field(default=None, repr=False)  # inputs.touched as the jobs started

    # -- the series -----------------------------------------------------------

    @classmethod
    def open(cls, root: Path, tree: Path, *args, **kw) -> Runner:
        """A runner on the build tree ``tree``: its series and commits read and checked."""
        base = args[3] if len(args) > 3 else kw["base"]
        state = SeamTree(tree, root).require(Kind.APPLY, base.name, "the seam tests")
        series = read_series(root, base.queue, base.name)
        inputs.require_queue(root, tree, base.name, state, series.file_digests())
        patches = series.load()
        again = hints.rerun("apply", root, base.name, tree)
        commits = git.repo.commits_after(tree, state.base_commit)
        if len(commits) != len(patches):
            raise SeamError(f"{tree} has {len(commits)} commits for {len(patches)} patches", hint=again)
        return cls(root, tree, *args, patches=patches, base_commit=state.base_commit, commits=commits, **kw)

    @property
    def paths(self) -> list[str]:
        return overlay_paths(self.patches) if self.overlay is None else self.overlay

    @property
    def chain(self) -> list[str]:
        """Prefix j of the series is ``chain[j]`` (0: the pristine base)."""
        return [self.base_commit, *self.commits]

    @property
    def head(self) -> str:
        return self.chain[-1]

    # -- slots ------------------------------------------------------------------

    def slot_python(self, i: int) -> Path:
        """The python of slot ``i``; slot i > 0 is a hard-linked copy of slot 0's venv, (re)made
        when what it holds is not what slot 0 holds (``keys.venv_state``: once per run)."""
        if i == 0:
            return self.python
        venv = self.python.parent.parent
        dest = self.work / "venvs" / f"slot-{i}"
        if i not in self._slots_checked:
            want = self.inputs()["venv"]
            if not (dest / ".tkv-seam-slot").is_file() or self.venv_state(dest) != want:
                self.progress.step(f"slot {i}: hard-linked copy of {venv} in {dest}")
                shutil.rmtree(dest, ignore_errors=True)
                tmp = dest.with_name(dest.name + ".tmp")
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(["cp", "-al", str(venv), str(tmp)], check=True)
                (tmp / ".tkv-seam-slot").write_text(f"{venv.resolve()}\n")
                tmp.rename(dest)
            self._slots_checked.add(i)
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
            config = (
                ["pyproject.toml"] if git.repo.exists_at(self.tree, root.commit, "pyproject.toml") else []
            )
            data = git.repo.archive(self.tree, root.commit, ["tests", *config])
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
                out.write_bytes(git.repo.show_required(self.tree, commit, source))
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
                "PYTHONPATH": str(inputs.SCRIPTS),
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
            *([] if job.root.commit is None else inputs.own_config(cwd)),
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
        return JobResult(job, rows, seconds, summary, log, slot, ended=started + seconds)

    # -- what a job reads ----------------------------------------------------------

    def _tree_id(self, commit: str) -> str:
        return git.repo.rev_parse(self.tree, f"{commit}^{{tree}}")

    def venv_state(self, venv: Path) -> str:
        """``keys.venv_state`` of a slot's venv, the overlay's files left out (the installer checks them)."""
        if self._hashes is None:
            self._hashes = keys.HashCache(self.work / "venv-hashes.json")
            if not self._hashes.known:
                self.progress.step(f"{venv}: hashing its installed files (once: kept in {self._hashes.path})")
        return keys.venv_state(venv, self.paths, self._hashes)

    def inputs(self) -> dict:
        """What the keys hold of the project and of the test venv (``inputs.read``), as the run
        found them: read once, at its first key."""
        if self._inputs is None:
            self._inputs = inputs.read(self)
        return self._inputs

    def held(self):
        return inputs.held(self)  # the work directory (slots, stages, roots) and the test venv

    def job_key(self, job: Job) -> str:
        """A digest of everything ``job`` can read: the tool, the venv's installed state with
        the overlay of ``job.commit`` (its tree id), the pristine base, the project (all of it
        for a job run in it; what its environment reaches for one run in a test root of the
        tree, with that root's files), its targets and options."""
        env = dict(job.env)
        inputs = self.inputs()
        if job.root.commit is None:
            tests = inputs["project"]
        else:
            tests = [self._tree_id(job.root.commit), inputs["reach"]]
        parts = {
            "tool": keys.tool_source(),
            "base": keys.base_inputs(self.root, self.base),
            "interpreter": keys.interpreter(self.python),
            "venv": inputs["venv"],
            "pristine": self._tree_id(self.base_commit),
            "overlay": self._tree_id(job.commit),
            "tests": tests,
            "extra": [(d, git.repo.rev_parse(self.tree, f"{c}:{p}")) for d, c, p in job.root.extra],
            "targets": list(job.targets),
            "env": sorted((k, v) for k, v in env.items()),
            "environ": keys.environment(os.environ),
            "plugins": list(job.plugins),
            "timeout": self.timeout,
            "hf_home": self.hf_home.name,
        }
        plugins_dir = str(layout.plugin_dir(self.root))
        if any(plugins_dir in (v or "") for v in env.values()):  # the job loads the plugin pin
            parts["plugin_pin"] = self.base.seam.plugin.requirements_txt()
        return digest(parts)

    def _recorded(self, job: Job, key: str) -> JobResult | None:
        rec = self.passes.lookup(job.label, key) if self.passes else None
        if rec is None:
            return None
        log = self.passes._file(job.label, key)
        d = rec.data
        return JobResult(job, d.get("rows", {}), rec.seconds, d.get("summary", ""), log, -1, rec.when)

    def record(self, result: JobResult) -> None:
        """Record that ``result``'s job passed (its lane said so); a cached one is not re-recorded."""
        if self.passes is None or result.cached:
            return
        data = {"rows": result.rows, "summary": result.summary}
        key = self._keys.get(result.job.label) or self.job_key(result.job)
        self.passes.record(result.job.label, key, result.seconds, data)

    def forget(self, job: Job) -> None:
        """``job`` ran and did not pass: a pass recorded before under its key is no longer one."""
        key = self._keys.get(job.label)
        if self.passes is not None and key is not None:
            self.passes.forget(job.label, key)

    # -- many jobs ----------------------------------------------------------------

    def run(self, jobs: list[Job]) -> dict[str, JobResult]:
        """Run ``jobs`` on up to ``slots`` slots, longest first; then slot 0 holds the full series.
        A job whose key has a recorded pass is not run: its recorded outcomes stand in."""
        labels = [j.label for j in jobs]
        if len(set(labels)) != len(labels):
            raise SeamError(f"duplicate job labels: {sorted(lb for lb in labels if labels.count(lb) > 1)}")
        times_file = self.work / "job-seconds.json"
        try:
            known = json.loads(times_file.read_text())
        except (OSError, ValueError):
            known = {}
        done: dict[str, JobResult] = {}
        to_run = []
        for job in jobs:
            cached = None
            if self.passes is not None:
                self._keys[job.label] = key = self.job_key(job)
                cached = self._recorded(job, key)
            if cached is None:
                to_run.append(job)
            else:
                done[job.label] = cached
        if done:
            self.progress.step(
                f"{len(done)} of {len(jobs)} jobs passed before with the same inputs: cached "
                f"(FRESH=1 runs them)"
            )
        todo: queue.Queue[Job] = queue.Queue()
        for job in sorted(to_run, key=lambda j: -known.get(j.label, j.estimate)):
            todo.put(job)
        errors: list[BaseException] = []
        total = len(to_run)
        running: dict[str, tuple[float, float]] = {}  # label -> (start, estimate)
        counter = iter(range(1, total + 1))

        def worker(slot: int) -> None:
            while not errors:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                estimate = known.get(job.label, job.estimate)
                with self._lock:
                    k = next(counter)
                    running[job.label] = (time.monotonic(), estimate)
                said = "last took" if job.label in known else "estimate"
                self.progress.step(f"{k}/{total} {job.label} [slot {slot}] ({said} ~{took(estimate)})")
                try:
                    result = self.run_job(job, slot)
                except BaseException as e:  # reported after the other slots finish their job
                    self.forget(job)
                    errors.append(e)
                    return
                finally:
                    with self._lock:
                        running.pop(job.label, None)
                with self._lock:
                    done[job.label] = result

        def status() -> str:
            with self._lock:
                now = time.monotonic()
                busy = ", ".join(f"{lb} {eta(now - t0, est)}" for lb, (t0, est) in sorted(running.items()))
                left = sum(known.get(j.label, j.estimate) for j in list(todo.queue))
                left += sum(max(0.0, est - (now - t0)) for t0, est in running.values())
                finished = sum(1 for r in done.values() if r.cached is None)
            return f"{finished}/{total} done; running {busy or 'nothing'}; ~{took(left / n)} left"

        n = max(1, min(self.slots, len(to_run)))
        if to_run:
            for i in range(n):  # make the slot copies before the threads start
                self.slot_python(i)
            if self.passes is not None:
                self._touched = inputs.touched(self)
            threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
            with heartbeat(self.progress, status):
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        if errors:
            raise errors[0]
        if to_run:
            self.install(0, self.head)
        known.update({label: round(r.seconds, 1) for label, r in done.items() if r.cached is None})
        times_file.parent.mkdir(parents=True, exist_ok=True)
        times_file.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
        return done


def passed_jobs(lane: Lane, r: Runner, done: Mapping[str, JobResult], report: LaneReport) -> set[str]:
    """The labels of ``lane``'s jobs that passed: the lane's own ``passed`` when it has one (a
    bisect step passes on its own), else all of them when the lane's report is ok."""
    judge = getattr(lane, "passed", None)
    if judge is not None:
        return set(judge(r, done))
    return set(lane.labels) if report.ok else set()


def ran_for(ran: list[JobResult]) -> str:
    """How long jobs that ran took: the wall time from the first start to the last end, then the
    job time summed (jobs run side by side, so the sum is more than the wait), e.g.
    ``in 37 s (job time 1 min 03 s)``."""
    if not ran:
        return "in 0 s"
    wall = max(r.ended for r in ran) - min(r.ended - r.seconds for r in ran)
    summed = sum(r.seconds for r in ran)
    return f"in {took(wall)}" + (f" (job time {took(summed)})" if len(ran) > 1 else "")


def run_lanes(r: Runner, lanes: list[Lane]) -> list[LaneReport]:
    """All jobs of ``lanes`` in one schedule (both cores busy across lanes); one report per lane.
    The run holds its work directory and test venv throughout (``Runner.held``). Each job that
    passed is recorded (``r.passes``) once every lane's verdict is in and its inputs are still
    what the run started from; one that ran and did not pass loses a pass recorded before under
    its key. A lane all of whose jobs stood in from records says ``cached pass from <time>``."""
    with r.held():
        return _run_lanes(r, lanes)


def _run_lanes(r: Runner, lanes: list[Lane]) -> list[LaneReport]:
    per_lane = []
    for lane in lanes:
        jobs = lane.jobs(r)
        lane.labels = [j.label for j in jobs]
        per_lane.append(jobs)
    done = r.run([job for jobs in per_lane for job in jobs]) if any(per_lane) else {}
    changed = inputs.changed(r) if r.passes is not None else []
    reports = []
    n = len(lanes)
    for i, (lane, jobs) in enumerate(zip(lanes, per_lane), 1):
        report = lane.report(r, done)
        results = [done[j.label] for j in jobs if j.label in done]
        cached = [res for res in results if res.cached]
        ran = [res for res in results if not res.cached]
        keep = passed_jobs(lane, r, done, report)
        for res in ran:
            if res.job.label not in keep:
                r.forget(res.job)
            elif not changed:
                r.record(res)
        seconds = sum(res.seconds for res in ran)
        if jobs and not ran:
            when = min(res.cached for res in cached)
            line = f"{i}/{n} {lane.name}: cached pass from {when} ({len(cached)} job(s); FRESH=1 runs it)"
        else:
            line = f"{i}/{n} {lane.name}: {len(ran)} job(s) ran {ran_for(ran)}" + (
                f", {len(cached)} cached" if cached else ""
            )
        report.notes.insert(0, line + ("" if report.ok else ": FAILED"))
        if ran and r.passes is not None and r.passes.linked is not None:
            report.notes.insert(1, f"{lane.name}: nothing recorded: {r.passes.linked} is a symlink")
        elif ran and changed:
            report.notes.insert(
                1,
                f"{lane.name}: nothing recorded: {', '.join(changed)} changed while the lanes ran "
                "(the next run runs them again)",
            )
        if r.passes is not None and jobs:  # a lane with no job (a patch without tests) measured nothing
            r.passes.time(f"lane-{lane.name}", seconds, cached=not ran, ok=report.ok)
        reports.append(report)
    return reports
