"""Known upstream bases and their sources: a verified PyPI sdist, or git.

Both routes end in a *pristine base repository* in the cache: a git repo whose
base commit holds exactly the upstream v0.31.0 tree. ``apply`` clones it.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import tarfile
import tempfile
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import git
from .errors import NetworkError, SeamError, UsageError, VerifyError
from .fsutil import atomic_write
from .lock import locked
from .progress import QUIET, Progress
from .series import Queue

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
BASE_AUTHOR = "vLLM upstream <base@tkv-seam.invalid>"
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


def _base(name: str, entry: object, path: Path) -> Base:
    if not isinstance(entry, dict):
        raise SeamError(
            f"{path}: {name!r} is not a table of pins", hint=f'see the ["v0.31.0"] table in {path}'
        )
    try:
        return Base(
            name=name,
            version=entry["version"],
            tag=entry.get("tag", name),
            commit_prefixes=tuple(p.lower() for p in entry["commit_prefixes"]),
            sdist=Sdist(**entry["sdist"]),
            image=Image(**entry["image"]),
            project=entry.get("project", "vllm"),
            queue=Queue(**entry["queue"]) if "queue" in entry else Queue.for_base(name),
            seam=_seam_pins(entry.get("seam", {})),
        )
    except KeyError as e:
        raise SeamError(
            f"{path}: [{name}] lacks the {e.args[0]!r} field",
            hint="add it (fields: version, commit_prefixes, sdist, image); see the README's 'Base pins'",
        ) from e
    except (TypeError, AttributeError) as e:
        raise SeamError(
            f"{path}: [{name}] is malformed: {e}",
            hint="sdist = { filename, size, sha256 }, image = { name, revision_prefix }, "
            'commit_prefixes = ["<hex>", ...]',
        ) from e


def load_bases(path: Path) -> dict[str, Base]:
    """Read the bases data file (TOML, one table per base name)."""
    try:
        data = tomllib.loads(Path(path).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SeamError(f"cannot read bases file {path}: {e}", hint=f"git checkout -- {path}") from e
    bases = {name: _base(name, entry, path) for name, entry in data.items()}
    _check_queues(bases, path)
    return bases


def _check_queues(bases: dict[str, Base], path: Path) -> None:
    """Each base's queue is its own: relative paths inside the project, no two bases sharing one."""
    owner: dict[str, str] = {}
    for name, b in bases.items():
        for rel in (b.queue.series, b.queue.patches):
            parts = Path(rel).parts
            if Path(rel).is_absolute() or ".." in parts or not parts:
                raise SeamError(f"{path}: queue of {name}: {rel!r} must be a path inside the project")
        for rel in {b.queue.series, b.queue.patches}:
            if rel in owner:
                raise SeamError(f"{path}: {name} and {owner[rel]} share the queue path {rel!r}")
            owner[rel] = name


def _seam_pins(entry: dict) -> SeamPins:
    plugin = entry.get("plugin", {})
    return SeamPins(
        ruff=entry.get("ruff", ""),
        plugin=Plugin(plugin.get("requirement", ""), tuple(plugin.get("hashes", ()))),
        upstream_tests=tuple(entry.get("upstream_tests", ())),
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


def default_index_url() -> str:
    """The package index's Simple API root: TKV_SEAM_INDEX_URL, PIP_INDEX_URL, or pip's default."""
    for var in ("TKV_SEAM_INDEX_URL", "PIP_INDEX_URL"):
        if os.environ.get(var):
            return os.environ[var].rstrip("/")
    try:
        from pip._internal.models.index import PyPI  # pip knows the default index
    except ImportError as e:
        raise SeamError(
            "no package index configured and pip is not importable",
            hint="set TKV_SEAM_INDEX_URL to a PEP 691 Simple API root",
        ) from e
    return PyPI.simple_url.rstrip("/")


def _urlopen(req: urllib.request.Request | str, what: str):
    try:
        return urllib.request.urlopen(req, timeout=60)
    except (urllib.error.URLError, OSError) as e:
        raise NetworkError(
            f"cannot fetch {what}: {e}",
            hint="check network access to the package index, or set VLLM_GIT=<url-or-path>",
        ) from e


def simple_listing(project: str, index_url: str) -> tuple[str, dict]:
    """The project's page on the Simple API (PEP 691 JSON): its URL and the parsed listing."""
    url = f"{index_url}/{project}/"
    req = urllib.request.Request(url, headers={"Accept": SIMPLE_JSON})
    with _urlopen(req, url) as resp:
        try:
            return url, json.load(resp)
        except ValueError as e:
            raise NetworkError(f"{url} did not answer PEP 691 JSON: {e}") from e


def find_sdist_url(base: Base, index_url: str) -> str:
    """Ask the Simple API (PEP 691 JSON) for the sdist and check the index's metadata against the pin."""
    url, listing = simple_listing(base.project, index_url)
    for entry in listing.get("files", []):
        if entry.get("filename") != base.sdist.filename:
            continue
        sha = entry.get("hashes", {}).get("sha256")
        if sha and sha != base.sdist.sha256:
            raise VerifyError(
                f"{base.sdist.filename}: the index lists sha256 {sha}, the pin for {base.name} "
                f"is {base.sdist.sha256}",
                hint="check bases.toml against the release; nothing was downloaded",
            )
        if entry.get("size") not in (None, base.sdist.size):
            raise VerifyError(
                f"{base.sdist.filename}: the index lists size {entry['size']}, the pin is {base.sdist.size}"
            )
        return urllib.parse.urljoin(url, entry["url"])
    raise NetworkError(f"{url} lists no file {base.sdist.filename}")


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
    """Return the verified sdist in the cache, downloading it once; also bytes fetched now."""
    dest = cache / "sdist" / base.sdist.filename
    if dest.exists():
        progress.step(f"verify cached {dest.name}")
        verify_file(dest, base.sdist)
        return dest, 0
    url = find_sdist_url(base, index_url or default_index_url())
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    progress.step(f"download {base.sdist.filename} ({base.sdist.size / 1e6:.1f} MB)")
    fetched = 0
    try:
        with _urlopen(url, url) as resp, open(part, "wb") as f:
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                f.write(chunk)
                fetched += len(chunk)
                progress.bytes(base.sdist.filename, fetched, base.sdist.size)
        if fetched < base.sdist.size:
            raise NetworkError(
                f"download of {url} cut short: {fetched} of {base.sdist.size} bytes; nothing was kept",
                hint="run the command again to download it afresh",
            )
        verify_file(part, base.sdist)
    except (http.client.HTTPException, OSError) as e:
        part.unlink(missing_ok=True)
        raise NetworkError(
            f"download of {url} failed after {fetched} of {base.sdist.size} bytes: {e}; nothing was kept",
            hint="run the command again to download it afresh",
        ) from e
    except VerifyError as e:
        part.unlink(missing_ok=True)
        raise VerifyError(
            f"{url}: {e.message.split(': ', 1)[1]}; the download was deleted",
            hint="check that the index serves the pinned release (bases.toml), then run the command again",
        ) from e
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, dest)
    return dest, fetched


def _sdist_root(tar: tarfile.TarFile) -> str:
    roots = {m.name.split("/", 1)[0] for m in tar.getmembers()}
    if len(roots) != 1:
        raise VerifyError(f"sdist has {len(roots)} top-level entries, expected one directory")
    return roots.pop()


def check_version_file(text: str, base: Base, where: str) -> str:
    """Check vllm/_version.py text against the pin; return the recorded commit id."""
    m_commit, m_version = _COMMIT_RE.search(text), _VERSION_RE.search(text)
    if not m_commit or not m_version:
        raise VerifyError(f"{where}: no __version__/__commit_id__ found")
    if m_version.group(1) != base.version:
        raise VerifyError(f"{where}: version {m_version.group(1)}, expected {base.version}")
    commit = m_commit.group(1)
    if not base.commit_matches(commit):
        raise VerifyError(
            f"{where}: commit {commit} does not match the pin {base.commit_prefix} of {base.name}",
            hint="the sdist is not the pinned release; check bases.toml",
        )
    return commit


def sdist_commit(tarball: Path, base: Base) -> str:
    """Read ``vllm/_version.py`` inside the tarball (nothing unpacked) and check it against the pin."""
    with tarfile.open(tarball) as tar:
        root = _sdist_root(tar)
        member = tar.getmember(f"{root}/vllm/_version.py")
        text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
    return check_version_file(text, base, f"{tarball.name}:vllm/_version.py")


def unpack_sdist(tarball: Path, base: Base, dest: Path, progress: Progress = QUIET) -> str:
    """Check the sdist's commit id, then unpack it (without its top directory) into ``dest``."""
    commit = sdist_commit(tarball, base)
    progress.step(f"unpack {tarball.name}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        with tarfile.open(tarball) as tar:
            root = _sdist_root(tar)
            # The "data" filter refuses absolute paths, links out of the tree and devices.
            tar.extractall(tmp, filter="data")
        os.replace(tmp / root, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return commit


# --------------------------------------------------------------------------- pristine repo


@dataclass(frozen=True)
class BaseRepo:
    """A local git repository holding the pristine base at ``commit``."""

    path: Path
    commit: str
    source: str  # "sdist" or "git"
    upstream_commit: str  # the upstream commit id (prefix) the source proved


@dataclass(frozen=True)
class BaseRecord:
    """What a pristine base repository of the cache was built from (its ``.git/tkv-seam-base.json``):
    the sdist's sha256, the base commit and its tree id (checked on every use), the upstream commit."""

    base: str
    sha256: str
    commit: str
    tree: str
    upstream_commit: str

    FILE = "tkv-seam-base.json"

    @classmethod
    def load(cls, repo: Path) -> BaseRecord | None:
        try:
            data = json.loads((repo / ".git" / cls.FILE).read_text())
            return cls(**{k: data[k] for k in ("base", "sha256", "commit", "tree", "upstream_commit")})
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def save(self, repo: Path) -> None:
        atomic_write(repo / ".git" / self.FILE, json.dumps(asdict(self), indent=1))


def _check_repo(repo: Path, commit: str, tree_id: str | None, full: bool) -> str | None:
    """Why the cached repository ``repo`` cannot be trusted, or None.

    Always (cheap): the base commit's tree id is the one recorded at build time and every
    object it reaches is present (``fsck --connectivity-only``). ``full``: every object's
    content is hashed again (``git fsck``, a few seconds on vLLM; ``fetch`` does it).
    """
    tree = git.tree_of(repo, commit)
    if tree is None:
        return f"the base commit {commit[:12]} cannot be read"
    if tree_id and tree != tree_id:
        return f"the base commit's tree is {tree[:12]}, recorded {tree_id[:12]}"
    return git.fsck(repo, commit, full)


def _interrupted_builds(bases_dir: Path, name: str) -> list[Path]:
    """The ``mkdtemp(prefix=".<name>-")`` directories of this base (8 random characters, so
    ``.v0.31.0-rc1-…`` of another base never matches ``v0.31.0``)."""
    pattern = re.compile(rf"\.{re.escape(name)}-[a-z0-9_]{{8}}")
    if not bases_dir.exists():
        return []
    return sorted(p for p in bases_dir.iterdir() if pattern.fullmatch(p.name))


def sdist_base_repo(
    base: Base,
    cache: Path,
    index_url: str | None = None,
    progress: Progress = QUIET,
    full_check: bool = False,
) -> tuple[BaseRepo, int]:
    """The pristine repo built from the verified sdist (cached, checked); and bytes fetched.

    Holds the cache entry's lock; removes the temporary directories of interrupted builds.
    A cached repository that fails its check is rebuilt from the verified sdist.
    """
    with locked(lock_file(cache, f"base-{base.name}-sdist"), f"the cached base {base.name}", progress):
        repo = cache / "bases" / f"{base.name}-sdist"
        for leftover in _interrupted_builds(repo.parent, base.name):
            progress.step(f"remove {leftover} (left by an interrupted build)")
            shutil.rmtree(leftover, ignore_errors=True)
        tarball, fetched = fetch_sdist(base, cache, index_url, progress)
        info = BaseRecord.load(repo)
        if info and info.sha256 == base.sdist.sha256:
            problem = _check_repo(repo, info.commit, info.tree, full_check)
            if problem is None:
                return BaseRepo(repo, info.commit, "sdist", info.upstream_commit), fetched
            progress.warn(f"the cached base {repo} is damaged ({problem}); rebuilding it from {tarball.name}")
        return _build_sdist_repo(base, tarball, repo, progress), fetched


def _build_sdist_repo(base: Base, tarball: Path, repo: Path, progress: Progress) -> BaseRepo:
    sdist_commit(tarball, base)  # refuse a wrong release before anything is written
    repo.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{base.name}-", dir=repo.parent))
    try:
        tree = work / "tree"
        upstream = unpack_sdist(tarball, base, tree, progress)
        progress.step(f"record pristine {base.name} in git")
        git.init(tree, branch="base")
        commit = git.commit(
            tree,
            f"vLLM {base.tag} ({upstream}) pristine base from {base.sdist.filename}\n",
            BASE_AUTHOR,
        )
        BaseRecord(
            base.name, base.sdist.sha256, commit, git.rev_parse(tree, f"{commit}^{{tree}}"), upstream
        ).save(tree)
        if repo.exists():
            os.replace(repo, work / "old")  # removed with work below
        os.replace(tree, repo)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return BaseRepo(repo, commit, "sdist", upstream)


def git_base_repo(
    base: Base, cache: Path, url: str, progress: Progress = QUIET, full_check: bool = False
) -> BaseRepo:
    """A bare mirror of ``url`` in the cache, checked: tag ``base.tag`` is the pinned commit."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", url.rstrip("/"))[-80:]
    mirror = cache / "git" / f"{slug}.git"
    with locked(lock_file(cache, f"git-{slug}"), f"the cached mirror of {url}", progress):
        for leftover in sorted(mirror.parent.glob(f".{slug}.clone-*")) if mirror.parent.exists() else []:
            shutil.rmtree(leftover, ignore_errors=True)
        if mirror.exists():
            progress.step(f"fetch {base.tag} from {url}")
            git.fetch_tags(mirror, url)
        else:
            progress.step(f"clone {url}")
            mirror.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{slug}.clone-", dir=mirror.parent))
            try:
                git.clone_bare(url, tmp / "m.git")
                os.replace(tmp / "m.git", mirror)
            except SeamError as e:
                raise NetworkError(
                    f"cannot clone {url}: {e.message}", hint="check the URL and network access, then retry"
                ) from e
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        commit = git.resolve(mirror, f"refs/tags/{base.tag}^{{commit}}")
        if commit is None:
            raise VerifyError(f"{url} has no tag {base.tag}", hint=f"git ls-remote --tags {url}")
        if not base.commit_matches(commit):
            raise VerifyError(
                f"{url}: tag {base.tag} is commit {commit}, the pin is {base.commit_prefix}",
                hint="the repository's tag moved or is not upstream vLLM; check VLLM_GIT",
            )
        problem = _check_repo(mirror, commit, None, full_check)
        if problem:
            raise VerifyError(
                f"the cached mirror {mirror} is damaged: {problem}",
                hint=f"rm -rf {mirror}, then run the command again (it clones afresh)",
            )
    return BaseRepo(mirror, commit, "git", commit)


def base_repo(
    base: Base,
    cache: Path,
    git_url: str | None = None,
    index_url: str | None = None,
    progress: Progress = QUIET,
    full_check: bool = False,
) -> tuple[BaseRepo, int]:
    """The pristine base from git (when ``git_url``) or from the sdist; bytes fetched.

    ``full_check`` re-hashes every object of the cached repository (``fetch`` does).
    """
    if git_url:
        return git_base_repo(base, cache, git_url, progress, full_check), 0
    return sdist_base_repo(base, cache, index_url, progress, full_check)
