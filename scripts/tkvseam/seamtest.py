"""Run the series' own tests and upstream's tests against a venv with the overlay installed.

The venv holds stock vLLM (``make venv-vllm``); for each prefix of the series the
overlay of that commit is installed (``overlay_install``, pristine-checked), the
test files of the relevant commit are exported to a directory without ``vllm/``
(so ``import vllm`` is the venv's), and pytest runs there. Outcomes are read per
node id through ``tkvseam.pytest_outcomes``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import git
from .errors import SeamError
from .overlay import install_into_venv, overlay_paths, stage
from .progress import QUIET, Progress
from .series import read_series
from .state import load_state

PASSED, FAILED = "passed", "failed"


@dataclass
class Runner:
    root: Path  # project root
    tree: Path  # build tree
    python: Path  # the vLLM venv's python
    work: Path  # scratch directory (build/seamtest)
    hf_home: Path
    progress: Progress = QUIET
    timeout: int = 900
    log: list[str] = field(default_factory=list)

    def env(self, outcomes: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "VLLM_TARGET_DEVICE": "cpu",
                "HF_HUB_OFFLINE": "1",
                "HF_HOME": str(self.hf_home),
                "VLLM_PLUGINS": "",
                "VLLM_CACHE_ROOT": str(self.work / "vllm-cache"),
                "TKV_SEAM_OUTCOMES": str(outcomes),
                "PYTHONPATH": str(self.root / "scripts"),
                "PYTHONDONTWRITEBYTECODE": "1",
                # humming (a vLLM dependency) starts two background CUDA builds per
                # importing process; on CPU they only fail, outlive the process and
                # double the load of every test run.
                "HUMMING_DISABLE_PARALLEL_BUILD": "1",
            }
        )
        env.update(extra or {})
        return env

    # -- trees and overlays ------------------------------------------------

    def commits(self) -> tuple[str, list[str]]:
        state = load_state(self.tree)
        out = git.out(self.tree, "rev-list", "--reverse", f"{state.base_commit}..HEAD")
        return state.base_commit, out.split() if out else []

    def install(self, commit: str, paths: list[str]) -> None:
        stage_dir = self.work / "stage"
        stage(self.tree, paths, stage_dir, commit)
        install_into_venv(self.python, stage_dir)

    def test_root(self, commit: str) -> Path:
        """tests/ and pyproject.toml of ``commit``, without vllm/ (cached per commit)."""
        dest = self.work / "roots" / commit[:12]
        if dest.exists():
            return dest
        data = git.run(self.tree, "archive", "--format=tar", commit, "tests", "pyproject.toml").stdout
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(tmp, filter="data")
        tmp.rename(dest)
        return dest

    # -- pytest --------------------------------------------------------------

    def pytest(self, root: Path, targets: list[str], label: str, extra_env=None) -> dict[str, dict]:
        """Run pytest on ``targets`` in ``root``; return {nodeid: {"outcome", "message"}}."""
        outcomes = self.work / "outcomes" / f"{label}.jsonl"
        outcomes.parent.mkdir(parents=True, exist_ok=True)
        outcomes.unlink(missing_ok=True)
        cmd = [
            str(self.python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tkvseam.pytest_outcomes",
            f"--timeout={self.timeout}",
            "-o",
            "addopts=",
            *targets,
        ]
        started = time.monotonic()
        proc = subprocess.run(
            cmd, cwd=root, env=self.env(outcomes, extra_env), capture_output=True, text=True
        )
        logfile = self.work / "logs" / f"{label}.log"
        logfile.parent.mkdir(parents=True, exist_ok=True)
        logfile.write_text(proc.stdout + proc.stderr)
        tail = (proc.stdout.strip().splitlines() or [""])[-1]
        self.progress.step(f"{label}: {tail} ({time.monotonic() - started:.0f} s, log {logfile})")
        rows: dict[str, dict] = {}
        for line in outcomes.read_text().splitlines() if outcomes.exists() else []:
            row = json.loads(line)
            prev = rows.get(row["nodeid"])
            if prev is None or prev["outcome"] == PASSED:
                rows[row["nodeid"]] = row
        if not rows and proc.returncode not in (0, 5):
            raise SeamError(f"pytest could not run ({label}); see {logfile}")
        return rows


def fold(rows: dict[str, dict], node: str) -> str:
    """One outcome for a requested node id (parametrized instances folded; collection errors count)."""
    file = node.split("::", 1)[0]
    found = [r for nid, r in rows.items() if nid == node or nid.startswith(node + "[") or nid == file]
    if not found:
        return "missing"
    outcomes = {r["outcome"] for r in found}
    for bad in ("error", FAILED, "skipped"):
        if bad in outcomes:
            return FAILED if bad == "error" else bad
    return PASSED


def _compile_prefix(tree: Path, commit: str, paths: list[str]) -> list[str]:
    """Byte-compile (in memory) every .py file the prefix touches; return the failures."""
    errors = []
    for path in paths:
        if not path.endswith(".py"):
            continue
        proc = git.run(tree, "show", f"{commit}:{path}", check=False)
        if proc.returncode != 0:
            continue  # not yet created at this prefix
        try:
            compile(proc.stdout, path, "exec")
        except SyntaxError as e:
            errors.append(f"{path}:{e.lineno}: {e.msg}")
    return errors


@dataclass
class BisectRow:
    k: int
    patch: str
    test: str
    kind: str  # "test" or "guard"
    at_k: str
    at_prev: str

    @property
    def ok(self) -> bool:
        if self.kind == "guard":
            return self.at_k == PASSED
        return self.at_k == PASSED and self.at_prev == FAILED


def bisect(r: Runner) -> tuple[list[BisectRow], list[str]]:
    """For each patch k: its Tests pass at k and fail at k-1; its Guards pass at k. Every prefix compiles."""
    patches = read_series(r.root).load()
    paths = overlay_paths(patches)
    touched: list[str] = []
    base, commits = r.commits()
    if len(commits) != len(patches):
        raise SeamError(f"{r.tree} has {len(commits)} commits for {len(patches)} patches", hint="make apply")
    rows: list[BisectRow] = []
    problems: list[str] = []
    chain = [base, *commits]
    results: dict[tuple[int, str], dict] = {}
    for j, commit in enumerate(chain):
        if j:
            touched += [fc.path for fc in patches[j - 1].files]
            problems += [f"prefix {j}: {e}" for e in _compile_prefix(r.tree, commit, sorted(set(touched)))]
        r.install(commit, paths)
        for k in (j, j + 1):  # patch j's tests at j; patch j+1's tests at j (its k-1)
            if not 1 <= k <= len(patches):
                continue
            h = patches[k - 1].header
            nodes = h.tests + h.guards
            if not nodes:
                continue
            targets = sorted({n for n in nodes})
            label = f"bisect-{k:02d}-at-{j:02d}"
            results[(k, "at_k" if k == j else "at_prev")] = r.pytest(r.test_root(chain[k]), targets, label)
    for k, patch in enumerate(patches, 1):
        h = patch.header
        for kind, nodes in (("test", h.tests), ("guard", h.guards)):
            for node in nodes:
                rows.append(
                    BisectRow(
                        k,
                        patch.name,
                        node,
                        kind,
                        fold(results.get((k, "at_k"), {}), node),
                        fold(results.get((k, "at_prev"), {}), node),
                    )
                )
    r.install(commits[-1] if commits else base, paths)
    return rows, problems


CUDA_ALIKE_PLUGIN = "tkvseam.cuda_alike"


def full(r: Runner, cuda_alike: bool = False) -> dict[str, str]:
    """Every Tests/Guard node of the series on the full series.

    With ``cuda_alike`` the platform reports ``is_cuda_alike()``/``is_cuda()``
    (the ``tkvseam.cuda_alike`` pytest plugin), so CUDA-only branches run too.
    """
    patches = read_series(r.root).load()
    base, commits = r.commits()
    r.install(commits[-1] if commits else base, overlay_paths(patches))
    nodes = sorted({n for p in patches for n in p.header.tests + p.header.guards})
    if not nodes:
        return {}
    label, extra = "full-series", None
    if cuda_alike:
        label, extra = "full-series-cuda-alike", {"PYTEST_PLUGINS": CUDA_ALIKE_PLUGIN}
    rows = r.pytest(r.test_root(commits[-1]), nodes, label, extra)
    return {n: fold(rows, n) for n in nodes}


UPSTREAM_FILES = (
    "tests/v1/core/test_kv_cache_utils.py",
    "tests/v1/core/test_single_type_kv_cache_manager.py",
    "tests/v1/core/test_prefix_caching.py",
    "tests/engine/test_arg_utils.py",
    "tests/v1/worker/test_gpu_worker.py",
    "tests/test_attention_backend_registry.py",
)


@dataclass
class UpstreamResult:
    file: str
    stock: dict[str, int]
    patched: dict[str, int]
    regressions: list[str]

    def to_json(self) -> dict:
        return asdict(self)


def _counts(rows: dict[str, dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows.values():
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    return counts


def upstream(r: Runner, files: tuple[str, ...] = UPSTREAM_FILES) -> list[UpstreamResult]:
    """Upstream test files on stock and on the full series: no failure stock does not show."""
    patches = read_series(r.root).load()
    paths = overlay_paths(patches)
    base, commits = r.commits()
    head = commits[-1] if commits else base
    stock_rows, patched_rows = {}, {}
    r.install(base, paths)
    for f in files:
        stock_rows[f] = r.pytest(r.test_root(base), [f], f"upstream-stock-{Path(f).stem}")
    r.install(head, paths)
    for f in files:
        patched_rows[f] = r.pytest(r.test_root(head), [f], f"upstream-patched-{Path(f).stem}")
    results = []
    for f in files:
        s, p = stock_rows[f], patched_rows[f]
        regressions = sorted(
            nid
            for nid, row in p.items()
            if row["outcome"] in (FAILED, "error") and s.get(nid, {}).get("outcome") not in (FAILED, "error")
        )
        results.append(UpstreamResult(f, _counts(s), _counts(p), regressions))
    return results


PLUGIN_REQUIREMENTS = "ci/plugin-requirements.txt"
PLUGIN_STOCK = "tests/plugin/test_stock.py"
PLUGIN_PATCHED = "tests/plugin/test_patched.py"


def plugin_dir(r: Runner) -> Path:
    """turbo-attn installed with --no-deps into its own --target dir (hash-checked by uv)."""
    target = r.work.parent / "plugin" / "turbo-attn"
    req = r.root / PLUGIN_REQUIREMENTS
    stamp = target / ".requirements"
    if stamp.exists() and stamp.read_text() == req.read_text():
        return target
    uv = Path(os.environ.get("UV") or Path(__file__).resolve().parents[2] / ".venv/bin/uv")
    cmd = [
        str(uv if uv.exists() else "uv"),
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--require-hashes",
        "--target",
        str(target),
        "-p",
        str(r.python),
        "-r",
        str(req),
    ]
    r.progress.step(f"install {req.name} into {target}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SeamError(
            f"cannot install the plugin: {proc.stderr.strip()}", hint="check network access to PyPI"
        )
    stamp.write_text(req.read_text())
    return target


def plugin(r: Runner) -> dict[str, dict[str, str]]:
    """turbo-attn on stock v0.31.0 (breaks it) and on the full series (works); outcomes per test."""
    patches = read_series(r.root).load()
    paths = overlay_paths(patches)
    base, commits = r.commits()
    target = plugin_dir(r)
    extra = {"TKV_SEAM_PLUGIN_PATH": str(target)}
    results = {}
    for label, commit, test_file in (("stock", base, PLUGIN_STOCK), ("patched", commits[-1], PLUGIN_PATCHED)):
        r.install(commit, paths)
        rows = r.pytest(r.root, [test_file], f"plugin-{label}", extra)
        results[label] = {nid: row["outcome"] for nid, row in rows.items()}
    r.install(commits[-1], paths)
    return results


DIFFERENTIAL_TESTS = "tests/differential"


def differential(r: Runner) -> dict[str, str]:
    """The project's differential tests (patched vs pristine modules) on the full series' overlay."""
    patches = read_series(r.root).load()
    base, commits = r.commits()
    r.install(commits[-1] if commits else base, overlay_paths(patches))
    rows = r.pytest(r.root, [DIFFERENTIAL_TESTS], "differential", {"TKV_SEAM_TREE": str(r.tree)})
    if not rows:
        raise SeamError(f"no test ran in {DIFFERENTIAL_TESTS}", hint=f"ls {DIFFERENTIAL_TESTS}")
    return {nid: fold(rows, nid) for nid in sorted(rows)}
