"""A pytest plugin: load vLLM's general plugins before the first test, as a vLLM process does.

``-p tkvseam.seamtest.load_plugins`` (runs inside the vLLM venv's pytest). The plugin
lane's guard job runs every ``Guard:`` of the series with turbo-attn importable and
``VLLM_PLUGINS`` unset, the overlay image's setup. Loading the plugins at session
start means every guard runs with turbo-attn's registrations in place (its backend
slot, its cache dtypes), whatever order the tests run in.

A guard sets its own plugin state and restores it: after each test's teardown the
registrations must still be what the plugin made, or that test gets a teardown
error naming what changed (a fixture that clears the real registration would
otherwise hide the plugin from every later test). The registrations are then put
back, so each test is judged on its own. A session that loads no turbo-attn proves
nothing: it stops with a usage error.
"""

from __future__ import annotations

import pytest

_AT_START: dict[str, object] = {}
_TORCH_DTYPES: dict[str, object] = {}  # the plugin's cache dtypes as registered, to put them back
_DTYPES = ("tkv", "tkv-bypass")


def _registrations() -> dict[str, object]:
    """What turbo-attn registers process-wide: the TURBO_ATTN slot and its two cache dtypes."""
    from vllm.config.cache import is_plugin_cache_dtype
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    slot = AttentionBackendEnum.TURBO_ATTN
    return {
        "TURBO_ATTN": slot.get_path() if slot.is_overridden() else None,
        **{f"plugin dtype {name}": is_plugin_cache_dtype(name) for name in _DTYPES},
    }


def pytest_sessionstart(session: pytest.Session) -> None:
    from vllm.plugins import load_general_plugins
    from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE

    load_general_plugins()
    _AT_START.update(_registrations())
    _TORCH_DTYPES.update({name: STR_DTYPE_TO_TORCH_DTYPE.get(name) for name in _DTYPES})
    if _AT_START["TURBO_ATTN"] is None:
        raise pytest.UsageError(
            "load_general_plugins() registered nothing into AttentionBackendEnum.TURBO_ATTN: "
            "turbo-attn is not importable here (PYTHONPATH) or VLLM_PLUGINS excludes it"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    result = yield
    now = _registrations()
    changed = {key: (was, now[key]) for key, was in _AT_START.items() if now[key] != was}
    if changed:
        _restore()
        raise AssertionError(
            f"the test did not restore turbo-attn's registrations (was -> now): {changed}; "
            "put back for the next test"
        )
    return result


def _restore() -> None:
    from vllm.config.cache import is_plugin_cache_dtype, register_cache_dtype
    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

    register_backend(AttentionBackendEnum.TURBO_ATTN, _AT_START["TURBO_ATTN"])
    for name, torch_dtype in _TORCH_DTYPES.items():
        if _AT_START[f"plugin dtype {name}"] and not is_plugin_cache_dtype(name):
            register_cache_dtype(name, torch_dtype)
