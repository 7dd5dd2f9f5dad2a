"""Known upstream bases and their sources: a verified PyPI sdist, or git.

Both routes end in a *pristine base repository* in the cache: a git repo whose
base commit holds exactly the upstream v0.31.0 tree. ``apply`` clones it.
"""

from __future__ import annotations

import hashlib
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
from dataclasses import dataclass, field
from pathlib import Path

from . import git
from .errors import NetworkError, SeamError, VerifyError
from .progress import QUIET, Progress

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
    seam: SeamPins = field(default_factory=SeamPins, compare=False)
    extra: dict = field(default_factory=dict, compare=False)

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
    return Path(xdg or Path.home() / ".cache") / "tkv-seam"


def load_bases(path: Path) -> dict[str, Base]:
    """Read the bases data file (TOML, one table per base name)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SeamError(f"cannot read bases file {path}: {e}") from e
    bases = {}
    for name, entry in data.items():
        bases[name] = Base(
            name=name,
            version=entry["version"],
            tag=entry.get("tag", name),
            commit_prefixes=tuple(p.lower() for p in entry["commit_prefixes"]),
            sdist=Sdist(**entry["sdist"]),
            image=Image(**entry["image"]),
            project=entry.get("project", "vllm"),
            seam=_seam_pins(entry.get("seam", {})),
        )
    return bases


def _seam_pins(entry: dict) -> SeamPins:
    plugin = entry.get("plugin", {})
    return SeamPins(
        ruff=entry.get("ruff", ""),
        plugin=Plugin(plugin.get("requirement", ""), tuple(plugin.get("hashes", ()))),
        upstream_tests=tuple(entry.get("upstream_tests", ())),
    )


def get_base(bases: dict[str, Base], name: str) -> Base:
    if name not in bases:
        known = ", ".join(sorted(bases)) or "none"
        raise SeamError(
            f"unknown base {name!r}; known bases: {known}",
            hint=f"make apply BASE={sorted(bases)[0] if bases else '<name>'}",
        )
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


def find_sdist_url(base: Base, index_url: str) -> str:
    """Ask the Simple API (PEP 691 JSON) for the sdist and check the index's metadata against the pin."""
    url = f"{index_url}/{base.project}/"
    req = urllib.request.Request(url, headers={"Accept": SIMPLE_JSON})
    with _urlopen(req, url) as resp:
        try:
            listing = json.load(resp)
        except ValueError as e:
            raise NetworkError(f"{url} did not answer PEP 691 JSON: {e}") from e
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
    with _urlopen(url, url) as resp, open(part, "wb") as f:
        for chunk in iter(lambda: resp.read(1 << 20), b""):
            f.write(chunk)
            fetched += len(chunk)
            progress.bytes(base.sdist.filename, fetched, base.sdist.size)
    try:
        verify_file(part, base.sdist)
    except VerifyError:
        part.unlink()
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


def _base_info(path: Path) -> dict | None:
    info = path / ".git" / "tkv-seam-base.json"
    if not info.exists():
        info = path / "tkv-seam-base.json"  # bare mirror
    try:
        return json.loads(info.read_text())
    except (OSError, ValueError):
        return None


def sdist_base_repo(
    base: Base, cache: Path, index_url: str | None = None, progress: Progress = QUIET
) -> tuple[BaseRepo, int]:
    """The pristine repo built from the verified sdist (cached); and bytes fetched."""
    repo = cache / "bases" / f"{base.name}-sdist"
    tarball, fetched = fetch_sdist(base, cache, index_url, progress)
    info = _base_info(repo)
    if info and info.get("sha256") == base.sdist.sha256:
        return BaseRepo(repo, info["commit"], "sdist", info["upstream_commit"]), fetched
    sdist_commit(tarball, base)  # refuse a wrong release before anything is written
    shutil.rmtree(repo, ignore_errors=True)
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
        (tree / ".git" / "tkv-seam-base.json").write_text(
            json.dumps(
                {
                    "base": base.name,
                    "sha256": base.sdist.sha256,
                    "commit": commit,
                    "upstream_commit": upstream,
                },
                indent=1,
            )
        )
        os.replace(tree, repo)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return BaseRepo(repo, commit, "sdist", upstream), fetched


def git_base_repo(base: Base, cache: Path, url: str, progress: Progress = QUIET) -> BaseRepo:
    """A bare mirror of ``url`` in the cache, checked: tag ``base.tag`` is the pinned commit."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", url.rstrip("/"))[-80:]
    mirror = cache / "git" / f"{slug}.git"
    if mirror.exists():
        progress.step(f"fetch {base.tag} from {url}")
        git.run(mirror, "fetch", "--quiet", "--tags", "--force", url)
    else:
        progress.step(f"clone {url}")
        mirror.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=mirror.parent))
        try:
            git.run(None, "clone", "--quiet", "--bare", url, str(tmp / "m.git"))
            os.replace(tmp / "m.git", mirror)
        except SeamError as e:
            raise NetworkError(f"cannot clone {url}: {e.message}") from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    proc = git.run(
        mirror, "rev-parse", "--verify", "--quiet", f"refs/tags/{base.tag}^{{commit}}", check=False
    )
    if proc.returncode != 0:
        raise VerifyError(f"{url} has no tag {base.tag}")
    commit = proc.stdout.decode().strip()
    if not base.commit_matches(commit):
        raise VerifyError(
            f"{url}: tag {base.tag} is commit {commit}, the pin is {base.commit_prefix}",
            hint="the repository's tag moved or is not upstream vLLM; check VLLM_GIT",
        )
    return BaseRepo(mirror, commit, "git", commit)


def base_repo(
    base: Base,
    cache: Path,
    git_url: str | None = None,
    index_url: str | None = None,
    progress: Progress = QUIET,
) -> tuple[BaseRepo, int]:
    """The pristine base from git (when ``git_url``) or from the sdist; bytes fetched."""
    if git_url:
        return git_base_repo(base, cache, git_url, progress), 0
    return sdist_base_repo(base, cache, index_url, progress)
