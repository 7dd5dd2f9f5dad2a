"""``make standin``: a local stand-in for ``vllm/vllm-openai:<base>`` where no registry is reachable.

A Debian root filesystem with python3 (debootstrap, cached as a tarball in the cache),
plus, at the official image's paths:

- the base's ``vllm/**/*.py`` in ``/usr/local/lib/python3.12/dist-packages/vllm``;
- metadata-only ``*.dist-info`` of every package of the base's lock (``ci/lock-cpu-<base>.txt``:
  vLLM, torch and the rest), so the image's Python sees the packages the real image carries
  (a ``.pth`` adds that directory to Debian's python3.11) and a freeze means something;
- by default uv in ``/usr/local/bin`` (the official image installs it with pip), the tool
  venv's own binary; ``installer="none"`` leaves it out (a base that cannot install a plugin).

Debian's ``EXTERNALLY-MANAGED`` marker is dropped, as the official image drops its own. The
image is labelled as a stand-in and has no revision label: ``make image`` takes it only with
``STAND_IN=1``, and tags what it builds on it ``…-standin``. For trying the build where the
official image cannot be pulled; a real image is built on the official one.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import git
from ..answer import Answer
from ..bases.pins import Base
from ..errors import DockerError, SeamError, UsageError
from .names import STAND_IN_LABEL, default_tag, parse_reference
from .engine import engine_errors
from ..tree.seamtree import SeamTree
from ..tree.state import Kind
from ..progress import QUIET, Progress, run_with_heartbeat

INSTALLER_LABEL = "io.tkv-seam.stand-in.installer"
SITE = "usr/local/lib/python3.12/dist-packages"  # the official image's site-packages
VLLM_PATH = f"{SITE}/vllm"
INSTALLERS = ("uv", "none")
SUITE = "bookworm"
_STRIP = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "var/cache/apt",
    "var/lib/apt/lists",
)
_PYTHON_RE = re.compile(r"^(?:\./)?usr/lib/(python3\.\d+)/EXTERNALLY-MANAGED$")
_PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


@dataclass
class StandIn(Answer):
    tag: str
    image_id: str
    installer: str
    packages: int
    base: str = ""

    def to_json(self) -> dict:
        return {
            "tag": self.tag,
            "image_id": self.image_id,
            "installer": self.installer,
            "packages": self.packages,
        }

    def lines(self) -> list[str]:
        named = "" if self.tag == default_tag(self.base) else f" BASE_IMAGE={self.tag}"
        plugin = "" if self.installer == "uv" else " TURBO_ATTN="
        return [
            f"stand-in {self.tag} ({self.image_id[:19]}): {self.base}'s vllm/*.py, {self.packages} package "
            f"records, installer {self.installer}",
            f"next: make image BASE={self.base} STAND_IN=1{named}{plugin}",
        ]


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
        # 1-3 min with nothing to show: a heartbeat line every 10 s says it still runs
        proc = run_with_heartbeat(
            progress, f"debootstrap {SUITE}", lambda: subprocess.run(cmd, capture_output=True, text=True)
        )
        if proc.returncode != 0:
            raise SeamError(
                f"debootstrap failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}",
                hint="check network access to the Debian mirror, then run the command again",
            )
        for rel in _STRIP:
            shutil.rmtree(work / "fs" / rel, ignore_errors=True)
        with tarfile.open(work / "fs.tar", "w") as tar:
            tar.add(work / "fs", arcname=".")
        (work / "fs.tar").rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def lock_pins(lock: Path) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line of a lock file."""
    pins = {}
    for line in lock.read_text().splitlines():
        m = _PIN_RE.match(line.strip())
        if m:
            pins[m.group(1)] = m.group(2)
    return pins


def uv_binary() -> Path:
    """The uv of the tool's venv (``make venv`` installs it), else the one on PATH."""
    beside = Path(sys.executable).with_name("uv")
    found = beside if beside.exists() else shutil.which("uv")
    if not found:
        raise SeamError(
            "no uv binary to put into the stand-in",
            hint="make venv  (installs uv into .venv), or --installer none",
        )
    return Path(found)


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(f"./{name}")
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str, present: set[str]) -> None:
    if name in present:
        return
    present.add(name)
    info = tarfile.TarInfo(f"./{name}".rstrip("/"))
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    tar.addfile(info)


def _copy_rootfs(src: Path, tar: tarfile.TarFile) -> tuple[str, set[str]]:
    """Copy the rootfs into ``tar`` without Debian's EXTERNALLY-MANAGED marker.

    Returns its python3.N and the paths it holds (``./``-less), so no entry is added twice.
    """
    python, names = "", set()
    with tarfile.open(src) as rootfs_tar:
        for member in rootfs_tar:
            m = _PYTHON_RE.match(member.name)
            if m:
                python = m.group(1)
                continue
            names.add(member.name.removeprefix("./").rstrip("/"))
            tar.addfile(member, rootfs_tar.extractfile(member) if member.isreg() else None)
    return python or "python3.11", names


def build_stand_in(
    api,
    rootfs_tar: Path,
    tree: Path,
    base_commit: str,
    repository: str,
    tag: str,
    packages: dict[str, str] | None = None,
    uv: Path | None = None,
) -> str:
    """Import rootfs + the base commit's vllm/*.py as ``repository:tag``; return the image id.

    ``packages``: name -> version of the metadata-only dist-infos to add; ``uv``: the
    binary to put in /usr/local/bin (None: neither uv nor pip in the image).
    """
    listing = git.repo.files_at(tree, base_commit, "vllm/")
    paths = [p for p in listing if p.endswith(".py")]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "image.tar"
        with tarfile.open(out, "w") as tar:
            python, present = _copy_rootfs(rootfs_tar, tar)
            for d in ["usr/local/lib/python3.12", SITE, *sorted({f"{SITE}/{Path(p).parent}" for p in paths})]:
                _add_dir(tar, d, present)  # directory entries first, so every parent has sane modes
            for path in paths:
                data = git.repo.show_required(tree, base_commit, path)
                _add(tar, f"{SITE}/{path}", data)
            for name, version in sorted((packages or {}).items()):
                info = f"{SITE}/{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
                _add_dir(tar, info, present)
                _add(
                    tar,
                    f"{info}/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
                )
                _add(tar, f"{info}/INSTALLER", b"tkv-seam stand-in (metadata only)\n")
            local = f"usr/local/lib/{python}/dist-packages"
            _add_dir(tar, f"usr/local/lib/{python}", present)
            _add_dir(tar, local, present)
            _add(tar, f"{local}/tkv-seam-stand-in.pth", f"/{SITE}\n".encode())
            if uv is not None:
                _add(tar, "usr/local/bin/uv", uv.read_bytes(), 0o755)
        changes = [
            f"LABEL {STAND_IN_LABEL}=true",
            f"LABEL {INSTALLER_LABEL}={'uv' if uv else 'none'}",
            'CMD ["/bin/sh"]',
        ]
        try:
            api.import_image_from_file(str(out), repository=repository, tag=tag, changes=changes)
            return api.inspect_image(f"{repository}:{tag}")["Id"]
        except engine_errors() as e:
            raise DockerError(
                f"the Docker engine refused the stand-in {repository}:{tag}: {e}",
                hint="check the engine (its log; DOCKER_HOST), then run the command again",
            ) from e


def make_stand_in(
    api,
    root: Path,
    tree: Path,
    base: Base,
    cache: Path,
    installer: str = "uv",
    tag: str | None = None,
    progress: Progress = QUIET,
) -> StandIn:
    """The stand-in of ``base`` from the applied build tree ``tree`` (``make standin``)."""
    if installer not in INSTALLERS:
        raise UsageError(
            f"unknown installer {installer!r}; expected one of {', '.join(INSTALLERS)}",
            hint=f"make standin BASE={base.name} INSTALLER=none",
        )
    repository, name = parse_reference(tag or default_tag(base.name, installer))
    if "standin" not in f"{repository}:{name}".lower().replace("-", ""):
        raise UsageError(
            f"tag {tag!r} could pass for a real image: a stand-in's tag must say stand-in",
            hint=f"make standin BASE={base.name}  (tags {default_tag(base.name, installer)})",
        )
    state = SeamTree(tree, root).require(Kind.APPLY, base.name, "the stand-in")
    lock = root / base.cpu_lock
    packages = lock_pins(lock) if lock.exists() else {}
    uv = uv_binary() if installer == "uv" else None
    tar = rootfs(cache, progress=progress)
    progress.step(
        f"import the stand-in {repository}:{name} ({len(packages)} package records, installer {installer})"
    )
    image_id = build_stand_in(api, tar, tree, state.base_commit, repository, name, packages=packages, uv=uv)
    return StandIn(f"{repository}:{name}", image_id, installer, len(packages), base.name)
