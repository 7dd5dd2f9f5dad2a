"""Shared helpers for the real-client tests: turbo-attn (``tkv``) loaded by vLLM in a subprocess.

Every test that lets vLLM load the plugin runs its body in a fresh interpreter
(``run_vllm_script``): plugin registration patches vLLM process-wide (backend
slot, cache dtypes, ``Attention.get_kv_cache_spec``, the bypass flag), so it must
never happen inside the pytest process. Checks whose setup is the same (plugin
loaded, default environment) may share one interpreter (``run_vllm_scripts``:
one script per check, in a fixed order, each reporting on its own); a check
that changes process-wide state (``tkv-bypass``) or needs another environment
gets its own.

The plugin comes from ``TKV_SEAM_PLUGIN_PATH``: a directory that
``pip install --no-deps --target DIR turbo-attn==0.70.1`` filled. It is prepended
to ``PYTHONPATH`` of the subprocess; whatever ``PYTHONPATH`` the runner set (for
example a patched vLLM tree) is kept behind it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..conftest import tiny_llama

PLUGIN_PATH_ENV = "TKV_SEAM_PLUGIN_PATH"
RESULT_KEY = "tkv_seam_result"
SUBPROCESS_TIMEOUT_S = 900

#: The class path turbo-attn registers into the ``TURBO_ATTN`` slot.
TKV_BACKEND_PATH = "tkv.integrations.vllm.backend_class.TkvAttentionBackend"

#: A uniform width the plugin accepts (integer 2..8); sizes its codec specs.
TKV_BITS = "4"

#: Tiny Llama (tests/data/tiny-llama.json) with head_dim 64: tkv has a baked codebook for it,
#: so building the codec impl of a layer needs no scipy.
TINY_MODEL = tiny_llama(hidden_size=256, intermediate_size=512, head_dim=64)

# Prepended to every script: ``emit`` prints the one JSON result line the test reads.
_PRELUDE = f"""\
import json as _json


def emit(**result):
    print(_json.dumps({{{RESULT_KEY!r}: result}}), flush=True)


"""


def plugin_path() -> Path:
    """The turbo-attn install dir; a missing or wrong setting fails the test (never skips)."""
    raw = os.environ.get(PLUGIN_PATH_ENV, "").strip()
    if not raw:
        pytest.fail(
            f"{PLUGIN_PATH_ENV} is unset: point it at the directory turbo-attn==0.70.1 was installed "
            "into with `pip install --no-deps --target DIR turbo-attn==0.70.1`.",
            pytrace=False,
        )
    path = Path(raw).resolve()
    if not (path / "tkv" / "integrations" / "vllm" / "plugin.py").is_file():
        pytest.fail(
            f"{PLUGIN_PATH_ENV}={raw} does not hold the turbo-attn package "
            "(tkv/integrations/vllm/plugin.py is missing).",
            pytrace=False,
        )
    return path


def write_tiny_model(directory: Path, **overrides) -> Path:
    """A local model dir holding only ``config.json`` (enough for ``create_engine_config``)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({**TINY_MODEL, **overrides}, indent=1))
    return directory


def vllm_env(tmp_path: Path, *, vllm_plugins: str | None = None) -> dict[str, str]:
    """Environment of one vLLM subprocess: CPU, offline, fresh caches, plugin importable.

    ``vllm_plugins=None`` removes ``VLLM_PLUGINS`` (unset means: load every plugin);
    a string sets it (``""`` is an allowlist matching nothing: no plugin loads).
    """
    plugin = plugin_path()
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True, exist_ok=True)
    tkv_cache = tmp_path / "tkv-cache"
    tkv_cache.mkdir(exist_ok=True)
    env = dict(os.environ)
    inherited = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(plugin), inherited) if p)
    env.update(
        {
            "VLLM_TARGET_DEVICE": "cpu",
            "HF_HUB_OFFLINE": "1",
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "VLLM_CACHE_ROOT": str(home / ".cache" / "vllm"),
            "TKV_BITS": TKV_BITS,
            "TKV_CACHE_DIR": str(tkv_cache),
            "TKV_CALIBRATION": "none",
            # Importing humming (vLLM's quantization stack imports it, and so does the
            # plugin) starts two background CUDA builds per process, which outlive it
            # and only fail on CPU; they would double the CPU load of every test.
            "HUMMING_DISABLE_PARALLEL_BUILD": "1",
        }
    )
    if vllm_plugins is None:
        env.pop("VLLM_PLUGINS", None)
    else:
        env["VLLM_PLUGINS"] = vllm_plugins
    return env


# Runs several check scripts in one interpreter, in order: each with its own argv and
# globals, its own ``emit``; an exception in one is reported as that part's "error".
_PARTS = """
import sys
import traceback

_results = {}
for _name, _source, _args in _json.loads(sys.argv[1]):
    _got = []
    sys.argv = [sys.argv[0], *_args]
    try:
        exec(compile(_source, f"<{_name}>", "exec"), {"__name__": "__main__", "emit": lambda **r: _got.append(r)})
        _results[_name] = _got[0] if len(_got) == 1 else {"error": f"{len(_got)} result lines"}
    except BaseException:
        _results[_name] = {"error": traceback.format_exc()}
emit(**_results)
"""


def run_vllm_scripts(parts: list[tuple[str, str, list[str]]], tmp_path: Path) -> dict[str, dict]:
    """Run ``(name, script, args)`` parts in one fresh interpreter, in order; ``{name: result}``.

    A part that raised has ``{"error": traceback}`` as its result (see ``part``).
    """
    payload = json.dumps([(name, textwrap.dedent(script), list(args)) for name, script, args in parts])
    return run_vllm_script(_PARTS, tmp_path, payload)


def part(results: dict[str, dict], name: str) -> dict:
    """One part's result; fails the test with the part's traceback when it raised."""
    result = results[name]
    if set(result) == {"error"}:
        pytest.fail(f"{name} raised in the vLLM subprocess:\n{result['error']}", pytrace=False)
    return result


def run_vllm_script(script: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run ``script`` in a fresh interpreter; return the dict it passed to ``emit(...)``.

    The script gets ``sys.argv[1:] == args``. A non-zero exit or a missing result
    line fails the test with the tail of the subprocess output.
    """
    env = vllm_env(tmp_path) if env is None else env
    work = tmp_path / "cwd"
    work.mkdir(exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(script), *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
    )
    results = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and RESULT_KEY in obj:
            results.append(obj[RESULT_KEY])
    if proc.returncode != 0 or len(results) != 1:
        tail = "\n".join((proc.stdout + "\n" + proc.stderr).strip().splitlines()[-40:])
        pytest.fail(
            f"vLLM subprocess exited {proc.returncode} with {len(results)} result line(s); "
            f"PYTHONPATH={env.get('PYTHONPATH', '')}\n--- output tail ---\n{tail}",
            pytrace=False,
        )
    return results[0]
