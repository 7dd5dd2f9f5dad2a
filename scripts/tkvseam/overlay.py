"""The overlay: the patched ``vllm/`` files of the series, derived from the patches.

``stage`` writes ``manifest.json`` (per file: path, pristine sha256, patched
sha256) and ``overlay/vllm/...`` for one commit of the build tree; the same
stage feeds the Docker build and the test venv (``overlay_install``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from . import git
from .errors import SeamError, VerifyError
from .patch import Patch
from .seamtree import SeamTree

PACKAGE_PREFIX = "vllm/"
INSTALLER = Path(__file__).with_name("overlay_install.py")


def overlay_paths(patches: list[Patch]) -> list[str]:
    """The vllm/ files the series touches (sorted): the image and venv overlay set."""
    paths = set()
    for patch in patches:
        for fc in patch.files:
            for p in (fc.old, fc.new):
                if p and p.startswith(PACKAGE_PREFIX):
                    if fc.kind != "modify":
                        raise SeamError(
                            f"{patch.name}: {p}: the overlay replaces existing files only "
                            f"({fc.kind} of a vllm/ file cannot be overlaid)"
                        )
                    paths.add(p)
    return sorted(paths)


def queue_overlay_paths(root: Path, base) -> list[str]:
    """The overlay set of ``base``'s own queue (bases.toml says where it lives)."""
    from .series import read_series

    return overlay_paths(read_series(root, base.queue, base.name).load())


def _blob(tree: Path, commit: str, path: str) -> bytes:
    return git.show_required(tree, commit, path)


def stage(tree: Path, paths: list[str], dest: Path, commit: str = "HEAD", series_digest: str = "") -> dict:
    """Write manifest.json and overlay/ for ``commit`` of the build tree into ``dest``."""
    state = SeamTree(tree).state()
    base_commit = state.base_commit
    commit = git.rev_parse(tree, commit)
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "overlay").mkdir(parents=True)
    files = []
    for path in paths:
        pristine = _blob(tree, base_commit, path)
        patched = _blob(tree, commit, path)
        out = dest / "overlay" / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(patched)
        files.append(
            {
                "path": path,
                "pristine_sha256": hashlib.sha256(pristine).hexdigest(),
                "patched_sha256": hashlib.sha256(patched).hexdigest(),
            }
        )
    manifest = {
        "base": state.base,
        "upstream_commit": state.upstream_commit,
        "commit": commit,
        "series_digest": series_digest or state.digest,
        "files": files,
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.copy2(INSTALLER, dest / "overlay_install.py")
    return manifest


def install_into_venv(python: Path, stage_dir: Path) -> str:
    """Run the stage's installer with the venv's python (so it finds that venv's vllm)."""
    proc = subprocess.run(
        [str(python), str(stage_dir / "overlay_install.py"), str(stage_dir), "--keep-state"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise VerifyError(
            proc.stderr.strip() or proc.stdout.strip(),
            hint="recreate the test venv (rm -rf .venv-vllm-<base> && make venv-vllm BASE=<base>)",
        )
    return proc.stdout
