"""Install the staged plugin wheel into an image's Python, hash-checked, changing nothing else (stdlib only).

Copied into the image's build context beside ``requirements.txt`` (``name==version
--hash=sha256:...``) and the wheel, and run by the image's ``python3`` after the overlay.
The installer is the base image's own: ``uv pip install --system`` (what the official vLLM
image carries), else ``python3 -m pip``; always ``--no-index --find-links <stage>`` (no
network), ``--require-hashes`` and ``--no-deps``, so no package of the base image is
installed, upgraded or removed. The plugin's own requirements must then already be in the
base image; they are checked by name afterwards.

Exit status: 0 installed, 3 the image has neither uv nor pip, 4 the installer failed,
5 the plugin's requirements are not in the image.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

PREFIX = "tkv-seam plugin:"
NO_INSTALLER, INSTALL_FAILED, MISSING_REQUIREMENTS = 3, 4, 5


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installer_command(stage: Path, requirements: Path) -> tuple[str, list[str]] | None:
    """The base image's installer and its command line, or None when it has neither uv nor pip."""
    offline = [
        "--no-index",
        "--find-links",
        str(stage),
        "--no-deps",
        "--require-hashes",
        "-r",
        str(requirements),
    ]
    uv = shutil.which("uv")
    if uv:
        return "uv", [uv, "pip", "install", "--system", "--python", sys.executable, "--no-cache", *offline]
    if importlib.util.find_spec("pip"):
        pip = [sys.executable, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check"]
        return "pip", [*pip, *offline]
    return None


def missing_requirements(name: str) -> list[str]:
    """The plugin's unconditional requirements (no extra, no marker) that no installed distribution provides."""
    installed = {_canonical(d.metadata["Name"] or "") for d in importlib.metadata.distributions()}
    missing = []
    for req in importlib.metadata.requires(name) or []:
        spec, _, marker = req.partition(";")
        if marker.strip():
            continue  # extras and environment markers: not needed unconditionally
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        if m and _canonical(m.group(1)) not in installed:
            missing.append(spec.strip())
    return missing


def check(requirement: str, installer: str = "the installer") -> int:
    """The installed release is ``requirement`` and its requirements are in the image."""
    name, _, version = requirement.partition("==")
    try:
        have = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        have = "nothing"
    if have != version:
        print(f"{PREFIX} {installer} installed {name} {have}, expected {version}", file=sys.stderr)
        return INSTALL_FAILED
    missing = missing_requirements(name)
    if missing:
        print(
            f"{PREFIX} {requirement} needs {', '.join(missing)}, which the base image does not carry "
            "(the plugin is installed --no-deps: the base image's packages are never changed)",
            file=sys.stderr,
        )
        return MISSING_REQUIREMENTS
    return 0


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if args[:1] == ["--check"]:
        return check(*args[1:3])
    stage = Path(args[0])
    requirements = stage / "requirements.txt"
    requirement = requirements.read_text().split()[0]
    found = installer_command(stage, requirements)
    if found is None:
        print(
            f"{PREFIX} the base image has neither uv nor pip ({sys.executable}): cannot install {requirement}",
            file=sys.stderr,
        )
        return NO_INSTALLER
    installer, cmd = found
    print(f"{PREFIX} {' '.join(cmd)}", flush=True)
    rc = subprocess.run(cmd).returncode
    if rc != 0:
        print(
            f"{PREFIX} {installer} could not install {requirement} (exit {rc}; its message is above)",
            file=sys.stderr,
        )
        return INSTALL_FAILED
    # A fresh interpreter sees what was just installed (this one's path entries predate it).
    rc = subprocess.run([sys.executable, __file__, "--check", requirement, installer]).returncode
    if rc != 0:
        return rc
    print(f"{PREFIX} installed {requirement} with {installer} (hash-checked, --no-deps, offline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
