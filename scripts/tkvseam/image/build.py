"""``make image``: the official vLLM image plus the overlay (and the plugin), built with the docker SDK.

Stages the build context from the build tree (files derived from the series) and, when
the plugin is installed, its hash-checked wheel (``wheel``) and installer; checks the base
image's revision label against the pinned commit before building; streams the build log as
it comes (low-level ``APIClient.build(decode=True)``); tags the result so that a stand-in
or no-plugin build cannot pass for the real image; labels it with its provenance (OCI
labels: source, tkv-seam commit, base image name and digest; the series digest). A failed
build is reported with the overlay's or plugin installer's own message, and the
intermediate images it made are removed. Pushing is ``push``.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..answer import Answer, plain
from ..bases.pins import Base
from .. import hints
from ..errors import DockerError, UsageError
from ..outputs import seal_output_dir
from ..bases.carried import queue_overlay_paths
from ..overlay.stage import Manifest, replace_context_dir, stage
from ..progress import QUIET, Progress

# the image's names and labels (imagename); the ``X as X`` ones are re-exported for callers of image
from .names import BASE_DIGEST_LABEL as BASE_DIGEST_LABEL
from .names import (
    REPOSITORY,
    REVISION_LABEL,
    SERIES_LABEL,
    STAND_IN_LABEL,
    image_labels,
    image_reference,
    parse_reference,
    provenance,
    registry_of,
)
from .names import SOURCE_LABEL as SOURCE_LABEL
from .names import tag_name as tag_name
from .wheel import PluginSpec, fetch_wheel, plugin_spec
from .engine import client, engine_errors
from .names import default_tag
from ..tree.seamtree import require_build_tree as check_tree

PLUGIN_INSTALLER = Path(__file__).with_name("plugin_install.py")

# Exit codes of the build's RUN step (overlay_install.py, plugin_install.py) -> the next step.
_STEP_HINTS = {
    1: "build on the official image of {base} (make image BASE={base}): its vllm/ files are the pristine ones",
    2: "the base image must hold one installed vllm package (the official image of {base} does)",
    3: "make image BASE={base} TURBO_ATTN=  (no plugin), or a base image with uv or pip "
    "(make standin BASE={base} makes one with uv)",
    4: "see the installer's message in the build log above; the context is in {context}",
    5: "build on the official image of {base}, which carries the plugin's requirements, "
    "or make image BASE={base} TURBO_ATTN=  (no plugin)",
}


@dataclass
class Layer:
    """A layer the build added on top of the base image."""

    created_by: str  # the Dockerfile step (its last 120 characters)
    size: int  # bytes


@dataclass
class Pushed:
    """What the registry holds after a push."""

    reference: str
    digest: str  # the pushed manifest's
    size: int | None
    pinned: str  # repository@digest: what to pull to get exactly this image


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
        if self.stand_in:
            out.append("stand-in base: for trying the build here, not for serving or shipping")
        if self.run_hint:
            out.append(f"run:  {self.run_hint}")
        if self.push:
            p = self.push
            out.append(f"pushed {p.reference}: digest {p.digest}  (pull {p.pinned})")
        return out


# --------------------------------------------------------------------------- build


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


class _BuildLog:
    """Follows the legacy builder's stream: the failing step's lines and the images it made."""

    _ID = re.compile(r"^ ---> ([0-9a-f]{12,64})$")
    _ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the engine colours a step's stderr

    def __init__(self, log: Callable[[str], None]):
        self.log = log
        self.step_lines: list[tuple[bool, str]] = []  # (from stderr, line)
        self.made: list[str] = []  # short ids of images this build's steps committed
        self._cached = self._from = False

    def feed(self, text: str) -> None:
        stderr = text.startswith("\x1b[91m")  # the legacy builder colours a step's stderr red
        for line in self._ANSI.sub("", text).splitlines():
            if not line.strip():
                continue
            self.log(line)
            if line.startswith("Step "):
                self.step_lines = []
                self._cached, self._from = False, " : FROM " in line
                continue
            self.step_lines.append((stderr, line))
            if line.strip() == "---> Using cache":
                self._cached = True
            m = self._ID.match(line)
            if m and not (self._cached or self._from):
                self.made.append(m.group(1))

    def tool_message(self) -> str | None:
        """What the overlay or the plugin installer said last in the failing step (its stderr first)."""
        ours = [
            (err, line)
            for err, line in self.step_lines
            if line.startswith(("tkv-seam overlay:", "tkv-seam plugin:"))
        ]
        errors = [line for err, line in ours if err]
        return (errors or [line for _, line in ours] or [None])[-1]


def _remove_dangling(api, made: list[str], before: set[str]) -> list[str]:
    """Remove the untagged images this build made (and only those); their ids."""
    removed = []
    for image_id in api.images(filters={"dangling": True}, quiet=True):
        short = image_id.split(":", 1)[-1][:12]
        if image_id in before or short not in {m[:12] for m in made}:
            continue
        try:
            api.remove_image(image_id)
            removed.append(image_id)
        except Exception:  # in use by a container: left, it is not dangling then
            pass
    return removed


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
    check_tree(tree, base)
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
    context = root / "build" / f"image-{base.name}"
    # One build of a base at a time: the context is staged afresh for each.
    with locked(root / "build" / f".image-{base.name}.lock", f"the image context {context}", progress):
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
        image_id, removed, added = _run_build(api, context, tag, base_image, labels, base, log)
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
    )


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


def _run_build(api, context: Path, tag: str, base_image: str, labels: dict, base: Base, log):
    """Build ``context`` as ``tag``: (image id, images of ours it untagged and removed, added layers).

    However the build ends without an image (a failing step, a lost engine, Ctrl-C), the
    intermediate images its steps committed are removed.
    """
    errors = engine_errors()
    stream = _BuildLog(log)
    before: set[str] | None = None
    try:
        before = set(api.images(filters={"dangling": True}, quiet=True))
        previous = _image_id(api, tag)
        image_id, error, code = None, None, None
        for chunk in api.build(
            path=str(context),
            tag=tag,
            buildargs={"BASE_IMAGE": base_image},
            labels=labels,
            rm=True,
            forcerm=True,
            decode=True,
            pull=False,
        ):
            if "stream" in chunk:
                stream.feed(chunk["stream"])
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            if "error" in chunk:
                error = chunk["error"].strip()
                code = (chunk.get("errorDetail") or {}).get("code")
        if error or not image_id:
            raise _build_failed(error, code, stream, base, context)
        removed = _drop_replaced(api, previous, image_id)
        # History is newest first; the entries above the base's own are the Dockerfile's steps.
        history = api.history(image_id)
        ours = history[: len(history) - len(api.history(base_image))]
    except BaseException as e:
        if before is not None:
            try:
                _remove_dangling(api, stream.made, before)
            except errors:
                pass  # the engine is gone: nothing can be removed now
        if isinstance(e, errors):
            raise DockerError(
                f"the Docker engine failed during the build of {tag}: {e}",
                hint=f"check the engine (its log; DOCKER_HOST), then `{hints.make('image', BASE=base.name)}`",
            ) from e
        raise
    added = [Layer(h.get("CreatedBy", "")[-120:], h.get("Size", 0)) for h in ours if h.get("Size", 0) > 0]
    return image_id, removed, added


def _image_id(api, ref: str) -> str | None:
    from docker.errors import ImageNotFound

    try:
        return api.inspect_image(ref)["Id"]
    except ImageNotFound:
        return None


def _drop_replaced(api, previous: str | None, new: str) -> list[str]:
    """The image the tag named before, now untagged: removed if tkv-seam built it (its label)."""
    if not previous or previous == new:
        return []
    info = api.inspect_image(previous)
    labels = (info.get("Config") or {}).get("Labels") or {}
    if info.get("RepoTags") or SERIES_LABEL not in labels:
        return []
    try:
        api.remove_image(previous)
    except Exception:  # a container uses it: it stays
        return []
    return [previous]


def _build_failed(
    error: str | None, code: int | None, stream: _BuildLog, base: Base, context: Path
) -> DockerError:
    """The build's failure in the overlay's or installer's own words, with the next step."""
    ours = stream.tool_message()
    hint = _STEP_HINTS.get(code) if ours and isinstance(code, int) else None
    hint = hint or "see the build log above; the context is in {context}"
    return DockerError(
        f"image build failed: {ours or error or 'no image produced'}",
        hint=hint.format(base=base.name, context=context),
    )


# --------------------------------------------------------------------------- push


def push(api, reference: str, log: Callable[[str], None] = print, progress: Progress = QUIET) -> Pushed:
    """Push ``reference`` through the engine; per-layer progress; the pushed manifest's digest."""
    repository, tag = parse_reference(reference)
    if not registry_of(repository):
        raise UsageError(
            f"{reference} names no registry host: pushing it would go to Docker Hub",
            hint="make image PUSH=1 REGISTRY=<host[:port]> REPOSITORY=<path>  (REGISTRY=docker.io for Docker Hub)",
        )
    status: dict[str, str] = {}
    sizes: dict[str, list[int]] = {}  # layer -> [bytes sent, bytes in all]
    pushed: dict = {}
    try:
        for chunk in api.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise DockerError(
                    f"push of {reference} failed: {chunk['error'].strip()}",
                    hint=f"check that {registry_of(repository)} is reachable and you may push to it "
                    f"(docker login {registry_of(repository)}), then run the same make image … PUSH=1 again "
                    "(the build comes from the cache)",
                )
            aux = chunk.get("aux") or {}
            if "Digest" in aux:
                pushed = aux
            layer, state = chunk.get("id"), chunk.get("status", "")
            detail = chunk.get("progressDetail") or {}
            if layer and state == "Pushing" and detail.get("total"):
                sizes[layer] = [min(detail.get("current", 0), detail["total"]), detail["total"]]
                done, total = (sum(col) for col in zip(*sizes.values()))
                progress.bytes(f"push {len(sizes)} layer(s)", done, total + 1)  # +1: the line ends below
            elif layer and state and status.get(layer) != state:
                if layer in sizes and state in ("Pushed", "Layer already exists"):
                    sizes[layer][0] = sizes[layer][1]
                log(f"  {layer}: {state}")
            elif state and not layer:
                log(state)
            if layer:
                status[layer] = state
        if sizes:
            total = sum(size for _, size in sizes.values())
            progress.bytes(f"push {len(sizes)} layer(s)", total, total)
    except engine_errors() as e:
        raise DockerError(
            f"the Docker engine failed while pushing {reference}: {e}",
            hint="check the engine and the registry, then run the same make image … PUSH=1 again",
        ) from e
    if not pushed.get("Digest"):
        raise DockerError(f"push of {reference}: the engine reported no digest", hint="push again")
    return Pushed(reference, pushed["Digest"], pushed.get("Size"), f"{repository}@{pushed['Digest']}")
