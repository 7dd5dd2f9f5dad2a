"""turbo-attn 0.70.1 on PATCHED vLLM v0.31.0 (the seam applied): the plugin loads and works on CPU.

Run with the patched vLLM importable (a patched tree first on ``PYTHONPATH``, or
the overlaid venv) and ``TKV_SEAM_PLUGIN_PATH`` set. Each test lets vLLM load the
plugin through its entry point in a fresh subprocess (``_helpers``), which reports
one JSON result the test asserts on. Against stock v0.31.0 every test fails: the
plugin cannot load there (see test_stock.py).

A subprocess costs ~20 s (vLLM + tkv imports) and one building an engine config
another ~20 s (vLLM inspects the model class in a subprocess of its own, which
loads the plugin too), so the checks that need the same setup share one
(``shared``, a module fixture): backend resolution first (``EngineArgs`` alone
loads the plugin there), then registration, then planning. ``tkv-bypass``
marks bypass process-wide: it keeps a process of its own.
"""

from __future__ import annotations

import json
import os

import pytest

from ..conftest import BASE  # the base under test (the runner passes the environment through)
from ._helpers import TKV_BACKEND_PATH, part, run_vllm_scripts, write_tiny_model

TKV_SPECS = "tkv.integrations.vllm.specs"
TKV_FULL_SPEC = f"{TKV_SPECS}.TkvFullAttentionSpec"

# Per-layer (k_bits, v_bits) of the fused (mixed-bit) plan and the uniform width of
# its equal-byte control: K4V4 and K8V8 slots average to exactly one K8V4 slot.
MIXED_BITS = [(4, 4), (8, 8), (4, 4), (8, 8)]
CONTROL_BITS = (8, 4)

# The module of the base's KV cache planner (the plugin lane reads it off the base's queue:
# tkvseam.bases.carried.planner_module); the runner passes the environment through.
PLANNER_ENV = "TKV_SEAM_PLANNER_MODULE"
PLANNER_MODULE = os.environ.get(PLANNER_ENV, "")
if not PLANNER_MODULE:
    pytest.fail(f"{PLANNER_ENV} is unset: run this through `make plugin BASE={BASE}`", pytrace=False)

# Scripts that check independent things run each part through ``attempt`` so one
# failing part still reports the others.
ATTEMPT = """
import traceback


def attempt(part):
    try:
        return {"ok": part()}
    except Exception:
        return {"error": traceback.format_exc()}

"""

REGISTRATION = """
from vllm.plugins import load_general_plugins

load_general_plugins()

from vllm.config.cache import CacheConfig, is_plugin_cache_dtype

try:
    from vllm.config.cache import cache_dtype_choices
except ImportError:  # v0.33.0: the values are upstream's KV_CACHE_DTYPES
    from vllm.config.cache import KV_CACHE_DTYPES

    def cache_dtype_choices():
        return sorted(KV_CACHE_DTYPES)

from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE
from vllm.v1.attention.backends.registry import AttentionBackendEnum

slot = AttentionBackendEnum.TURBO_ATTN
cls = slot.get_class()
names = ["tkv", "tkv-bypass"]
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
emit(
    overridden=slot.is_overridden(),
    path=slot.get_path(),
    class_path=f"{cls.__module__}.{cls.__qualname__}",
    name=cls.get_name(),
    backend_dtypes=list(cls.supported_kv_cache_dtypes),
    custom_overridden=AttentionBackendEnum.CUSTOM.is_overridden(),
    plugin_dtype={n: is_plugin_cache_dtype(n) for n in names + ["auto", "fp8"]},
    choices=cache_dtype_choices(),
    torch_dtypes={n: str(STR_DTYPE_TO_TORCH_DTYPE[n]) for n in names},
    cache_config=CacheConfig(cache_dtype="tkv").cache_dtype,
    cli={n: parser.parse_args(["--kv-cache-dtype", n]).kv_cache_dtype for n in names},
)
"""

BACKEND_RESOLUTION = (
    ATTEMPT
    + """
import sys

from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser

MODEL = dict(model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256)


def describe(config):
    backend = config.attention_config.backend
    return {
        "backend": None if backend is None else backend.name,
        "backend_path": None if backend is None else backend.get_path(),
        "cache_dtype": config.cache_config.cache_dtype,
    }


def dtype_only():
    # EngineArgs.__post_init__ loads the plugin: nothing else registers it here.
    args = EngineArgs(**MODEL, kv_cache_dtype="tkv")
    return {
        "named": args.attention_backend,
        **describe(args.create_engine_config()),
        "builtin": describe(EngineArgs(**MODEL).create_engine_config()),
    }


def cli_spelling():
    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    argv = ["--model", MODEL["model"], "--skip-tokenizer-init", "--max-model-len", "256"]
    args = EngineArgs.from_cli_args(parser.parse_args([*argv, "--attention-backend", "turbo-attn"]))
    return {"parsed": args.attention_backend, **describe(args.create_engine_config())}


def cpu_layers():
    # The CPU platform serves every non-MLA layer with CPU_ATTN, TURBO_ATTN named or
    # not: a "tkv" layer is refused there, a layer skipped to "auto" gets CPU_ATTN.
    import torch

    from vllm.config import set_current_vllm_config
    from vllm.v1.attention.selector import get_attn_backend

    config = EngineArgs(**MODEL, kv_cache_dtype="tkv").create_engine_config()
    with set_current_vllm_config(config):
        try:
            get_attn_backend(16, torch.bfloat16, "tkv")
            refusal = None
        except ValueError as e:
            refusal = str(e)
        skipped = get_attn_backend(16, torch.bfloat16, "auto").get_name()
    return {"refusal": refusal, "skipped": skipped}


emit(dtype_only=attempt(dtype_only), cli=attempt(cli_spelling), cpu=attempt(cpu_layers))
"""
)

# Both planning scripts build the tiny model's attention layers the same way.
MODEL_LAYERS = """
def model_layers(config, backend):
    \"\"\"The tiny model's attention layers by name, built with `backend`, and their KV
    specs (Attention.get_kv_cache_spec, with the plugin's customize_spec).\"\"\"
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.attention.attention import Attention

    model_config, parallel_config = config.model_config, config.parallel_config
    head_size = model_config.get_head_size()
    with set_current_vllm_config(config):
        built = {
            f"model.layers.{i}.self_attn.attn": Attention(
                model_config.get_num_attention_heads(parallel_config),
                head_size,
                head_size**-0.5,
                num_kv_heads=model_config.get_num_kv_heads(parallel_config),
                cache_config=config.cache_config,
                prefix=f"model.layers.{i}.self_attn.attn",
                attn_backend=backend,
            )
            for i in range(model_config.get_num_layers(parallel_config))
        }
        return built, {name: layer.get_kv_cache_spec(config) for name, layer in built.items()}
"""

# The tiny model's attention layers are built with the backend the config names,
# their KV specs taken (Attention.get_kv_cache_spec, with the plugin's
# customize_spec), the KV layout resolved from the backends as the engine core does,
# and the layers planned: as they are, mixed-bit (fused by the plugin's merge), as
# an equal-byte unfused control, and with the fused spec's layer count ignored.
PLANNING = (
    MODEL_LAYERS
    + """
import dataclasses
import json
import sys

import torch

from vllm.config import set_current_vllm_config
from vllm.engine.arg_utils import EngineArgs
from vllm.model_executor.layers.attention.attention import Attention
from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

import importlib
import inspect

# the base's planner module (sys.argv[4]); where it takes the global groups (v0.33.0),
# the engine core forms them first
planner = importlib.import_module(sys.argv[4])
get_kv_cache_configs = planner.get_kv_cache_configs
# The v0.31.0 and v0.32.0 queues plan fused pages (get_tensor_slots); v0.33.0's plans the
# plugin's mixed widths per layer, through upstream's UniformTypeKVCacheSpecs.
get_tensor_slots = getattr(planner, "get_tensor_slots", None)
fused_pages = get_tensor_slots is not None
takes_groups = "global_kv_cache_groups" in inspect.signature(get_kv_cache_configs).parameters
get_global_kv_cache_groups = planner.get_global_kv_cache_groups if takes_groups else None

mixed_bits = json.loads(sys.argv[2])
control_k, control_v = json.loads(sys.argv[3])
config = EngineArgs(
    model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256, kv_cache_dtype="tkv"
).create_engine_config()
backend = config.attention_config.backend.get_class()
model_config, parallel_config = config.model_config, config.parallel_config
num_kv_heads = model_config.get_num_kv_heads(parallel_config)
head_size = model_config.get_head_size()
block_size = config.cache_config.block_size
layers_by_name, layer_specs = model_layers(config, backend)
layers = list(layers_by_name.values())
names = list(layer_specs)
specs = list(layer_specs.values())


def type_path(obj):
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def plan_workers(workers, available):
    args = (config, workers, [available] * len(workers))
    if get_global_kv_cache_groups is not None:
        args += (get_global_kv_cache_groups(config, workers),)
    return get_kv_cache_configs(*args)


def plan(specs_by_name, available):
    (kv_cache_config,) = plan_workers([specs_by_name], available)
    return kv_cache_config


geometry = dict(block_size=block_size, num_kv_heads=num_kv_heads, head_size=head_size, dtype=torch.uint8)
stock_full = FullAttentionSpec(**geometry)
custom_full = backend.customize_spec(stock_full)
custom_window = backend.customize_spec(SlidingWindowSpec(**geometry, sliding_window=64))
spec = dict(
    impl=type_path(layers[0].impl),
    # tkv pops the seam's _tq_layer_idx (tkv-layer-index) into _layer_idx at construction
    layer_idx=[getattr(layer.impl, "_layer_idx", None) for layer in layers],
    names=names,
    types=[type_path(s) for s in specs],
    full_attention=all(isinstance(s, FullAttentionSpec) for s in specs),
    dtypes=sorted({str(s.dtype) for s in specs}),
    pages=[s.page_size_bytes for s in specs],
    slot_bytes=[s.slot_size_bytes for s in specs],
    block_size=block_size,
    stock_page=stock_full.page_size_bytes,
    custom_full_type=type_path(custom_full),
    custom_full_page=custom_full.page_size_bytes,
    custom_idempotent=backend.customize_spec(custom_full) is custom_full,
    custom_window_type=type_path(custom_window),
    custom_window_sliding=isinstance(custom_window, SlidingWindowSpec),
    custom_window_page=custom_window.page_size_bytes,
)

supported = [layout.name for layout in get_supported_kv_cache_layouts([backend])]
layout = resolve_kv_cache_layout(config, [supported], specs).name
available = 64 << 20
kv = plan(layer_specs, available)
uniform = dict(
    supported_layouts=supported,
    layout=layout,
    available=available,
    num_blocks=kv.num_blocks,
    groups=[g.layer_names for g in kv.kv_cache_groups],
    tensor_layers=[t.layers for t in kv.kv_cache_tensors],
    tensor_bytes=sum(t.size for t in kv.kv_cache_tensors),
)

# Per-layer widths as the plugin's smart-mix identity adoption stamps them
# (tkv.integrations.vllm.specs.adopt_layer_identity); its merge fuses them.
mixed = {
    name: dataclasses.replace(
        layer_specs[name], layer_name=name, tq_k_bit_width=k, tq_v_bit_width=v, tq_bit_width=max(k, v)
    )
    for name, (k, v) in zip(names, mixed_bits, strict=True)
}
control_spec = dataclasses.replace(
    specs[0], tq_k_bit_width=control_k, tq_v_bit_width=control_v, tq_bit_width=max(control_k, control_v)
)
available = 256 << 20
fused_kv = plan(mixed, available)
group_spec = fused_kv.kv_cache_groups[0].kv_cache_spec
# what the plugin's merge makes of the layers (on v0.33.0 the planner does not keep it)
composite = group_spec if fused_pages else type(specs[0]).merge(list(mixed.values()))
control_kv = plan({name: control_spec for name in names}, available)
# Stock v0.31 planning ignores aggregated_layer_count: the same composite spec with
# its count at 1 is charged once per layer.
stock_spec = dataclasses.replace(composite, _composite_layer_count=1)
stock_kv = plan({name: stock_spec for name in names}, available)
fused = dict(
    fused_pages=fused_pages,
    group_type=type_path(group_spec),
    layer_pages=[mixed[name].page_size_bytes for name in names],
    groups=[g.layer_names for g in fused_kv.kv_cache_groups],
    composite_type=type_path(composite),
    composite_count=composite.aggregated_layer_count,
    composite_page=composite.page_size_bytes,
    composite_layers=sorted(composite.per_layer_offsets or {}),
    tensors=[[t.layers, t.offset] for t in fused_kv.kv_cache_tensors],
    control_page=control_spec.page_size_bytes,
    control_count=control_kv.kv_cache_groups[0].kv_cache_spec.aggregated_layer_count,
    stock_count=stock_spec.aggregated_layer_count,
    stock_page=stock_spec.page_size_bytes,
    fused_blocks=fused_kv.num_blocks,
    control_blocks=control_kv.num_blocks,
    stock_blocks=stock_kv.num_blocks,
)

from tkv.integrations.vllm._offsets import composite_region_view, get_layer_offsets, layer_region
from vllm.v1.worker.utils import allocate_kv_cache


# Each layer's cache as the worker binds it (allocate_kv_cache, then the plugin's 3-D view) and
# the region the plugin reads of it by name (layer_region over the offsets its merge published):
# [name, width, first byte, end byte, allocation size, region is the view].
def layer_views(kv, layers=None):
    caches = allocate_kv_cache(kv, torch.device("cpu"), resolve_kv_cache_layout(config, [supported], specs))
    raw = next(iter(caches.values())).untyped_storage()
    views = []
    offsets = get_layer_offsets()
    for name, cache in caches.items():
        if name not in (offsets if layers is None else layers):  # not one of the plugin's layers
            continue
        view = cache.squeeze(1)
        start, end = offsets[name][:2]
        region = layer_region(view, start, end)
        first = view.data_ptr() - raw.data_ptr()
        last = first + (view.shape[0] - 1) * view.stride(0) + view.shape[1] * view.shape[2]
        views.append([name, view.shape[-1], first, last, raw.nbytes(), region.data_ptr() == view.data_ptr()
                      and tuple(region.shape) == tuple(view.shape)])
    return views


# [name, first byte, end byte] of every layer's cache as the worker allocates it.
def byte_spans(kv):
    caches = allocate_kv_cache(kv, torch.device("cpu"), resolve_kv_cache_layout(config, [supported], specs))
    raw = next(iter(caches.values())).untyped_storage().data_ptr()
    spans = []
    for name, cache in caches.items():
        first = cache.data_ptr() - raw
        extent = sum((size - 1) * stride for size, stride in zip(cache.shape, cache.stride())) + 1
        spans.append([name, first, first + extent * cache.element_size()])
    return spans


fused["views"] = None if fused_pages else layer_views(fused_kv)
fused["own_widths"] = {name: mixed[name].slot_size_bytes for name in names}

# Two pipeline-parallel workers of half the layers each. With fused pages every worker keeps
# the plugin's fused set (its slots, by position); the plugin reads each layer's region by name
# from the composite's per_layer_offsets (composite_region_view), here over the worker's own
# bytes. Planned per layer, each worker views its own layers at their own widths.
half = len(names) // 2
pp = []
for kv in plan_workers([dict(list(mixed.items())[:half]), dict(list(mixed.items())[half:])], 4 << 20):
    if not fused_pages:
        pp.append(dict(group_type=type_path(kv.kv_cache_groups[0].kv_cache_spec), views=layer_views(kv)))
        continue
    (group,) = kv.kv_cache_groups
    composite_spec = group.kv_cache_spec
    page = composite_spec.page_size_bytes
    raw = torch.zeros(kv.kv_cache_tensors[0].size, dtype=torch.uint8)
    regions = []
    for tensor in kv.kv_cache_tensors:
        (name,) = tensor.layers
        slot = raw[tensor.offset : tensor.offset + kv.num_blocks * page]
        start, end = composite_spec.per_layer_offsets[name][:2]
        region = composite_region_view(slot.view(kv.num_blocks, block_size, -1), start, end)
        first = region.data_ptr() - raw.data_ptr()
        regions.append([name, first, first + region.numel(), raw.numel()])
    pp.append(dict(slots=get_tensor_slots(group), regions=regions))

# A hybrid model: two sliding-window layers beside the four full-attention layers of two
# widths, planned with the sliding-window layers first and with a full-attention layer first.
window = {
    name: dataclasses.replace(custom_window, layer_name=name)
    for name in (f"model.layers.{len(names) + i}.self_attn.attn" for i in range(2))
}


def plan_hybrid(specs_by_name):
    try:
        kv = plan(specs_by_name, 256 << 20)
    except Exception as e:
        return dict(raised=type(e).__name__, message=str(e))
    return dict(
        groups=[[g.layer_names, getattr(g.kv_cache_spec, "aggregated_layer_count", 1)] for g in kv.kv_cache_groups]
    )


hybrid = dict(window_first=plan_hybrid({**window, **mixed}), full_first=plan_hybrid({**mixed, **window}))
# A Mamba/GDN hybrid (the kind of the plugin README's Qwen3.5-0.8B): linear-attention layers
# beside the plugin's full-attention layers of mixed widths (its default TKV_PER_LAYER_SLOTS=1),
# their state page larger than the attention pages and a multiple of none, so that upstream pads
# every attention page to it (unify_kv_cache_spec_page_size) instead of scaling block sizes.
from vllm.v1.kv_cache_interface import MambaSpec

attention_pages = sorted({spec.page_size_bytes for spec in mixed.values()})
mamba_page = 3 * attention_pages[-1] + 4
mamba = {
    f"model.layers.{len(names) + i}.linear_attn": MambaSpec(
        block_size=block_size, shapes=((mamba_page // 4,),), dtypes=(torch.float32,)
    )
    for i in range(len(names))
}
hybrid["mamba"] = plan_hybrid({**mamba, **mixed})
hybrid["mamba"]["pages"] = dict(attention=attention_pages, mamba=next(iter(mamba.values())).page_size_bytes)
if "raised" not in hybrid["mamba"] and not fused_pages:
    hybrid["mamba"]["views"] = layer_views(plan({**mamba, **mixed}, 256 << 20), names)
# The first layer kept at the model's dtype (as --kv-cache-dtype-skip-layers keeps it), the
# others of mixed widths: the plugin's merge fails on the stock spec, so the model takes
# upstream's UniformTypeKVCacheSpecs path with the plugin's equal-comparing specs in it.
skipped = FullAttentionSpec(block_size=block_size, num_kv_heads=num_kv_heads, head_size=head_size, dtype=torch.bfloat16)
skip_first = {names[0]: skipped, **{name: mixed[name] for name in names[1:]}}
hybrid["skipped_first"] = plan_hybrid(skip_first)
if "raised" not in hybrid["skipped_first"] and not fused_pages:
    hybrid["skipped_first"]["views"] = layer_views(plan(skip_first, 256 << 20), names[1:])
# The plugin's layers first and a layer of the model's dtype after them: a last layer kept by
# --kv-cache-dtype-skip-layers, or a non-MLA EAGLE draft of a built-in dtype (its layers come after
# the target's, numbered on from them). The plugin's merge reads `per_layer_offsets` of every spec.
skip_last = {**{name: mixed[name] for name in names[:-1]}, names[-1]: skipped}
# (a draft's spec says so where specs have the field: v0.33.0's is_draft)
draft_fields = {"is_draft": True} if "is_draft" in {f.name for f in dataclasses.fields(skipped)} else {}
draft = {**mixed, f"model.layers.{len(names)}.self_attn.attn": dataclasses.replace(skipped, **draft_fields)}
for key, specs_by_name in (("skipped_last", skip_last), ("draft", draft)):
    hybrid[key] = plan_hybrid(specs_by_name)
    if "raised" not in hybrid[key] and not fused_pages:
        kv = plan(specs_by_name, 256 << 20)
        plugin_layers = [name for name, spec in specs_by_name.items() if spec is mixed.get(name)]
        hybrid[key].update(
            plugin_layers=plugin_layers,
            views=layer_views(kv, plugin_layers),
            spans=byte_spans(kv),
            num_blocks=kv.num_blocks,
            bytes_per_block=sum(spec.page_size_bytes for spec in specs_by_name.values()),
        )
# One width and the stock layer last: planned as one group at the sum of the pages.
uniform_skip_last = {**{name: layer_specs[name] for name in names[:-1]}, names[-1]: skipped}
try:
    kv = plan(uniform_skip_last, 256 << 20)
    hybrid["uniform_skipped_last"] = dict(
        groups=[g.layer_names for g in kv.kv_cache_groups],
        group_type=type_path(kv.kv_cache_groups[0].kv_cache_spec),
        num_blocks=kv.num_blocks,
        pages=[s.page_size_bytes for s in uniform_skip_last.values()],
        available=256 << 20,
    )
except Exception as e:
    hybrid["uniform_skipped_last"] = dict(raised=type(e).__name__, message=str(e))
emit(spec=spec, uniform=uniform, fused=fused, pp=pp, hybrid=hybrid)
"""
)

BYPASS = """
from vllm.plugins import load_general_plugins

load_general_plugins()

import torch

from tkv.runtime.bypass_bf16 import bypass_mode_active
from vllm.config import CacheConfig, VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.attention.attention import Attention
from vllm.v1.attention.backends.registry import AttentionBackendEnum
from vllm.v1.kv_cache_interface import FullAttentionSpec

marked_before = bypass_mode_active()
config = VllmConfig(cache_config=CacheConfig(cache_dtype="tkv-bypass", block_size=128))
with set_current_vllm_config(config):
    layer = Attention(
        4,
        64,
        0.125,
        num_kv_heads=2,
        cache_config=config.cache_config,
        prefix="model.layers.0.self_attn.attn",
        attn_backend=AttentionBackendEnum.TURBO_ATTN.get_class(),
    )
    spec = layer.get_kv_cache_spec(config)
dense = FullAttentionSpec(block_size=128, num_kv_heads=2, head_size=64, dtype=torch.bfloat16)
emit(
    marked_before=marked_before,
    marked_after=bypass_mode_active(),
    impl_bypass=getattr(layer.impl, "_bypass", None) is not None,
    spec_type=f"{type(spec).__module__}.{type(spec).__qualname__}",
    spec_dtype=str(spec.dtype),
    page=spec.page_size_bytes,
    dense_page=dense.page_size_bytes,
)
"""


# tkv-bypass beside a layer kept at the model's dtype (--kv-cache-dtype-skip-layers 0, or the
# last layer): the plugin's bf16 spec has that stock layer's dtype and head fields but one slot
# per token (num_heads 1). Planned with the stock layer first and last, each layer's cache as
# the worker allocates it, and whether the plugin's own bypass view (`fused_views`, after the
# impl's squeeze of a [B, 1, N, C] view) accepts each of its layers' caches.
BYPASS_PLANNING = (
    MODEL_LAYERS
    + """
import importlib
import inspect
import sys

import torch

from vllm.config import set_current_vllm_config
from vllm.engine.arg_utils import EngineArgs
from vllm.model_executor.layers.attention.attention import Attention
from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
from vllm.v1.kv_cache_interface import FullAttentionSpec
from vllm.v1.worker.utils import allocate_kv_cache

planner = importlib.import_module(sys.argv[2])
takes_groups = "global_kv_cache_groups" in inspect.signature(planner.get_kv_cache_configs).parameters
config = EngineArgs(
    model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256, kv_cache_dtype="tkv-bypass"
).create_engine_config()
backend = config.attention_config.backend.get_class()
model_config, parallel_config = config.model_config, config.parallel_config
num_kv_heads, head_size = model_config.get_num_kv_heads(parallel_config), model_config.get_head_size()
layers, plugin_specs = model_layers(config, backend)
names = list(layers)
spec = plugin_specs[names[0]]
stock = FullAttentionSpec(
    block_size=spec.block_size, num_kv_heads=spec.num_kv_heads, head_size=spec.head_size, dtype=spec.dtype
)
layout = resolve_kv_cache_layout(config, [[x.name for x in get_supported_kv_cache_layouts([backend])]], [spec])


def plan(stock_name):
    specs = {name: stock if name == stock_name else plugin_specs[name] for name in names}
    args = (config, [specs], [64 << 20])
    if takes_groups:
        args += (planner.get_global_kv_cache_groups(config, [specs]),)
    (kv,) = planner.get_kv_cache_configs(*args)
    caches = allocate_kv_cache(kv, torch.device("cpu"), layout)
    raw = next(iter(caches.values())).untyped_storage().data_ptr()
    views = {}
    for name, cache in caches.items():
        first = cache.data_ptr() - raw
        extent = sum((size - 1) * stride for size, stride in zip(cache.shape, cache.stride())) + 1
        bypass_view = None
        if name != stock_name:
            view = cache.squeeze(1) if cache.dim() == 4 and cache.shape[1] == 1 else cache
            try:
                k_view, _ = layers[name].impl._bypass.fused_views(view)
                bypass_view = list(k_view.shape)
            except Exception as e:
                bypass_view = f"{type(e).__name__}: {e}"
        views[name] = dict(
            shape=list(cache.shape), span=[first, first + extent * cache.element_size()], bypass_view=bypass_view
        )
    return dict(
        stock=stock_name,
        groups=[g.layer_names for g in kv.kv_cache_groups],
        group_type=type(kv.kv_cache_groups[0].kv_cache_spec).__qualname__,
        views=views,
    )


emit(
    names=names,
    num_kv_heads=num_kv_heads,
    fields_equal=[getattr(spec, f) == getattr(stock, f) for f in ("dtype", "num_kv_heads", "head_size", "block_size")],
    pages=[stock.page_size_bytes, spec.page_size_bytes],
    stock_merge_takes_it=type(FullAttentionSpec.merge([stock, spec])).__qualname__,
    stock_first=plan(names[0]),
    stock_last=plan(names[-1]),
)
"""
)

# turbo-attn's recent ring predicts the KV cache groups before vLLM forms them, with
# `from vllm.v1.core.kv_cache_utils import get_kv_cache_groups` (tkv/integrations/vllm/
# _recent_ring.py, `predicted_groups`), and plans over every layer when that fails.
RING_PREDICTION = """
import sys
from types import SimpleNamespace

import torch

from tkv.integrations.vllm._recent_ring import predicted_groups
from vllm.engine.arg_utils import EngineArgs
from vllm.v1.kv_cache_interface import FullAttentionSpec

config = EngineArgs(model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256).create_engine_config()
spec = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=torch.bfloat16)
specs = {f"model.layers.{i}.self_attn.attn": spec for i in range(2)}
worker = SimpleNamespace(vllm_config=config, model_runner=SimpleNamespace(get_kv_cache_spec=lambda: specs))
try:
    from vllm.v1.core.kv_cache_utils import get_kv_cache_groups  # noqa: F401

    import_error = None
except ImportError as e:
    import_error = str(e)
emit(groups=predicted_groups(worker), names=list(specs), import_error=import_error)
"""


# turbo-attn 0.70.1 folds a scale into each layer's o_proj weight at the layer's first use
# (`_ensure_one_time_init` -> `maybe_fold_o_proj_for_instance` -> `fold_o_proj_weight`), not at
# load, and latches the fold on the o_proj module (`_tkv_o_proj_folded`). A new elastic EP worker
# receives a running worker's weights (`prepare_new_worker`), folded, but not the latch. Here the
# plugin's own fold on a toy o_proj, then the seam's answer to the scale-up with TURBO_ATTN named.
ELASTIC_FOLD = """
import traceback
from types import SimpleNamespace

import torch

from tkv.runtime.oproj_fold import fold_o_proj_weight
from vllm.plugins import load_general_plugins
from vllm.v1.attention.backends.registry import AttentionBackendEnum

load_general_plugins()

HEADS, HEAD_SIZE, HIDDEN = 2, 16, 32
generator = torch.Generator().manual_seed(0)
rotation, _ = torch.linalg.qr(torch.randn(HEAD_SIZE, HEAD_SIZE, generator=generator))
ops = SimpleNamespace(v_per_channel_scale=torch.rand(HEAD_SIZE, generator=generator) + 0.5, v_R_inv=rotation)
checkpoint = torch.randn(HIDDEN, HEADS * HEAD_SIZE, generator=generator)


def o_proj(weight):
    layer = torch.nn.Linear(HEADS * HEAD_SIZE, HIDDEN, bias=False)
    with torch.no_grad():
        layer.weight.copy_(weight)
    return layer


def fold(layer):
    return fold_o_proj_weight(layer, ops=ops, num_heads=HEADS, head_size=HEAD_SIZE, gated=False)[1]


sender = o_proj(checkpoint)  # a running worker's o_proj, folded at the layer's first use
statuses = [fold(sender)]
folded = sender.weight.detach().clone()
statuses.append(fold(sender))  # the latch: a second fold of the same module changes nothing
receiver = o_proj(torch.zeros_like(checkpoint))  # a new worker's, loaded with dummy weights
with torch.no_grad():
    receiver.weight.copy_(sender.weight)  # what prepare_new_worker receives
latched = getattr(receiver, "_tkv_o_proj_folded", False)
statuses.append(fold(receiver))  # the receiving worker's first use of the layer
fold_once = (sender.weight - folded).abs().max().item()
fold_twice = (receiver.weight - sender.weight).abs().max().item()

received = []
try:
    from vllm.v1.worker import gpu_worker

    worker = object.__new__(gpu_worker.Worker)
    worker.vllm_config = SimpleNamespace(attention_config=SimpleNamespace(backend=AttentionBackendEnum.TURBO_ATTN))
    worker.elastic_ep_executor = SimpleNamespace(execute=lambda method, *args, **kwargs: received.append(method))
    gpu_worker.Worker.elastic_ep_execute(worker, "prepare_new_worker")
    scale_up = None
except Exception as e:
    scale_up = [type(e).__name__, str(e)]

# The front end, where a scale-up starts: AsyncLLM._scale_elastic_ep and the engine client's
# prepare_elastic_ep (the base's own client code; the seam refuses in one of them), before the
# client tells any engine to reconfigure or launches one (_prepare_scale_up/down_elastic_ep, stubbed
# here: each records its call and ends the scaling there).
import asyncio

from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.engine.core_client import DPLBAsyncMPClient

client_calls = {}


class Client(DPLBAsyncMPClient):
    def __init__(self, key, config, old_size):  # none of the client's processes or sockets
        self.key, self.vllm_config = key, config
        self._prepared_elastic_ep = None
        self.core_engines = [rank.to_bytes(2, "little") for rank in range(old_size)]

    def _told(self, name):
        client_calls.setdefault(self.key, []).append(name)
        raise RuntimeError(f"stub client: {name}")

    async def _prepare_scale_up_elastic_ep(self, *args, **kwargs):
        self._told("_prepare_scale_up_elastic_ep")

    async def _prepare_scale_down_elastic_ep(self, *args, **kwargs):
        self._told("_prepare_scale_down_elastic_ep")


def scale(key, old_size, new_size):
    config = SimpleNamespace(
        attention_config=SimpleNamespace(backend=AttentionBackendEnum.TURBO_ATTN),
        parallel_config=SimpleNamespace(
            data_parallel_size=old_size,
            data_parallel_external_lb=False,
            data_parallel_backend="ray",
            elastic_ep_max_dp_size=4,
            eplb_config=SimpleNamespace(num_redundant_experts=8),  # room to scale 2 -> 1
        ),
        model_config=SimpleNamespace(get_num_experts=lambda: 8),
    )
    llm = object.__new__(AsyncLLM)
    llm.vllm_config, llm.engine_core, llm.log_stats = config, Client(key, config, old_size), False
    llm.shutdown = lambda *args, **kwargs: None  # nothing was started
    try:
        asyncio.run(AsyncLLM._scale_elastic_ep(llm, new_size, 300))
    except Exception as e:
        return [type(e).__name__, str(e)]
    return None


front_scale_up = scale("up", 1, 2)
front_scale_down = scale("down", 2, 1)
emit(
    statuses=statuses,
    latched=latched,
    fold_once=fold_once,
    fold_twice=fold_twice,
    scale_up=scale_up,
    received=received,
    front_scale_up=front_scale_up,
    front_scale_down=front_scale_down,
    client_calls=client_calls,
)
"""


def _ok(part: dict) -> dict:
    assert "error" not in part, part["error"]
    return part["ok"]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Resolution, registration and planning in one vLLM subprocess (same setup), in that order."""
    tmp_path = tmp_path_factory.mktemp("shared")
    model = write_tiny_model(tmp_path / "model")
    model_n = write_tiny_model(tmp_path / "model-n", num_hidden_layers=len(MIXED_BITS))
    return run_vllm_scripts(
        [
            ("backend_resolution", BACKEND_RESOLUTION, [str(model)]),
            ("registration", REGISTRATION, []),
            (
                "planning",
                PLANNING,
                [str(model_n), json.dumps(MIXED_BITS), json.dumps(CONTROL_BITS), PLANNER_MODULE],
            ),
            ("ring_prediction", RING_PREDICTION, [str(model)]),
            ("elastic_fold", ELASTIC_FOLD, []),
        ],
        tmp_path,
    )


def test_plugin_loads_registers_dtypes_and_fills_turbo_attn_slot(shared):
    result = part(shared, "registration")

    assert result["overridden"] is True, result
    assert result["path"] == TKV_BACKEND_PATH, result
    assert result["class_path"] == TKV_BACKEND_PATH, result
    assert result["name"] == "TURBO_ATTN", result
    assert set(result["backend_dtypes"]) == {"tkv", "tkv-bypass"}, result
    assert result["custom_overridden"] is False, result

    assert result["plugin_dtype"] == {"tkv": True, "tkv-bypass": True, "auto": False, "fp8": False}, result
    choices = result["choices"]
    assert "tkv" in choices and "tkv-bypass" in choices and "auto" in choices, result
    assert choices == sorted(choices), result
    assert result["torch_dtypes"] == {"tkv": "torch.uint8", "tkv-bypass": "torch.bfloat16"}, result
    assert result["cache_config"] == "tkv", result
    assert result["cli"] == {"tkv": "tkv", "tkv-bypass": "tkv-bypass"}, result


def test_turbo_attn_resolved_from_tkv_dtype_and_from_cli_spelling(shared):
    result = part(shared, "backend_resolution")

    # --kv-cache-dtype tkv alone: the backend is TURBO_ATTN although nobody named it.
    dtype_only = _ok(result["dtype_only"])
    assert dtype_only["named"] is None, dtype_only
    assert dtype_only["cache_dtype"] == "tkv", dtype_only
    assert dtype_only["backend"] == "TURBO_ATTN", dtype_only
    assert dtype_only["backend_path"] == TKV_BACKEND_PATH, dtype_only
    assert dtype_only["builtin"]["backend"] is None, dtype_only  # guard: builtin dtype, no default
    # --attention-backend turbo-attn through the CLI, with no plugin dtype.
    cli = _ok(result["cli"])
    assert cli["parsed"] == "turbo-attn", cli
    assert cli["cache_dtype"] == "auto", cli
    assert cli["backend"] == "TURBO_ATTN", cli
    assert cli["backend_path"] == TKV_BACKEND_PATH, cli


def test_cpu_refuses_tkv_layers_instead_of_serving_them_with_cpu_attn(shared):
    # TURBO_ATTN is named for "tkv", but the CPU platform answers CPU_ATTN for any named
    # backend; the seam refuses that answer for a plugin dtype (v0.33.0's platform
    # refuses it itself) instead of letting CPU_ATTN read turbo-attn's packed cache.
    cpu = _ok(part(shared, "backend_resolution")["cpu"])
    assert cpu["refusal"] is not None and "tkv" in cpu["refusal"], cpu
    assert cpu["skipped"] == "CPU_ATTN", cpu


def _assert_own_views(views: list, own_widths: dict, names: list) -> None:
    """Every layer of ``names`` is viewed at its own width, in bytes of its own inside the
    allocation, and the plugin's region of it (by name) is the whole view."""
    assert sorted(name for name, *_ in views) == sorted(names), views
    for name, width, first, last, size, region_is_view in views:
        assert width == own_widths[name], (name, views)
        assert 0 <= first < last <= size, (name, views)
        assert region_is_view, (name, views)
    spans = sorted((first, last) for _, _, first, last, _, _ in views)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), views


def test_spec_customisation_and_kv_planning_run_on_cpu_fused_plan_keeps_capacity(shared):
    n = len(MIXED_BITS)

    result = part(shared, "planning")

    spec, uniform, fused = result["spec"], result["uniform"], result["fused"]
    names = spec["names"]
    assert names == [f"model.layers.{i}.self_attn.attn" for i in range(n)], spec
    assert spec["impl"] == "tkv.integrations.vllm.attention_impl.TkvAttentionImpl", spec
    assert spec["layer_idx"] == list(range(n)), spec
    assert spec["types"] == [TKV_FULL_SPEC] * n, spec
    assert spec["full_attention"] is True, spec
    assert spec["dtypes"] == ["torch.uint8"], spec
    page = spec["pages"][0]
    assert spec["pages"] == [page] * n, spec
    assert page == spec["block_size"] * spec["slot_bytes"][0], spec
    assert 0 < page < spec["stock_page"], spec  # packed: smaller than the stock page
    assert spec["custom_full_type"] == TKV_FULL_SPEC, spec
    assert spec["custom_full_page"] == page, spec
    assert spec["custom_idempotent"] is True, spec
    assert spec["custom_window_type"] == f"{TKV_SPECS}.TkvSlidingWindowSpec", spec
    assert spec["custom_window_sliding"] is True, spec
    assert spec["custom_window_page"] == page, spec

    assert uniform["supported_layouts"] == ["LBNHC", "LBHNC"], uniform
    assert uniform["layout"] == "LBNHC", uniform
    assert uniform["groups"] == [names], uniform
    assert sorted(name for layers in uniform["tensor_layers"] for name in layers) == names, uniform
    assert uniform["num_blocks"] == uniform["available"] // (n * page), uniform
    assert uniform["tensor_bytes"] == uniform["num_blocks"] * n * page, uniform

    fused_blocks, control_blocks, stock_blocks = (
        fused["fused_blocks"],
        fused["control_blocks"],
        fused["stock_blocks"],
    )
    print(
        f"\nKV blocks, {n} layers {MIXED_BITS} vs {n} x K{CONTROL_BITS[0]}V{CONTROL_BITS[1]} "
        f"({uniform['layout']}): fused={fused_blocks} control={control_blocks} stock-style={stock_blocks}"
    )
    assert len(set(fused["layer_pages"])) > 1, fused  # the layers really have mixed widths
    # The plugin's merge fuses all layers into one composite spec holding n per-layer pages.
    assert fused["groups"] == [names], fused
    assert fused["composite_type"] == TKV_FULL_SPEC, fused
    assert fused["composite_count"] == n, fused
    assert fused["composite_layers"] == names, fused
    assert fused["composite_page"] == sum(fused["layer_pages"]), fused
    # Equal bytes per block: the control's n unfused pages sum to the composite page.
    assert fused["control_count"] == 1, fused
    assert n * fused["control_page"] == fused["composite_page"], fused
    if fused["fused_pages"]:
        # One aliased page per fused set: a tensor per layer, all at one offset.
        assert fused["group_type"] == TKV_FULL_SPEC, fused
        assert sorted(layers for layers, _ in fused["tensors"]) == [[name] for name in names], fused
        assert len({offset for _, offset in fused["tensors"]}) == 1, fused
    else:
        # Planned per layer (upstream's UniformTypeKVCacheSpecs): a tensor per width, each
        # layer viewed at its own width, the region the plugin reads by name its whole view.
        assert fused["group_type"] == "vllm.v1.kv_cache_interface.UniformTypeKVCacheSpecs", fused
        _assert_own_views(fused["views"], fused["own_widths"], names)

    assert fused_blocks == control_blocks, fused
    # Charged as stock v0.31 does (count ignored): the page n times, 1/n of the capacity.
    assert fused["stock_count"] == 1 and fused["stock_page"] == fused["composite_page"], fused
    assert stock_blocks == control_blocks // n, fused
    assert stock_blocks < fused_blocks, fused


def test_pipeline_parallel_workers_keep_the_plugins_fused_set_and_its_layers_apart(shared):
    """Two PP workers of two of the four mixed-bit layers each: each worker's slot is the
    plugin's whole fused set by position (the other worker's layers None), and the regions
    turbo-attn reads by layer name (`composite_region_view` over the composite's
    `per_layer_offsets`) lie in the worker's allocation, apart from each other."""
    result = part(shared, "planning")
    names = result["spec"]["names"]
    pp = result["pp"]

    if not result["fused"]["fused_pages"]:
        for worker, own in zip(pp, (names[:2], names[2:])):
            assert worker["group_type"] == "vllm.v1.kv_cache_interface.UniformTypeKVCacheSpecs", worker
            _assert_own_views(worker["views"], result["fused"]["own_widths"], own)
        return
    assert [worker["slots"] for worker in pp] == [
        [[names[0], names[1], None, None]],
        [[None, None, names[2], names[3]]],
    ], pp
    for worker, own in zip(pp, (names[:2], names[2:])):
        regions = sorted(worker["regions"], key=lambda region: region[1])
        assert sorted(name for name, *_ in regions) == own, worker
        assert all(0 <= start < end <= size for _, start, end, size in regions), worker
        assert all(a[2] <= b[1] for a, b in zip(regions, regions[1:])), worker


def test_hybrid_model_of_mixed_widths_plans_without_a_fused_spec(shared):
    """turbo-attn 0.70.1 fuses only within a KV cache group. On a hybrid model (sliding-window
    layers first, then full-attention layers of two widths) upstream's grouping separates the
    widths before it merges a group, so every group's merge sees one width, no group is fused,
    and the single-group rule of fused pages refuses nothing. With a full-attention layer
    first the same: the plugin's own merge, which reads `per_layer_offsets` of every spec it
    merges, raises AttributeError on its sliding-window spec, which the planner takes as "not
    uniform" (specs of other classes), as it takes upstream's AssertionError."""
    result = part(shared, "planning")
    hybrid, names = result["hybrid"], result["spec"]["names"]

    for order in ("window_first", "full_first"):
        groups = hybrid[order].get("groups")
        assert groups is not None and len(groups) > 1, hybrid
        assert all(count == 1 for _, count in groups), hybrid
        assert sorted(name for layers, _ in groups for name in layers if name in names) == names, hybrid


def test_mamba_hybrid_of_mixed_widths_is_refused_naming_the_remedy(shared):
    """A Mamba/GDN hybrid of mixed widths with the plugin's default TKV_PER_LAYER_SLOTS=1, its
    Mamba page larger than the attention pages and a multiple of none: upstream pads every
    attention page to the Mamba page, so the plugin's layers of both widths (whose specs compare
    equal) fall into one bucket, which its merge fuses into one composite beside the Mamba group.
    Where the seam plans fused pages (v0.31.0, v0.32.0) the planner refuses that plan, naming the
    remedy (an integer TKV_BITS, or TKV_PER_LAYER_SLOTS=0). Where it plans a page per layer
    (v0.33.0) nothing is fused, and upstream's layout check refuses these mixed pages on the
    layer-outer layout the plugin declares (LBNHC), suggesting a block-outermost one."""
    result = part(shared, "planning")
    mamba, names = result["hybrid"]["mamba"], result["spec"]["names"]
    pages = mamba["pages"]

    assert len(pages["attention"]) == 2 and pages["mamba"] > pages["attention"][-1], mamba
    assert all(pages["mamba"] % page for page in pages["attention"]), mamba
    if result["fused"]["fused_pages"]:
        assert mamba.get("raised") == "NotImplementedError", mamba
        message = mamba["message"]
        assert message.startswith("Fused KV cache pages need a single KV cache group"), message
        assert f"2 KV cache groups of [{len(names)}, {len(names)}] layers" in message, message
        # the remedy, in each base's words: uniform bits (an integer TKV_BITS) or no per-layer slots
        assert "an integer" in message and "TKV_BITS" in message, message
        assert "TKV_PER_LAYER_SLOTS=0" in message, message
    else:
        assert mamba.get("raised") == "ValueError", mamba
        message = mamba["message"]
        assert message.startswith("KV cache layout LBNHC cannot express this model's mixed page sizes"), (
            message
        )


@pytest.mark.parametrize("case", ["skipped_last", "draft"])
def test_plugin_layers_before_a_layer_of_the_models_dtype_plan_apart(shared, case):
    """The plugin's mixed-width layers first, then a stock `FullAttentionSpec` of the model's
    dtype: a last layer kept by --kv-cache-dtype-skip-layers, or a non-MLA EAGLE draft with
    `"kv_cache_dtype": "auto"` (numbered on from the target). The plugin's merge raises
    AttributeError on the stock spec; where the planner takes that for "not uniform" every layer
    is planned at its own page, at the capacity of the bytes per block, in bytes of its own."""
    result = part(shared, "planning")
    planned, names = result["hybrid"][case], result["spec"]["names"]

    if result["fused"]["fused_pages"]:  # v0.31.0, v0.32.0: equal specs of other pages are refused
        assert planned.get("raised") == "NotImplementedError", planned
        return
    stock = names[-1] if case == "skipped_last" else f"model.layers.{len(names)}.self_attn.attn"
    plugin_layers = names[:-1] if case == "skipped_last" else names
    (group,) = planned["groups"]
    assert sorted(group[0]) == sorted([*plugin_layers, stock]) and group[1] == 1, planned
    assert planned["plugin_layers"] == plugin_layers, planned
    _assert_own_views(planned["views"], result["fused"]["own_widths"], plugin_layers)
    assert planned["num_blocks"] == (256 << 20) // planned["bytes_per_block"], planned
    spans = sorted((first, end, name) for name, first, end in planned["spans"])
    assert sorted(name for *_, name in spans) == sorted([*plugin_layers, stock]), planned
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), planned


def test_mixed_widths_beside_a_skipped_layer_are_refused_or_planned_apart(shared):
    """A first layer at the model's dtype (kept by --kv-cache-dtype-skip-layers) beside the
    plugin's layers of mixed widths, whose specs compare equal: where the seam plans fused
    pages (v0.31.0, v0.32.0) the planner refuses to put them in one bucket, naming both layers;
    where it plans them per layer (v0.33.0) each layer is viewed at its own width."""
    result = part(shared, "planning")
    skipped, names = result["hybrid"]["skipped_first"], result["spec"]["names"]

    if result["fused"]["fused_pages"]:
        assert skipped["raised"] == "NotImplementedError", skipped
        assert f"The KV cache spec of layer {names[2]} equals that of layer {names[1]}" in skipped["message"]
    else:
        assert skipped["groups"] == [[names, 1]], skipped
        _assert_own_views(skipped["views"], result["fused"]["own_widths"], names[1:])


def test_plugin_layers_beside_a_last_layer_of_a_builtin_dtype_plan_or_are_refused(shared):
    """The last layer at the model's dtype (--kv-cache-dtype-skip-layers of it, or a draft
    model of a built-in dtype) after the plugin's layers: the plugin's merge raises
    AttributeError on the stock spec in upstream's uniformity check, which the planner takes
    as "not uniform". Of one width, the layers plan as one UniformTypeKVCacheSpecs group at the
    capacity of their pages' sum; of mixed widths, as with the stock layer first (above)."""
    result = part(shared, "planning")
    hybrid, names = result["hybrid"], result["spec"]["names"]

    uniform = hybrid["uniform_skipped_last"]
    assert uniform.get("groups") == [names], uniform
    assert uniform["group_type"] == "vllm.v1.kv_cache_interface.UniformTypeKVCacheSpecs", uniform
    assert uniform["num_blocks"] == uniform["available"] // sum(uniform["pages"]), uniform
    skipped = hybrid["skipped_last"]
    if result["fused"]["fused_pages"]:
        assert skipped["raised"] == "NotImplementedError", skipped
        assert f"The KV cache spec of layer {names[1]} equals that of layer {names[0]}" in skipped["message"]
    else:
        assert skipped["groups"] == [[names, 1]], skipped


def test_recent_ring_predicts_the_kv_cache_groups_where_the_planner_has_not_moved(shared):
    """Outside the seam: turbo-attn 0.70.1 imports get_kv_cache_groups from kv_cache_utils.
    Where the base's planner has moved out of it (its queue plans in another module, as on
    v0.33.0's kv_cache_planning.py) that import fails and the ring prediction falls back to
    None (a known gap of that base's PROTOCOL.md); elsewhere it predicts the groups."""
    result = part(shared, "ring_prediction")

    if PLANNER_MODULE != "vllm.v1.core.kv_cache_utils":
        assert result["groups"] is None, result
        assert result["import_error"].startswith(
            "cannot import name 'get_kv_cache_groups' from 'vllm.v1.core.kv_cache_utils'"
        ), result
    else:
        assert result["import_error"] is None, result
        assert result["groups"] == [result["names"]], result


def test_elastic_scale_up_with_the_plugins_lazy_fold_is_refused(shared):
    """turbo-attn 0.70.1's own fold on a toy o_proj: folded once on a running worker (a second
    fold of that module is a no-op: the latch), its weight received by a new elastic EP worker
    without the latch is folded again at that worker's first use, a doubly rotated o_proj (no
    error). The plugin's backend edits weights after load and implements no
    on_weights_replaced, so the seam (backend-lifecycle-hooks), which takes the receive for a
    weight replacement, refuses the scale-up before anything is received."""
    result = part(shared, "elastic_fold")

    assert result["statuses"] == ["folded", "folded", "folded"], result
    assert result["fold_once"] == 0.0, result
    assert result["latched"] is False, result
    assert result["fold_twice"] > 0.05, result
    assert result["received"] == [], result
    refusal = [
        "RuntimeError",
        "Attention backend TkvAttentionBackend implements on_model_loaded and "
        "on_draft_model_loaded but not on_weights_replaced, so it cannot be told that an "
        "elastic EP scale-up replaces the model weights; refusing to replace them. Use a "
        "release of the backend's plugin that implements on_weights_replaced, or restart "
        "the engine at the new data parallel size.",
    ]
    assert result["scale_up"] == refusal, result
    # and before that, in the front end: no engine is told of the scale-up (none would then wait
    # for a worker that refuses to receive), while a scale-down reaches the engine client
    assert result["front_scale_up"] == refusal, result
    assert "up" not in result["client_calls"], result
    assert result["client_calls"]["down"] == ["_prepare_scale_down_elastic_ep"], result


@pytest.fixture(scope="module")
def bypass(tmp_path_factory):
    """tkv-bypass marks bypass process-wide: its checks share a process of their own."""
    tmp_path = tmp_path_factory.mktemp("bypass")
    model = write_tiny_model(tmp_path / "model", num_hidden_layers=4)
    return run_vllm_scripts(
        [("bypass", BYPASS, []), ("bypass_planning", BYPASS_PLANNING, [str(model), PLANNER_MODULE])],
        tmp_path,
    )


def test_tkv_bypass_serves_the_models_own_kv(bypass):
    result = part(bypass, "bypass")

    assert result["marked_before"] is False, result
    assert result["impl_bypass"] is True, result
    assert result["marked_after"] is True, result  # process-wide: hence a process of its own
    assert result["spec_type"] == TKV_FULL_SPEC, result
    assert result["spec_dtype"] == "torch.bfloat16", result
    assert result["page"] == result["dense_page"], result


@pytest.mark.parametrize("order", ["stock_first", "stock_last"])
def test_tkv_bypass_beside_a_layer_of_the_models_dtype_plans_each_layer_at_its_own_view(bypass, order):
    """--kv-cache-dtype tkv-bypass with one layer kept at the model's dtype (first: skip-layers 0;
    or last): the plugin's bf16 spec has that stock layer's dtype and head fields and its page,
    so the stock merge takes it for its own, but its view is one slot per token. Whichever layer
    comes first, the layers plan apart (one UniformTypeKVCacheSpecs group), each viewed with its
    own spec, in bytes of its own, and the plugin's bypass view of each of its layers works."""
    result = part(bypass, "bypass_planning")
    planned, names, heads = result[order], result["names"], result["num_kv_heads"]

    assert result["fields_equal"] == [True] * 4, result
    assert result["pages"][0] == result["pages"][1], result
    assert result["stock_merge_takes_it"] == "FullAttentionSpec", result
    assert planned["groups"] == [names], planned
    assert planned["group_type"] == "UniformTypeKVCacheSpecs", planned
    for name, view in planned["views"].items():
        if name == planned["stock"]:
            assert view["shape"][1] == heads and view["bypass_view"] is None, (name, planned)
        else:
            assert view["shape"][1] == 1, (name, planned)
            assert isinstance(view["bypass_view"], list), (name, planned)
    spans = sorted(view["span"] for view in planned["views"].values())
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), planned
