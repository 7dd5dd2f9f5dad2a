"""Read and unpack an sdist (a ``.tar.gz``) without trusting it, on any Python 3.11.

Every member is checked before anything is written: an sdist holds regular files and
directories only, under one top directory, at normalised relative paths. Links, devices
and FIFOs, absolute paths, ``..``, a ``.git`` component, a name given twice and archives
larger than ``MAX_BYTES`` (unpacked) are refused (exit 4, naming the member). The files
are then written by this module itself, below a fresh directory, with ``O_EXCL |
O_NOFOLLOW``: tarfile's extraction filters decide nothing (Python 3.11.2 has none;
3.11.7's ``filter="data"`` is bypassed by a long symlink chain, CVE-2025-4517).
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from ..errors import VerifyError

MAX_BYTES = 4 << 30  # unpacked; vLLM 0.33.0's sdist is 137 MB
MAX_MEMBERS = 200_000  # vLLM 0.33.0's has 9629
_READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError)


def _local(e: BaseException) -> bool:
    """An OSError of this machine (no such file, disk full), not of the archive's bytes."""
    return isinstance(e, OSError) and e.errno is not None


class Sdist:
    """An opened sdist: its checked members by path below the top directory."""

    def __init__(self, tarball: Path, hint: str):
        self.tarball = tarball
        self.hint = hint
        try:
            self.tar = tarfile.open(tarball, "r:*")
        except _READ_ERRORS as e:
            raise self._unreadable(e) from e
        try:
            self.root, self.members = self._check(self._each())
        except BaseException:
            self.tar.close()
            raise

    def _unreadable(self, e: BaseException) -> BaseException:
        if _local(e):
            return e
        return VerifyError(
            f"{self.tarball.name} is not a readable .tar.gz sdist ({type(e).__name__}: {e}); "
            "a .zip or damaged sdist cannot be used",
            hint=self.hint,
        )

    def _each(self) -> Iterator[tarfile.TarInfo]:
        """The members as the archive lists them, read one at a time (a check can stop early,
        before a bomb is decompressed to its end)."""
        members = iter(self.tar)
        while True:
            try:
                yield next(members)
            except StopIteration:
                return
            except _READ_ERRORS as e:
                raise self._unreadable(e) from e

    def __enter__(self) -> Sdist:
        return self

    def __exit__(self, *exc) -> None:
        self.tar.close()

    def _refuse(self, member: str, why: str) -> VerifyError:
        return VerifyError(
            f"{self.tarball.name}: member {member!r} {why}; an sdist holds only regular files and "
            "directories inside its top directory, so nothing was unpacked",
            hint=self.hint,
        )

    def _check(self, members: Iterator[tarfile.TarInfo]) -> tuple[str, dict[str, tarfile.TarInfo]]:
        roots, out, files, total = set(), {}, set(), 0
        for m in members:
            name = m.name
            if len(out) >= MAX_MEMBERS:
                raise self._refuse(name, f"is past the {MAX_MEMBERS}-member limit")
            if not (m.isreg() or m.isdir()):
                kind = "a symlink" if m.issym() else "a hard link" if m.islnk() else "a device or FIFO"
                target = f" to {m.linkname!r}" if m.linkname else ""
                raise self._refuse(name, f"is {kind}{target}")
            if name.startswith("/") or any(c == "\\" or ord(c) < 0x20 or ord(c) == 0x7F for c in name):
                raise self._refuse(name, "is not a relative POSIX path of printable characters")
            if len(name.encode()) > 4000 or any(len(p.encode()) > 255 for p in name.split("/")):
                raise self._refuse(name[:80] + "…", "is too long for a file name")
            parts = PurePosixPath(name).parts
            if not parts or any(p in ("", ".", "..") for p in name.rstrip("/").split("/")):
                raise self._refuse(name, "is not a normalised path (., .. or an empty part)")
            if any(p.lower() == ".git" for p in parts):
                raise self._refuse(name, "is inside a .git directory")
            roots.add(parts[0])
            if len(roots) > 1:
                raise self._refuse(name, f"is outside the top directory {sorted(roots)[0]!r}")
            rel = "/".join(parts[1:])
            if rel in out:
                raise self._refuse(name, "is in the archive twice")
            above = next((str(a) for a in PurePosixPath(rel).parents if str(a) in files), None)
            if above is not None:
                raise self._refuse(name, f"is below {above!r}, which is a file")
            if m.isreg():
                files.add(rel)
            total += m.size
            if total > MAX_BYTES:
                raise self._refuse(name, f"takes the unpacked size past {MAX_BYTES >> 20} MiB")
            out[rel] = m
        if not roots or "" in files:
            raise VerifyError(f"{self.tarball.name} is empty or has no top directory", hint=self.hint)
        return roots.pop(), out

    def read(self, rel: str) -> bytes:
        """The bytes of the regular file ``rel`` (below the top directory)."""
        m = self.members.get(rel)
        if m is None or not m.isreg():
            raise VerifyError(f"{self.tarball.name} has no file {self.root}/{rel}", hint=self.hint)
        try:
            return self.tar.extractfile(m).read()  # type: ignore[union-attr]
        except _READ_ERRORS as e:
            if _local(e):
                raise
            raise VerifyError(f"{self.tarball.name}: cannot read {m.name}: {e}", hint=self.hint) from e

    def extract(self, dest: Path) -> None:
        """Unpack the top directory's content into ``dest`` (which must not exist), atomically."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
        try:
            out = tmp / "tree"
            out.mkdir()
            for rel, m in self.members.items():  # archive order: a gzip stream reads forward
                if not rel:
                    continue
                path = out / rel
                if m.isdir():
                    path.mkdir(parents=True, exist_ok=True)
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                self._write(m, path)
            os.replace(out, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _write(self, m: tarfile.TarInfo, path: Path) -> None:
        mode = 0o755 if m.mode & 0o111 else 0o644
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as f:
            try:
                src = self.tar.extractfile(m)
                shutil.copyfileobj(src, f, 1 << 20)  # type: ignore[arg-type]
            except _READ_ERRORS as e:
                if _local(e):
                    raise  # a local write error (disk full): the boundary names the file
                raise VerifyError(f"{self.tarball.name}: cannot read {m.name}: {e}", hint=self.hint) from e
        os.chmod(path, mode)  # not the umask's
