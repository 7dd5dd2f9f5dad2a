"""``make image``: the official vLLM image plus the overlay, built with the docker SDK.

Stages the build context from the build tree (files derived from the series),
checks the base image's revision label against the pinned commit before building,
streams the build log as it comes (low-level ``APIClient.build(decode=True)``),
tags the result and reports the size of the layers the Dockerfile added.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from . import __version__
from .bases import Base
from .errors import DockerError
from .overlay import queue_overlay_paths, replace_context_dir, stage

REVISION_LABEL = "org.opencontainers.image.revision"
STAND_IN_LABEL = "io.tkv-seam.stand-in"
REPOSITORY = "tkv-seam/vllm-openai"


@dataclass
class ImageResult:
    tag: str
    image_id: str
    base_image: str
    base_revision: str
    series_digest: str
    added_layers: list[dict] = field(default_factory=list)

    @property
    def added_bytes(self) -> int:
        return sum(layer["size"] for layer in self.added_layers)

    def to_json(self) -> dict:
        return {**asdict(self), "added_bytes": self.added_bytes}


def client():
    """A docker API client, or one clear DockerError when no engine answers."""
    import docker
    from docker.errors import DockerException

    try:
        api = docker.APIClient(**docker.utils.kwargs_from_env())
        api.ping()
    except DockerException as e:
        where = os.environ.get("DOCKER_HOST", "the default socket")
        raise DockerError(
            f"no Docker engine reachable at {where}: start dockerd or set DOCKER_HOST "
            "(README.md, 'Docker image')"
        ) from e
    return api


def stage_context(root: Path, tree: Path, dest: Path, base: Base) -> dict:
    """Dockerfile + tkv-seam/{manifest.json, overlay/, overlay_install.py} in ``dest``."""
    replace_context_dir(dest)  # created, or a previous context emptied; anything else refused
    shutil.copyfile(root / "Dockerfile", dest / "Dockerfile")
    return stage(tree, queue_overlay_paths(root, base), dest / "tkv-seam")


def check_base_image(api, image: str, base: Base, stand_in: bool) -> str:
    """The base image's revision label, refused unless it starts with the pinned prefix."""
    from docker.errors import ImageNotFound

    try:
        info = api.inspect_image(image)
    except ImageNotFound:
        raise DockerError(
            f"base image {image} is not present in the Docker engine",
            hint=f"docker pull {image} (needs a registry), or pass --base-image for a local image",
        ) from None
    labels = (info.get("Config") or {}).get("Labels") or {}
    revision = labels.get(REVISION_LABEL, "")
    if revision.startswith(base.image.revision_prefix):
        return revision
    if stand_in:
        return revision or "stand-in"
    raise DockerError(
        f"base image {image} has {REVISION_LABEL}={revision or '(none)'}; "
        f"{base.name} pins {base.image.revision_prefix}",
        hint="use the official image of this base, or --stand-in for a local stand-in base",
    )


def build(
    root: Path,
    tree: Path,
    base: Base,
    base_image: str | None = None,
    turbo_attn: str | None = None,
    stand_in: bool = False,
    tag: str | None = None,
    log: Callable[[str], None] = print,
) -> ImageResult:
    if turbo_attn is None:  # the base's pin (bases.toml); "" installs no plugin
        turbo_attn = base.seam.plugin.requirement
    api = client()
    # Pinned by digest once bases.toml records the full index digest (only a prefix is known today).
    base_image = base_image or (
        f"{base.image.name}@{base.image.digest}" if base.image.digest else base.image.name
    )
    revision = check_base_image(api, base_image, base, stand_in)
    context = root / "build" / f"image-{base.name}"
    manifest = stage_context(root, tree, context, base)
    digest = manifest["series_digest"]
    tag = tag or f"{REPOSITORY}:{base.name}-{digest[:12]}"
    buildargs = {
        "BASE_IMAGE": base_image,
        "TURBO_ATTN": turbo_attn,
        "BASE_REVISION": revision,
        "SEAM_DIGEST": digest,
        "SEAM_VERSION": __version__,
    }
    image_id = None
    error = None
    for chunk in api.build(
        path=str(context), tag=tag, buildargs=buildargs, rm=True, forcerm=True, decode=True, pull=False
    ):
        if "stream" in chunk:
            for line in chunk["stream"].splitlines():
                if line.strip():
                    log(line)
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
        if "error" in chunk:
            error = chunk["error"].strip()
    if error or not image_id:
        raise DockerError(
            f"image build failed: {error or 'no image produced'}",
            hint=f"see the build log above; context in {context}",
        )
    # History is newest first; the entries above the base's own are the Dockerfile's steps.
    history = api.history(image_id)
    ours = history[: len(history) - len(api.history(base_image))]
    added = [
        {"created_by": h.get("CreatedBy", "")[-120:], "size": h.get("Size", 0)}
        for h in ours
        if h.get("Size", 0) > 0
    ]
    return ImageResult(tag, image_id, base_image, revision, digest, added)
