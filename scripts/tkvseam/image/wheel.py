"""The plugin's wheel for the image: the pinned release, downloaded once and hash-checked.

``bases.toml`` pins the plugin as a requirement with its sha256 hashes (the same pin the
test lanes install). The image build installs it offline from the build context, so the
wheel is fetched here, on the host: found through the package index's Simple API (PEP 691
JSON), chosen by its pinned hash, kept in ``<cache>/wheels/`` and checked again on every use.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..bases import index
from ..bases.pins import Plugin, lock_file
from ..errors import NetworkError, UsageError, VerifyError
from ..fsutil import sha256_of
from ..lock import locked
from ..progress import QUIET, Progress

_HASH_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class PluginSpec:
    """One plugin release to install: ``name==version`` and the sha256 hashes it may have."""

    name: str
    version: str
    hashes: tuple[str, ...]

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    def requirements_txt(self) -> str:
        return Plugin(self.requirement, self.hashes).requirements_txt()


def plugin_spec(text: str, pin: Plugin, base: str) -> PluginSpec:
    """Parse ``TURBO_ATTN`` (``name==version [--hash=sha256:<hex>]...``) against the base's pin.

    The pin's own requirement takes the pin's hashes; any other release must bring its hash
    (the image installs the plugin hash-checked, as the test lanes do).
    """
    words = text.split()
    hashes = tuple(w.split("=", 1)[1] for w in words[1:] if w.startswith("--hash="))
    extra = [w for w in words[1:] if not w.startswith("--hash=")]
    usage = f"TURBO_ATTN={text!r}"
    example = "TURBO_ATTN='turbo-attn==<version> --hash=sha256:<hex>'"
    if not words or extra:
        raise UsageError(
            f"{usage}: expected a requirement `name==version`, optionally with --hash=sha256:<hex>",
            hint=f"make image BASE={base} {example}  (or TURBO_ATTN= for no plugin)",
        )
    try:
        req = Requirement(words[0])
    except InvalidRequirement as e:
        raise UsageError(f"{usage}: {e}", hint=f"make image BASE={base} {example}") from e
    specs = list(req.specifier)
    if (
        req.url
        or req.extras
        or req.marker
        or len(specs) != 1
        or specs[0].operator != "=="
        or "*" in specs[0].version
    ):
        raise UsageError(
            f"{usage}: the image installs one exact release, `name==version` (no ranges, extras, URLs, markers)",
            hint=f"make image BASE={base} {example}",
        )
    bad = [h for h in hashes if not _HASH_RE.match(h)]
    if bad:
        raise UsageError(
            f"{usage}: {bad[0]!r} is not sha256:<64 hex digits>", hint=f"make image BASE={base} {example}"
        )
    spec_name, version = canonicalize_name(req.name), specs[0].version
    if not hashes and pin.requirement:
        pinned = Requirement(pin.requirement)
        pinned_version = next(iter(pinned.specifier)).version
        if canonicalize_name(pinned.name) == spec_name and pinned_version == version:
            hashes = pin.hashes
    if not hashes:
        raise UsageError(
            f"{usage} is not the plugin pin of {base} ({pin.requirement or 'none'}) and carries no "
            "--hash: the image installs the plugin hash-checked",
            hint=f'pin it in bases.toml (["{base}".seam] plugin) or make image BASE={base} {example}',
        )
    return PluginSpec(spec_name, version, hashes)


def _choose(spec: PluginSpec, page: index.Listing) -> index.IndexFile:
    """The page's wheel of ``spec`` whose sha256 is one of the pinned hashes."""
    wanted = {h.split(":", 1)[1] for h in spec.hashes}
    seen = []
    for entry in page.files:
        try:
            name, version, _, _ = parse_wheel_filename(entry.filename)
        except InvalidWheelFilename:
            continue
        if name != spec.name or str(version) != spec.version or "/" in entry.filename:
            continue
        seen.append(entry.filename)
        if entry.sha256 in wanted:
            entry = entry.usable()
            if entry.size is None:
                raise VerifyError(
                    f"the index's entry for {entry.filename} has no size: the download cannot be bounded",
                    hint="use an index that lists file sizes (PEP 700; PyPI does)",
                )
            return entry
    if seen:
        raise VerifyError(
            f"{page.url}: no wheel of {spec.requirement} has a pinned hash (index lists {', '.join(seen)})",
            hint="check the plugin pin's hashes in bases.toml against the release",
        )
    raise NetworkError(
        f"{page.url} lists no wheel of {spec.requirement}",
        hint="check the plugin pin in bases.toml (the image installs a wheel, never an sdist)",
    )


def fetch_wheel(
    spec: PluginSpec, cache: Path, index_url: str | None = None, progress: Progress = QUIET
) -> Path:
    """The wheel of ``spec`` in ``<cache>/wheels/``, downloaded once; its sha256 is one of the pins."""
    wanted = {h.split(":", 1)[1] for h in spec.hashes}
    folder = cache / "wheels"
    with locked(
        lock_file(cache, f"wheel-{spec.name}-{spec.version}"), f"the cached {spec.requirement}", progress
    ):
        for have in sorted(folder.glob("*.whl")) if folder.exists() else []:
            try:
                name, version, _, _ = parse_wheel_filename(have.name)
            except InvalidWheelFilename:
                continue
            if (
                name == spec.name
                and str(version) == spec.version
                and have.is_file()
                and sha256_of(have) in wanted
            ):
                progress.step(f"verified cached {have.name}")
                return have
        entry = _choose(spec, index.listing(spec.name, index_url or index.default_index_url()))
        folder.mkdir(parents=True, exist_ok=True)
        dest, part = folder / entry.filename, folder / f"{entry.filename}.part"
        progress.step(f"download {entry.filename} ({entry.size / 1e6:.1f} MB)")
        try:
            index.download(entry.url, part, entry.size, entry.filename, progress=progress)
            have = sha256_of(part)
            if have not in wanted:
                raise VerifyError(
                    f"{entry.url}: sha256 {have}, the pin of {spec.requirement} is {', '.join(spec.hashes)}; "
                    "the download was deleted",
                    hint="check that the index serves the pinned release (bases.toml), then run the command again",
                )
            os.replace(part, dest)
        finally:
            part.unlink(missing_ok=True)
    return dest
