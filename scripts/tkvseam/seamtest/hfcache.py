"""An offline Hugging Face hub cache holding config-only snapshots.

Upstream vLLM tests name hub models (``Qwen/Qwen3-0.6B``, ``facebook/opt-125m``,
``Qwen/Qwen1.5-7B``) and placeholder names (``m``, ``dummy``, ``test``). With
``HF_HUB_OFFLINE=1`` they resolve from this cache: ``refs/main`` names a snapshot
holding only ``config.json`` (kept in tests/data/hf-configs), and ``.no_exist``
markers tell huggingface_hub that the optional files are absent (otherwise it
would try the network).
"""

from __future__ import annotations

import shutil
from pathlib import Path

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


def build(hf_home: Path, configs: Path) -> Path:
    """(Re)build ``hf_home/hub`` from ``configs/<org>--<name>/config.json``; return the hub dir."""
    hub = hf_home / "hub"
    if hub.exists():
        shutil.rmtree(hub)
    for cfg in sorted(configs.glob("*/config.json")):
        root = _repo(hub, cfg.parent.name)
        shutil.copyfile(cfg, root / "snapshots" / SNAPSHOT / "config.json")
        absent = root / ".no_exist" / SNAPSHOT
        absent.mkdir(parents=True, exist_ok=True)
        for name in ABSENT:
            (absent / name).touch()
    for name in EMPTY_REPOS:
        _repo(hub, name)
    return hub
