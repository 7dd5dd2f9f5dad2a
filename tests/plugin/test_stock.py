"""turbo-attn 0.70.1 on STOCK vLLM v0.31.0: plugin loading breaks vLLM.

Run against an unpatched vLLM with ``TKV_SEAM_PLUGIN_PATH`` set. The plugin
registers into ``AttentionBackendEnum.TURBO_ATTN``, a slot only the seam adds, and
``load_general_plugins()`` does not catch plugin errors: loading raises
``AttributeError: TURBO_ATTN``, and so does every ``EngineArgs`` (its
``__post_init__`` loads plugins). ``VLLM_PLUGINS=""`` disables plugin loading and
the same ``EngineArgs`` works again (control).
"""

from __future__ import annotations

from ._helpers import run_vllm_script, vllm_env, write_tiny_model

PLUGIN_MODULE_SUFFIX = "tkv/integrations/vllm/plugin.py"

# Reports the exception (type, message, traceback files) instead of dying, so
# that the test asserts on it. ``find_spec`` proves the plugin was importable.
LOAD_PLUGINS = """
import importlib.util
import traceback

error = None
try:
    from vllm.plugins import load_general_plugins

    load_general_plugins()
except Exception as e:
    error = {
        "type": type(e).__name__,
        "message": str(e),
        "frames": [frame.filename for frame in traceback.extract_tb(e.__traceback__)],
    }
emit(error=error, tkv_importable=importlib.util.find_spec("tkv") is not None)
"""

ENGINE_ARGS = """
import importlib.metadata
import importlib.util
import sys
import traceback

from vllm.engine.arg_utils import EngineArgs

stage, error, backend, cache_dtype = "construct", None, None, None
try:
    args = EngineArgs(model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256)
    stage = "config"
    config = args.create_engine_config()
    stage = "done"
    backend = None if config.attention_config.backend is None else config.attention_config.backend.name
    cache_dtype = config.cache_config.cache_dtype
except Exception as e:
    error = {
        "type": type(e).__name__,
        "message": str(e),
        "frames": [frame.filename for frame in traceback.extract_tb(e.__traceback__)],
    }
entry_points = [ep.name for ep in importlib.metadata.entry_points(group="vllm.general_plugins")]
emit(
    stage=stage,
    error=error,
    backend=backend,
    cache_dtype=cache_dtype,
    tkv_importable=importlib.util.find_spec("tkv") is not None,
    entry_points=entry_points,
)
"""


def test_load_general_plugins_raises_turbo_attn_attribute_error(tmp_path):
    result = run_vllm_script(LOAD_PLUGINS, tmp_path)

    assert result["tkv_importable"], result
    error = result["error"]
    assert error is not None, f"loading turbo-attn on stock vLLM succeeded: {result}"
    assert error["type"] == "AttributeError", result
    assert "TURBO_ATTN" in error["message"], result
    assert any(f.endswith(PLUGIN_MODULE_SUFFIX) for f in error["frames"]), result


def test_engine_args_raise_turbo_attn_attribute_error(tmp_path):
    model = write_tiny_model(tmp_path / "model")

    result = run_vllm_script(ENGINE_ARGS, tmp_path, str(model))

    assert result["tkv_importable"], result
    error = result["error"]
    assert error is not None, f"EngineArgs worked on stock vLLM with turbo-attn loaded: {result}"
    assert result["stage"] == "construct", result
    assert error["type"] == "AttributeError", result
    assert "TURBO_ATTN" in error["message"], result
    assert any(f.endswith(PLUGIN_MODULE_SUFFIX) for f in error["frames"]), result


def test_engine_args_work_with_plugin_loading_disabled(tmp_path):
    model = write_tiny_model(tmp_path / "model")
    env = vllm_env(tmp_path, vllm_plugins="")

    result = run_vllm_script(ENGINE_ARGS, tmp_path, str(model), env=env)

    # Same interpreter setup as above: the plugin is importable and discoverable.
    assert result["tkv_importable"], result
    assert "tkv" in result["entry_points"], result
    assert result["error"] is None, result
    assert result["stage"] == "done", result
    assert result["cache_dtype"] == "auto", result
    assert result["backend"] is None, result
