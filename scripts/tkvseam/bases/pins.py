"""Known upstream bases and their sources: a verified PyPI sdist, or git.

Both routes end in a *pristine base repository* in the cache (``baserepo``): a git repo whose
base commit holds exactly the upstream v0.31.0 tree. ``apply`` clones it.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import git, hints
from ..answer import Answer, plain
from ..errors import SeamError, UsageError
from ..outputs import is_inside, symlink_on_the_way
from ..queue.series import Queue


@dataclass(frozen=True)
class Sdist:
    filename: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Image:
    """The official image of a base: its revision label (vLLM's commit) and registry digests.

    ``index_digest_prefix``: a prefix of the digest of the image index (the multi-arch manifest
    list) the registry serves for ``name``; an engine that pulled it records it among the
    image's ``RepoDigests``, and ``make image`` checks it there. ``digest``: the whole digest,
    once known (the build then names the base by it).
    """

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
class Exclusion:
    """A package the CPU test venv leaves out of the release's requirements, and why."""

    name: str
    why: str


TORCH_LOCAL = "local"  # the machine's CPU build of torch ($PIP_FIND_LINKS), whatever the release asks
TRITON_STAND_IN = "stand-in"  # the test venv reports Triton present (docs/tests.md, "Triton on CPU")


@dataclass(frozen=True)
class CpuVenv:
    """How a base's CPU test venv (its lock, ``make venv-vllm``) departs from the release's own
    requirements: data of the base (``["<base>".seam.cpu]``), so carrying a release edits no code.

    ``torch``: ``local`` or a version; ``exclude``: what the lock leaves out, each with its
    reason; ``triton``: ``stand-in`` or empty.
    """

    torch: str = ""
    exclude: tuple[Exclusion, ...] = ()
    triton: str = ""

    @property
    def given(self) -> bool:
        return bool(self.torch or self.exclude or self.triton)

    @property
    def excluded(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.exclude)

    def with_exclusions(self, more: list[Exclusion]) -> CpuVenv:
        """These rules and ``more`` (a name already left out, in any spelling PEP 503 takes as the
        same, keeps its first reason)."""
        known = {canonicalize_name(n) for n in self.excluded}
        extra = tuple(e for e in more if canonicalize_name(e.name) not in known)
        return CpuVenv(self.torch, self.exclude + extra, self.triton)


@dataclass(frozen=True)
class SeamPins:
    """What the seam is checked with on this base: a new base brings its own.

    ``ruff``: the version of upstream's style gate (its .pre-commit-config.yaml);
    ``plugin``: the real client; ``upstream_tests``: upstream's test files that
    must show no new failure on the patched tree; ``cpu``: the CPU test venv's rules.
    """

    ruff: str = ""
    plugin: Plugin = field(default_factory=Plugin)
    upstream_tests: tuple[str, ...] = ()
    cpu: CpuVenv = field(default_factory=CpuVenv)


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
_PACKAGE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")


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
    cpu = _cpu_venv(seam.table("cpu", "a table { torch, exclude, triton }", default={}))
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
            cpu=cpu,
        ),
    )


def _cpu_venv(e: _Entry) -> CpuVenv:
    unknown = sorted(set(e.data) - {"torch", "exclude", "triton"})
    if unknown:
        raise e.fail(unknown[0], "absent (the cpu table has torch, exclude and triton)", e.data[unknown[0]])
    torch = e.text("torch", f'"{TORCH_LOCAL}" or a torch version', default="")
    if torch and torch != TORCH_LOCAL:
        try:
            Version(torch)
        except InvalidVersion:
            raise e.fail("torch", f'"{TORCH_LOCAL}" or a torch version', torch) from None
    what = "a list of { name, why } (a package name and its reason)"
    exclude = []
    for item in e.get("exclude", list, what, default=[]):
        if not (
            isinstance(item, dict)
            and set(item) == {"name", "why"}
            and isinstance(item["name"], str)
            and _PACKAGE.fullmatch(item["name"])
            and isinstance(item["why"], str)
            and item["why"].strip()
        ):
            raise e.fail("exclude", what, item)
        exclude.append(Exclusion(item["name"], item["why"]))
    triton = e.text("triton", f'"{TRITON_STAND_IN}" or absent', default="")
    if triton not in ("", TRITON_STAND_IN):
        raise e.fail("triton", f'"{TRITON_STAND_IN}" or absent', triton)
    return CpuVenv(torch, tuple(exclude), triton)


def cpu_rules(bases: dict[str, Base], base: Base) -> tuple[CpuVenv, str]:
    """The CPU test venv's rules of ``base`` and the base they are written for: its own table,
    else the one of the newest older base that has one (what a carry starts from), else none."""
    if base.seam.cpu.given:
        return base.seam.cpu, base.name
    older = [b for b in bases.values() if b.seam.cpu.given and Version(b.version) < Version(base.version)]
    if not older:
        return CpuVenv(), ""
    source = max(older, key=lambda b: Version(b.version))
    return source.seam.cpu, source.name


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
        raise SeamError(f"cannot read bases file {path}: {e}", hint=_unreadable_hint(path, root)) from e
    bases = {name: _base(name, entry, path) for name, entry in data.items()}
    _check_queues(bases, path, Path(root) if root is not None else path.parent)
    return bases


def _unreadable_hint(path: Path, root: Path | None = None) -> str:
    """The next step for a bases file that cannot be read: see what changed in it, get it back
    from git, or (no such file where the project should be) name the project's directory. A file
    outside the project (``--bases /etc/passwd``) is never one to fix: give --bases another."""
    top = git.index.toplevel(path.parent) if path.parent.is_dir() else None
    real = path.parent.resolve() / path.name
    rel = real.relative_to(top).as_posix() if top is not None and real.is_relative_to(top) else None
    ours = root is None or real.is_relative_to(Path(root).resolve())
    if path.exists() and not ours:
        return (
            f"give --bases the project's bases file ({hints.quote(Path(root) / 'bases.toml')}), or leave "
            f"--bases out ({hints.quote(path)} is not a bases file of the project {hints.quote(root)})"
        )
    if path.exists():
        return (
            hints.shell("git", "-C", top, "diff", "--", rel)
            if rel
            else f"read {hints.quote(path)} and fix it"
        )
    if rel and git.repo.exists_at(top, "HEAD", rel):  # deleted from a checkout that has it
        return hints.shell("git", "-C", top, "checkout", "--", rel)
    if path.name != "bases.toml":  # --bases named it
        return "give --bases an existing bases file (or leave --bases out: the project's bases.toml)"
    return (
        f"{hints.quote(path.parent)} is not the project (no bases.toml there): run tkv-seam from the "
        "project's root, or give --root <the project> (or --bases <its bases.toml>)"
    )


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
            hint=f"replace {link.relative_to(root)} with "
            + ("the file itself" if link == root / norm and not link.is_dir() else "a directory")
            + " (or fix the queue path), then run again",
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
    bases: dict[str, Base],
    name: str,
    hint: str = "make apply BASE={}",
    avoid: str | None = None,
    again: bool = False,
) -> Base:
    """The base ``name``; a usage error listing the known ones (``hint``: the command, ``{}`` a
    known name other than ``avoid``). Under make, a name close to a known one (and the default
    hint, or ``again``) hints the command being run with ``BASE=`` that one."""
    if name not in bases:
        known = ", ".join(sorted(bases)) or "none"
        candidates = [b for b in sorted(bases) if b != avoid] or ["<name>"]
        meant = [b for b in hints.close(name, bases) if b != avoid]
        chosen = (meant or candidates)[0]
        # under make: the command the user ran, with that base (not another command's)
        retry = None
        if meant and (again or hint == "make apply BASE={}"):
            retry = hints.make_again(BASE=chosen) or hints.tool_again(name, chosen)
        raise UsageError(
            f"unknown base {name!r}; known bases: {known}{hints.did_you_mean(meant)}",
            hint=retry or hint.format(chosen),
        )
    return bases[name]


@dataclass
class KnownBases(Answer):
    """``bases``: every base of the bases file and its pins."""

    bases: dict[str, Base]

    def lines(self) -> list[str]:
        return [
            f"{name}\tcommit {b.commit_prefix}\t{b.sdist.filename} sha256 {b.sdist.sha256[:16]}…"
            f"\timage {b.image.name}"
            for name, b in self.bases.items()
        ]

    def to_json(self) -> dict:
        return {
            "bases": {
                name: {"commit_prefix": b.commit_prefix, "sdist": plain(b.sdist), "image": plain(b.image)}
                for name, b in self.bases.items()
            }
        }
