"""The carried bases, and what each one's own queue says about it.

A base is *carried* when its queue exists (the series file ``bases.toml`` names for it).
``make test`` checks every carried base, in release order (PEP 440, not the order of
the file). Everything the tests expect of one base comes from its queue: the concerns it
carries (the seam's, less those its ``PORT.md`` records as skipped), the files it touches,
the overlay set and the module holding the KV cache planner (the ``vllm/v1/core/`` module
the ``fused-kv-pages`` patch changes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from .pins import Base
from ..answer import Answer
from ..errors import SeamError
from ..queue.footprint import PACKAGE_PREFIX, overlay_paths
from ..queue.patch import Patch
from ..queue.series import read_series

# How the seamtest lanes tell tests/differential and tests/plugin the base's planner module (they
# run in the vLLM venv, where tkvseam's own dependencies are not installed).
PLANNER_ENV = "TKV_SEAM_PLANNER_MODULE"
PLANNER_SLUG = "fused-kv-pages"  # the concern that changes the planner
PLANNER_DIR = PACKAGE_PREFIX + "v1/core/"


def release_order(bases: dict[str, Base]) -> list[str]:
    """The base names by release (PEP 440: 0.10.0 after 0.9.0), whatever their order in the file."""
    return sorted(bases, key=lambda n: Version(bases[n].version))


def carried_bases(bases: dict[str, Base], root: Path) -> list[str]:
    """The bases whose own queue exists, oldest release first."""
    return [n for n in release_order(bases) if (root / bases[n].queue.series).is_file()]


def carried_before(bases: dict[str, Base], root: Path, version: str | Version) -> Base | None:
    """The newest carried base older than release ``version`` (the queue a port starts from)."""
    older = [n for n in carried_bases(bases, root) if Version(bases[n].version) < Version(str(version))]
    return bases[older[-1]] if older else None


CARRIED_HINT = ".venv/bin/tkv-seam carried   (the bases with a queue)"


def source_of(
    bases: dict[str, Base],
    root: Path,
    version: str | Version,
    named: str,
    then: str = "",
    hint: str = CARRIED_HINT,
    exit_code: int | None = None,
) -> Base:
    """The queue release ``version`` is carried or ported from (``carried_before``); none is
    ``no_source``'s refusal."""
    source = carried_before(bases, root, version)
    if source is None:
        raise no_source(named, then, hint, exit_code)
    return source


def no_source(
    named: str, then: str = "", hint: str = CARRIED_HINT, exit_code: int | None = None
) -> SeamError:
    """The one refusal of a release no carried base is older than, naming it as ``named`` and what
    cannot be done (``then``): a port goes forward only."""
    why = f"{then} (a port goes forward only)" if then else "a port goes forward only"
    return SeamError(f"no carried base is older than {named}: {why}", hint=hint, exit_code=exit_code)


@dataclass
class Carried(Answer):
    """``carried``: the carried bases, oldest release first."""

    names: list[str]

    def lines(self) -> list[str]:
        return list(self.names)

    def to_json(self) -> dict:
        return {"carried": self.names}


@dataclass(frozen=True)
class Footprint:
    """What one base's queue touches."""

    slugs: tuple[str, ...]  # the patches' concerns, in series order
    names: tuple[str, ...]  # the patch file names
    vllm_files: tuple[str, ...]  # the overlay: the vllm/ files it replaces
    other_files: tuple[str, ...]  # tests, PROTOCOL.md, ...

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(sorted(self.vllm_files + self.other_files))


def queue_patches(root: Path, base: Base) -> list[Patch]:
    return read_series(root, base.queue, base.name).load()


def footprint(root: Path, base: Base) -> Footprint:
    """The base's queue as the tests see it (``read_series`` errors name a missing queue)."""
    patches = queue_patches(root, base)
    vllm = overlay_paths(patches)
    touched = {p for patch in patches for fc in patch.files for p in (fc.old, fc.new) if p}
    return Footprint(
        tuple(p.header.slug for p in patches),
        tuple(p.name for p in patches),
        tuple(vllm),
        tuple(sorted(t for t in touched if t not in vllm)),
    )


def queue_overlay_paths(root: Path, base) -> list[str]:
    """The overlay set of ``base``'s own queue (bases.toml says where it lives)."""
    return overlay_paths(read_series(root, base.queue, base.name).load())


def planner_module(root: Path, base: Base) -> str:
    """The dotted module holding the KV cache planner on ``base``: the ``vllm/v1/core/`` module
    its ``fused-kv-pages`` patch changes (``vllm.v1.core.kv_cache_utils`` on v0.31.0,
    ``vllm.v1.core.kv_cache_planning`` on v0.33.0, where upstream moved the planner)."""
    found = sorted(
        {
            fc.path
            for patch in queue_patches(root, base)
            if patch.header.slug == PLANNER_SLUG
            for fc in patch.files
            if fc.path.startswith(PLANNER_DIR) and fc.path.endswith(".py")
        }
    )
    if len(found) != 1:
        where = ", ".join(found) or f"no {PLANNER_DIR} file"
        raise SeamError(
            f"{base.name}: the queue's {PLANNER_SLUG} patch changes {where}; expected exactly one "
            "(the module of the KV cache planner)",
            hint=f"grep -n '^diff --git a/{PLANNER_DIR}' {base.queue.patches}/*-{PLANNER_SLUG}.patch",
        )
    return found[0].removesuffix(".py").replace("/", ".")


_ROW = re.compile(r"^\|([^|]*)\|([^|]*)\|")


def skipped(root: Path, base: Base) -> set[str]:
    """The concerns the port to ``base`` left out: ``PORT.md`` rows whose status is ``skipped``.

    A row names the patch (``0003-foo.patch`` or ``0003 foo``) in its first cell and the port
    status in its second; the slug is the name without its number and ``.patch``.
    """
    path = root / base.queue.port_md
    if not path.is_file():
        return set()
    out = set()
    for line in path.read_text().splitlines():
        m = _ROW.match(line.strip())
        if not m or not m.group(2).strip().lower().startswith("skipped"):
            continue
        name = m.group(1).strip().strip("`").removesuffix(".patch")
        slug = re.sub(r"^\d+[- ]", "", name).strip()
        if slug:
            out.add(slug)
    return out
