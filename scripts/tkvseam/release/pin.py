"""Pin a vLLM release: add its entry to a bases file from the verified sdist.

``pin`` finds the release's sdist on the Simple API (PEP 691 JSON, the same
index code as ``fetch``), downloads it into the cache, checks it against the
index's sha256 and size, reads the upstream commit from its ``vllm/_version.py``
and adds the entry (tag, version, commit prefix, sdist, official image) with
``tomlkit``, so the file's comments, order and other entries stay byte for byte.
An existing entry whose values differ is refused (exit 4, both values shown);
one that agrees leaves the file untouched.

The version is the index's spelling of it (``pin 9.11`` pins ``v9.11.0`` when the
index has ``vllm-9.11.0.tar.gz``), decided before anything is downloaded. Runs take
turns: the download holds the cache entry's lock (``base-v<version>-sdist``, the one
``apply`` and ``fetch`` hold), the read-compare-write of the bases file holds the
file's own lock, so two pins at once both land and one download serves both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

import tomlkit
from packaging.utils import InvalidSdistFilename, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from .. import hints, layout
from ..answer import Answer
from ..bases.index import default_index_url
from ..bases.pins import Base, Image, Sdist, load_bases, lock_file, plain_sdist_name
from ..bases.sdist import fetch_sdist, sdist_commit
from ..bases.file import inline_table, insert_base, refuse_link, write
from ..errors import EXIT_USAGE, SeamError, VerifyError
from ..bases.index import IndexFile, Listing, listing
from ..lock import locked
from ..progress import QUIET, Progress
from ..queue.series import Queue

PROJECT = "vllm"
OFFICIAL_IMAGE = "vllm/vllm-openai"
MAX_SDIST_BYTES = 1 << 30  # what pin downloads on the index's word; vLLM 0.33.0's is 47 MB


class PinStatus(StrEnum):
    ADDED = "added"  # the entry was written
    UNCHANGED = "unchanged"  # the bases file pinned the release already, with the same values


@dataclass
class PinResult(Answer):
    name: str  # the base name, "v<version>"
    status: PinStatus
    bases_file: str
    commit_prefix: str
    sdist: Sdist
    fetched_bytes: int

    def lines(self) -> list[str]:
        return [
            f"{self.name}: {self.status} in {self.bases_file}: commit {self.commit_prefix}, "
            f"{self.sdist.filename} size {self.sdist.size} sha256 {self.sdist.sha256[:16]}…"
        ]


def parse_release(text: str, verb: str = "pin") -> Version:
    """``0.34.0`` or ``v0.34.0`` as a PEP 440 version; a usage error (exit 2) otherwise, whose hint
    lists the releases there are and names ``make <verb>`` (the command the user ran)."""
    try:
        return Version(text.removeprefix("v"))
    except InvalidVersion as e:
        raise SeamError(
            f"{text!r} is not a PEP 440 version (a vLLM release is e.g. 0.34.0)",
            hint=f"`{hints.make('watch')}` lists the releases newer than the carried base; then "
            f"`{hints.make(verb, VERSION='<version>')}`",
            exit_code=EXIT_USAGE,
        ) from e


def sdist_version(filename: str) -> Version | None:
    """The version of an sdist file name of the project, or None (a wheel, another project, junk)."""
    try:
        name, version = parse_sdist_filename(filename)
    except (InvalidSdistFilename, InvalidVersion):
        return None
    return version if name == PROJECT else None


def find_sdist(page: Listing, version: Version) -> IndexFile:
    """The page's sdist entry for ``version``, which must carry a sha256 and a size."""
    for entry in page.files:
        if sdist_version(entry.filename) == version and plain_sdist_name(entry.filename):
            break
    else:
        raise SeamError(
            f"{page.url} lists no sdist of {PROJECT} {version}",
            hint=f"{hints.make('watch', SINCE='0', PRE='1', YANKED='1')}   (lists every release the index has)",
        )
    entry.usable()
    if not entry.sha256 or entry.size is None:
        raise VerifyError(
            f"{page.url}: {entry.filename} has no sha256 or no size in the index (PEP 691/700); "
            "a pin needs both",
            hint="set TKV_SEAM_INDEX_URL to an index serving the Simple API 1.1 (PyPI does)",
        )
    if entry.size > MAX_SDIST_BYTES:
        raise VerifyError(
            f"{page.url}: {entry.filename} is {entry.size} bytes, more than the {MAX_SDIST_BYTES >> 20} MiB "
            "a vLLM sdist may have; nothing was downloaded",
            hint="check the index (TKV_SEAM_INDEX_URL): vLLM's sdists are under 50 MB",
        )
    return entry


def _differences(old: Base, new: Base) -> list[str]:
    """Each field the release determines where the pinned entry disagrees, both values shown."""
    rows = [
        ("version", old.version, new.version),
        ("tag", old.tag, new.tag),
        ("sdist.filename", old.sdist.filename, new.sdist.filename),
        ("sdist.size", old.sdist.size, new.sdist.size),
        ("sdist.sha256", old.sdist.sha256, new.sdist.sha256),
    ]  # not the image: the release does not say which image a maintainer pins
    out = [f"{key}: bases file has {a}, the release has {b}" for key, a, b in rows if a != b]
    if new.commit_prefixes and not old.commit_matches(new.commit_prefix):
        out.append(
            f"commit: bases file has {', '.join(old.commit_prefixes)}, the release's "
            f"vllm/_version.py has {new.commit_prefix}"
        )
    return out


def _refuse(bases_file: Path, name: str, diffs: list[str]) -> VerifyError:
    lines = "\n".join(f"  {d}" for d in diffs)
    return VerifyError(
        f"{name} is already pinned in {bases_file} with other values:\n{lines}",
        hint=f'check the release; to re-pin on purpose, delete the ["{name}"] table from '
        f"{bases_file.name}, then: {hints.make('pin', VERSION=name.removeprefix('v'))}",
    )


def _write_entry(bases_file: Path, base: Base) -> None:
    """Append ``base``'s table to the bases file (format-preserving, atomic)."""
    doc = tomlkit.parse(bases_file.read_text())
    table = tomlkit.table()
    table.add(
        tomlkit.comment(
            f"pinned by `tkv-seam pin {base.version}`: commit read from the sha256-verified "
            "sdist's vllm/_version.py"
        )
    )
    table.add("version", base.version)
    table.add("tag", base.tag)
    table.add("commit_prefixes", list(base.commit_prefixes))
    table.add("sdist", inline_table(asdict(base.sdist)))
    table.add("image", inline_table(asdict(base.image)))
    table.add("queue", inline_table({"series": base.queue.series, "patches": base.queue.patches}))
    insert_base(doc, base.name, table)  # release order, whatever order pins arrive in
    write(bases_file, doc)  # atomic, keeps the file's mode (the caller holds its lock)


def pin(
    bases_file: Path,
    version: str,
    cache: Path,
    index_url: str | None = None,
    allow_yanked: bool = False,
    progress: Progress = QUIET,
    root: Path | None = None,
) -> PinResult:
    """Pin release ``version`` (e.g. ``0.34.0``) in ``bases_file``; see the module docstring.

    ``root``: the project root the bases file's queue paths are relative to.
    """
    wanted = parse_release(version)
    refuse_link(bases_file)  # before anything is downloaded
    index_url = index_url or default_index_url()
    entry = find_sdist(listing(PROJECT, index_url), wanted)
    release = sdist_version(entry.filename)  # the index's spelling: 9.11 -> 9.11.0
    name = f"v{release}"
    if entry.yanked and not allow_yanked:
        reason = entry.yanked if isinstance(entry.yanked, str) else "no reason given"
        raise SeamError(
            f"{entry.filename} is yanked on the index ({reason})",
            hint=f"{hints.tool('pin', '--yanked', release)}   (only if you mean to carry a yanked release)",
        )
    sdist = Sdist(entry.filename, entry.size, entry.sha256)
    candidate = Base(name, str(release), name, (), sdist, Image(f"{OFFICIAL_IMAGE}:{name}", ""))
    existing = load_bases(bases_file, root).get(name)
    if existing:  # refuse before downloading anything when the index already disagrees
        diffs = _differences(existing, candidate)
        if diffs:
            raise _refuse(bases_file, name, diffs)
    with locked(lock_file(cache, f"base-{name}-sdist"), f"the cached base {name}", progress):
        tarball, fetched = fetch_sdist(candidate, cache, index_url, progress)
        commit = sdist_commit(tarball, candidate)  # checks __version__; no commit pinned yet
    pinned = Base(
        name,
        str(release),
        name,
        (commit,),
        sdist,
        Image(f"{OFFICIAL_IMAGE}:{name}", commit, "", ""),
        queue=Queue.for_base(name),  # its own queue, made by `tkv-seam port start --to <name>`
    )
    with locked(layout.lock_of(bases_file), f"the bases file {bases_file}", progress):
        existing = load_bases(bases_file, root).get(name)  # again: another pin may have written it
        if existing:
            diffs = _differences(existing, pinned)
            if diffs:
                raise _refuse(bases_file, name, diffs)
            status = PinStatus.UNCHANGED
        else:
            _write_entry(bases_file, pinned)
            status = PinStatus.ADDED
    return PinResult(name, status, str(bases_file), commit, sdist, fetched)
