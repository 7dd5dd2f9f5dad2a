"""Named git operations on conflicts: a file's three sides merged again, and recorded resolutions.

``merge_diff3`` merges three versions of a file as ``git apply --3way`` did, with the base's
lines in each conflict (``--diff3``), so that a caller can see what each side changed.
``rerere`` is git's reuse of recorded resolutions, run on request only (never enabled in the
repository's config): it records the conflicts the work tree holds, puts back a resolution
recorded before for the same conflict, and records the resolutions of conflicts since resolved.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from .core import run

MARKER_SIZE = 7  # git's default conflict marker length

# rerere on request: enabled for this call only; autoUpdate off (the caller stages what it checked)
_RERERE = ("-c", "rerere.enabled=true", "-c", "rerere.autoUpdate=false")


def merge_diff3(repo: Path, ours: bytes, base: bytes, theirs: bytes) -> tuple[bytes, bool]:
    """(the merged text, clean) of three versions of one file; a conflict is marked with
    ``<<<<<<< ours``, ``||||||| base`` (the base's lines), ``=======``, ``>>>>>>> theirs``.

    The three are written to scratch files in the repository's ``.git`` (removed after):
    ``git merge-file`` reads files only. -p: the result on stdout, the files untouched.
    """
    scratch = Path(repo) / ".git" / f"tkv-seam-merge-{os.getpid()}-{secrets.token_hex(4)}"
    scratch.mkdir()
    try:
        paths = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            (scratch / name).write_bytes(data)
            paths.append(str(scratch / name))
        proc = run(
            repo,
            "merge-file",
            "-p",
            "--diff3",
            *("-L", "ours", "-L", "base", "-L", "theirs"),
            *paths,
            check=False,
        )
    finally:
        for p in scratch.iterdir():
            p.unlink()
        scratch.rmdir()
    if proc.returncode < 0 or proc.returncode > 127:  # an error, not a count of conflicts
        raise OSError(f"git merge-file failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout, proc.returncode == 0


def rerere(repo: Path) -> list[str]:
    """``git rerere``: record the conflicts the index holds (preimages), put back in the work tree
    the resolution recorded for any of them, and record resolutions of conflicts resolved since
    the last call; git's messages (``Resolved 'x' using previous resolution.``, ``Recorded
    resolution for 'x'.``), one a line. The recorded resolutions live in ``.git/rr-cache``."""
    proc = run(repo, *_RERERE, "rerere")
    return [x for x in (proc.stdout + proc.stderr).decode(errors="replace").splitlines() if x.strip()]
