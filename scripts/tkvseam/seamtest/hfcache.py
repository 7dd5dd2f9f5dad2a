"""An offline Hugging Face hub cache holding config-only snapshots.

Upstream vLLM tests name hub models (``Qwen/Qwen3-0.6B``, ``facebook/opt-125m``,
``Qwen/Qwen1.5-7B``) and placeholder names (``m``, ``dummy``, ``test``). With
``HF_HUB_OFFLINE=1`` they resolve from this cache: ``refs/main`` names a snapshot
holding only ``config.json`` (kept in tests/data/hf-configs), and ``.no_exist``
markers tell huggingface_hub that the optional files are absent (otherwise it
would try the network).

The cache is placed once per content (``hf-home-<digest>``), built in a temporary
directory and renamed into place, and never rebuilt in place: lanes of several bases
running at once share it, and a run killed while building leaves only its temporary
directory (``.hf-home-*``), which the next build removes. A home it did not place (a file,
a symlink, a directory without ``hub/``) is refused, never used or replaced.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import RefusedError
from ..fsutil import lexists
from ..hints import shell

SNAPSHOT = "0" * 40
EMPTY_REPOS = ("m", "dummy", "test")
ABSENT = (
    "hf_quant_config.json generation_config.json params.json preprocessor_config.json "
    "processor_config.json tokenizer_config.json tokenizer.json special_tokens_map.json "
    "chat_template.json chat_template.jinja added_tokens.json vocab.json merges.txt "
    "model.safetensors.index.json adapter_config.json quant_config.json modules.json "
    "config_sentence_transformers.json sentence_bert_config.json video_preprocessor_config.json "
    "tokenizer.model tekken.json model_index.json audio_processor_config.json "
    "feature_extractor_config.json image_processor_config.json"
).split()


def _repo(hub: Path, repo_dir: str) -> Path:
    root = hub / f"models--{repo_dir}"
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(SNAPSHOT)
    snap = root / "snapshots" / SNAPSHOT
    snap.mkdir(parents=True, exist_ok=True)
    return root


def _digest(configs: list[Path]) -> str:
    h = hashlib.sha256(SNAPSHOT.encode() + repr((EMPTY_REPOS, ABSENT)).encode())
    for cfg in configs:
        h.update(cfg.parent.name.encode() + b"\0" + cfg.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _fill(hub: Path, configs: list[Path]) -> None:
    for cfg in configs:
        root = _repo(hub, cfg.parent.name)
        shutil.copyfile(cfg, root / "snapshots" / SNAPSHOT / "config.json")
        absent = root / ".no_exist" / SNAPSHOT
        absent.mkdir(parents=True, exist_ok=True)
        for name in ABSENT:
            (absent / name).touch()
    for name in EMPTY_REPOS:
        _repo(hub, name)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _refuse_foreign(home: Path) -> None:
    """A home at the name tkv-seam places that it did not place: refused, naming it."""
    if home.is_symlink():
        what = f"a symlink (to {os.readlink(home)})"
    elif not home.is_dir():
        what = "a file"
    else:
        what = "a directory without hub/"
    raise RefusedError(
        f"{home} is {what}, not an offline HF cache tkv-seam placed; it was neither used nor changed",
        hint=f"{shell('mv', home, f'{home}.mine')}, then run the command again",
    )


def build(parent: Path, configs: Path) -> Path:
    """The HF_HOME holding a hub built from ``configs/<org>--<name>/config.json``, below ``parent``."""
    found = sorted(configs.glob("*/config.json"))
    home = parent / f"hf-home-{_digest(found)}"
    if lexists(home) and (home.is_symlink() or not (home / "hub").is_dir()):
        _refuse_foreign(home)
    if (home / "hub").is_dir():
        return home
    parent.mkdir(parents=True, exist_ok=True)
    for stale in parent.glob(".hf-home-*-*"):  # a build killed before its rename
        if stale.is_dir() and not stale.is_symlink() and not _alive(stale.name.split("-")[2]):
            shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".hf-home-{os.getpid()}-"))
    try:
        _fill(tmp / "hub", found)
        tmp.rename(home)
    except OSError:  # another run placed the same content first (or the fill failed)
        shutil.rmtree(tmp, ignore_errors=True)
        if lexists(home) and (home.is_symlink() or not (home / "hub").is_dir()):
            _refuse_foreign(home)
        if not (home / "hub").is_dir():
            raise
    return home
