"""tkv-seam benchmark: every figure is a ratio against a baseline measured in the same run.

1. Apply: cold (empty cache: download + verify + unpack + apply), warm (cached base,
   the tree rebuilt), no-op (unchanged inputs); bytes fetched, against the bytes a
   user fetches today for a full vLLM git clone (a reference figure, not measured
   here: no access to the git host).
2. Patched vs stock vLLM (the overlay installed into .venv-vllm, alternating runs,
   median of N): `import vllm`, `create_engine_config()` on a tiny local model, and
   KV planning (`get_kv_cache_configs`) for a 64-layer model. Target ratio <= 1.05.
3. Fused pages: blocks for a fused 6-layer set vs an unfused control of the same
   bytes, on the patched planner and on stock.

Usage: .venv/bin/python bench/bench.py [--base v0.31.0] [--repeat 5] [--skip-cold] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tkvseam.apply import apply_series
from tkvseam.bases import default_cache_dir, fetch_sdist, get_base, load_bases
from tkvseam.hfcache import build as build_hf
from tkvseam.overlay import overlay_paths
from tkvseam.seamtest import Runner
from tkvseam.series import read_series
from tkvseam.state import load_state

ROOT = Path(__file__).resolve().parents[1]
GIT_CLONE_BYTES = 1.1e9  # "the vLLM repository history is over 1.1 GB" (issue; lower bound)

MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 128,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "num_hidden_layers": 2,
}

# Each probe runs in a fresh process and prints one JSON line: {"seconds": ...} (+ extras).
PROBE_IMPORT = "import time; t = time.perf_counter(); import vllm; print('{\"seconds\": %f}' % (time.perf_counter() - t))"

PROBE_ENGINE = """
import json, sys, time
from vllm.engine.arg_utils import EngineArgs
args = EngineArgs(model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256)
args.create_engine_config()  # warm the lazy imports once
t = time.perf_counter()
for _ in range(3):
    EngineArgs(model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256).create_engine_config()
print(json.dumps({"seconds": (time.perf_counter() - t) / 3}))
"""

PROBE_PLAN = """
import json, sys, time
import torch
from vllm.config import ModelConfig, VllmConfig
from vllm.v1.core.kv_cache_utils import get_kv_cache_configs
from vllm.v1.kv_cache_interface import FullAttentionSpec
cfg = VllmConfig(model_config=ModelConfig(model=sys.argv[1], max_model_len=4096))
cfg.cache_config.kv_cache_layout = "LBNHC"
spec = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=16, dtype=torch.bfloat16)
specs = {f"model.layers.{i}.self_attn.attn": spec for i in range(64)}
def plan():
    return get_kv_cache_configs(cfg, [specs], [1 << 30])
plan()
t = time.perf_counter()
for _ in range(20):
    plan()
print(json.dumps({"seconds": (time.perf_counter() - t) / 20}))
"""


def probe(runner: Runner, code: str, *args: str) -> dict:
    env = runner.env(runner.work / "outcomes" / "bench.jsonl")
    proc = subprocess.run([str(runner.python), "-c", code, *args], env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"probe failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


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
    out["patches"] = len(r.patches)
    out["git_clone_reference_bytes"] = GIT_CLONE_BYTES
    if "cold_fetched_bytes" in out:
        out["clone_over_sdist_bytes"] = GIT_CLONE_BYTES / out["cold_fetched_bytes"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="v0.31.0")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-cold", action="store_true", help="skip the cold apply (43 MB download)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    base = get_base(load_bases(ROOT / "bases.toml"), args.base)
    tree = ROOT / "build" / f"vllm-{args.base}"
    results: dict = {"apply": bench_apply(base, tree, args.skip_cold)}
    a = results["apply"]
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

    work = ROOT / "build" / "bench"
    hf_home = work / "hf-home"
    build_hf(hf_home, ROOT / "tests" / "data" / "hf-configs")
    runner = Runner(ROOT, tree, (ROOT / ".venv-vllm/bin/python").absolute(), work, hf_home)
    paths = overlay_paths(read_series(ROOT).load())
    state = load_state(tree)
    head = state.head
    model = Path(tempfile.mkdtemp(prefix="tiny-llama-"))
    (model / "config.json").write_text(json.dumps(MODEL_CONFIG))
    model64 = Path(tempfile.mkdtemp(prefix="tiny-llama-64-"))
    (model64 / "config.json").write_text(
        json.dumps({**MODEL_CONFIG, "num_hidden_layers": 64, "max_position_embeddings": 4096})
    )
    samples: dict[str, dict[str, list[float]]] = {}
    try:
        for rep in range(args.repeat):
            for label, commit in (("stock", state.base_commit), ("patched", head)):
                runner.install(commit, paths)
                for name, code, extra in (
                    ("import vllm", PROBE_IMPORT, ()),
                    ("create_engine_config", PROBE_ENGINE, (str(model),)),
                    ("get_kv_cache_configs 64 layers", PROBE_PLAN, (str(model64),)),
                ):
                    res = probe(runner, code, *extra)
                    samples.setdefault(name, {}).setdefault(label, []).append(res["seconds"])
            print(f"  round {rep + 1}/{args.repeat} done", file=sys.stderr)
        fused = {}
        for label, commit in (("stock", state.base_commit), ("patched", head)):
            runner.install(commit, paths)
            fused[label] = probe(runner, FUSED_PROBE)
    finally:
        runner.install(head, paths)
        shutil.rmtree(model, ignore_errors=True)
        shutil.rmtree(model64, ignore_errors=True)
    results["patched_vs_stock"] = {}
    for name, by in samples.items():
        s, p = statistics.median(by["stock"]), statistics.median(by["patched"])
        results["patched_vs_stock"][name] = {"stock_s": s, "patched_s": p, "ratio": p / s}
        verdict = "ok" if p / s <= 1.05 else "OVER 1.05"
        print(f"{name:32} stock {s * 1e3:9.2f} ms  patched {p * 1e3:9.2f} ms  ratio {p / s:.3f}  {verdict}")
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
import json
from dataclasses import dataclass
from types import SimpleNamespace
import torch
from vllm.v1.core.kv_cache_utils import get_kv_cache_config_from_groups
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheGroupSpec
from vllm.v1.kv_cache_layout import KVCacheLayout

SLOTS = (544, 544, 544, 480, 544, 608)

@dataclass(frozen=True, kw_only=True)
class FusedSpec(FullAttentionSpec):
    slot_bytes: tuple = SLOTS
    @property
    def page_size_bytes(self):
        return sum(self.slot_bytes) * self.block_size
    @property
    def aggregated_layer_count(self):
        return len(self.slot_bytes)

names = [f"model.layers.{i}.self_attn.attn" for i in range(6)]
fused = FusedSpec(block_size=16, num_kv_heads=1, head_size=16, dtype=torch.uint8)
# K and V per layer: 2 x 16 tokens x 272 B = 544 B per token, the fused slots' mean
control = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=272, dtype=torch.uint8)
cfg = SimpleNamespace(
    cache_config=SimpleNamespace(num_gpu_blocks_override=None, prefix_cache_retention_interval=None,
                                 get_resolved_kv_cache_layout=lambda: KVCacheLayout.LBNHC),
    attention_config=SimpleNamespace(hisparse_config=None),
)
avail = 6 * 544 * 16 * 4000
def blocks(spec):
    groups = [KVCacheGroupSpec(names, spec)]
    return get_kv_cache_config_from_groups(cfg, groups, avail).num_blocks
print(json.dumps({"fused_blocks": blocks(fused), "control_blocks": blocks(control)}))
"""

if __name__ == "__main__":
    sys.exit(main())
