"""``make image``: the official vLLM image plus the overlay (and the plugin), built with the docker SDK.

Stages the build context from the build tree (files derived from the series) and, when
the plugin is installed, its hash-checked wheel (``wheel``) and installer; checks the base
image's revision label against the pinned commit before building; streams the build log as
it comes (low-level ``APIClient.build(decode=True)``); tags the result so that a stand-in
or no-plugin build cannot pass for the real image; labels it with its provenance (OCI
labels: source, tkv-seam commit, base image name and digest; the series digest). The run
in the engine (the log followed, a failure in the overlay's or plugin installer's own words,
the intermediate images of a failed build removed) and pushing are ``engine``'s.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import hints, layout
from ..answer import Answer, plain
from ..bases.carried import queue_overlay_paths
from ..bases.pins import Base
from ..errors import DockerError, UsageError
from ..outputs import seal_output_dir
from ..overlay.stage import Manifest, replace_context_dir, stage
from ..progress import QUIET, Progress
from ..tree.seamtree import SeamTree
from ..tree.state import Kind
from .engine import Layer, Pushed, client, engine_errors, run_build

# the image's names and labels (names); the ``X as X`` ones are re-exported for callers of image
from .names import BASE_DIGEST_LABEL as BASE_DIGEST_LABEL
from .names import (
    REPOSITORY,
    REVISION_LABEL,
    STAND_IN_LABEL,
    default_tag,
    image_labels,
    image_reference,
    parse_reference,
    provenance,
)
from .names import SOURCE_LABEL as SOURCE_LABEL
from .names import tag_name as tag_name
from .wheel import PluginSpec, fetch_wheel, plugin_spec

PLUGIN_INSTALLER = Path(__file__).with_name("plugin_install.py")


@dataclass
class ImageResult(Answer):
    tag: str
    image_id: str
    base_image: str
    base_revision: str
    series_digest: str
    stand_in: bool = False
    plugin: str = ""  # the plugin requirement installed ("" none)
    labels: dict[str, str] = field(default_factory=dict)
    added_layers: list[Layer] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # images of ours this build left untagged, removed
    push: Pushed | None = None  # set once pushed
    log: str = ""  # the build's full log (project-relative)

    @property
    def added_bytes(self) -> int:
        return sum(layer.size for layer in self.added_layers)

    @property
    def run_hint(self) -> str | None:
        """How to serve the image: only a real base with the plugin can."""
        if not self.plugin or self.stand_in:
            return None
        return f"docker run --gpus all -p 8000:8000 {self.tag} <model> --kv-cache-dtype tkv"

    def to_json(self) -> dict:
        return {**plain(self), "added_bytes": self.added_bytes, "run": self.run_hint}

    def lines(self) -> list[str]:
        out = [f"layer {layer.size / 1e6:8.2f} MB  {layer.created_by}" for layer in self.added_layers]
        out += [
            f"removed {removed[:19]}: the image this tag named before (built by tkv-seam, now untagged)"
            for removed in self.removed
        ]
        out.append(
            f"built {self.tag} ({self.image_id[:19]}) on {self.base_image} (revision {self.base_revision}); "
            f"added {self.added_bytes / 1e6:.2f} MB"
        )
        out.append(
            f"plugin: {self.plugin} (hash-checked)" if self.plugin else "plugin: none (TURBO_ATTN= given)"
        )
        if self.log:
            out.append(f"build log: {self.log}")
        if self.stand_in:
            out.append("stand-in base: for trying the build here, not for serving or shipping")
        if self.run_hint:
            out.append(f"run:  {self.run_hint}")
        if self.push:
            p = self.push
            out.append(f"pushed {p.reference}: digest {p.digest}  (pull {p.pinned})")
        return out


# --------------------------------------------------------------------------- the context


def stage_context(root: Path, tree: Path, dest: Path, base: Base) -> Manifest:
    """Dockerfile + tkv-seam/{manifest.json, overlay/, overlay_install.py} in ``dest``."""
    replace_context_dir(dest)  # created, or a previous context emptied; anything else refused
    shutil.copyfile(root / "Dockerfile", dest / "Dockerfile")
    return stage(tree, queue_overlay_paths(root, base), dest / "tkv-seam")


def stage_plugin(context: Path, spec: PluginSpec, wheel: Path) -> None:
    """tkv-seam/plugin/{requirements.txt, <wheel>} and tkv-seam/plugin_install.py in the context."""
    out = context / "tkv-seam" / "plugin"
    out.mkdir(parents=True)
    (out / "requirements.txt").write_text(spec.requirements_txt())
    shutil.copyfile(wheel, out / wheel.name)
    shutil.copyfile(PLUGIN_INSTALLER, context / "tkv-seam" / "plugin_install.py")
    seal_output_dir(context / "tkv-seam")  # the stage's record covers the plugin's files too


def check_base_image(api, image: str, base: Base, stand_in: bool) -> tuple[str, dict, bool]:
    """The base image's revision label, its inspect data, and whether it is a stand-in.

    Refused unless the revision starts with the pinned prefix and, where ``bases.toml`` pins the
    official image's index digest (``image.index_digest_prefix``), the engine pulled the image
    by a digest starting with it (its ``RepoDigests``: a copy built or loaded here has none);
    or ``stand_in`` accepts a local stand-in (a tkv-seam stand-in is one even when its revision
    label matches).
    """
    from docker.errors import ImageNotFound

    standin = f"`{hints.make('standin', BASE=base.name)}`, then `{hints.make('image', BASE=base.name, STAND_IN='1')}`"
    try:
        info = api.inspect_image(image)
    except ImageNotFound:
        hint = (
            f"make standin BASE={base.name}  (then make image BASE={base.name} STAND_IN=1)"
            if stand_in
            else f"`docker pull {image}` (needs its registry); to try the build without it, on a local "
            f"stand-in: {standin}"
        )
        raise DockerError(f"base image {image} is not present in the Docker engine", hint=hint) from None
    labels = (info.get("Config") or {}).get("Labels") or {}
    revision = labels.get(REVISION_LABEL, "")
    marked = labels.get(STAND_IN_LABEL) == "true"
    pinned = base.image.index_digest_prefix
    digests = [d.split("@", 1)[1] for d in info.get("RepoDigests") or [] if "@" in d]
    official = not pinned or any(d.startswith(pinned) for d in digests)
    if revision.startswith(base.image.revision_prefix) and not marked and official:
        return revision, info, False
    if stand_in:
        return revision or "stand-in", info, True
    if marked:
        what = f"is a tkv-seam stand-in ({STAND_IN_LABEL}=true)"
    elif not revision.startswith(base.image.revision_prefix):
        what = f"has {REVISION_LABEL}={revision or '(none)'}; {base.name} pins {base.image.revision_prefix}"
    else:
        found = ", ".join(digests) if digests else "none (an image built or loaded here, not pulled)"
        what = (
            f"is not the official image {base.image.name}: {base.name} pins its index digest {pinned}…, "
            f"the engine's registry digests of it: {found}"
        )
        raise DockerError(
            f"base image {image} {what}",
            hint=f"`docker pull {base.image.name}` (the official image, by its registry), then "
            f"`{hints.make('image', BASE=base.name)}`; to try the build on this image: "
            f"`{hints.make('image', BASE=base.name, BASE_IMAGE=image, STAND_IN='1')}`",
        )
    raise DockerError(
        f"base image {image} {what}",
        hint=f"use the official image of this base, or for a stand-in `{hints.make('image', BASE=base.name, STAND_IN='1')}`",
    )


# --------------------------------------------------------------------------- build


def build(
    root: Path,
    tree: Path,
    base: Base,
    base_image: str | None = None,
    turbo_attn: str | None = None,
    stand_in: bool = False,
    tag: str | None = None,
    log: Callable[[str], None] = print,
    *,
    cache: Path | None = None,
    registry: str = "",
    repository: str = REPOSITORY,
    source: str | None = None,
    progress: Progress = QUIET,
) -> ImageResult:
    """Build the overlay image of ``base`` from the build tree ``tree``.

    ``turbo_attn``: None installs the base's plugin pin, "" no plugin, else a requirement
    (``name==version [--hash=sha256:…]``). ``tag`` names the whole reference; without it,
    ``[registry/]repository:<tag_name>``.
    """
    from ..bases.pins import default_cache_dir
    from ..lock import locked

    pin = base.seam.plugin
    text = pin.requirement if turbo_attn is None else turbo_attn.strip()
    plugin = plugin_spec(text, pin, base.name) if text else None
    if tag is not None:
        if registry or repository != REPOSITORY:
            raise UsageError(
                "--tag names the whole image reference; give either --tag or --registry/--repository",
                hint=f"make image BASE={base.name} REGISTRY=<host[:port]> REPOSITORY=<path>",
            )
        parse_reference(tag)
    else:
        parse_reference(f"{registry.rstrip('/')}/{repository}:x" if registry else f"{repository}:x")
    SeamTree(tree, root).require(Kind.APPLY, base.name, "the image")
    api = client()
    if not base_image:
        # Pinned by digest once bases.toml records the full index digest (only a prefix is known today).
        pinned = f"{base.image.name}@{base.image.digest}" if base.image.digest else base.image.name
        base_image = default_tag(base.name) if stand_in else pinned
    try:
        revision, base_info, on_stand_in = check_base_image(api, base_image, base, stand_in)
    except engine_errors() as e:
        raise DockerError(
            f"the Docker engine failed on {base_image}: {e}",
            hint="check the engine (its log; DOCKER_HOST), then run again",
        ) from e
    if tag is not None:
        _check_own_tag(tag, on_stand_in, plugin, base)
    wheel = fetch_wheel(plugin, cache or default_cache_dir(), progress=progress) if plugin else None
    context = layout.image_context(root, base.name)
    # One build of a base at a time: the context is staged afresh for each.
    with locked(layout.lock_of(context), f"the image context {context}", progress):
        manifest = stage_context(root, tree, context, base)
        if plugin and wheel:
            stage_plugin(context, plugin, wheel)
        digest = manifest.series_digest
        tag = tag or image_reference(base, digest, on_stand_in, plugin, registry, repository)
        labels = image_labels(
            base, base_image, base_info, revision, digest, plugin, on_stand_in, *provenance(root, source)
        )
        if not labels[REVISION_LABEL]:
            log("note: the project is not a git checkout: the image's tkv-seam commit label is empty")
        log_file = layout.image_log(root, base.name)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)  # never a link
        with open(fd, "w", encoding="utf-8") as kept:
            image_id, removed, added = run_build(
                api, context, tag, base_image, labels, base, build_progress(kept, progress), log_file
            )
    return ImageResult(
        tag,
        image_id,
        base_image,
        revision,
        digest,
        stand_in=on_stand_in,
        plugin=plugin.requirement if plugin else "",
        labels=labels,
        added_layers=added,
        removed=removed,
        log=layout.shown(log_file, root),
    )


_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")


def build_progress(kept, progress: Progress) -> Callable[[str], None]:
    """Each line of the build's stream into ``kept`` (the full log); one progress line a
    Dockerfile step (``image step 3/9: COPY overlay/ /tmp/overlay/``) but its LABEL steps, not every
    line of it."""

    def log(line: str) -> None:
        kept.write(line + "\n")
        kept.flush()
        m = _STEP.match(line)
        if m and not m.group(3).startswith("LABEL "):  # the labels: metadata steps, done in a blink
            progress.step(f"image step {m.group(1)}/{m.group(2)}: {m.group(3)[:80]}")

    return log


def _check_own_tag(tag: str, stand_in: bool, plugin: PluginSpec | None, base: Base) -> None:
    """A tag given by hand still says what the image is not: ``standin``, ``noplugin``."""
    lowered = tag.lower()
    missing = [
        word
        for word, needed in (("standin", stand_in), ("noplugin", plugin is None))
        if needed and word not in lowered.replace("-", "")
    ]
    if missing:
        raise UsageError(
            f"tag {tag!r} could pass for the real image: it is "
            + " and ".join(
                {"standin": "built on a stand-in", "noplugin": "without the plugin"}[w] for w in missing
            )
            + f", so the tag must say {' and '.join(missing)}",
            hint=f"`{hints.make('image', BASE=base.name, IMAGE_TAG=f'{tag}-' + '-'.join(missing))}` (with your other "
            "variables), or leave IMAGE_TAG unset",
        )
