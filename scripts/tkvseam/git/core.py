"""The git gateway's primitives: the environment every git call runs in, ``run``/``out``, typed values.

Only the ``tkvseam.git`` package calls ``run``/``out``; everything else calls a named
operation (``tests/tooling/plumbing/test_git_gateway.py`` checks).
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import SeamError

# Fixed identity and dates for commits the tool makes, so that applying the same
# inputs twice gives the same commit ids (nothing churns, nothing to compare).
FIXED_DATE = "2026-01-01T00:00:00+0000"
TOOL_NAME = "tkv-seam"
TOOL_EMAIL = "tkv-seam@users.noreply.invalid"
SYMLINK_MODE = "120000"
TREE_MODE = "040000"


@dataclass(frozen=True)
class Person:
    """An author: ``Name <email>``."""

    name: str
    email: str

    @classmethod
    def parse(cls, text: str) -> Person:
        name, _, email = text.rpartition("<")
        if not name:  # no "<": the whole text is the name
            return cls(text.strip(), "")
        return cls(name.strip(), email.rstrip(">").strip())

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"

    def author_env(self, date: str = FIXED_DATE) -> dict[str, str]:
        return {"GIT_AUTHOR_NAME": self.name, "GIT_AUTHOR_EMAIL": self.email, "GIT_AUTHOR_DATE": date}


TOOL = Person(TOOL_NAME, TOOL_EMAIL)


@dataclass(frozen=True)
class Commit:
    id: str
    parents: tuple[str, ...]
    author: Person
    message: str  # the whole message, as written

    @property
    def subject(self) -> str:
        return subject_of(self.message)


def subject_of(message: str) -> str:
    """git's ``%s`` of a commit message: its first paragraph on one line."""
    return " ".join(message.split("\n\n", 1)[0].split())


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    id: str
    path: str


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
    """Run ``git -C repo args...`` and return the completed process (bytes).

    rerere off (``merge.rerere`` turns it on for its own call with a later ``-c``): git enables it by
    itself where ``.git/rr-cache`` exists (a port tree links it), and ``git apply --3way`` and
    ``git commit`` then run it on the tool's intermediate states: a conflict parked while the next
    file merges (the file reset to HEAD) was recorded as its resolution and replayed.
    """
    cmd = ["git", "-c", "rerere.enabled=false"]
    if repo is not None:
        cmd += ["-C", str(repo)]
    cmd += list(args)
    proc = subprocess.run(cmd, input=input, capture_output=True, env=_env(env))
    if check and proc.returncode < 0:
        raise _killed(args, repo, -proc.returncode)
    if check and proc.returncode != 0:
        where = f" in {repo}" if repo is not None else ""
        raise SeamError(
            f"git {' '.join(args[:3])} failed{where}: {proc.stderr.decode(errors='replace').strip()}",
            hint=f"{shlex.join(['git', '-C', str(repo or '.'), 'status'])}  (see what state the repository is in)",
        )
    return proc


def _killed(args: tuple[str, ...], repo: Path | str | None, number: int) -> SeamError:
    """git ended by a signal: it said nothing, so the signal is the message."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    where = f" in {repo}" if repo is not None else ""
    look = shlex.quote(str(repo or "."))
    if number == signal.SIGXFSZ:
        return SeamError(
            f"git {' '.join(args[:3])}{where} was killed by SIGXFSZ: a file it wrote grew past this "
            "process's file size limit (ulimit -f)",
            hint=f"df -h {look}  (free space there, or lift the limit: ulimit -f unlimited), then run the command again",
        )
    return SeamError(
        f"git {' '.join(args[:3])}{where} was killed by {name}",
        hint="run the command again",
    )


def out(repo: Path | str | None, *args: str, **kw) -> str:
    """Run git and return stripped stdout as text."""
    return run(repo, *args, **kw).stdout.decode().strip()


def _ok(repo: Path, *args: str, **kw) -> bool:
    return run(repo, *args, check=False, **kw).returncode == 0


def _z(data: bytes) -> list[str]:
    """NUL-separated paths (``-z``: verbatim, no quoting of odd names)."""
    return [p for p in data.decode("utf-8", "surrogateescape").split("\0") if p]
