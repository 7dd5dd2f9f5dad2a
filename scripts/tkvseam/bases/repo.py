"""The pristine base repositories of the cache: a git repo per base whose base commit holds exactly
the upstream tree, built from the verified sdist (or mirrored from git) and checked on every use.

``base_repo`` is what apply and the port clone from. A repository records what it was built
from (``BaseRecord``: the sdist's sha256, the base commit and its tree id); a cached repository
that fails its check is rebuilt from the verified sdist; interrupted builds are cleaned.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import git
from ..answer import Answer
from . import unpack
from .pins import Base, lock_file
from .sdist import sdist_hint, version_text, check_version_file, fetch_sdist
from ..errors import NetworkError, SeamError, VerifyError
from ..fsutil import atomic_write
from ..lock import locked
from ..progress import QUIET, Progress

BASE_AUTHOR = "vLLM upstream <base@tkv-seam.invalid>"


@dataclass(frozen=True)
class BaseRepo:
    """A local git repository holding the pristine base at ``commit``."""

    path: Path
    commit: str
    source: str  # "sdist" or "git"
    upstream_commit: str  # the upstream commit id (prefix) the source proved


@dataclass
class Fetched(Answer):
    """``fetch``: the pristine base in the cache, checked, and the bytes downloaded for it now."""

    base: str
    repo: BaseRepo
    fetched_bytes: int

    def lines(self) -> list[str]:
        r = self.repo
        return [
            f"{self.base}: pristine base {r.commit[:12]} ({r.source}, upstream {r.upstream_commit[:12]}) in "
            f"{r.path}; fetched {self.fetched_bytes} bytes"
        ]

    def to_json(self) -> dict:
        r = self.repo
        return {
            "base": self.base,
            "commit": r.commit,
            "source": r.source,
            "upstream_commit": r.upstream_commit,
            "path": str(r.path),
            "fetched_bytes": self.fetched_bytes,
        }


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
    tree = git.repo.tree_of(repo, commit)
    if tree is None:
        return f"the base commit {commit[:12]} cannot be read"
    if tree_id and tree != tree_id:
        return f"the base commit's tree is {tree[:12]}, recorded {tree_id[:12]}"
    return git.repo.fsck(repo, commit, full)


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
    with unpack.Sdist(tarball, sdist_hint(tarball)) as sdist:
        # every member and the release's commit are checked before anything is written
        upstream = check_version_file(version_text(sdist), base, f"{tarball.name}:vllm/_version.py")
        repo.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{base.name}-", dir=repo.parent))
        try:
            progress.step(f"unpack {tarball.name}")
            sdist.extract(work / "tree")
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    try:
        tree = work / "tree"
        progress.step(f"record pristine {base.name} in git")
        git.repo.init(tree, branch="base")
        commit = git.index.commit(
            tree,
            f"vLLM {base.tag} ({upstream}) pristine base from {base.sdist.filename}\n",
            BASE_AUTHOR,
        )
        BaseRecord(
            base.name, base.sdist.sha256, commit, git.repo.rev_parse(tree, f"{commit}^{{tree}}"), upstream
        ).save(tree)
        if repo.exists():
            os.replace(repo, work / "old")  # removed with work below
        os.replace(tree, repo)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return BaseRepo(repo, commit, "sdist", upstream)


def git_source(root: Path, url: str) -> str:
    """``url`` as the git source of a base: a local path (git's rule: no ``://``, and no ``:`` or a
    ``/`` before the first one) made absolute against the project ``root``, so every fetch into the
    cache's mirror (run from another directory) and the mirror's name mean that one repository (two
    projects' ``../x`` are two mirrors); a URL as it is."""
    local = "://" not in url and (":" not in url or "/" in url.split(":", 1)[0])
    if not local or os.path.isabs(url):
        return os.path.normpath(url) if local else url
    return os.path.normpath(os.path.join(root, url))


def git_base_repo(
    base: Base, cache: Path, url: str, progress: Progress = QUIET, full_check: bool = False
) -> BaseRepo:
    """A bare mirror of ``url`` in the cache, checked: tag ``base.tag`` is the pinned commit.
    ``url`` is a URL or an absolute path (``git_source``)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", url.rstrip("/"))[-80:]
    mirror = cache / "git" / f"{slug}.git"
    with locked(lock_file(cache, f"git-{slug}"), f"the cached mirror of {url}", progress):
        for leftover in sorted(mirror.parent.glob(f".{slug}.clone-*")) if mirror.parent.exists() else []:
            shutil.rmtree(leftover, ignore_errors=True)
        if mirror.exists():
            progress.step(f"fetch {base.tag} from {url}")
            git.repo.fetch_tags(mirror, url)
        else:
            progress.step(f"clone {url}")
            mirror.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{slug}.clone-", dir=mirror.parent))
            try:
                git.repo.clone_bare(url, tmp / "m.git")
                os.replace(tmp / "m.git", mirror)
            except SeamError as e:
                raise NetworkError(
                    f"cannot clone {url}: {e.message}", hint="check the URL and network access, then retry"
                ) from e
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        commit = git.repo.resolve(mirror, f"refs/tags/{base.tag}^{{commit}}")
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
