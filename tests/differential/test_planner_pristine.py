"""Unfused KV cache plans: the patched planner against the pristine base's, byte for byte.

Runs in the vLLM venv with the full series' overlay installed (``make differential``,
``tkv-seam seamtest differential``). The pristine planner module of the base (the lane reads it
off the base's queue into ``TKV_SEAM_PLANNER_MODULE``: ``vllm/v1/core/kv_cache_utils.py`` on
v0.31.0, ``vllm/v1/core/kv_cache_planning.py`` where v0.33.0 moved it) is read from the build tree's base commit
(``git show tkv-seam-base:...``, tree from ``TKV_SEAM_TREE``) and imported under another module
name beside the installed (patched) one; both planners then get the same seeded random inputs
without a fused spec and must return equal ``KVCacheConfig`` objects (``==`` and ``repr``),
equal numbers or the same error.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import random
import subprocess
import sys
from types import ModuleType, SimpleNamespace

import pytest
import torch
from vllm.config import ModelConfig, VllmConfig
from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheGroupSpec,
    KVCacheLayout,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)

from ..conftest import BASE, tiny_llama

TREE_ENV = "TKV_SEAM_TREE"
BASE_TAG = "tkv-seam-base"
# The module holding the KV cache planner: read off the base's queue by the lane
# (tkvseam.bases.carried.planner_module: the vllm/v1/core/ module fused-kv-pages changes).
PLANNER_ENV = "TKV_SEAM_PLANNER_MODULE"
PLANNER_MODULE = os.environ.get(PLANNER_ENV, "")
if not PLANNER_MODULE:
    pytest.fail(f"{PLANNER_ENV} is unset: run this through `make differential BASE={BASE}`", pytrace=False)
MODULE_PATH = PLANNER_MODULE.replace(".", "/") + ".py"
PRISTINE_NAME = "tkv_seam_pristine_" + PLANNER_MODULE.rsplit(".", 1)[1]
patched = importlib.import_module(PLANNER_MODULE)
# From v0.32.0 on, the per-block budget takes the layout (its layer-outer branch pads each page).
BUDGET_TAKES_LAYOUT = "layout" in inspect.signature(patched._get_kv_cache_bytes_per_block).parameters
LAYOUTS = list(KVCacheLayout)  # every layout, the head-outer LHBNC and BHLNC too
BLOCK_SIZE = 16
NUM_CASES = 200


@pytest.fixture(scope="module")
def pristine() -> ModuleType:
    tree = os.environ.get(TREE_ENV)
    assert tree, f"set {TREE_ENV} to the build tree (build/vllm-{BASE})"
    source = subprocess.run(
        ["git", "-C", tree, "show", f"{BASE_TAG}:{MODULE_PATH}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # The comparison is only meaningful against the patched planner.
    assert inspect.getsource(patched) != source, "the installed vLLM is not patched"
    spec = importlib.util.spec_from_loader(PRISTINE_NAME, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = f"{tree}/{MODULE_PATH}@{BASE_TAG}"
    sys.modules[PRISTINE_NAME] = module
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        yield module
    finally:
        del sys.modules[PRISTINE_NAME]


@pytest.fixture(scope="module")
def vllm_config(tmp_path_factory) -> VllmConfig:
    model = tmp_path_factory.mktemp("model")
    (model / "config.json").write_text(json.dumps(tiny_llama(num_hidden_layers=8)))
    config = VllmConfig(model_config=ModelConfig(model=str(model), max_model_len=256))
    config.cache_config.kv_cache_layout = "LBNHC"
    return config


def _outcome(fn, *args):
    """What a call returns, or the type and text of what it raises."""
    try:
        with _own_builder(inspect.getmodule(fn)):
            result = fn(*args)
    except Exception as e:  # both planners must fail the same way
        return ("raised", type(e).__name__, str(e))
    return ("returned", result, repr(result))


@contextlib.contextmanager
def _own_builder(module):
    """Where the planner places through the platform's ``KVCacheConfigBuilder`` (v0.33.0),
    make the platform pick the builder of ``module``, so the pristine planner is not served
    by the patched module's ``DefaultKVCacheConfigBuilder``."""
    if not hasattr(module, "DefaultKVCacheConfigBuilder"):
        yield
        return
    from vllm.platforms import current_platform

    path = f"{module.__name__}.DefaultKVCacheConfigBuilder"
    saved = current_platform.__dict__.get("get_kv_cache_config_builder_cls")
    current_platform.get_kv_cache_config_builder_cls = lambda vllm_config: path
    try:
        yield
    finally:
        if saved is None:
            del current_platform.get_kv_cache_config_builder_cls
        else:
            current_platform.get_kv_cache_config_builder_cls = saved


def _bytes_per_block_args(module, groups, layout):
    """The arguments of ``_get_kv_cache_bytes_per_block``: the groups, and the layout
    where the base's planner takes it."""
    if "layout" in inspect.signature(module._get_kv_cache_bytes_per_block).parameters:
        return (groups, layout)
    return (groups,)


def _get_kv_cache_configs(module):
    """``get_kv_cache_configs`` of ``module``, taking the per-worker specs and memory; on a
    base whose planner takes the global groups too (v0.33.0), they are formed first, as the
    engine core does."""
    if "global_kv_cache_groups" not in inspect.signature(module.get_kv_cache_configs).parameters:
        return module.get_kv_cache_configs

    def get_kv_cache_configs(vllm_config, kv_cache_specs, available_memory):
        groups = module.get_global_kv_cache_groups(vllm_config, kv_cache_specs)
        return module.get_kv_cache_configs(vllm_config, kv_cache_specs, available_memory, groups)

    get_kv_cache_configs.__module__ = module.__name__
    return get_kv_cache_configs


def _random_spec(rng: random.Random) -> KVCacheSpec:
    kind = rng.choice(["full", "full", "sliding", "chunked", "mla", "mamba"])
    attention = dict(
        block_size=BLOCK_SIZE,
        num_kv_heads=rng.choice([1, 2, 4]),
        head_size=rng.choice([8, 16, 32, 64]),
        dtype=rng.choice([torch.bfloat16, torch.float32, torch.int8]),
    )
    if BUDGET_TAKES_LAYOUT:
        # Alignments that pad pages: the layer-outer budget pads each one.
        attention["block_stride_alignment"] = rng.choice([None, None, 256, 1024, 4096])
    if kind == "full":
        return FullAttentionSpec(**attention)
    if kind == "sliding":
        return SlidingWindowSpec(**attention, sliding_window=rng.choice([32, 64, 128]))
    if kind == "chunked":
        return ChunkedLocalAttentionSpec(**attention, attention_chunk_size=64)
    if kind == "mla":
        return MLAAttentionSpec(**attention)
    return MambaSpec(
        block_size=BLOCK_SIZE,
        shapes=((2, rng.choice([8, 16])), (4, 8)),
        dtypes=(torch.float32, torch.float32),
    )


def _random_groups(rng: random.Random) -> list[KVCacheGroupSpec]:
    groups = []
    for group_index in range(rng.randint(1, 3)):
        names = [f"g{group_index}.l{i}" for i in range(rng.randint(1, 8))]
        if rng.random() < 0.5:
            groups.append(KVCacheGroupSpec(names, _random_spec(rng)))
        else:
            specs = [_random_spec(rng) for _ in range(rng.randint(1, 3))]
            layer_specs = {name: rng.choice(specs) for name in names}
            groups.append(
                KVCacheGroupSpec(
                    names,
                    UniformTypeKVCacheSpecs(block_size=BLOCK_SIZE, kv_cache_specs=layer_specs),
                )
            )
    return groups


def _planner_config(layout: KVCacheLayout) -> SimpleNamespace:
    return SimpleNamespace(
        attention_config=SimpleNamespace(hisparse_config=None),
        cache_config=SimpleNamespace(
            num_gpu_blocks_override=None,
            prefix_cache_retention_interval=None,
            get_resolved_kv_cache_layout=lambda: layout,
        ),
    )


def _random_model(rng: random.Random) -> dict[str, KVCacheSpec]:
    """Per-layer specs of a model: one spec kind, or a hybrid of two."""
    kinds = [_random_spec(rng) for _ in range(rng.choice([1, 1, 2]))]
    return {f"model.layers.{i}.self_attn.attn": rng.choice(kinds) for i in range(rng.randint(1, 8))}


def test_unfused_groups_plan_as_pristine(pristine):
    rng = random.Random("tkv-seam-unfused-groups")
    budgeted = planned = 0
    for _ in range(NUM_CASES):
        groups = _random_groups(rng)
        layout = rng.choice(LAYOUTS)
        memory = rng.randint(0, 64) * 4096 + rng.randrange(4096)
        config = _planner_config(layout)
        for name in ("_get_kv_cache_bytes_per_block", "get_kv_cache_config_from_groups"):
            ours, theirs = (
                _outcome(
                    getattr(module, name),
                    *(
                        _bytes_per_block_args(module, groups, layout)
                        if name.startswith("_")
                        else (config, groups, memory)
                    ),
                )
                for module in (patched, pristine)
            )
            assert ours == theirs, (name, groups, layout, memory)
            if name.startswith("_"):
                budgeted += ours[0] == "returned"
        planned += ours[0] == "returned"
    # Most inputs are plannable: the comparison is not one of errors only.
    assert budgeted > NUM_CASES // 2
    assert planned > NUM_CASES // 2


def test_projected_groups_plan_as_pristine(pristine):
    """A pipeline parallel worker's projection of random groups, as get_kv_cache_configs makes it.

    The patched projection (which records the model's fused sets on a group with a fused spec)
    returns the pristine one's groups for these unfused ones.

    A projected UniformTypeKVCacheSpecs group that holds some of its layers gets their specs only;
    one that holds none keeps the global kv_cache_specs with no layer_names. The budget and the
    plan equal the pristine ones in every case, the pristine planner's handling of a group that
    holds none of its layers included: it budgets the group at 0 bytes, and a planner that places
    a group's kv_cache_specs (v0.33.0's) still emits tensors for the global specs' layers (of
    other workers, held by no group of the config), on which upstream's allocate_kv_cache later
    raises StopIteration; one that places a group's layer_names (v0.34.0's) emits none. The seam
    keeps either as it is.
    """
    rng = random.Random("tkv-seam-projected-groups")
    planned = uniform_none = foreign_tensors = uniform_part = 0
    for _ in range(NUM_CASES):
        global_groups = _random_groups(rng)
        names = [name for group in global_groups for name in group.layer_names]
        specs = {
            name: pristine._get_per_layer_spec(group, name)
            for group in global_groups
            for name in group.layer_names
        }
        worker = {name: specs[name] for name in names if rng.random() < 0.5} or {names[0]: specs[names[0]]}
        groups = pristine._project_kv_cache_groups_to_worker(global_groups, worker)
        # The patched projection records fused sets only: unfused groups project as pristine.
        ours = _outcome(patched._project_kv_cache_groups_to_worker, global_groups, worker)
        assert ours == ("returned", groups, repr(groups)), (
            "_project_kv_cache_groups_to_worker",
            global_groups,
        )
        for group, projected in zip(global_groups, groups):
            if isinstance(group.kv_cache_spec, UniformTypeKVCacheSpecs):
                if not projected.layer_names:
                    uniform_none += 1
                elif len(projected.layer_names) < len(group.layer_names):
                    uniform_part += 1
        layout = rng.choice(LAYOUTS)
        memory = rng.randint(0, 64) * 4096 + rng.randrange(4096)
        config = _planner_config(layout)
        budget_args = (groups, layout) if BUDGET_TAKES_LAYOUT else (groups,)
        ours = _outcome(patched._get_kv_cache_bytes_per_block, *budget_args)
        theirs = _outcome(pristine._get_kv_cache_bytes_per_block, *budget_args)
        assert ours == theirs, ("_get_kv_cache_bytes_per_block", groups, layout)
        ours = _outcome(patched.get_kv_cache_config_from_groups, config, groups, memory)
        theirs = _outcome(pristine.get_kv_cache_config_from_groups, config, groups, memory)
        assert ours == theirs, ("get_kv_cache_config_from_groups", groups, layout, memory)
        planned += ours[0] == "returned"
        if ours[0] == "returned":
            held = {name for group in groups for name in group.layer_names}
            foreign_tensors += any(not set(t.layers) <= held for t in ours[1].kv_cache_tensors)
    assert planned > NUM_CASES // 2
    # Both projections of a UniformTypeKVCacheSpecs group are drawn, and plans in which pristine
    # emits tensors of layers no group holds are among those compared, where it emits them.
    assert uniform_none > 10 and uniform_part > 10
    if _places_layers_no_group_holds(pristine):
        assert foreign_tensors > 10
    else:
        assert foreign_tensors == 0


def _places_layers_no_group_holds(planner: ModuleType) -> bool:
    """Whether `planner` emits tensors for the kv_cache_specs of a UniformTypeKVCacheSpecs group
    that holds none of its layers (a worker's projection of another worker's group)."""
    spec = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=8, dtype=torch.float16)
    group = KVCacheGroupSpec(
        [], UniformTypeKVCacheSpecs(block_size=BLOCK_SIZE, kv_cache_specs={"other.l0": spec})
    )
    held = KVCacheGroupSpec(["l0"], spec)
    config = planner.get_kv_cache_config_from_groups(
        _planner_config(KVCacheLayout.LBNHC), [held, group], 1 << 20
    )
    return any("other.l0" in tensor.layers for tensor in config.kv_cache_tensors)


def test_unfused_models_plan_and_check_capacity_as_pristine(pristine, vllm_config):
    rng = random.Random("tkv-seam-unfused-models")
    planned = 0
    for _ in range(NUM_CASES):
        model = _random_model(rng)
        names = list(model)
        # Pipeline parallelism: each worker holds a contiguous run of layers.
        pp_size = rng.randint(1, min(3, len(names)))
        cuts = sorted(rng.sample(range(1, len(names)), pp_size - 1))
        workers = [
            {name: model[name] for name in names[a:b]} for a, b in zip([0, *cuts], [*cuts, len(names)])
        ]
        memory = [rng.randint(1, 4) * 2**20 + rng.randrange(2**16) for _ in workers]
        vllm_config.model_config.max_model_len = rng.choice([16, 100, 256])
        ours = _outcome(_get_kv_cache_configs(patched), vllm_config, workers, memory)
        theirs = _outcome(_get_kv_cache_configs(pristine), vllm_config, workers, memory)
        assert ours == theirs, (workers, memory)
        planned += ours[0] == "returned"

        small = rng.randrange(2**16)
        for name in ("check_enough_kv_cache_memory", "estimate_max_model_len"):
            for available in (memory[0], small):
                ours = _outcome(getattr(patched, name), vllm_config, dict(model), available)
                theirs = _outcome(getattr(pristine, name), vllm_config, dict(model), available)
                assert ours == theirs, (name, model, available)
    vllm_config.model_config.max_model_len = 256
    assert planned > NUM_CASES // 2
