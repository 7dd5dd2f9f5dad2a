"""The overlay image's names and labels: docker references (parsed and checked), the tag that says
what the image is (``-noplugin``, ``-standin``, another plugin release), and the OCI provenance
labels. Split out of ``image`` (which builds and pushes) unchanged.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

from .. import __version__, git
from ..bases.pins import Base
from ..errors import UsageError
from .wheel import PluginSpec, plugin_spec

REVISION_LABEL = "org.opencontainers.image.revision"
SOURCE_LABEL = "org.opencontainers.image.source"
BASE_NAME_LABEL = "org.opencontainers.image.base.name"
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"
STAND_IN_LABEL = "io.tkv-seam.stand-in"
SERIES_LABEL = "io.tkv-seam.series.digest"
REPOSITORY = "tkv-seam/vllm-openai"
# What the image is made from, in the project: a change here not yet committed makes the
# tkv-seam commit label "<commit>-dirty".
IMAGE_INPUTS = ("Dockerfile", "bases.toml", "series", "patches", "scripts/tkvseam")

# docker reference grammar (distribution/reference): path components, tag, registry host.
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_HOST = re.compile(
    r"^(?:localhost|(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?$"
)


# --------------------------------------------------------------------------- names


def parse_reference(ref: str) -> tuple[str, str]:
    """``[host[:port]/]path:tag`` -> (repository, tag); a usage error naming what is wrong."""
    why = None
    name, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:  # no tag (a colon, if any, was the registry's port)
        name, tag = ref, "latest"
    parts = name.split("/")
    host = (
        parts[0] if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost") else ""
    )
    path = parts[1:] if host else parts
    if "@" in ref:
        why = "a digest reference cannot be a build's tag"
    elif host and not _HOST.match(host):
        why = f"registry {host!r} is not host[:port]"
    elif not path or not all(_COMPONENT.match(p) for p in path):
        why = "repository path components are lowercase letters and digits separated by . _ __ or -"
    elif not _TAG.match(tag):
        why = "a tag is up to 128 of A-Z a-z 0-9 _ . - and does not start with . or -"
    elif len(name) > 255:
        why = "the repository name is longer than 255 characters"
    if why:
        raise UsageError(
            f"image reference {ref!r}: {why}",
            hint="make image REGISTRY=127.0.0.1:5000 REPOSITORY=tkv-seam/vllm-openai  (or IMAGE_TAG=<repository>:<tag>)",
        )
    return name, tag


def registry_of(repository: str) -> str:
    """The registry host a repository name points at ("" for Docker Hub's short names)."""
    first, _, rest = repository.partition("/")
    return first if rest and ("." in first or ":" in first or first == "localhost") else ""


def tag_name(base: Base, series_digest: str, stand_in: bool, plugin: PluginSpec | None) -> str:
    """``<base>-<digest12>``: the real image with the base's plugin pin; anything else says so.

    ``-noplugin`` without the plugin, ``-<name>-<version>`` with another release than the
    pin, ``-standin`` on a stand-in base.
    """
    out = f"{base.name}-{series_digest[:12]}"
    pin = (
        plugin_spec(base.seam.plugin.requirement, base.seam.plugin, base.name)
        if base.seam.plugin.requirement
        else None
    )
    if plugin is None:
        out += "-noplugin"
    elif pin is None or plugin.requirement != pin.requirement:
        out += "-" + re.sub(r"[^A-Za-z0-9_.-]", "-", f"{plugin.name}-{plugin.version}")
    if stand_in:
        out += "-standin"
    return out


def image_reference(
    base: Base, series_digest: str, stand_in: bool, plugin: PluginSpec | None, registry: str, repository: str
) -> str:
    """``[registry/]repository:<tag_name>``, checked."""
    registry = registry.strip().rstrip("/")
    repo = f"{registry}/{repository}" if registry else repository
    ref = f"{repo}:{tag_name(base, series_digest, stand_in, plugin)}"
    parsed, _ = parse_reference(ref)
    if registry and registry_of(parsed) != registry.split("/")[0]:
        raise UsageError(
            f"registry {registry!r} is not host[:port][/path] (a host has a dot or a port, or is localhost)",
            hint="make image PUSH=1 REGISTRY=127.0.0.1:5000 REPOSITORY=tkv-seam/vllm-openai",
        )
    return ref


# --------------------------------------------------------------------------- labels


def _public_url(url: str) -> str:
    """A remote URL without credentials (``https://user:token@host/…`` -> ``https://host/…``)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme and parts.netloc and "@" in parts.netloc:
        return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return url


def provenance(root: Path, source: str | None = None) -> tuple[str, str]:
    """(source URL, tkv-seam commit) of the project at ``root``; "" where unknown.

    The commit gets ``-dirty`` when an input of the image (``IMAGE_INPUTS``) has changes
    not committed; the source is ``source`` or the ``origin`` remote, without credentials.
    """
    commit = (git.repo.resolve(root, "HEAD") or "") if git.index.toplevel(root) else ""
    if commit:
        commit += "-dirty" if git.index.status_paths(root, list(IMAGE_INPUTS)) else ""
    if source is None:
        source = git.repo.remote_url(root, "origin") or ""
    return _public_url(source), commit


def image_labels(
    base: Base,
    base_image: str,
    base_info: dict,
    base_revision: str,
    series_digest: str,
    plugin: PluginSpec | None,
    stand_in: bool,
    source: str,
    commit: str,
) -> dict[str, str]:
    """The labels the build sets (OCI: source, revision = the tkv-seam commit, base name and digest).

    The base's revision label (vLLM's commit) is replaced by the tkv-seam commit, and kept as
    ``io.tkv-seam.base.revision``. The base digest is the registry digest the engine recorded
    when it pulled the base, else (a local image) its image id.
    """
    repo_digests = [d.split("@", 1)[1] for d in base_info.get("RepoDigests") or [] if "@" in d]
    return {
        SOURCE_LABEL: source,
        REVISION_LABEL: commit,
        BASE_NAME_LABEL: base_image,
        BASE_DIGEST_LABEL: repo_digests[0] if repo_digests else base_info.get("Id", ""),
        "io.tkv-seam.base": base.name,
        "io.tkv-seam.base.image": base_image,
        "io.tkv-seam.base.id": base_info.get("Id", ""),
        "io.tkv-seam.base.revision": base_revision,
        SERIES_LABEL: series_digest,
        "io.tkv-seam.version": __version__,
        "io.tkv-seam.turbo-attn": plugin.requirement if plugin else "",
        "io.tkv-seam.turbo-attn.hashes": ",".join(plugin.hashes) if plugin else "",
        STAND_IN_LABEL: "true" if stand_in else "false",
    }


STAND_IN_REPOSITORY = "tkv-seam/stand-in"


def default_tag(base: str, installer: str = "uv") -> str:
    """``tkv-seam/stand-in:<base>`` (with uv), ``…:<base>-noinstaller`` (neither uv nor pip)."""
    return f"{STAND_IN_REPOSITORY}:{base}" + ("" if installer == "uv" else "-noinstaller")
