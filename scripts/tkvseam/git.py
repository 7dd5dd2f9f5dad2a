"""Thin wrapper over the git command line. Knows nothing about the project layout.

Plumbing sequences (a private index, blobs, trees, commits made without touching
the work tree) are named functions here, each unusual flag with its reason.
"""

from __future__ import annotations

import atexit
import os
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import SeamError

# Fixed identity and dates for commits the tool makes, so that applying the same
# inputs twice gives the same commit ids (nothing churns, nothing to compare).
FIXED_DATE = "2026-01-01T00:00:00+0000"
TOOL_NAME = "tkv-seam"
TOOL_EMAIL = "tkv-seam@users.noreply.invalid"


_global_config: str | None = None


def _tool_global_config() -> str:
    """A global git config of this process holding only ``safe.directory = *``.

    A user's global config must not change what we produce or read, so it is replaced.
    safe.directory: the cache and the trees unpacked from a tarball may belong to another
    uid, and git (2.39) honours safe.directory only in a global or system config, not
    with ``-c``; git's own advice (``git config --global``) cannot reach us either.
    mkstemp: a private file (a fixed name in /tmp could be planted by another user).
    """
    global _global_config
    if _global_config is None:
        fd, path = tempfile.mkstemp(prefix="tkv-seam-gitconfig-")
        with os.fdopen(fd, "w") as f:
            f.write("[safe]\n\tdirectory = *\n")
        atexit.register(lambda: Path(path).unlink(missing_ok=True))
        _global_config = path
    return _global_config


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": _tool_global_config(),
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "GIT_COMMITTER_NAME": TOOL_NAME,
            "GIT_COMMITTER_EMAIL": TOOL_EMAIL,
            "GIT_COMMITTER_DATE": FIXED_DATE,
        }
    )
    if extra:
        env.update(extra)
    return env


def run(
    repo: Path | str | None,
    *args: str,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git -C repo args...`` and return the completed process (bytes)."""
    cmd = ["git"]
    if repo is not None:
        cmd += ["-C", str(repo)]
    cmd += list(args)
    proc = subprocess.run(cmd, input=input, capture_output=True, env=_env(env))
    if check and proc.returncode != 0:
        raise SeamError(
            f"git {' '.join(args[:3])} failed in {repo}: {proc.stderr.decode(errors='replace').strip()}",
            hint=f"git -C {repo or '.'} status  (see what state the repository is in)",
        )
    return proc


def out(repo: Path | str | None, *args: str, **kw) -> str:
    """Run git and return stripped stdout as text."""
    return run(repo, *args, **kw).stdout.decode().strip()


def head(repo: Path) -> str:
    return out(repo, "rev-parse", "HEAD")


def status_porcelain(repo: Path) -> list[str]:
    """Uncommitted changes, including untracked files (ignored files do not count)."""
    text = run(repo, "status", "--porcelain", "--untracked-files=all").stdout.decode()
    return [line for line in text.splitlines() if line.strip()]


def init(repo: Path, branch: str = "main") -> None:
    run(None, "init", "-q", "-b", branch, str(repo))


def commit(
    repo: Path,
    message: str,
    author: str,
    paths: list[str] | None = None,
    date: str = FIXED_DATE,
) -> str:
    """Stage ``paths`` (default: the whole tree, ignored files too) and commit.

    The date is fixed so that the same inputs always give the same commit id.
    """
    run(repo, "add", "-A", "--force", "--", *(paths or ["."]))
    run(
        repo,
        "commit",
        "-q",
        "--allow-empty",
        "--no-verify",
        "-F",
        "-",
        "--author",
        author,
        env={"GIT_AUTHOR_DATE": date},
        input=message.encode(),
    )
    return head(repo)


def status_paths(repo: Path) -> list[tuple[str, str]]:
    """(two-letter status, path) of every uncommitted change, untracked files included."""
    # -z: paths verbatim (no quoting of odd names); --no-renames: one path per entry
    text = run(repo, "status", "--porcelain", "-z", "--no-renames", "--untracked-files=all").stdout
    rows = []
    for entry in text.decode("utf-8", "surrogateescape").split("\0"):
        if entry:
            rows.append((entry[:2], entry[3:]))
    return rows


def subjects(repo: Path, *revs: str) -> list[tuple[str, str]]:
    """(commit id, subject) of the commits ``revs`` select (e.g. ``B ^A``), newest first."""
    proc = run(repo, "log", "--format=%H %s", *revs, "--", check=False)
    text = proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else ""
    return [tuple(line.split(" ", 1)) if " " in line else (line, "") for line in text.splitlines()]


# --------------------------------------------------------------------------- plumbing


@contextmanager
def private_index(repo: Path, start: str) -> Iterator[dict[str, str]]:
    """An index file of this run only, loaded with ``start``; yields the env that selects it.

    The repository's real index and work tree are not touched; the file is removed at the end.
    A per-run name: two runs never share (or delete) each other's index.
    """
    index = Path(repo).absolute() / ".git" / f"tkv-seam-index-{os.getpid()}-{secrets.token_hex(4)}"
    env = {"GIT_INDEX_FILE": str(index)}  # absolute: git -C would resolve a relative one twice
    try:
        run(repo, "read-tree", start, env=env)
        yield env
    finally:
        index.unlink(missing_ok=True)
        index.with_name(index.name + ".lock").unlink(missing_ok=True)


def hash_blob(repo: Path, data: bytes) -> str:
    """Store ``data`` as a blob; return its id."""
    # -w: write the object (not only compute the id); --stdin: the bytes, not a path
    return out(repo, "hash-object", "-w", "--stdin", input=data)


def update_index(repo: Path, index_env: dict[str, str], entries: list[tuple[str, str, str]]) -> None:
    """Set ``(mode, blob id, path)`` entries in the private index; mode "0" removes the path."""
    lines = [f"{mode} {'0' * 40 if mode == '0' else sha}\t{path}" for mode, sha, path in entries]
    # --index-info: many entries in one call, read from stdin in ls-files --stage format
    run(repo, "update-index", "--index-info", env=index_env, input=("\n".join(lines) + "\n").encode())


def write_tree(repo: Path, index_env: dict[str, str]) -> str:
    """The tree object of the private index; return its id."""
    return out(repo, "write-tree", env=index_env)


def commit_tree(repo: Path, tree: str, parent: str, message: str, author_env: dict[str, str]) -> str:
    """A commit of ``tree`` on ``parent`` (no ref moves); return its id."""
    # -F -: the message from stdin, byte for byte (no -m paragraph rewrapping)
    return out(repo, "commit-tree", tree, "-p", parent, "-F", "-", env=author_env, input=message.encode())


def snapshot_worktree(repo: Path, message: str) -> str:
    """A commit on HEAD holding the work tree as it is (tracked and untracked, not ignored).

    Nothing in the repository changes but new objects: used to keep what ``--force`` drops.
    """
    with private_index(repo, "HEAD") as env:
        # -A: modified, deleted and untracked files (ignored ones stay out, as in status)
        run(repo, "add", "-A", "--", ".", env=env)
        tree = write_tree(repo, env)
    author = {"GIT_AUTHOR_NAME": TOOL_NAME, "GIT_AUTHOR_EMAIL": TOOL_EMAIL, "GIT_AUTHOR_DATE": FIXED_DATE}
    return commit_tree(repo, tree, head(repo), message, author)


def blob_id(repo: Path, commit: str, path: str) -> str | None:
    """The blob id of ``path`` at ``commit``, or None when the commit has no such file."""
    proc = run(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{path}", check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def file_blob_id(repo: Path, path: str) -> str | None:
    """The blob id the work-tree file ``path`` would have, or None when it does not exist."""
    full = Path(repo) / path
    if not full.exists() and not full.is_symlink():
        return None
    # --no-filters: the bytes as they are on disk, like the tool writes them
    return out(repo, "hash-object", "--no-filters", "--", path)


def tree_entry(repo: Path, commit: str, path: str) -> tuple[str, str] | None:
    """``(mode, object id)`` of ``path`` at ``commit``; None when absent.

    Raises SeamError when git cannot read the commit or a tree on the way (a corrupt
    or missing object), which a plain "does it exist" check would report as absent.
    """
    line = out(repo, "ls-tree", "--full-tree", commit, "--", path)
    if not line:
        return None
    mode, _, rest = line.partition(" ")
    return mode, rest.split("\t", 1)[0].split(" ", 1)[1]


def read_blob(repo: Path, sha: str) -> bytes:
    """The bytes of blob ``sha`` (SeamError when the object is missing or corrupt)."""
    return run(repo, "cat-file", "blob", sha).stdout
