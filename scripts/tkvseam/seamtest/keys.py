"""The parts of a pass record's key (``passes``): digests of what a lane step can read.

A key cannot miss an input because it is not a list of what a step reads, kept by hand: it is
everything the step can reach, less a short named list.

- ``project``: every file of the project (git-tracked or not, ignored or not), by path and
  bytes, but ``build/`` (the tool's own trees and records), git's ``.git``, every venv (each is
  keyed by its installed state, ``venv_state``), bytecode, the caches the runs write, lock files,
  and ``NOT_READ`` (prose and CI definitions: ``docs/``, ``README.md``, ``LICENSE``,
  ``.github/``), which a step's key holds only when the step names them (the tooling lane's
  tests read them);
- ``files``: given project files or directories, by content (a job run in a test root of the
  build tree reaches the project only through its ``PYTHONPATH`` and its HF home: ``reach``);
- ``venv_state``: a venv's installed state: every file under it, by path, mode and content
  (a file edited in place changes it), its links and the interpreter they lead to; bytecode
  and what the overlay installer manages are left out (the installer checks each of those
  files against its sha256 before every job). Content hashes are remembered per inode, size,
  mtime and ctime (``HashCache``), so an unchanged venv costs one ``lstat`` per file;
- ``environment``: the inherited variables that steer Python, pytest, torch, vLLM, Hugging Face,
  turbo-attn and the tool (``ENV_PREFIXES``; what changes from run to run without changing an
  outcome, such as the lock timeout, is left out);
- ``tool_source``: every file of the tool's package (the pytest plugins the lanes load);
- ``base_inputs``: the base's sdist sha256 and its CPU lock's sha256;
- ``queue``: the base's own series and patch files.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
import sys
from pathlib import Path

from .. import layout
from ..fsutil import atomic_write, sha256_of

#: What a digest of project files skips anywhere: bytecode and caches the runs themselves write.
SKIP_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".git"}
#: What no lane's tests read but the tooling lane's: the project's prose and its CI definitions.
#: A step's key holds them only when it names them (``seamtest lane --reads docs``).
NOT_READ = ("docs", "README.md", "LICENSE", ".github")
_LOCK_FILE = re.compile(r"\..+\.lock")  # .bases.toml.lock: there while another run holds it


def _skipped(name: str, is_dir: bool) -> bool:
    if name in SKIP_PARTS or (is_dir and name.endswith(".egg-info")):
        return True
    return not is_dir and (name.endswith(".pyc") or bool(_LOCK_FILE.fullmatch(name)))


def _walk(path: Path):
    """The files under ``path`` in a fixed order, through symlinked directories (a command
    reads through them; each real directory once, so a link loop ends); no venv, no bytecode."""
    if not path.is_dir():
        yield path
        return
    seen = set()
    for top, dirs, names in os.walk(path, followlinks=True):
        real = os.path.realpath(top)
        if real in seen or (top != str(path) and os.path.isfile(os.path.join(top, "pyvenv.cfg"))):
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not _skipped(d, True))
        yield from (Path(top) / n for n in sorted(names) if not _skipped(n, False))


def _content(path: Path) -> bytes:
    """A file's sha256; what stands instead for a link to nothing or a file not readable."""
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError as e:
        return f"unreadable {type(e).__name__}".encode()


def _ident(st: os.stat_result) -> str:
    """What changes whenever a file is written, replaced or its mode changed (ctime cannot be
    put back), even when its bytes are put back as they were."""
    return f"{st.st_ino}:{st.st_size}:{st.st_mode}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _touch(path: Path) -> bytes:
    try:
        return _ident(path.stat()).encode()
    except OSError as e:
        return f"unreadable {type(e).__name__}".encode()


def files(root: Path, paths, touched: bool = False) -> str:
    """A digest of the files ``paths`` (relative to ``root``; directories recursively, through
    symlinked ones) name: each file's path and bytes; a missing path counts as missing.
    ``touched``: each file's inode, size, mode and times instead of its bytes (a file written
    and put back while a step ran changes it)."""
    h = hashlib.sha256()
    for rel in sorted(set(paths)):
        top = Path(root) / rel
        if not top.exists():
            h.update(f"missing {rel}\0".encode())
            continue
        for p in _walk(top):
            h.update(os.path.relpath(p, root).encode() + b"\0")
            h.update(_touch(p) if touched else _content(p))
    return h.hexdigest()


def project(root: Path, reads=(), touched: bool = False) -> str:
    """A digest of every file of the project a step can read (see the module docstring):
    all but ``build/``, venvs, bytecode, caches, lock files and the ``NOT_READ`` entries the
    step does not name in ``reads``. ``touched``: as ``files``."""
    root = Path(root)
    named = {os.path.normpath(r).split(os.sep)[0] for r in reads}
    left_out = {layout.BUILD, *(n for n in NOT_READ if n not in named)}
    try:
        top = sorted(e.name for e in os.scandir(root) if e.name not in left_out)
    except OSError as e:
        return f"unreadable project {type(e).__name__}"
    top = [n for n in top if not _skipped(n, (root / n).is_dir()) and not (root / n / "pyvenv.cfg").is_file()]
    return files(root, top, touched)


# --------------------------------------------------------------------------- a venv's installed state


class HashCache:
    """Content hashes of files, remembered per (device, inode, size, mtime) with the ctime and link
    count they had: a file written or replaced gets a new inode, size, mtime or ctime, so it is
    hashed again (ctime cannot be put back: an edit whose mtime was put back shows too). A ctime
    that moved with the link count is another venv made or removed from uv's cache (uv hard-links
    its files into every venv): the bytes are the ones hashed. The hard-linked slot copies of a
    venv share their slot 0's entries. Kept in ``path`` (JSON) between runs; a file that is not one
    the cache wrote counts as empty."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self.known: dict[str, str] = {}
        self.seen: dict[str, str] = {}
        if path is not None:
            try:
                if stat.S_ISREG(path.lstat().st_mode):
                    data = json.loads(path.read_text())
                    if isinstance(data, dict):
                        self.known = {k: v for k, v in data.items() if isinstance(v, str)}
            except (OSError, ValueError):
                pass

    def sha256(self, path: str, st: os.stat_result) -> str:
        ident = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
        had = (self.seen.get(ident) or self.known.get(ident) or "").split(":", 2)
        ctime, nlink, found = had if len(had) == 3 else ("", "", "")
        if not found or (ctime != str(st.st_ctime_ns) and nlink == str(st.st_nlink)):
            try:
                found = sha256_of(Path(path))
            except OSError as e:
                found = f"unreadable {type(e).__name__}"
        self.seen[ident] = f"{st.st_ctime_ns}:{st.st_nlink}:{found}"
        return found

    def save(self) -> None:
        """Keep the hashes seen since it was read (what the venvs hold now); never through a link."""
        if self.path is None or self.seen == self.known:
            return
        try:
            if self.path.is_symlink():
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(self.seen, sort_keys=True))
        except OSError:
            pass


#: In a venv, what the tool and the runs write or manage: the slot stamp, uv's lock file.
VENV_SKIP = {".tkv-seam-slot", ".lock"}
#: What the overlay installer keeps inside the vllm package (overlay/install.py's STATE, PRISTINE_DIR).
OVERLAY_RECORDS = {".tkv-seam-overlay.json", ".tkv-seam-overlay-pristine"}


def site_packages(venv: Path) -> Path | None:
    found = sorted(Path(venv).glob("lib/python*/site-packages"))
    return found[0] if found else None


def _venv_entries(venv: Path, managed=()):
    """``(rel, DirEntry, lstat)`` of every entry of ``venv`` a key holds, in a fixed order; a
    directory that cannot be read is yielded as ``(rel, None, error name)``."""
    site = site_packages(venv)
    skip = {f"{site.relative_to(venv)}/{m}" for m in managed} if site is not None else set()
    top = str(venv)
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(f"{top}/{rel_dir}" if rel_dir else top) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            yield rel_dir, None, type(e).__name__
            continue
        subdirs = []
        for entry in entries:
            name = entry.name
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if name in SKIP_PARTS or name in OVERLAY_RECORDS or name in VENV_SKIP or rel in skip:
                continue
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(rel)
            elif not name.endswith(".pyc"):
                try:
                    yield rel, entry, entry.stat(follow_symlinks=False)
                except OSError:
                    continue
        stack.extend(reversed(subdirs))


def venv_state(venv: Path, managed=(), cache: HashCache | None = None) -> str:
    """A digest of what ``venv`` holds: each file's path, mode and sha256, each link's target
    (and the size and times of the interpreter a link leads to outside the venv). Left out:
    bytecode, ``VENV_SKIP``, the overlay installer's records and ``managed`` (paths relative to
    site-packages: the overlay's files, checked by the installer before every job)."""
    venv = Path(os.path.abspath(venv))
    if not (venv / "pyvenv.cfg").is_file():
        return f"no venv at {venv}"
    cache = cache or HashCache()
    h = hashlib.sha256()
    for rel, entry, st in _venv_entries(venv, managed):
        if entry is None:
            h.update(f"D {rel} unreadable {st}\0".encode())
        elif stat.S_ISREG(st.st_mode):
            h.update(f"F {rel} {st.st_mode & 0o7777:o} {cache.sha256(entry.path, st)}\0".encode())
        elif stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(entry.path)
            outside = "" if real.startswith(f"{venv}{os.sep}") else _outside(real)
            h.update(f"L {rel} -> {os.readlink(entry.path)} {outside}\0".encode())
        else:
            h.update(f"O {rel} {stat.S_IFMT(st.st_mode)}\0".encode())
    return h.hexdigest()


def venv_touched(venv: Path, managed=()) -> dict[str, tuple[int, ...]]:
    """Each entry ``venv_state`` holds by inode, size, mode, mtime, ctime and link count."""
    venv = Path(os.path.abspath(venv))
    return {
        rel: (st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink)
        if entry is not None
        else (0,)
        for rel, entry, st in _venv_entries(venv, managed)
    }


def untouched(before: dict, after: dict) -> bool:
    """No entry of ``venv_touched`` was written, replaced or added since ``before``: a ctime that
    moved with the link count is another venv made or removed from uv's cache, not a write."""
    if before.keys() != after.keys():
        return False
    for rel, was in before.items():
        now = after[rel]
        if was[:4] != now[:4] or (was[4:5] != now[4:5] and was[5:] == now[5:]):
            return False
    return True


def _outside(path: str) -> str:
    """What stands for a file outside the venv a link leads to (the base interpreter)."""
    try:
        st = os.stat(path)
    except OSError:
        return f"{path} missing"
    return f"{path} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"


# --------------------------------------------------------------------------- the environment

#: The namespaces of the variables a test's outcome can depend on (a job inherits the environment).
ENV_PREFIXES = (
    "VLLM_", "TORCH", "PYTORCH_", "CUDA_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "HF_", "HUGGINGFACE_",
    "TRANSFORMERS_", "TOKENIZERS_", "TRITON_", "PYTHON", "PYTEST_", "LD_", "TKV_", "LANG", "LC_", "TZ",
)  # fmt: skip
#: Of those, what changes how long a run waits or what it logs, never what it finds.
ENV_VOLATILE = {
    "TKV_SEAM_LOCK_TIMEOUT", "TKV_SEAM_JOBS", "TKV_SEAM_HINT_LOG", "TKV_SEAM_LANE_COUNTS", "PYTEST_CURRENT_TEST",
}  # fmt: skip


def environment(env) -> list[tuple[str, str]]:
    """The variables of ``env`` a key holds (``ENV_PREFIXES`` but ``ENV_VOLATILE``), sorted."""
    return sorted((k, v) for k, v in env.items() if k.startswith(ENV_PREFIXES) and k not in ENV_VOLATILE)


# --------------------------------------------------------------------------- the tool, the base


@functools.cache
def tool_source() -> str:
    """A digest of the tool's own package (read once per process)."""
    package = Path(__file__).resolve().parents[1]
    return files(package.parent, [package.name])


def interpreter(python: Path | None = None) -> str:
    """The Python a step runs under: a venv's ``pyvenv.cfg`` (version, base interpreter), else
    this process's version."""
    if python is not None:
        cfg = Path(python).parent.parent / "pyvenv.cfg"
        try:
            return cfg.read_text()
        except OSError:
            return f"missing {cfg}"
    return sys.version


def lock_sha256(root: Path, lock: str) -> str:
    try:
        return sha256_of(Path(root) / lock)
    except OSError:
        return "missing"


def queue(root: Path, base) -> str:
    """A digest of the base's own queue: its series file and the files of its patches directory
    (not the directories in it: another base's queue lives in ``patches/<base>/``)."""
    top = Path(root) / base.queue.patches
    names = [base.queue.series]
    if top.is_dir():
        names += [p.relative_to(root).as_posix() for p in sorted(top.iterdir()) if p.is_file()]
    return files(root, names)


def base_inputs(root: Path, base) -> dict:
    """What every step of a base reads of the base: its sdist and its lock (its test venv is
    keyed by its installed state, ``venv_state``)."""
    return {
        "base": base.name,
        "sdist_sha256": base.sdist.sha256,
        "lock_sha256": lock_sha256(root, base.cpu_lock),
    }
