"""A base's CPU test venv: the vLLM release and CPU torch of its lock, and its rules' stand-ins.

``make venv-vllm BASE=<base>`` (``tkv-seam venv-vllm``) builds ``.venv-vllm-<base>`` from
``ci/lock-cpu-<base>.txt`` with uv (``--no-deps``: the lock is the whole set), then adds what
the base's rules (``["<base>".seam.cpu]``) ask for: the Triton stand-in
(``seamtest/triton_standin``) where they say ``triton = "stand-in"``. ``--path DIR`` builds the
same venv elsewhere, for a user's own overlay (README, "The overlay in your own venv").

A venv is rebuilt only when what it is built from changed: its record (``tkv-seam-venv.json``
inside it, written last) holds the lock's and the stand-in's digests and the interpreter asked
for. A venv with no record is replaced only where the tool owns the path (the project's
``.venv-vllm-<base>``); a ``--path`` that holds anything else is refused. One build at a time
per venv (a lock under ``build/locks/``); beside that lock, while a build removes and makes the
venv, a ``.building`` mark: a build killed half-way (its record gone, or not yet written) leaves
the path the next build's to take up. ``check`` runs the canary: import vLLM and build the
engine config of a tiny local model, on stock, the way every lane starts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from .. import hints, layout
from ..answer import Answer
from ..bases.pins import TRITON_STAND_IN, Base, cpu_rules
from ..errors import RefusedError, SeamError
from ..fsutil import atomic_write, sha256_of
from ..lock import locked, venv_locked
from ..progress import QUIET, Progress
from ..tree.state import refuse_in_git_dir
from ..overlay.install import STATE as OVERLAY_STATE
from . import triton_standin

RECORD = "tkv-seam-venv.json"
MAKE_MARKER = ".done"  # what the Makefile's venv rule wrote before the tool built venvs
CANARY = """\
import json, os, sys, tempfile
os.environ.update(VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", VLLM_PLUGINS="")
model = tempfile.mkdtemp(prefix="tkv-seam-canary-")
with open(os.path.join(model, "config.json"), "w") as f:
    json.dump({CONFIG}, f)
from vllm.engine.arg_utils import EngineArgs
EngineArgs(model=model, skip_tokenizer_init=True).create_engine_config()
print("canary: ok")
"""
TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_hidden_layers": 2,
    "vocab_size": 128,
    "max_position_embeddings": 256,
    "torch_dtype": "bfloat16",
}


class VenvStatus(StrEnum):
    BUILT = "built"
    UP_TO_DATE = "up to date"


@dataclass
class TestVenv(Answer):
    base: str
    path: str
    status: VenvStatus
    lock: str
    triton: str  # "stand-in" or ""
    canary: str = ""  # "ok", the failure, or "" (not run)

    def lines(self) -> list[str]:
        extra = "; Triton: stand-in (docs/tests.md, 'Triton on CPU')" if self.triton else ""
        out = [f"{self.path}: {self.status} from {self.lock}{extra}"]
        if self.canary:
            out.append(f"canary (import vLLM, a tiny model's engine config): {self.canary}")
        return out


def _wanted(lock: Path, triton: str, python: str) -> dict:
    standin = sha256_of(Path(triton_standin.__file__)) if triton == TRITON_STAND_IN else ""
    return {"lock": sha256_of(lock), "triton_standin": standin, "python": python}


def _record(venv: Path) -> dict | None:
    try:
        data = json.loads((venv / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _built_from(venv: Path) -> dict | None:
    """What the venv's record says it was built from (its canary's answer left out)."""
    data = _record(venv)
    return None if data is None else {k: v for k, v in data.items() if k != "canary"}


def built_by_tool(venv: Path) -> bool:
    """``venv`` carries the record of a build by this module (or by the Makefile's rule before it)."""
    return _record(venv) is not None or (venv / MAKE_MARKER).is_file()


def _owned(venv: Path, default: bool) -> bool:
    """The tool may replace ``venv``: its record is there, or it is the project's own venv path
    (``.venv-vllm-<base>``, made by the Makefile's rule before), or it does not exist."""
    if not venv.exists() and not venv.is_symlink():
        return True
    if venv.is_symlink() or not venv.is_dir():
        return False
    return _record(venv) is not None or (
        default and ((venv / MAKE_MARKER).exists() or not any(venv.iterdir()))
    )


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def install_triton_standin(python: Path) -> Path:
    """Copy the stand-in into the venv's site-packages with its ``.pth`` line; the file written."""
    site = site_packages(python)
    target = site / f"{triton_standin.MODULE}.py"
    shutil.copyfile(triton_standin.__file__, target)
    (site / triton_standin.PTH).write_text(f"import {triton_standin.MODULE}\n")
    return target


def uv_executable() -> str:
    """``$UV``, else the uv beside this Python (``make venv`` installs it), else ``uv`` on PATH."""
    for candidate in (os.environ.get("UV"), str(Path(sys.executable).with_name("uv")), shutil.which("uv")):
        if candidate and Path(candidate).is_file():
            return candidate
    raise SeamError("no uv executable found", hint="make venv   (installs uv into .venv)")


def _run(args: list[str], what: str, hint: str) -> None:
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        said = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        raise SeamError(f"{what} failed (exit {proc.returncode}): " + " | ".join(said[-6:]), hint=hint)


def canary(python: Path, timeout: float = 600) -> str:
    """ "ok", or the last lines of what stock vLLM says when the venv starts it as every lane does."""
    script = CANARY.replace("{CONFIG}", repr(TINY_CONFIG))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VLLM_PLUGINS")}
    env.setdefault("HF_HOME", str(Path(python).parent.parent / "tkv-seam-hf"))
    try:
        proc = subprocess.run(
            [str(python), "-c", script], capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return f"no answer in {timeout:.0f} s"
    if proc.returncode == 0 and "canary: ok" in proc.stdout:
        return "ok"
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    return " | ".join(lines[-3:]) or f"exit {proc.returncode}, nothing said"


def build(
    root: Path,
    base: Base,
    bases: dict[str, Base],
    path: Path | None = None,
    python: str = "python3.11",
    find_links: list[str] | None = None,
    check: bool = False,
    progress: Progress = QUIET,
    no_index: bool = False,
) -> TestVenv:
    """Build (or keep, when up to date) ``base``'s CPU test venv; see the module docstring."""
    default = path is None
    venv = Path(os.path.abspath(root / base.test_venv if default else path))
    refuse_in_git_dir(venv, "--path")
    lock = root / base.cpu_lock
    make = hints.make("venv-vllm", BASE=base.name)
    if not lock.is_file():
        raise SeamError(
            f"{base.name}: no CPU lock {base.cpu_lock} to build its test venv from",
            hint=hints.make("lock-cpu", BASE=base.name),
        )
    rules, _ = cpu_rules(bases, base)
    links = os.environ.get("PIP_FIND_LINKS", "").split() if find_links is None else find_links
    shown = layout.shown(venv, root)
    with locked(layout.venv_lock(root, venv), f"the test venv {shown}", progress):
        wanted = _wanted(lock, rules.triton, python)
        status = VenvStatus.UP_TO_DATE
        building = layout.venv_lock(root, venv).with_suffix(".building")  # a build killed half-way
        if _built_from(venv) != wanted:
            if not (_owned(venv, default) or (building.is_file() and not venv.is_symlink())):
                what = f"not a venv tkv-seam built (no {RECORD} in it)"
                if venv.is_symlink():  # what it names is never rebuilt through it
                    what = f"a symlink (to {os.path.realpath(venv)}), not a venv tkv-seam built there"
                raise RefusedError(
                    f"{shown} exists and is {what}; nothing was changed",
                    hint=f"`{hints.shell('mv', shown, f'{shown}.mine')}` (kept as it is), then {make}"
                    if default
                    else f"give another --path (a directory that does not exist yet), or remove {hints.quote(shown)} yourself",
                )
            progress.step(f"{shown}: uv venv + {base.cpu_lock} (--no-deps)")
            atomic_write(building, f"{venv}\n")
            if venv.exists():
                with venv_locked(venv, progress):  # never under a lane running its tests there
                    shutil.rmtree(venv)
            uv = uv_executable()
            _run(
                [uv, "venv", "-q", "-p", python, str(venv)],
                f"uv venv {shown}",
                hint=f"{make} PYTHON=<python3.11>",
            )
            (venv / RECORD).write_text("{}\n")  # the tool's from here on; complete once the record is written
            install = [uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python"), "--no-deps"]
            install += [word for link in links for word in ("--find-links", link)]
            install += ["--no-index"] if no_index else []
            _run(
                [*install, "-r", str(lock)],
                f"uv pip install -r {base.cpu_lock}",
                hint=f"check network access to the index (and PIP_FIND_LINKS for the CPU torch), then {make}",
            )
            if rules.triton == TRITON_STAND_IN:
                install_triton_standin(venv / "bin" / "python")
            atomic_write(venv / RECORD, json.dumps(wanted, indent=1) + "\n")
            building.unlink()
            status = VenvStatus.BUILT
        result = TestVenv(base.name, shown, status, base.cpu_lock, rules.triton)
        if check:
            result.canary = _canary(venv, wanted, shown, progress)
    return result


def _canary(venv: Path, wanted: dict, shown: str, progress: Progress) -> str:
    """The canary's answer for this venv as built: a pass is recorded once it ran on the stock venv
    (the record names what the venv was built from, so a rebuild runs it again); a failure is run
    again by the next check (an environment variable, a timeout on a loaded machine: nothing a
    rebuild of an up-to-date venv would change)."""
    if (_record(venv) or {}).get("canary") == "ok":
        return "ok"
    if overlay_installed(venv):
        return "not run: an overlay is installed (make overlay-restore BASE=<base>), so vLLM is not stock"
    progress.step(f"{shown}: canary (import vLLM, a tiny model's engine config, stock)")
    said = canary(venv / "bin" / "python")
    if said == "ok":
        atomic_write(venv / RECORD, json.dumps({**wanted, "canary": said}, indent=1) + "\n")
    return said


def overlay_installed(venv: Path) -> bool:
    """An overlay's record in the venv's vllm package names a file it replaced."""
    for state in venv.glob(f"lib/python*/site-packages/vllm/{OVERLAY_STATE}"):
        try:
            files = json.loads(state.read_text()).get("files", {})
        except (OSError, ValueError, AttributeError):
            return True  # unreadable: do not take the venv for stock
        if files:
            return True
    return False
