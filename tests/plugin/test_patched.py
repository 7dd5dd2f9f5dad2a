"""turbo-attn 0.70.1 on PATCHED vLLM v0.31.0 (the seam applied): the plugin loads and works on CPU.

Run with the patched vLLM importable (a patched tree first on ``PYTHONPATH``, or
the overlaid venv) and ``TKV_SEAM_PLUGIN_PATH`` set. Each test lets vLLM load the
plugin through its entry point in a fresh subprocess (``_helpers``), which reports
one JSON result the test asserts on. Against stock v0.31.0 every test fails: the
plugin cannot load there (see test_stock.py).
"""

from __future__ import annotations

import json

from ._helpers import TKV_BACKEND_PATH, run_vllm_script, write_tiny_model

TKV_SPECS = "tkv.integrations.vllm.specs"

# Per-layer (k_bits, v_bits) of the fused (mixed-bit) plan and the uniform width of
# its equal-byte control: K4V4 and K8V8 slots average to exactly one K8V4 slot.
MIXED_BITS = [(4, 4), (8, 8), (4, 4), (8, 8)]
CONTROL_BITS = (8, 4)

SLOT = """
from vllm.plugins import load_general_plugins

load_general_plugins()

from vllm.v1.attention.backends.registry import AttentionBackendEnum

slot = AttentionBackendEnum.TURBO_ATTN
cls = slot.get_class()
emit(
    overridden=slot.is_overridden(),
    path=slot.get_path(),
    class_path=f"{cls.__module__}.{cls.__qualname__}",
    name=cls.get_name(),
    supported_dtypes=list(cls.supported_kv_cache_dtypes),
    custom_overridden=AttentionBackendEnum.CUSTOM.is_overridden(),
)
"""

DTYPES = """
from vllm.plugins import load_general_plugins

load_general_plugins()

from vllm.config.cache import CacheConfig, cache_dtype_choices, is_plugin_cache_dtype
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE

names = ["tkv", "tkv-bypass"]
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
emit(
    plugin={n: is_plugin_cache_dtype(n) for n in names + ["auto", "fp8"]},
    choices=cache_dtype_choices(),
    torch_dtypes={n: str(STR_DTYPE_TO_TORCH_DTYPE[n]) for n in names},
    cache_config=CacheConfig(cache_dtype="tkv").cache_dtype,
    cli={n: parser.parse_args(["--kv-cache-dtype", n]).kv_cache_dtype for n in names},
)
"""

AUTO_BACKEND = """
import sys

from vllm.engine.arg_utils import EngineArgs


def backend_of(config):
    backend = config.attention_config.backend
    return None if backend is None else backend.name


tkv_args = EngineArgs(model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256, kv_cache_dtype="tkv")
tkv_config = tkv_args.create_engine_config()
auto_config = EngineArgs(model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256).create_engine_config()
emit(
    named=tkv_args.attention_backend,
    backend=backend_of(tkv_config),
    cache_dtype=tkv_config.cache_config.cache_dtype,
    backend_path=tkv_config.attention_config.backend.get_path(),
    auto_backend=backend_of(auto_config),
)
"""

CLI_BACKEND = """
import sys

from vllm.plugins import load_general_plugins

load_general_plugins()  # as `vllm serve` does before it builds the parser

from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser

parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
argv = [
    "--model", sys.argv[1], "--skip-tokenizer-init", "--max-model-len", "256",
    "--attention-backend", "turbo-attn",
]
args = EngineArgs.from_cli_args(parser.parse_args(argv))
config = args.create_engine_config()
emit(
    parsed=args.attention_backend,
    backend=config.attention_config.backend.name,
    backend_path=config.attention_config.backend.get_path(),
    cache_dtype=config.cache_config.cache_dtype,
)
"""

# Builds the tiny model's attention layers with the backend the config names,
# takes their KV specs (Attention.get_kv_cache_spec + the plugin's customize_spec),
# resolves the KV layout from the backends as the engine core does, and plans.
# Defines names used by the two planning scripts below.
BUILD_LAYERS = """
import sys

from vllm.config import set_current_vllm_config
from vllm.engine.arg_utils import EngineArgs
from vllm.model_executor.layers.attention.attention import Attention
from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
from vllm.v1.core.kv_cache_utils import get_kv_cache_configs

config = EngineArgs(
    model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256, kv_cache_dtype="tkv"
).create_engine_config()
backend = config.attention_config.backend.get_class()
model_config, parallel_config = config.model_config, config.parallel_config
num_layers = model_config.get_num_layers(parallel_config)
num_heads = model_config.get_num_attention_heads(parallel_config)
num_kv_heads = model_config.get_num_kv_heads(parallel_config)
head_size = model_config.get_head_size()
block_size = config.cache_config.block_size
with set_current_vllm_config(config):
    layers = [
        Attention(
            num_heads,
            head_size,
            head_size**-0.5,
            num_kv_heads=num_kv_heads,
            cache_config=config.cache_config,
            prefix=f"model.layers.{i}.self_attn.attn",
            attn_backend=backend,
        )
        for i in range(num_layers)
    ]
    layer_specs = {layer.layer_name: layer.get_kv_cache_spec(config) for layer in layers}
layer_names = list(layer_specs)


def type_path(obj):
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def resolve_layout(specs):
    supported = [layout.name for layout in get_supported_kv_cache_layouts([backend])]
    return supported, resolve_kv_cache_layout(config, [supported], list(specs.values())).name


def plan(specs, available):
    (kv_cache_config,) = get_kv_cache_configs(config, [specs], [available])
    return kv_cache_config

"""

SPEC_AND_PLANNING = (
    BUILD_LAYERS
    + """
import torch

from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

geometry = dict(block_size=block_size, num_kv_heads=num_kv_heads, head_size=head_size, dtype=torch.uint8)
stock_full = FullAttentionSpec(**geometry)
custom_full = backend.customize_spec(stock_full)
custom_window = backend.customize_spec(SlidingWindowSpec(**geometry, sliding_window=64))
specs = list(layer_specs.values())
supported, layout = resolve_layout(layer_specs)
available = 64 << 20
kv = plan(layer_specs, available)
emit(
    impl=type_path(layers[0].impl),
    spec_types=[type_path(s) for s in specs],
    specs_are_full_attention=all(isinstance(s, FullAttentionSpec) for s in specs),
    spec_dtypes=sorted({str(s.dtype) for s in specs}),
    pages=[s.page_size_bytes for s in specs],
    slot_bytes=[s.slot_size_bytes for s in specs],
    block_size=block_size,
    stock_page=stock_full.page_size_bytes,
    custom_full_type=type_path(custom_full),
    custom_full_page=custom_full.page_size_bytes,
    custom_idempotent=backend.customize_spec(custom_full) is custom_full,
    custom_window_type=type_path(custom_window),
    custom_window_is_sliding=isinstance(custom_window, SlidingWindowSpec),
    custom_window_page=custom_window.page_size_bytes,
    supported_layouts=supported,
    layout=layout,
    available=available,
    num_blocks=kv.num_blocks,
    groups=[g.layer_names for g in kv.kv_cache_groups],
    tensor_layers=[t.layers for t in kv.kv_cache_tensors],
    tensor_bytes=sum(t.size for t in kv.kv_cache_tensors),
)
"""
)

FUSED_PLANNING = (
    BUILD_LAYERS
    + """
import dataclasses
import json

mixed_bits = json.loads(sys.argv[2])
control_k, control_v = json.loads(sys.argv[3])
# Per-layer widths as the plugin's per-layer (smart-mix) identity adoption stamps them
# (tkv.integrations.vllm.specs.adopt_layer_identity); the plugin's merge fuses them.
mixed = {
    name: dataclasses.replace(
        layer_specs[name], layer_name=name, tq_k_bit_width=k, tq_v_bit_width=v, tq_bit_width=max(k, v)
    )
    for name, (k, v) in zip(layer_names, mixed_bits, strict=True)
}
control_spec = dataclasses.replace(
    layer_specs[layer_names[0]],
    tq_k_bit_width=control_k,
    tq_v_bit_width=control_v,
    tq_bit_width=max(control_k, control_v),
)
control_specs = {name: control_spec for name in layer_names}
available = 256 << 20

supported, layout = resolve_layout(mixed)
fused = plan(mixed, available)
composite = fused.kv_cache_groups[0].kv_cache_spec
control = plan(control_specs, available)
# Stock v0.31 planning ignores aggregated_layer_count: the same composite spec with
# the count at 1 is charged once per layer.
stock_spec = dataclasses.replace(composite, _composite_layer_count=1)
stock = plan({name: stock_spec for name in layer_names}, available)
emit(
    layout=layout,
    layer_names=layer_names,
    layer_pages=[mixed[name].page_size_bytes for name in layer_names],
    fused_groups=[g.layer_names for g in fused.kv_cache_groups],
    composite_type=type_path(composite),
    composite_count=composite.aggregated_layer_count,
    composite_page=composite.page_size_bytes,
    composite_offsets=sorted(composite.per_layer_offsets or {}),
    fused_tensors=[[t.layers, t.offset, t.size] for t in fused.kv_cache_tensors],
    control_page=control_spec.page_size_bytes,
    control_count=control.kv_cache_groups[0].kv_cache_spec.aggregated_layer_count,
    stock_count=stock_spec.aggregated_layer_count,
    stock_page=stock_spec.page_size_bytes,
    fused_blocks=fused.num_blocks,
    control_blocks=control.num_blocks,
    stock_blocks=stock.num_blocks,
)
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


def test_plugin_loading_fills_turbo_attn_slot(tmp_path):
    result = run_vllm_script(SLOT, tmp_path)

    assert result["overridden"] is True, result
    assert result["path"] == TKV_BACKEND_PATH, result
    assert result["class_path"] == TKV_BACKEND_PATH, result
    assert result["name"] == "TURBO_ATTN", result
    assert set(result["supported_dtypes"]) == {"tkv", "tkv-bypass"}, result
    assert result["custom_overridden"] is False, result


def test_plugin_registers_tkv_cache_dtypes(tmp_path):
    result = run_vllm_script(DTYPES, tmp_path)

    assert result["plugin"] == {"tkv": True, "tkv-bypass": True, "auto": False, "fp8": False}, result
    choices = result["choices"]
    assert "tkv" in choices and "tkv-bypass" in choices, result
    assert choices == sorted(choices), result
    assert result["torch_dtypes"] == {"tkv": "torch.uint8", "tkv-bypass": "torch.bfloat16"}, result
    assert result["cache_config"] == "tkv", result
    assert result["cli"] == {"tkv": "tkv", "tkv-bypass": "tkv-bypass"}, result


def test_tkv_cache_dtype_resolves_turbo_attn_without_naming_it(tmp_path):
    model = write_tiny_model(tmp_path / "model")

    result = run_vllm_script(AUTO_BACKEND, tmp_path, str(model))

    assert result["named"] is None, result
    assert result["cache_dtype"] == "tkv", result
    assert result["backend"] == "TURBO_ATTN", result
    assert result["backend_path"] == TKV_BACKEND_PATH, result
    # Guard: a builtin dtype leaves the backend to the platform.
    assert result["auto_backend"] is None, result


def test_cli_attention_backend_turbo_attn_is_accepted(tmp_path):
    model = write_tiny_model(tmp_path / "model")

    result = run_vllm_script(CLI_BACKEND, tmp_path, str(model))

    assert result["parsed"] == "turbo-attn", result
    # No plugin dtype given: TURBO_ATTN comes from the spelling alone.
    assert result["cache_dtype"] == "auto", result
    assert result["backend"] == "TURBO_ATTN", result
    assert result["backend_path"] == TKV_BACKEND_PATH, result


def test_spec_customisation_and_kv_planning_run_on_cpu(tmp_path):
    model = write_tiny_model(tmp_path / "model")

    result = run_vllm_script(SPEC_AND_PLANNING, tmp_path, str(model))

    num_layers = 2
    assert result["impl"] == "tkv.integrations.vllm.attention_impl.TkvAttentionImpl", result
    assert result["spec_types"] == [f"{TKV_SPECS}.TkvFullAttentionSpec"] * num_layers, result
    assert result["specs_are_full_attention"] is True, result
    assert result["spec_dtypes"] == ["torch.uint8"], result
    block_size, (page, *others) = result["block_size"], result["pages"]
    assert others == [page] * (num_layers - 1), result
    assert page == block_size * result["slot_bytes"][0], result
    # The packed page is smaller than the stock page of the same geometry and dtype.
    assert 0 < page < result["stock_page"], result
    assert result["custom_full_type"] == f"{TKV_SPECS}.TkvFullAttentionSpec", result
    assert result["custom_full_page"] == page, result
    assert result["custom_idempotent"] is True, result
    assert result["custom_window_type"] == f"{TKV_SPECS}.TkvSlidingWindowSpec", result
    assert result["custom_window_is_sliding"] is True, result
    assert result["custom_window_page"] == page, result

    assert result["supported_layouts"] == ["LBNHC", "LBHNC"], result
    assert result["layout"] == "LBNHC", result
    layer_names = [f"model.layers.{i}.self_attn.attn" for i in range(num_layers)]
    assert result["groups"] == [layer_names], result
    assert sorted(n for layers in result["tensor_layers"] for n in layers) == layer_names, result
    assert result["num_blocks"] == result["available"] // (num_layers * page), result
    assert result["tensor_bytes"] == result["num_blocks"] * num_layers * page, result


def test_fused_mixed_bit_plan_gets_equal_byte_capacity(tmp_path):
    n = len(MIXED_BITS)
    model = write_tiny_model(tmp_path / "model", num_hidden_layers=n)

    result = run_vllm_script(
        FUSED_PLANNING, tmp_path, str(model), json.dumps(MIXED_BITS), json.dumps(CONTROL_BITS)
    )

    fused, control, stock = result["fused_blocks"], result["control_blocks"], result["stock_blocks"]
    print(
        f"\nKV blocks, {n} layers bits {MIXED_BITS} fused vs {n} x K{CONTROL_BITS[0]}V{CONTROL_BITS[1]}:"
        f" fused={fused} control={control} stock-style={stock} ({result['layout']})"
    )
    layer_names = result["layer_names"]
    assert len(set(result["layer_pages"])) > 1, result  # the layers really have mixed widths
    # The plugin fused all layers into one composite spec holding n per-layer pages.
    assert result["fused_groups"] == [layer_names], result
    assert result["composite_type"] == f"{TKV_SPECS}.TkvFullAttentionSpec", result
    assert result["composite_count"] == n, result
    assert result["composite_offsets"] == sorted(layer_names), result
    assert result["composite_page"] == sum(result["layer_pages"]), result
    # Equal bytes per block: the control's n unfused pages sum to the composite page.
    assert result["control_count"] == 1, result
    assert n * result["control_page"] == result["composite_page"], result
    # One aliased page per fused set: a tensor per layer, all at the same offset.
    tensor_layers = sorted(layers for layers, _, _ in result["fused_tensors"])
    assert tensor_layers == [[name] for name in layer_names], result
    assert len({offset for _, offset, _ in result["fused_tensors"]}) == 1, result

    assert fused == control, result
    # Stock-style charging (count ignored): the same spec is charged n times, ~1/n capacity.
    assert result["stock_count"] == 1 and result["stock_page"] == result["composite_page"], result
    assert stock == control // n, result
    assert stock < fused, result


def test_tkv_bypass_serves_the_models_own_kv(tmp_path):
    result = run_vllm_script(BYPASS, tmp_path)

    assert result["marked_before"] is False, result
    assert result["impl_bypass"] is True, result
    assert result["marked_after"] is True, result  # process-wide: hence its own process
    assert result["spec_type"] == f"{TKV_SPECS}.TkvFullAttentionSpec", result
    assert result["spec_dtype"] == "torch.bfloat16", result
    assert result["page"] == result["dense_page"], result
