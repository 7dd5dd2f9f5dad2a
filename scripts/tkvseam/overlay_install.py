"""Install a staged overlay over an installed ``vllm`` package (stdlib only).

Used twice, the same way: by the Docker image build (copied into the build
context, run by the image's python3) and by ``tkv-seam overlay install`` on the
test venv. Steps: locate the installed ``vllm`` package; check that every target
file is the pristine base file (sha256 from ``manifest.json``), or, on a venv,
the file a previous overlay installed (recorded in ``.tkv-seam-overlay.json``);
only then replace the files, drop their stale bytecode and byte-compile them.

Exit status: 0 installed, 1 a target file is not the expected base file, 2 no
or several vllm packages found.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.util
import json
import os
import py_compile
import sys
from pathlib import Path

STATE = ".tkv-seam-overlay.json"


class OverlayError(Exception):
    pass


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def locate_vllm() -> Path:
    """The installed vllm package directory: the import system first, then the usual prefixes."""
    spec = importlib.util.find_spec("vllm")
    if spec and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    found = sorted(
        {
            Path(p).resolve()
            for pattern in ("/usr/local/lib/python3*/*-packages/vllm", "/usr/lib/python3*/*-packages/vllm")
            for p in glob.glob(pattern)
            if Path(p, "__init__.py").exists()
        }
    )
    if len(found) != 1:
        raise OverlayError(f"expected one installed vllm package, found {len(found)}: {found}")
    return found[0]


def install(stage: Path, vllm_dir: Path, base_label: str, keep_state: bool) -> list[str]:
    """Verify, then replace. Return the paths written (relative to site-packages)."""
    manifest = json.loads((stage / "manifest.json").read_text())
    site = vllm_dir.parent
    state_path = vllm_dir / STATE
    state = json.loads(state_path.read_text()) if keep_state and state_path.exists() else {}
    installed = state.get("files", {})
    for entry in manifest["files"]:
        target = site / entry["path"]
        if not target.exists():
            raise OverlayError(f"base {base_label}: {entry['path']} is missing from {site}")
        have = sha256(target)
        if have not in (entry["pristine_sha256"], installed.get(entry["path"])):
            raise OverlayError(
                f"base is not vLLM {base_label}: {entry['path']} has sha256 {have}, "
                f"expected the pristine {entry['pristine_sha256']}"
            )
    written = []
    for entry in manifest["files"]:
        target = site / entry["path"]
        source = stage / "overlay" / entry["path"]
        if sha256(target) == entry["patched_sha256"]:
            continue
        tmp = target.with_name(f".{target.name}.tkv-seam-tmp")
        tmp.write_bytes(source.read_bytes())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        cache = target.parent / "__pycache__"
        for stale in cache.glob(f"{target.stem}.*.pyc") if cache.exists() else []:
            stale.unlink()
        py_compile.compile(str(target), doraise=True)
        written.append(entry["path"])
    changed = {
        e["path"]: e["patched_sha256"]
        for e in manifest["files"]
        if e["patched_sha256"] != e["pristine_sha256"]
    }
    if keep_state:
        if changed:
            # By rename, like the files: a hard-linked copy of the venv must keep its own record.
            tmp = state_path.with_name(f".{STATE}.tkv-seam-tmp")
            tmp.write_text(
                json.dumps(
                    {
                        "series_digest": manifest.get("series_digest"),
                        "commit": manifest.get("commit"),
                        "files": changed,
                    },
                    indent=1,
                )
                + "\n"
            )
            os.replace(tmp, state_path)
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
    args = parser.parse_args(argv)
    manifest = json.loads((args.stage / "manifest.json").read_text())
    label = manifest.get("base", "base")
    try:
        vllm_dir = args.vllm_dir or locate_vllm()
        print(f"tkv-seam overlay: vllm package at {vllm_dir}")
        written = install(args.stage, vllm_dir, label, args.keep_state)
    except OverlayError as e:
        print(f"tkv-seam overlay: {e}", file=sys.stderr)
        return 1 if "sha256" in str(e) or "missing" in str(e) else 2
    for path in written:
        print(f"tkv-seam overlay: replaced {path}")
    print(f"tkv-seam overlay: {len(written)} file(s) replaced, {len(manifest['files'])} verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
