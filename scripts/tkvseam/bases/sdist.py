"""The sdist of a base: found on the package index, downloaded once into the cache, verified.

The pin (``bases.pins``) says which file and which bytes; this module fetches them and checks
that ``vllm/_version.py`` inside names the pinned release and commit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from . import index, unpack
from ..errors import NetworkError, VerifyError
from ..fsutil import sha256_of
from ..progress import QUIET, Progress
from .index import default_index_url
from .pins import Base, Sdist

_COMMIT_RE = re.compile(r"""^__commit_id__\s*=.*?['"]g?([0-9a-f]{7,40})['"]""", re.M)
_VERSION_RE = re.compile(r"""^__version__\s*=.*?['"]([^'"]+)['"]""", re.M)

APPLY_INDEX_HINT = "check network access to the package index, or set VLLM_GIT=<url-or-path>"


def find_sdist_url(base: Base, index_url: str) -> str:
    """Ask the Simple API (PEP 691 JSON) for the sdist and check the index's metadata against the pin."""
    page = index.listing(base.project, index_url, APPLY_INDEX_HINT)
    for entry in page.files:
        if entry.filename != base.sdist.filename:
            continue
        entry.usable()
        if entry.sha256 and entry.sha256 != base.sdist.sha256:
            raise VerifyError(
                f"{base.sdist.filename}: the index lists sha256 {entry.sha256}, the pin for {base.name} "
                f"is {base.sdist.sha256}",
                hint="check bases.toml against the release; nothing was downloaded",
            )
        if entry.size not in (None, base.sdist.size):
            raise VerifyError(
                f"{base.sdist.filename}: the index lists size {entry.size}, the pin is {base.sdist.size}"
            )
        return entry.url
    raise NetworkError(f"{page.url} lists no file {base.sdist.filename}")


def mismatch(path: Path, sdist: Sdist) -> str | None:
    """How the file at ``path`` differs from the pinned sdist (size, sha256), or None."""
    size = path.stat().st_size
    digest = sha256_of(path)
    if size != sdist.size or digest != sdist.sha256:
        return f"size {size}, sha256 {digest}; expected size {sdist.size}, sha256 {sdist.sha256}"
    return None


def verify_file(path: Path, sdist: Sdist) -> None:
    """Check size and sha256 of a downloaded sdist; raise VerifyError on mismatch."""
    wrong = mismatch(path, sdist)
    if wrong:
        raise VerifyError(
            f"{path}: {wrong}", hint=f"rm {path} and run the command again to download it afresh"
        )


def fetch_sdist(
    base: Base, cache: Path, index_url: str | None = None, progress: Progress = QUIET
) -> tuple[Path, int]:
    """Return the verified sdist in the cache, downloading it once; also bytes fetched now.

    The caller holds the cache entry's lock (``base-<name>-sdist``): one download at a time.
    """
    dest = cache / "sdist" / base.sdist.filename
    if dest.exists():
        progress.step(f"verify cached {dest.name}")
        verify_file(dest, base.sdist)
        return dest, 0
    url = find_sdist_url(base, index_url or default_index_url())
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    progress.step(f"download {base.sdist.filename} ({base.sdist.size / 1e6:.1f} MB)")
    try:
        fetched = index.download(url, part, base.sdist.size, base.sdist.filename, progress=progress)
    except BaseException:
        part.unlink(missing_ok=True)  # nothing of a failed download is kept
        raise
    wrong = mismatch(part, base.sdist)
    if wrong:
        part.unlink(missing_ok=True)
        raise VerifyError(
            f"{url}: {wrong}; the download was deleted",
            hint="check that the index serves the pinned release (bases.toml), then run the command again",
        )
    os.replace(part, dest)
    return dest, fetched


def sdist_hint(tarball: Path) -> str:
    return f"the sdist is not the pinned release's: check bases.toml and the index; rm {tarball} to drop it"


def check_version_file(text: str, base: Base, where: str) -> str:
    """Check vllm/_version.py text against the pin; return the recorded commit id."""
    m_commit, m_version = _COMMIT_RE.search(text), _VERSION_RE.search(text)
    if not m_commit or not m_version:
        raise VerifyError(f"{where}: no __version__/__commit_id__ found")
    if not _same_version(m_version.group(1), base.version):
        raise VerifyError(f"{where}: version {m_version.group(1)}, expected {base.version}")
    commit = m_commit.group(1)
    if not base.commit_matches(commit):
        raise VerifyError(
            f"{where}: commit {commit} does not match the pin {base.commit_prefix} of {base.name}",
            hint="the sdist is not the pinned release; check bases.toml",
        )
    return commit


def _same_version(a: str, b: str) -> bool:
    """PEP 440 equality (``0.34`` is ``0.34.0``); plain string equality when either is not a version."""
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def version_text(sdist: unpack.Sdist) -> str:
    try:
        return sdist.read("vllm/_version.py").decode()
    except UnicodeDecodeError as e:
        raise VerifyError(f"{sdist.tarball.name}: vllm/_version.py is not UTF-8: {e}", hint=sdist.hint) from e


def sdist_commit(tarball: Path, base: Base) -> str:
    """Read ``vllm/_version.py`` inside the tarball (nothing unpacked) and check it against the pin.

    Every member of the tarball is checked first (``unpack``): a hostile archive is refused
    (exit 4, naming the member) before any of it is read.
    """
    with unpack.Sdist(tarball, sdist_hint(tarball)) as sdist:
        text = version_text(sdist)
    return check_version_file(text, base, f"{tarball.name}:vllm/_version.py")
