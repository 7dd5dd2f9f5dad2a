"""A stand-in for ``vllm/vllm-openai:<base>`` where no registry is reachable.

A Debian root filesystem with python3 (debootstrap, cached as a tarball), plus the
base's ``vllm/**/*.py`` at the official image's path
(``/usr/local/lib/python3.12/dist-packages/vllm``), imported as an image. It is
labelled as a stand-in; ``make image`` accepts it only with ``--stand-in``.
Used by CI and the image tests; a real user builds on the official image.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from tkvseam import git
from tkvseam.errors import SeamError
from tkvseam.image import REVISION_LABEL, STAND_IN_LABEL
from tkvseam.progress import QUIET, Progress

VLLM_PATH = "usr/local/lib/python3.12/dist-packages/vllm"
SUITE = "bookworm"
_STRIP = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "var/cache/apt",
    "var/lib/apt/lists",
)


def rootfs(cache: Path, mirror: str | None = None, progress: Progress = QUIET) -> Path:
    """A cached tarball of a minimal Debian with python3 (built once with debootstrap)."""
    out = cache / "standin" / f"{SUITE}-python3.tar"
    if out.exists():
        return out
    if not shutil.which("debootstrap"):
        raise SeamError("debootstrap is not installed", hint="apt-get install -y debootstrap")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".rootfs-", dir=out.parent))
    try:
        progress.step(f"debootstrap {SUITE} (minbase + python3) for the stand-in base")
        cmd = ["debootstrap", "--variant=minbase", "--include=python3", SUITE, str(work / "fs")]
        if mirror:
            cmd.append(mirror)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SeamError(f"debootstrap failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        for rel in _STRIP:
            shutil.rmtree(work / "fs" / rel, ignore_errors=True)
        with tarfile.open(work / "fs.tar", "w") as tar:
            tar.add(work / "fs", arcname=".")
        (work / "fs.tar").rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def build_stand_in(
    api,
    rootfs_tar: Path,
    tree: Path,
    base_commit: str,
    repository: str,
    tag: str,
    revision: str | None = None,
    alter: str | None = None,
) -> str:
    """Import rootfs + the base commit's vllm/*.py as ``repository:tag``; return the image id.

    ``alter`` names one vllm/ file to change (a negative test: not the pristine file);
    ``revision`` sets the OCI revision label (a stand-in has none by default).
    """
    listing = git.out(tree, "ls-tree", "-r", "--name-only", base_commit, "vllm/").splitlines()
    paths = [p for p in listing if p.endswith(".py")]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "image.tar"
        shutil.copyfile(rootfs_tar, out)
        with tarfile.open(out, "a") as tar:
            dirs = sorted({str(Path(p).parent) for p in paths})
            for d in dirs:  # directory entries first, so every parent has sane modes
                info = tarfile.TarInfo(f"./{VLLM_PATH}/{d[len('vllm') :].lstrip('/')}".rstrip("/"))
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            for path in paths:
                data = git.run(tree, "show", f"{base_commit}:{path}").stdout
                if path == alter:
                    data += b"# altered: not the pristine file\n"
                info = tarfile.TarInfo(f"./{VLLM_PATH}/{path[len('vllm/') :]}")
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        changes = [f"LABEL {STAND_IN_LABEL}=true", 'CMD ["/bin/sh"]']
        if revision:
            changes.append(f"LABEL {REVISION_LABEL}={revision}")
        api.import_image_from_file(str(out), repository=repository, tag=tag, changes=changes)
    return api.inspect_image(f"{repository}:{tag}")["Id"]
