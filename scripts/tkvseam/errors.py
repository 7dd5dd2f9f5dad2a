"""One error type and the exit codes of the ``tkv-seam`` CLI.

Exit codes (also in README.md):

====  ==========================================================================
0     success
1     generic failure (unexpected state, a git command failed, ...)
2     usage error (bad option or argument; click's own code)
3     a patch does not apply exactly (hunk needs fuzz or an offset, or fails)
4     verification failed (sha256, size, commit id, pristine file, base image,
      an sdist member or an index entry refused)
5     refused to overwrite work (uncommitted edits, unrefreshed commits, files
      git ignores, edited patch files, an output directory tkv-seam did not make,
      a port in progress, a queue changed since its port started, a tree or a
      queue's patch file given as a symlink); also a tree the command cannot use (``SeamTree.require``: none,
      another base's, a port in progress, half-switched)
6     lint found problems (also a written queue's lint or style gate: not carried)
7     Docker engine unreachable or image build failed
8     network or download failure (also an index answer that is not PEP 691);
      a failing write on this machine (disk full) is 1
9     tests failed (seam test runs)
10    busy: another tkv-seam run holds the lock on the same tree or cache entry
      (waited TKV_SEAM_LOCK_TIMEOUT seconds)
11    watch: a vLLM release newer than the carried base exists (not a failure:
      a scheduled job notifies on it)
12    port stopped, needs you: a patch did not apply onto the new base (resolve
      and ``port continue``, or ``port skip``), or it went in but breaks the new
      base (stop kind ``breaks``: a changed .py does not compile, fails the base's
      style gate, or the patch's own tests fail at that prefix; fix and stage it,
      then ``continue`` runs the gate again); a carry's stop before any patch (kind
      ``environment``: stock vLLM does not start in the test venv; ``lock``: a pin the
      index does not serve); ``--json`` says ``kind`` and ``patch``; ``port report`` that ran exits 0
      whatever it found (its JSON's ``summary.all_apply`` says whether every patch applies)
====  ==========================================================================
"""

from __future__ import annotations

from .hints import TOOL as TOOL  # how hints spell the tool (from the project root, as the Makefile runs it)

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_APPLY = 3
EXIT_VERIFY = 4
EXIT_REFUSED = 5
EXIT_LINT = 6
EXIT_DOCKER = 7
EXIT_NETWORK = 8
EXIT_TESTS = 9
EXIT_BUSY = 10
EXIT_NEWER = 11
EXIT_PORT = 12


class SeamError(Exception):
    """An error a user can act on.

    ``message`` says what went wrong (naming patch, file and line where known),
    ``hint`` the next command to run, ``exit_code`` one of the codes above. ``kind`` names a
    stop or a step for scripts (``--json``'s ``kind``: a port stop's ``conflict``, ``breaks``,
    ``environment``; a carry step's ``lock``, ``seam-table``); ``patch`` the patch it is about.
    """

    exit_code = EXIT_FAILURE
    default_hint: str | None = None  # the next step when the raise site gives none
    kind: str | None = None
    patch: str | None = None

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        exit_code: int | None = None,
        kind: str | None = None,
        patch: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint
        if exit_code is not None:
            self.exit_code = exit_code
        if kind is not None:
            self.kind = kind
        if patch is not None:
            self.patch = patch

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  next: {self.hint}"
        return self.message


class ApplyError(SeamError):
    exit_code = EXIT_APPLY
    default_hint = (
        "fix the patch (or rebase it: edit the build tree, commit, `make refresh`), then make apply"
    )


class VerifyError(SeamError):
    exit_code = EXIT_VERIFY
    default_hint = "check bases.toml against the release (docs/bases.md, 'Pins'), then run the command again"


class RefusedError(SeamError):
    exit_code = EXIT_REFUSED


class DockerError(SeamError):
    exit_code = EXIT_DOCKER


class NetworkError(SeamError):
    exit_code = EXIT_NETWORK
    default_hint = "check access to the package index (TKV_SEAM_INDEX_URL), then run the command again"


class UsageError(SeamError):
    exit_code = EXIT_USAGE


class BusyError(SeamError):
    exit_code = EXIT_BUSY


class PortStopped(SeamError):
    exit_code = EXIT_PORT
