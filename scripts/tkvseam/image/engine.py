"""The Docker engine through the SDK: a client that answers, what a failing engine raises, a build's
run (its log followed, the failing step told in the overlay's or plugin installer's own words, the
intermediate images of a build that made no image removed) and a push."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import hints
from ..bases.pins import Base
from ..errors import DockerError, UsageError
from ..progress import QUIET, Progress
from .names import SERIES_LABEL, parse_reference, registry_of

# Exit codes of the build's RUN step (overlay_install.py, plugin_install.py) -> the next step.
_STEP_HINTS = {
    1: "build on the official image of {base} (make image BASE={base}): its vllm/ files are the pristine ones",
    2: "the base image must hold one installed vllm package (the official image of {base} does)",
    3: "make image BASE={base} TURBO_ATTN=  (no plugin), or a base image with uv or pip "
    "(make standin BASE={base} makes one with uv)",
    4: "see the installer's message in the build log {log}; the context is in {context}",
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


def engine_errors() -> tuple[type[BaseException], ...]:
    """What a lost or failing engine raises through the SDK (a broken stream is urllib3's own)."""
    from docker.errors import DockerException
    from requests.exceptions import RequestException
    from urllib3.exceptions import HTTPError

    return DockerException, RequestException, HTTPError


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
            "(README.md, 'The image')",
            hint="export DOCKER_HOST=unix:///run/tkv-dockerd/sock  (README.md, 'The image', starts one)",
        ) from e
    return api


# --------------------------------------------------------------------------- build


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


def run_build(
    api, context: Path, tag: str, base_image: str, labels: dict, base: Base, log, log_file: Path | None = None
):
    """Build ``context`` as ``tag``: (image id, images of ours it untagged and removed, added layers).

    ``log`` gets every line of the build's stream (``log_file``: where they are kept, named by a
    failure). However the build ends without an image (a failing step, a lost engine, Ctrl-C),
    the intermediate images its steps committed are removed.
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
            raise _build_failed(error, code, stream, base, context, log_file)
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
            said = f" (the build's log so far: {log_file})" if log_file else ""
            raise DockerError(
                f"the Docker engine failed during the build of {tag}: {e}{said}",
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
    error: str | None, code: int | None, stream: _BuildLog, base: Base, context: Path, log_file: Path | None
) -> DockerError:
    """The build's failure in the overlay's or installer's own words (else the failing step's last
    lines), with the next step."""
    ours = stream.tool_message()
    hint = _STEP_HINTS.get(code) if ours and isinstance(code, int) else None
    hint = hint or "see the build log {log}; the context is in {context}"
    said = ours or error or "no image produced"
    if not ours and stream.step_lines:
        said += "\n" + "\n".join(f"  {line}" for _, line in stream.step_lines[-8:])
    return DockerError(
        f"image build failed: {said}",
        hint=hint.format(base=base.name, context=context, log=log_file or "above"),
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
