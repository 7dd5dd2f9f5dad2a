"""Known upstream bases and their sources: a verified PyPI sdist, or git.

Both routes end in a *pristine base repository* in the cache (``baserepo``): a git repo whose
base commit holds exactly the upstream v0.31.0 tree. ``apply`` clones it.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from . import index, unpack
from ..errors import NetworkError, SeamError, UsageError, VerifyError
from .index import default_index_url
from ..outputs import is_inside, symlink_on_the_way
from ..progress import QUIET, Progress
from ..queue.series import Queue

_COMMIT_RE = re.compile(r"""^__commit_id__\s*=.*?['"]g?([0-9a-f]{7,40})['"]""", re.M)
_VERSION_RE = re.compile(r"""^__version__\s*=.*?['"]([^'"]+)['"]""", re.M)


@dataclass(frozen=True)
class Sdist:
    filename: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Image:
    name: str
    revision_prefix: str
    index_digest_prefix: str = ""
    digest: str = ""


@dataclass(frozen=True)
class Plugin:
    """The plugin release that matches the seam on this base (hash-pinned)."""

    requirement: str = ""
    hashes: tuple[str, ...] = ()

    def requirements_txt(self) -> str:
        """The pin as a pip/uv requirements file with --require-hashes lines."""
        return " ".join([self.requirement, *(f"--hash={h}" for h in self.hashes)]) + "\n"


@dataclass(frozen=True)
class SeamPins:
    """What the seam is checked with on this base: a new base brings its own.

    ``ruff``: the version of upstream's style gate (its .pre-commit-config.yaml);
    ``plugin``: the real client; ``upstream_tests``: upstream's test files that
    must show no new failure on the patched tree.
    """

    ruff: str = ""
    plugin: Plugin = field(default_factory=Plugin)
    upstream_tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class Base:
    name: str
    version: str
    tag: str
    commit_prefixes: tuple[str, ...]
    sdist: Sdist
    image: Image
    project: str = "vllm"
    queue: Queue = field(default_factory=Queue)  # where this base's series + patches live
    seam: SeamPins = field(default_factory=SeamPins, compare=False)
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def cpu_lock(self) -> str:
        """The lock file of this base's CPU test venv (that vLLM release + CPU torch), project-relative."""
        return f"ci/lock-cpu-{self.name}.txt"

    @property
    def test_venv(self) -> str:
        """This base's CPU test venv (``make venv-vllm BASE=<name>``), project-relative."""
        return f".venv-vllm-{self.name}"

    @property
    def commit_prefix(self) -> str:
        """The longest known prefix of the pinned commit."""
        return max(self.commit_prefixes, key=len)

    def commit_matches(self, commit: str) -> bool:
        """True when ``commit`` (a full id or a prefix of >= 7 chars) agrees with every known prefix."""
        commit = commit.lower()
        if len(commit) < 7:
            return False
        return all(p.startswith(commit) or commit.startswith(p) for p in self.commit_prefixes)


def default_cache_dir() -> Path:
    env = os.environ.get("TKV_SEAM_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "tkv-seam"
    try:
        return Path.home() / ".cache" / "tkv-seam"
    except RuntimeError as e:  # no HOME and no passwd entry
        raise SeamError(f"no cache directory: {e}", hint="export TKV_SEAM_CACHE=$PWD/.cache/tkv-seam") from e


def lock_file(cache: Path, entry: str) -> Path:
    """The lock file of one cache entry (``cache/locks/<entry>.lock``)."""
    return cache / "locks" / f"{entry}.lock"


_BASE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_PROJECT = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
_PREFIX = re.compile(r"[0-9a-fA-F]{7,40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_REQUIRED = object()


class _Entry:
    """Typed reads of one table of the bases file; every error names the file, base and key."""

    def __init__(self, path: Path, name: str, data: dict, prefix: str = ""):
        self.path, self.name, self.data, self.prefix = path, name, data, prefix

    def fail(self, key: str, what: str, value: object = _REQUIRED) -> SeamError:
        got = "it is missing" if value is _REQUIRED else f"not {value!r}"
        return SeamError(
            f"{self.path}: [{self.name}] {self.prefix}{key} must be {what}; {got}",
            hint=f"fix {self.prefix}{key} in {self.path.name} (docs/bases.md, 'Pins'; "
            f"git diff -- {self.path.name} shows what changed)",
        )

    def get(self, key: str, kind: type, what: str, default: object = _REQUIRED):
        if key not in self.data:
            if default is _REQUIRED:
                raise self.fail(key, what)
            return default
        value = self.data[key]
        if not isinstance(value, kind) or isinstance(value, bool):  # TOML's true is no number
            raise self.fail(key, what, value)
        return value

    def text(
        self, key: str, what: str = "a string", pattern: re.Pattern | None = None, default=_REQUIRED
    ) -> str:
        value = self.get(key, str, what, default)
        if pattern is not None and not pattern.fullmatch(value):
            raise self.fail(key, what, value)
        return value

    def strings(self, key: str, what: str, pattern: re.Pattern | None = None, default=_REQUIRED) -> tuple:
        values = self.get(key, list, what, default)
        if not all(isinstance(v, str) and (pattern is None or pattern.fullmatch(v)) for v in values):
            raise self.fail(key, what, values)
        return tuple(values)

    def table(self, key: str, what: str, default=_REQUIRED) -> _Entry:
        return _Entry(self.path, self.name, self.get(key, dict, what, default), f"{self.prefix}{key}.")


def plain_sdist_name(filename: str) -> bool:
    """A bare ``.tar.gz`` file name: it names a file in the cache, so no directory part."""
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*\.tar\.gz", filename)) and ".." not in filename


def _base(name: str, data: object, path: Path) -> Base:
    if not isinstance(data, dict):
        raise SeamError(
            f"{path}: {name!r} is not a table of pins", hint=f'see the ["v0.31.0"] table in {path}'
        )
    if not _BASE_NAME.fullmatch(name) or ".." in name:
        raise SeamError(
            f"{path}: base name {name!r} must be letters, digits and . _ + - (it names directories)",
            hint=f'rename the table in {path.name}, e.g. ["v0.34.0"]',
        )
    e = _Entry(path, name, data)
    version = e.text("version", 'a PEP 440 version such as "0.31.0"')
    try:
        Version(version)
    except InvalidVersion:
        raise e.fail("version", 'a PEP 440 version such as "0.31.0"', version) from None
    prefixes = e.strings("commit_prefixes", "a non-empty list of 7-40 hex digits", _PREFIX)
    if not prefixes:
        raise e.fail("commit_prefixes", "a non-empty list of 7-40 hex digits", [])
    sd = e.table("sdist", "a table { filename, size, sha256 }")
    filename = sd.text("filename", "a file name ending in .tar.gz (no directory part)")
    if not plain_sdist_name(filename):
        raise sd.fail("filename", "a file name ending in .tar.gz (no directory part)", filename)
    size = sd.get("size", int, "a number of bytes")
    if size <= 0:
        raise sd.fail("size", "a number of bytes", size)
    sdist = Sdist(filename, size, sd.text("sha256", "64 lowercase hex digits", _SHA256))
    im = e.table("image", "a table { name, revision_prefix }")
    image = Image(
        im.text("name", "an image reference"),
        im.text("revision_prefix", "a string (hex prefix of the image's revision label)"),
        im.text("index_digest_prefix", "a string", default=""),
        im.text("digest", "a string", default=""),
    )
    queue = Queue.for_base(name)
    if "queue" in data:
        q = e.table("queue", "a table { series, patches }")
        unknown = sorted(set(q.data) - {"series", "patches"})
        if unknown:
            raise q.fail(unknown[0], "absent (a queue has series and patches only)", q.data[unknown[0]])
        queue = Queue(
            q.text("series", "a path inside the project"), q.text("patches", "a path inside the project")
        )
    seam = e.table("seam", "a table", default={})
    plugin = seam.table("plugin", "a table { requirement, hashes }", default={})
    return Base(
        name=name,
        version=version,
        tag=e.text("tag", "a string (the release tag)", default=name),
        commit_prefixes=tuple(p.lower() for p in prefixes),
        sdist=sdist,
        image=image,
        project=e.text("project", "a project name on the index", _PROJECT, default="vllm"),
        queue=queue,
        seam=SeamPins(
            ruff=seam.text("ruff", "a ruff version", default=""),
            plugin=Plugin(
                plugin.text("requirement", "a requirement such as turbo-attn==0.70.1", default=""),
                plugin.strings("hashes", "a list of sha256:<hex> strings", default=[]),
            ),
            upstream_tests=seam.strings("upstream_tests", "a list of test file paths", default=[]),
        ),
    )


def load_bases(path: Path, root: Path | None = None) -> dict[str, Base]:
    """Read the bases data file (TOML, one table per base name), every field checked.

    ``root``: the project root the queue paths are relative to (default: the file's
    directory); each queue must lie inside it, reached through no symlink, and be its
    base's own.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        hint = f"git diff -- {path}" if path.exists() else f"git checkout -- {path}"
        raise SeamError(f"cannot read bases file {path}: {e}", hint=hint) from e
    bases = {name: _base(name, entry, path) for name, entry in data.items()}
    _check_queues(bases, path, Path(root) if root is not None else path.parent)
    return bases


def _queue_path(rel: str, name: str, path: Path, root: Path) -> str:
    """``rel`` normalised (``./series`` is ``series``), refused unless it stays inside ``root``
    through no symlink."""
    where = f"{path}: queue of {name}: {rel!r}"
    hint = f"give {name} a queue of its own inside the project, e.g. patches/{name}/ (docs/bases.md, 'One queue per base')"
    pure = Path(rel)
    norm = os.path.normpath(rel) if rel else ""
    if pure.is_absolute() or ".." in pure.parts or norm in ("", ".") or ".git" in Path(norm).parts:
        raise SeamError(f"{where} must be a path inside the project", hint=hint)
    link = symlink_on_the_way(root, root / norm)
    if link is not None:
        raise SeamError(
            f"{where} goes through the symlink {link} -> {os.readlink(link)}; a queue is never reached "
            "through a symlink",
            hint=f"replace {link.relative_to(root)} with a directory (or fix the queue path), then run again",
        )
    if not is_inside(root, root / norm):
        raise SeamError(f"{where} resolves outside the project", hint=hint)
    return norm


def _check_queues(bases: dict[str, Base], path: Path, root: Path) -> None:
    """Each base's queue is its own: paths inside the project (compared normalised, no symlink
    on the way), no two bases sharing a series file or a patch directory, and no base's series
    file among another base's patches."""
    owner: dict[str, str] = {}
    dirs: dict[str, str] = {}
    for name, b in bases.items():
        series = _queue_path(b.queue.series, name, path, root)
        patches = _queue_path(b.queue.patches, name, path, root)
        for norm in {series, patches}:
            if norm in owner:
                raise SeamError(
                    f"{path}: {name} and {owner[norm]} share the queue path {norm!r} "
                    f"({name}: series {b.queue.series!r}, patches {b.queue.patches!r})",
                    hint=f'give {name} a queue of its own, e.g. queue = {{ series = "patches/{name}/series", '
                    f'patches = "patches/{name}" }}',
                )
            owner[norm] = name
        dirs[patches] = name
    for name, b in bases.items():  # quilt's layout: a series beside its own patches, never another's
        other = dirs.get(os.path.dirname(os.path.normpath(b.queue.series)))
        if other not in (None, name):
            raise SeamError(
                f"{path}: the series of {name} ({b.queue.series!r}) lies among {other}'s patches",
                hint=f"give {name} a queue of its own, e.g. patches/{name}/series",
            )


def get_base(
    bases: dict[str, Base], name: str, hint: str = "make apply BASE={}", avoid: str | None = None
) -> Base:
    """The base ``name``; a usage error listing the known ones (``hint``: the command, ``{}`` a
    known name other than ``avoid``)."""
    if name not in bases:
        known = ", ".join(sorted(bases)) or "none"
        candidates = [b for b in sorted(bases) if b != avoid] or ["<name>"]
        raise UsageError(f"unknown base {name!r}; known bases: {known}", hint=hint.format(candidates[0]))
    return bases[name]


# --------------------------------------------------------------------------- sdist

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


def verify_file(path: Path, sdist: Sdist) -> None:
    """Check size and sha256 of a downloaded sdist; raise VerifyError on mismatch."""
    size = path.stat().st_size
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    if size != sdist.size or digest.hexdigest() != sdist.sha256:
        raise VerifyError(
            f"{path}: size {size}, sha256 {digest.hexdigest()}; "
            f"expected size {sdist.size}, sha256 {sdist.sha256}",
            hint=f"rm {path} and run the command again to download it afresh",
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
    try:
        verify_file(part, base.sdist)
    except VerifyError as e:
        part.unlink(missing_ok=True)
        raise VerifyError(
            f"{url}: {e.message.split(': ', 1)[1]}; the download was deleted",
            hint="check that the index serves the pinned release (bases.toml), then run the command again",
        ) from e
    os.replace(part, dest)
    return dest, fetched


def _sdist_hint(tarball: Path) -> str:
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


def _version_text(sdist: unpack.Sdist) -> str:
    try:
        return sdist.read("vllm/_version.py").decode()
    except UnicodeDecodeError as e:
        raise VerifyError(f"{sdist.tarball.name}: vllm/_version.py is not UTF-8: {e}", hint=sdist.hint) from e


def sdist_commit(tarball: Path, base: Base) -> str:
    """Read ``vllm/_version.py`` inside the tarball (nothing unpacked) and check it against the pin.

    Every member of the tarball is checked first (``unpack``): a hostile archive is refused
    (exit 4, naming the member) before any of it is read.
    """
    with unpack.Sdist(tarball, _sdist_hint(tarball)) as sdist:
        text = _version_text(sdist)
    return check_version_file(text, base, f"{tarball.name}:vllm/_version.py")


def unpack_sdist(tarball: Path, base: Base, dest: Path, progress: Progress = QUIET) -> str:
    """Check the sdist's members and commit id, then unpack it (without its top directory) into ``dest``."""
    with unpack.Sdist(tarball, _sdist_hint(tarball)) as sdist:
        commit = check_version_file(_version_text(sdist), base, f"{tarball.name}:vllm/_version.py")
        progress.step(f"unpack {tarball.name}")
        sdist.extract(dest)
    return commit
