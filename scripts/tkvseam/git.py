"""Thin wrapper over the git command line. Knows nothing about the project layout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import SeamError

# Fixed identity and dates for commits the tool makes, so that applying the same
# inputs twice gives the same commit ids (nothing churns, nothing to compare).
FIXED_DATE = "2026-01-01T00:00:00+0000"
TOOL_NAME = "tkv-seam"
TOOL_EMAIL = "tkv-seam@users.noreply.invalid"


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # A user's global config must not change what we produce or read.
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
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
        # safe.directory: trees unpacked from a tarball may belong to another uid.
        cmd += ["-c", "safe.directory=*", "-C", str(repo)]
    cmd += list(args)
    proc = subprocess.run(cmd, input=input, capture_output=True, env=_env(env))
    if check and proc.returncode != 0:
        raise SeamError(
            f"git {' '.join(args[:3])} failed in {repo}: {proc.stderr.decode(errors='replace').strip()}"
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
