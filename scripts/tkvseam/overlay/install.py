"""Install a staged overlay over an installed ``vllm`` package (stdlib only).

Used twice, the same way: by the Docker image build (copied into the build
context, run by the image's python3) and by ``tkv-seam overlay install`` on the
test venv. Steps: take the package's lock (one overlay run at a time per installed
``vllm``, whichever tree or project it comes from); locate the installed ``vllm``
package; check that every target file is the pristine base file (sha256 from
``manifest.json``), or, on a venv, the file a previous overlay installed (recorded in
``.tkv-seam-overlay.json``); check that every directory it writes is writable; only
then replace the files, drop their stale bytecode and byte-compile them.

On a venv (``--keep-state``) the venv keeps its own record of what it replaced: per file
the sha256 installed and the pristine one, and a copy of each pristine file
(``.tkv-seam-overlay-pristine/``). A file an earlier overlay replaced that this stage does
not name (its patch left the queue) is put back from that copy: restore and the next install
work from what the venv holds, whatever the queue is now. The record is written *before*
the first file is replaced: it names, per file, what the file is now (the overlay installed,
or what an earlier killed run left) and the one being installed (``pending``). A run killed
half-way, or stopped by a file it cannot write, leaves every target either as it was or the
new overlay's file, both of which the record accepts: a later install or restore always goes
through, however many runs were killed before it.

Exit status: 0 installed (or already installed), 1 a target file is not the
expected base file, 2 no or several vllm packages found, 3 a file or directory
cannot be written (nothing was replaced when the check finds it first), 4 another
overlay run held the package longer than ``TKV_SEAM_LOCK_TIMEOUT`` seconds (default 600).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import py_compile
import sys
import time
from dataclasses import dataclass
from pathlib import Path

STATE = ".tkv-seam-overlay.json"
PRISTINE_DIR = ".tkv-seam-overlay-pristine"  # beside the record: the pristine files it replaced
NOT_PRISTINE, NO_VLLM, CANNOT_WRITE, BUSY = 1, 2, 3, 4
TIMEOUT_ENV, DEFAULT_TIMEOUT = "TKV_SEAM_LOCK_TIMEOUT", 600.0


class OverlayError(Exception):
    def __init__(self, message: str, status: int = NOT_PRISTINE, path: str = ""):
        super().__init__(message)
        self.status = status
        self.path = path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def locate_vllm(venv: bool = False) -> Path:
    """The installed vllm package directory: the import system first, then (in an image, not
    ``venv``) the usual system prefixes.

    ``venv``: the package must be this Python's own (below ``sys.prefix``): a venv that sees the
    system's site-packages never gets the system's vllm patched through it.
    """
    spec = importlib.util.find_spec("vllm")
    if spec and spec.submodule_search_locations:
        found = Path(list(spec.submodule_search_locations)[0])
        prefix = Path(sys.prefix).resolve()
        if venv and prefix not in found.resolve().parents:
            raise OverlayError(
                f"the vllm this Python imports ({found}) is not inside its environment ({prefix}); "
                "overlay the environment that holds it",
                NO_VLLM,
            )
        return found
    if venv:
        raise OverlayError(f"this Python ({sys.executable}) has no vllm package", NO_VLLM)
    found = sorted(
        {
            Path(p).resolve()
            for pattern in ("/usr/local/lib/python3*/*-packages/vllm", "/usr/lib/python3*/*-packages/vllm")
            for p in glob.glob(pattern)
            if Path(p, "__init__.py").exists()
        }
    )
    if len(found) != 1:
        raise OverlayError(f"expected one installed vllm package, found {len(found)}: {found}", NO_VLLM)
    return found[0]


def vllm_version(vllm_dir: Path) -> str:
    """The version of the vllm package at ``vllm_dir`` (its _version.py, else the metadata)."""
    try:
        for line in (vllm_dir / "_version.py").read_text().splitlines():
            if line.startswith("__version__") and "=" in line:
                return line.rsplit("=", 1)[1].strip().strip("'\"")
    except OSError:
        pass
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _vllm_path(path: object) -> bool:
    """``path`` is a relative ``vllm/`` file path that stays inside the package."""
    if not isinstance(path, str):
        return False
    parts = path.split("/")
    return parts[0] == "vllm" and len(parts) >= 2 and not any(p in ("", ".", "..") for p in parts)


def _load_state(state_path: Path) -> dict:
    """The venv's record; a record that is not ours (not JSON, wrong types, a path that is not
    a file inside vllm/) counts as none."""
    try:
        data = json.loads(state_path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    for key in ("files", "pending", "pristine"):
        table = data.get(key)
        if table is not None and not (
            isinstance(table, dict) and all(isinstance(v, str) for v in table.values())
        ):
            data[key] = {}
        if not all(_vllm_path(p) for p in data.get(key) or {}):
            return {}
    return data


def _timeout() -> float:
    try:
        value = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT)
    except ValueError:
        value = DEFAULT_TIMEOUT
    return value if value >= 0 else DEFAULT_TIMEOUT


@contextlib.contextmanager
def package_lock(vllm_dir: Path, log=print):
    """Hold the installed package's lock (``flock`` on its directory: nothing is created, the
    kernel drops it when the holder dies): two overlay runs on one vllm take turns."""
    try:
        fd = os.open(vllm_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        raise OverlayError(
            f"cannot open {vllm_dir} to lock it: {e.strerror or e}", CANNOT_WRITE, str(vllm_dir)
        ) from e
    try:
        deadline = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is None:
                    timeout = _timeout()
                    deadline = time.monotonic() + timeout
                    log(
                        f"tkv-seam overlay: waiting for another overlay run on {vllm_dir} (up to {timeout:g} s; {TIMEOUT_ENV})"
                    )
                elif time.monotonic() >= deadline:
                    raise OverlayError(
                        f"another overlay run still holds {vllm_dir} after {timeout:g} s; nothing was replaced",
                        BUSY,
                        str(vllm_dir),
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to a file created afresh at ``path`` (never through a planted symlink)."""
    if path.is_symlink() or path.exists():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _save_state(state_path: Path, data: dict) -> None:
    """By rename, like the files: a hard-linked copy of the venv must keep its own record."""
    tmp = state_path.with_name(f".{STATE}.tkv-seam-tmp")
    _write_new(tmp, (json.dumps(data, indent=1) + "\n").encode())
    os.replace(tmp, state_path)


def _check_paths(manifest: dict) -> None:
    """Every manifest path is a relative ``vllm/`` path that stays inside the package."""
    for entry in manifest["files"]:
        if not _vllm_path(entry["path"]):
            raise OverlayError(f"the stage's manifest names {entry['path']!r}: not a file inside vllm/")


def _unwritable(dirs: set[Path]) -> Path | None:
    """The first directory of ``dirs`` this process cannot create files in (None: all fine)."""
    for d in sorted(dirs):
        if d.exists() and not os.access(d, os.W_OK | os.X_OK):
            return d
    return None


def _check_writable(site: Path, targets: list[Path], state_path: Path | None, copies: bool = False) -> None:
    dirs = {t.parent for t in targets}
    dirs |= {t.parent / "__pycache__" for t in targets if (t.parent / "__pycache__").exists()}
    if state_path is not None:
        dirs.add(state_path.parent)
        if copies and (state_path.parent / PRISTINE_DIR).is_dir():
            dirs.add(state_path.parent / PRISTINE_DIR)
    bad = _unwritable(dirs)
    if bad is not None:
        raise OverlayError(
            f"cannot write {bad}: permission denied; nothing was replaced", CANNOT_WRITE, str(bad)
        )


def describe_installed(state: dict) -> str:
    digest = (state.get("series_digest") or "")[:12] or "unknown"
    commit = (state.get("commit") or "")[:12] or "unknown"
    return f"series {digest}, commit {commit}"


@dataclass
class _Target:
    path: str  # vllm/... (relative to site-packages)
    want: str  # sha256 it is to hold
    pristine: str  # sha256 of the base's own file
    source: Path  # the bytes to install: the stage's file, or the venv's copy of the pristine one


class _Copies:
    """The venv's copies of the pristine files its overlay replaced (``PRISTINE_DIR``), never
    reached through a symlink."""

    def __init__(self, vllm_dir: Path):
        self.top = vllm_dir / PRISTINE_DIR

    def path(self, rel: str) -> Path:
        """The copy of ``rel`` (named ``<file>.pristine``: no tool takes it for Python source)."""
        return self.top / f"{rel}.pristine"

    def _linked(self, rel: str) -> bool:
        path = self.path(rel)
        return any(p.is_symlink() for p in (path, *path.parents) if p == self.top or self.top in p.parents)

    def holds(self, rel: str, digest: str) -> bool:
        path = self.path(rel)
        return not self._linked(rel) and path.is_file() and sha256(path) == digest

    def save(self, rel: str, data: bytes) -> None:
        if self._linked(rel):
            raise OverlayError(
                f"{self.path(rel)} is reached through a symlink: the venv's copies are never written "
                "through one; nothing was replaced",
                CANNOT_WRITE,
                str(self.top),
            )
        path = self.path(rel)
        tmp = path.with_name(f".{path.name}.tkv-seam-tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_new(tmp, data)
            os.replace(tmp, path)
        except OSError as e:
            raise OverlayError(
                f"cannot keep the pristine {rel} in {self.top}: {e.strerror or e}; nothing was replaced",
                CANNOT_WRITE,
                str(self.top),
            ) from e

    def keep_only(self, keep: set[str]) -> None:
        """Drop the copies of files the record no longer names (all of them: the directory)."""
        if self.top.is_symlink():
            self.top.unlink()
            return
        if not self.top.is_dir():
            return
        wanted = {self.path(rel) for rel in keep}
        for here, dirs, files in os.walk(self.top, topdown=False):
            for name in files + [d for d in dirs if Path(here, d).is_symlink()]:
                if Path(here, name) not in wanted:
                    Path(here, name).unlink()
            if here != str(self.top) and not os.listdir(here):
                os.rmdir(here)
        if not any(self.top.iterdir()):
            self.top.rmdir()


def install(stage: Path, vllm_dir: Path, base_label: str, keep_state: bool, log=print) -> list[str]:
    """Verify, then replace, holding the package's lock. Return the paths written (relative to
    site-packages)."""
    manifest = json.loads((stage / "manifest.json").read_text())
    _check_paths(manifest)
    with package_lock(vllm_dir, log):
        return _install(stage, manifest, vllm_dir, base_label, keep_state, log)


def _targets(
    stage: Path, manifest: dict, state: dict, copies: _Copies, site: Path, base_label: str
) -> dict[str, _Target]:
    """The manifest's files, and those an earlier overlay replaced that it does not name (each to
    go back to its pristine file, from the venv's copy)."""
    saved = state.get("pristine") or {}
    targets = {}
    for e in manifest["files"]:
        recorded = saved.get(e["path"])
        if recorded is not None and recorded != e["pristine_sha256"]:
            raise OverlayError(
                f"base is not vLLM {base_label}: the overlay installed in {copies.top.parent} "
                f"({describe_installed(state)}) replaced {e['path']} of another vLLM (pristine sha256 "
                f"{recorded}, {base_label}'s is {e['pristine_sha256']})"
            )
        targets[e["path"]] = _Target(
            e["path"], e["patched_sha256"], e["pristine_sha256"], stage / "overlay" / e["path"]
        )
    installed, pending = state.get("files") or {}, state.get("pending") or {}
    for path in sorted((set(installed) | set(pending)) - set(targets)):
        if path in saved:
            targets[path] = _Target(path, saved[path], saved[path], copies.path(path))
            continue
        now = sha256(site / path) if (site / path).is_file() else None
        if now is None or now not in (installed.get(path), pending.get(path)):
            continue  # no longer the overlay's file (vLLM reinstalled): not ours to put back
        raise OverlayError(
            f"{path}: the overlay installed in {copies.top.parent} ({describe_installed(state)}) replaced it, "
            "this stage does not name it, and the venv holds no copy of its pristine file (an older "
            "tkv-seam installed that overlay): it cannot be put back; nothing was replaced"
        )
    return targets


def _install(
    stage: Path, manifest: dict, vllm_dir: Path, base_label: str, keep_state: bool, log
) -> list[str]:
    site = vllm_dir.parent
    state_path = vllm_dir / STATE
    copies = _Copies(vllm_dir)
    state = _load_state(state_path) if keep_state else {}
    installed = state.get("files") or {}
    pending = state.get("pending") or {}
    targets = _targets(stage, manifest, state, copies, site, base_label)
    have = {}
    for t in targets.values():
        target = site / t.path
        if not target.is_file():
            raise OverlayError(f"base {base_label}: {t.path} is missing from {site}")
        have[t.path] = sha256(target)
        if have[t.path] not in {t.pristine, installed.get(t.path), pending.get(t.path)}:
            raise OverlayError(
                f"base is not vLLM {base_label}: {t.path} has sha256 {have[t.path]}, "
                f"expected the pristine {t.pristine} (the vllm at {vllm_dir} is version "
                f"{vllm_version(vllm_dir)})"
            )
    todo = [t for t in targets.values() if have[t.path] != t.want]
    changed = {t.path: t.want for t in targets.values() if t.want != t.pristine}
    saved = {p: d for p, d in (state.get("pristine") or {}).items() if copies.holds(p, d)}
    for t in todo:  # what goes back from the venv's copy must be there, as it was copied
        if t.want == t.pristine and t.source == copies.path(t.path) and t.path not in saved:
            raise OverlayError(
                f"the venv's copy of the pristine {t.path} ({t.source}) is missing or changed: "
                "it cannot be put back; nothing was replaced"
            )
    to_copy = [t for t in todo if t.want != t.pristine and t.path not in saved and have[t.path] == t.pristine]
    data = {t.path: t.source.read_bytes() for t in todo}
    for t in todo:
        if hashlib.sha256(data[t.path]).hexdigest() != t.want:
            raise OverlayError(
                f"{t.source} is not the file the manifest names (sha256 {t.want}); nothing was replaced"
            )
    if not todo:
        if changed and keep_state and state.get("files") == changed and not pending:
            log(f"tkv-seam overlay: already installed in {vllm_dir} ({describe_installed(state)})")
        elif not changed and keep_state and not state_path.exists():
            log(f"tkv-seam overlay: {vllm_dir} already holds the pristine files")
    elif keep_state and state.get("files"):
        what = "replacing the overlay" if changed else "putting the pristine files back over the overlay"
        log(f"tkv-seam overlay: {what} installed in {vllm_dir} ({describe_installed(state)})")
    _check_writable(site, [site / t.path for t in todo], state_path if keep_state else None, bool(to_copy))
    if keep_state and todo:  # the intent, before the first replace: restore always goes through
        for t in to_copy:  # the pristine file, kept in the venv before it is replaced
            pristine = (site / t.path).read_bytes()
            if hashlib.sha256(pristine).hexdigest() != t.pristine:
                raise OverlayError(
                    f"{site / t.path} changed while the overlay was installed; nothing was replaced"
                )
            copies.save(t.path, pristine)
            saved[t.path] = t.pristine
        # every target as it is now (each one verified above) stays accepted: a file an earlier
        # killed run left as its own pending overlay is not lost from the record by this one
        now = {t.path: have[t.path] for t in targets.values() if have[t.path] != t.pristine}
        _save_state(
            state_path,
            {
                "series_digest": state.get("series_digest"),
                "commit": state.get("commit"),
                "base": state.get("base"),
                "files": {**installed, **now},
                "pending": {t.path: t.want for t in todo},
                "pristine": saved,
                "installing": {
                    "series_digest": manifest.get("series_digest"),
                    "commit": manifest.get("commit"),
                },
            },
        )
    written = []
    for t in todo:
        target = site / t.path
        tmp = target.with_name(f".{target.name}.tkv-seam-tmp")
        try:
            _write_new(tmp, data[t.path])
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
            cache = target.parent / "__pycache__"
            for stale in cache.glob(f"{target.stem}.*.pyc") if cache.exists() else []:
                stale.unlink()
            py_compile.compile(str(target), doraise=True)
        except (OSError, py_compile.PyCompileError) as e:
            tmp.unlink(missing_ok=True)
            what = "byte-compile" if isinstance(e, py_compile.PyCompileError) else "write"
            raise OverlayError(
                f"cannot {what} {target}: {getattr(e, 'strerror', None) or e}; {len(written)} of "
                f"{len(todo)} file(s) were replaced before it (recorded: restore puts them back)",
                CANNOT_WRITE,
                str(target.parent),
            ) from e
        written.append(t.path)
    if keep_state:
        if changed:
            _save_state(
                state_path,
                {
                    "series_digest": manifest.get("series_digest"),
                    "commit": manifest.get("commit"),
                    "base": manifest.get("base"),
                    "files": changed,
                    "pristine": {p: d for p, d in saved.items() if p in changed},
                },
            )
        elif state_path.exists():
            state_path.unlink()
        copies.keep_only(set(changed) & set(saved))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", type=Path, help="staged overlay: manifest.json + overlay/vllm/...")
    parser.add_argument("--vllm-dir", type=Path, help="the installed vllm package (default: locate it)")
    parser.add_argument(
        "--keep-state",
        action="store_true",
        help="record what was installed so a later overlay or restore may replace it",
    )
    parser.add_argument(
        "--venv", action="store_true", help="the vllm must be this Python's own (no system search)"
    )
    parser.add_argument(
        "--result-json", action="store_true", help="end stdout with the outcome as one JSON line"
    )
    args = parser.parse_args(argv)
    manifest = json.loads((args.stage / "manifest.json").read_text())
    label = manifest.get("base", "base")
    result: dict = {"status": 0}
    try:
        vllm_dir = args.vllm_dir or locate_vllm(args.venv)
        result["vllm_dir"] = str(vllm_dir)
        result["vllm_version"] = vllm_version(vllm_dir)
        print(f"tkv-seam overlay: vllm package at {vllm_dir}")
        written = install(args.stage, vllm_dir, label, args.keep_state)
    except OverlayError as e:
        print(f"tkv-seam overlay: {e}", file=sys.stderr)
        result.update(status=e.status, error=str(e), path=e.path)
        written = None
    if written is not None:
        for path in written:
            print(f"tkv-seam overlay: replaced {path}")
        print(f"tkv-seam overlay: {len(written)} file(s) replaced, {len(manifest['files'])} verified")
    if args.result_json:
        print(json.dumps(dict(result, replaced=written)))
    return result["status"]


if __name__ == "__main__":
    sys.exit(main())
