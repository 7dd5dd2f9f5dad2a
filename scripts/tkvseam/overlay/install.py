"""Install a staged overlay over an installed ``vllm`` package (stdlib only).

Used twice, the same way: by the Docker image build (copied into the build
context, run by the image's python3) and by ``tkv-seam overlay install`` on the
test venv. Steps: locate the installed ``vllm`` package; check that every target
file is the pristine base file (sha256 from ``manifest.json``), or, on a venv,
the file a previous overlay installed (recorded in ``.tkv-seam-overlay.json``);
check that every directory it writes is writable; only then replace the files,
drop their stale bytecode and byte-compile them.

On a venv (``--keep-state``) the record is written *before* the first file is
replaced: it names, per file, what the file is now (the overlay installed, or what an
earlier killed run left) and the one being installed (``pending``). A run killed
half-way, or stopped by a file it cannot write, leaves every target either as it was
or the new overlay's file, both of which the record accepts: a later install or
restore always goes through, however many runs were killed before it.

Exit status: 0 installed (or already installed), 1 a target file is not the
expected base file, 2 no or several vllm packages found, 3 a file or directory
cannot be written (nothing was replaced when the check finds it first).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import py_compile
import sys
from pathlib import Path

STATE = ".tkv-seam-overlay.json"
NOT_PRISTINE, NO_VLLM, CANNOT_WRITE = 1, 2, 3


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


def _load_state(state_path: Path) -> dict:
    """The venv's record; a record that is not ours (not JSON, wrong types) counts as none."""
    try:
        data = json.loads(state_path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    for key in ("files", "pending"):
        table = data.get(key)
        if table is not None and not (
            isinstance(table, dict) and all(isinstance(v, str) for v in table.values())
        ):
            data[key] = {}
    return data


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
        parts = entry["path"].split("/")
        if parts[0] != "vllm" or len(parts) < 2 or any(p in ("", ".", "..") for p in parts):
            raise OverlayError(f"the stage's manifest names {entry['path']!r}: not a file inside vllm/")


def _unwritable(dirs: set[Path]) -> Path | None:
    """The first directory of ``dirs`` this process cannot create files in (None: all fine)."""
    for d in sorted(dirs):
        if d.exists() and not os.access(d, os.W_OK | os.X_OK):
            return d
    return None


def _check_writable(site: Path, targets: list[Path], state_path: Path | None) -> None:
    dirs = {t.parent for t in targets}
    dirs |= {t.parent / "__pycache__" for t in targets if (t.parent / "__pycache__").exists()}
    if state_path is not None:
        dirs.add(state_path.parent)
    bad = _unwritable(dirs)
    if bad is not None:
        raise OverlayError(
            f"cannot write {bad}: permission denied; nothing was replaced", CANNOT_WRITE, str(bad)
        )


def describe_installed(state: dict) -> str:
    digest = (state.get("series_digest") or "")[:12] or "unknown"
    commit = (state.get("commit") or "")[:12] or "unknown"
    return f"series {digest}, commit {commit}"


def install(stage: Path, vllm_dir: Path, base_label: str, keep_state: bool, log=print) -> list[str]:
    """Verify, then replace. Return the paths written (relative to site-packages)."""
    manifest = json.loads((stage / "manifest.json").read_text())
    _check_paths(manifest)
    site = vllm_dir.parent
    state_path = vllm_dir / STATE
    state = _load_state(state_path) if keep_state else {}
    installed = state.get("files") or {}
    pending = state.get("pending") or {}
    have = {}
    for entry in manifest["files"]:
        target = site / entry["path"]
        if not target.is_file():
            raise OverlayError(f"base {base_label}: {entry['path']} is missing from {site}")
        have[entry["path"]] = sha256(target)
        accepted = {entry["pristine_sha256"], installed.get(entry["path"]), pending.get(entry["path"])}
        if have[entry["path"]] not in accepted:
            raise OverlayError(
                f"base is not vLLM {base_label}: {entry['path']} has sha256 {have[entry['path']]}, "
                f"expected the pristine {entry['pristine_sha256']} (the vllm at {vllm_dir} is version "
                f"{vllm_version(vllm_dir)})"
            )
    todo = [e for e in manifest["files"] if have[e["path"]] != e["patched_sha256"]]
    changed = {
        e["path"]: e["patched_sha256"]
        for e in manifest["files"]
        if e["patched_sha256"] != e["pristine_sha256"]
    }
    if not todo:
        if changed and keep_state and state.get("files") == changed and not pending:
            log(f"tkv-seam overlay: already installed in {vllm_dir} ({describe_installed(state)})")
        elif not changed and keep_state and not state_path.exists():
            log(f"tkv-seam overlay: {vllm_dir} already holds the pristine files")
    elif keep_state and state.get("files"):
        what = "replacing the overlay" if changed else "putting the pristine files back over the overlay"
        log(f"tkv-seam overlay: {what} installed in {vllm_dir} ({describe_installed(state)})")
    _check_writable(site, [site / e["path"] for e in todo], state_path if keep_state else None)
    if keep_state and todo:  # the intent, before the first replace: restore always goes through
        # every target as it is now (each one verified above) stays accepted: a file an earlier
        # killed run left as its own pending overlay is not lost from the record by this one
        now = {
            e["path"]: have[e["path"]] for e in manifest["files"] if have[e["path"]] != e["pristine_sha256"]
        }
        _save_state(
            state_path,
            {
                "series_digest": state.get("series_digest"),
                "commit": state.get("commit"),
                "files": {**installed, **now},
                "pending": {e["path"]: e["patched_sha256"] for e in todo},
                "installing": {
                    "series_digest": manifest.get("series_digest"),
                    "commit": manifest.get("commit"),
                },
            },
        )
    written = []
    for entry in todo:
        target = site / entry["path"]
        source = stage / "overlay" / entry["path"]
        tmp = target.with_name(f".{target.name}.tkv-seam-tmp")
        try:
            _write_new(tmp, source.read_bytes())
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
        written.append(entry["path"])
    if keep_state:
        if changed:
            _save_state(
                state_path,
                {
                    "series_digest": manifest.get("series_digest"),
                    "commit": manifest.get("commit"),
                    "files": changed,
                },
            )
        elif state_path.exists():
            state_path.unlink()
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
