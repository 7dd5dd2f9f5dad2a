"""tkv-seam benchmark: every figure is a ratio against a baseline measured in the same run.

1. Apply: cold (empty cache: download + verify + unpack + apply), warm (cached base,
   the tree rebuilt), no-op (unchanged inputs); bytes fetched, against the bytes a
   user fetches today for a full vLLM git clone (a reference figure, not measured
   here: no access to the git host).
2. Patched vs stock vLLM, stock in one venv slot and the full series in another
   (hard-linked copies of .venv-vllm-<base> under build/bench/<base>/), in interleaved rounds so that both sides see
   the same load: `import vllm` (fresh processes, alternating), and in one warm
   process per side `create_engine_config()` on a tiny local model and KV planning
   (`get_kv_cache_configs` of the base's planner module) for a 64-layer model (>= 200 calls per round), timed in CPU
   seconds of the process (wall seconds beside: load stretches those). Reported:
   the min and the median of the per-round ratios, their quartiles and spread.
   Target: median ratio <= 1.05.
3. Mixed widths: blocks for six layers of turbo-attn 0.70.1's spec design (widths out of ==,
   fused by merge()) vs an unfused control of the same bytes, on the patched planner and on
   stock (v0.31.0/v0.32.0 plan a fused page, v0.33.0 a page per layer).

Usage: .venv/bin/python bench/bench.py [--base v0.31.0] [--repeat 6] [--rounds 15]
       [--skip-cold] [--skip-apply] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tkvseam.edit.apply import apply_series
from tkvseam.bases.pins import default_cache_dir, get_base, load_bases
from tkvseam.bases.sdist import fetch_sdist
from tkvseam.bases.carried import planner_module
from tkvseam.seamtest.hfcache import build as build_hf
from tkvseam.seamtest.runner import Runner

ROOT = Path(__file__).resolve().parents[1]
GIT_CLONE_BYTES = 1.1e9  # "the vLLM repository history is over 1.1 GB" (issue; lower bound)

# The tests' tiny Llama (no weights): what `create_engine_config()` and the planner are timed on.
MODEL_CONFIG = json.loads((ROOT / "tests" / "data" / "tiny-llama.json").read_text())

# `import vllm`: a fresh process per sample (that is what it costs a user).
# Timed in CPU seconds of the process (wall seconds beside): a loaded machine stretches wall time
# by whatever else runs, the CPU time a process spends far less.
PROBE_IMPORT = (
    "import time; t, c = time.perf_counter(), time.process_time(); import vllm; "
    'print(\'{"seconds": %f, "cpu": %f}\' % (time.perf_counter() - t, time.process_time() - c))'
)

# Sub-second work runs in one long-lived process per side, warmed once; each request
# "<probe> <calls>" is answered with the mean seconds per call over that round.
WORKER = """
import importlib, inspect, json, sys, time
import torch
from vllm.config import ModelConfig, VllmConfig
from vllm.engine.arg_utils import EngineArgs
from vllm.v1.kv_cache_interface import FullAttentionSpec

model, model64, planner = sys.argv[1], sys.argv[2], importlib.import_module(sys.argv[3])
cfg = VllmConfig(model_config=ModelConfig(model=model64, max_model_len=4096))
cfg.cache_config.kv_cache_layout = "LBNHC"
spec = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=16, dtype=torch.bfloat16)
specs = {f"model.layers.{i}.self_attn.attn": spec for i in range(64)}
# where the planner takes the global groups (v0.33.0), they are formed per plan, as the engine core does
takes_groups = "global_kv_cache_groups" in inspect.signature(planner.get_kv_cache_configs).parameters


def plan():
    if takes_groups:
        groups = planner.get_global_kv_cache_groups(cfg, [specs])
        return planner.get_kv_cache_configs(cfg, [specs], [1 << 30], groups)
    return planner.get_kv_cache_configs(cfg, [specs], [1 << 30])


def engine():
    return EngineArgs(model=model, skip_tokenizer_init=True, max_model_len=256).create_engine_config()


probes = {"plan": plan, "engine": engine}
for fn in probes.values():
    for _ in range(3):
        fn()
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    name, calls = line.split()
    fn, calls = probes[name], int(calls)
    t, c = time.perf_counter_ns(), time.process_time_ns()
    for _ in range(calls):
        fn()
    wall, cpu = time.perf_counter_ns() - t, time.process_time_ns() - c
    print(json.dumps({"seconds": wall / calls / 1e9, "cpu": cpu / calls / 1e9}), flush=True)
"""

# name in the report -> (worker probe, calls per round)
ROUND_PROBES = {
    "get_kv_cache_configs 64 layers": ("plan", 200),
    "create_engine_config": ("engine", 20),
}


def probe(runner: Runner, slot: int, code: str, *args: str) -> dict:
    env = runner.env(runner.work / "outcomes" / "bench.jsonl")
    python = str(runner.slot_python(slot))
    proc = subprocess.run([python, "-c", code, *args], env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"probe failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


class Worker:
    """A long-lived probe process in one venv slot."""

    def __init__(self, runner: Runner, slot: int, *args: str) -> None:
        env = runner.env(runner.work / "outcomes" / "bench.jsonl")
        self.proc = subprocess.Popen(
            [str(runner.slot_python(slot)), "-c", WORKER, *args],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.read()

    def read(self) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"bench worker exited {self.proc.wait()}")
            if line.startswith("{"):
                return json.loads(line)

    def round(self, name: str, calls: int) -> dict:
        self.proc.stdin.write(f"{name} {calls}\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def ratio_stats(stock: list[dict], patched: list[dict]) -> dict:
    """Per-round CPU-time ratios patched/stock: min, median, quartiles and spread (max - min)."""
    ratios = sorted(p["cpu"] / s["cpu"] for s, p in zip(stock, patched, strict=True))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "rounds": len(ratios),
        "stock_median_cpu_s": statistics.median(s["cpu"] for s in stock),
        "patched_median_cpu_s": statistics.median(p["cpu"] for p in patched),
        "stock_median_wall_s": statistics.median(s["seconds"] for s in stock),
        "patched_median_wall_s": statistics.median(p["seconds"] for p in patched),
        "ratio_min": ratios[0],
        "ratio_median": statistics.median(ratios),
        "ratio_max": ratios[-1],
        "ratio_spread": ratios[-1] - ratios[0],
        "ratio_q1": q[0],
        "ratio_q3": q[2],
    }


def alternate(rep: int) -> tuple[str, str]:
    return ("stock", "patched") if rep % 2 == 0 else ("patched", "stock")


def bench_apply(base, tree: Path, skip_cold: bool) -> dict:
    out = {}
    if not skip_cold:
        with tempfile.TemporaryDirectory() as cache:
            t = time.monotonic()
            _, fetched = fetch_sdist(base, Path(cache) / "c")
            out["cold_download_seconds"] = time.monotonic() - t
            r = apply_series(ROOT, base, Path(cache) / "tree", Path(cache) / "c")
            out["cold_seconds"] = out["cold_download_seconds"] + r.seconds
            out["cold_fetched_bytes"] = fetched
    r = apply_series(ROOT, base, tree, default_cache_dir(), force=True)
    out["warm_seconds"] = r.seconds
    r = apply_series(ROOT, base, tree, default_cache_dir())
    out["noop_seconds"], out["noop_up_to_date"] = r.seconds, r.up_to_date
    out["patches"] = len(r.state.patches)
    out["git_clone_reference_bytes"] = GIT_CLONE_BYTES
    if "cold_fetched_bytes" in out:
        out["clone_over_sdist_bytes"] = GIT_CLONE_BYTES / out["cold_fetched_bytes"]
    return out


def print_apply(a: dict) -> None:
    print(f"apply: warm {a['warm_seconds']:.2f} s, no-op {a['noop_seconds']:.2f} s", end="")
    if "cold_seconds" in a:
        print(
            f", cold {a['cold_seconds']:.2f} s ({a['cold_download_seconds']:.2f} s of it downloading "
            f"{a['cold_fetched_bytes'] / 1e6:.1f} MB) "
            f"(a full git clone fetches > {GIT_CLONE_BYTES / 1e9:.1f} GB: "
            f"{a['clone_over_sdist_bytes']:.0f}x more)",
            end="",
        )
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="v0.31.0")
    ap.add_argument("--repeat", type=int, default=6, help="fresh-process `import vllm` samples per side")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds per in-process probe")
    ap.add_argument("--skip-cold", action="store_true", help="skip the cold apply (43 MB download)")
    ap.add_argument("--skip-apply", action="store_true", help="skip the apply timings")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    base = get_base(load_bases(ROOT / "bases.toml"), args.base)
    tree = ROOT / "build" / f"vllm-{args.base}"
    planner = planner_module(ROOT, base)  # where the base's queue plans (kv_cache_planning on v0.33.0)
    results: dict = {}
    if not args.skip_apply:
        results["apply"] = bench_apply(base, tree, args.skip_cold)
        print_apply(results["apply"])

    work = ROOT / "build" / "bench" / args.base
    hf_home = work / "hf-home"
    build_hf(hf_home, ROOT / "tests" / "data" / "hf-configs")
    python = (ROOT / base.test_venv / "bin" / "python").absolute()
    runner = Runner.open(ROOT, tree, python, work, hf_home, base, default_cache_dir(), slots=3)
    # Two hard-linked copies of the base's test venv (build/bench/<base>/venvs/): it stays as it is.
    sides = {"stock": (1, runner.base_commit), "patched": (2, runner.head)}
    for slot, commit in sides.values():
        runner.install(slot, commit)
    model = Path(tempfile.mkdtemp(prefix="tiny-llama-"))
    (model / "config.json").write_text(json.dumps(MODEL_CONFIG))
    model64 = Path(tempfile.mkdtemp(prefix="tiny-llama-64-"))
    (model64 / "config.json").write_text(
        json.dumps({**MODEL_CONFIG, "num_hidden_layers": 64, "max_position_embeddings": 4096})
    )
    results["load_before"] = os.getloadavg()
    results["patched_vs_stock"] = {}
    workers: dict[str, Worker] = {}
    try:
        samples: dict[str, list[dict]] = {"stock": [], "patched": []}
        for rep in range(args.repeat):
            for side in alternate(rep):
                samples[side].append(probe(runner, sides[side][0], PROBE_IMPORT))
        results["patched_vs_stock"]["import vllm"] = ratio_stats(samples["stock"], samples["patched"])
        workers = {
            side: Worker(runner, slot, str(model), str(model64), planner) for side, (slot, _) in sides.items()
        }
        for name, (probe_name, calls) in ROUND_PROBES.items():
            samples = {"stock": [], "patched": []}
            for rep in range(args.rounds):
                for side in alternate(rep):
                    samples[side].append(workers[side].round(probe_name, calls))
            stats = ratio_stats(samples["stock"], samples["patched"])
            results["patched_vs_stock"][name] = stats | {"calls_per_round": calls}
        fused = {side: probe(runner, slot, FUSED_PROBE, planner) for side, (slot, _) in sides.items()}
    finally:
        for w in workers.values():
            w.close()
        shutil.rmtree(model, ignore_errors=True)
        shutil.rmtree(model64, ignore_errors=True)
    results["load_after"] = os.getloadavg()
    print(
        f"load average before {results['load_before'][0]:.2f}, after {results['load_after'][0]:.2f} "
        f"({os.cpu_count()} cores); ratios: patched/stock CPU time per interleaved round"
    )
    for name, st in results["patched_vs_stock"].items():
        verdict = "ok" if st["ratio_median"] <= 1.05 else "OVER 1.05"
        unit = f"{st['calls_per_round']} calls/round" if "calls_per_round" in st else "1 process/sample"
        print(
            f"{name:31} CPU stock {st['stock_median_cpu_s'] * 1e3:9.3f} ms  "
            f"patched {st['patched_median_cpu_s'] * 1e3:9.3f} ms (wall {st['stock_median_wall_s'] * 1e3:.3f} / "
            f"{st['patched_median_wall_s'] * 1e3:.3f} ms)  ratio min {st['ratio_min']:.3f} "
            f"median {st['ratio_median']:.3f} (quartiles {st['ratio_q1']:.3f}-{st['ratio_q3']:.3f}, "
            f"spread {st['ratio_spread']:.3f}; {st['rounds']} rounds, {unit})  {verdict}"
        )
    results["fused_pages"] = fused
    for label, f in fused.items():
        print(
            f"fused 6-layer set on {label:7}: {f['fused_blocks']} blocks; unfused control of the same "
            f"bytes: {f['control_blocks']} blocks (ratio {f['fused_blocks'] / f['control_blocks']:.3f})"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


FUSED_PROBE = """
import importlib, json, sys
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
import torch
planner = importlib.import_module(sys.argv[1])
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheGroupSpec, UniformTypeKVCacheSpecs
from vllm.v1.kv_cache_layout import KVCacheLayout

WIDTHS = (544, 544, 544, 480, 544, 608)  # bytes per token of six layers; their mean is 544

# turbo-attn 0.70.1's spec design: a width that takes no part in ==, and a merge() that fuses
# layers of other widths into one spec whose page holds all of theirs.
@dataclass(frozen=True, kw_only=True)
class WidthSpec(FullAttentionSpec):
    width: int = field(default=544, compare=False, hash=False)
    fused: tuple = field(default=(), compare=False, hash=False)
    @property
    def num_heads(self):
        return 1
    @property
    def state_content_size_bytes(self):
        return sum(self.fused) or self.width
    @property
    def aggregated_layer_count(self):
        return len(self.fused) or 1
    @classmethod
    def merge(cls, specs):
        if len({s.width for s in specs}) == 1:
            return specs[0]
        return replace(specs[0], fused=tuple(s.width for s in specs))

names = [f"model.layers.{i}.self_attn.attn" for i in range(6)]
cfg = SimpleNamespace(
    cache_config=SimpleNamespace(num_gpu_blocks_override=None, prefix_cache_retention_interval=None,
                                 get_resolved_kv_cache_layout=lambda: KVCacheLayout.LBNHC),
    attention_config=SimpleNamespace(hisparse_config=None),
)
avail = 6 * 544 * 16 * 4000
def blocks(widths):
    # the grouping get_kv_cache_groups gives a full-attention model
    specs = {n: WidthSpec(block_size=16, num_kv_heads=1, head_size=16, dtype=torch.uint8, width=w)
             for n, w in zip(names, widths)}
    if planner.is_kv_cache_spec_uniform(specs):
        groups = planner.create_kv_cache_group_specs(specs, [names])
    else:
        groups = [KVCacheGroupSpec(names, UniformTypeKVCacheSpecs(block_size=16, kv_cache_specs=specs))]
    return planner.get_kv_cache_config_from_groups(cfg, groups, avail).num_blocks
print(json.dumps({"fused_blocks": blocks(WIDTHS), "control_blocks": blocks((544,) * 6)}))
"""

if __name__ == "__main__":
    sys.exit(main())
