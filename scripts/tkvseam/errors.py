"""One error type and the exit codes of the ``tkv-seam`` CLI.

Exit codes (also in README.md):

====  ==========================================================================
0     success
1     generic failure (unexpected state, a git command failed, ...)
2     usage error (bad option or argument; click's own code)
3     a patch does not apply exactly (hunk needs fuzz or an offset, or fails)
4     verification failed (sha256, size, commit id, pristine file, base image)
5     refused to overwrite work (uncommitted edits, unrefreshed commits,
      edited patch files)
6     lint found problems
7     Docker engine unreachable or image build failed
8     network or download failure
9     tests failed (seam test runs)
10    port stopped, needs you: a patch did not apply onto the new base (resolve
      and ``port --continue``, or ``--skip``); ``port --report``: some patch
      did not apply
====  ==========================================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_APPLY = 3
EXIT_VERIFY = 4
EXIT_REFUSED = 5
EXIT_LINT = 6
EXIT_DOCKER = 7
EXIT_NETWORK = 8
EXIT_TESTS = 9
EXIT_PORT = 10


class SeamError(Exception):
    """An error a user can act on.

    ``message`` says what went wrong (naming patch, file and line where known),
    ``hint`` the next command to run, ``exit_code`` one of the codes above.
    """

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  next: {self.hint}"
        return self.message


class ApplyError(SeamError):
    exit_code = EXIT_APPLY


class VerifyError(SeamError):
    exit_code = EXIT_VERIFY


class RefusedError(SeamError):
    exit_code = EXIT_REFUSED


class DockerError(SeamError):
    exit_code = EXIT_DOCKER


class NetworkError(SeamError):
    exit_code = EXIT_NETWORK


class PortStopped(SeamError):
    exit_code = EXIT_PORT
