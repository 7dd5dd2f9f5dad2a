"""The CPU lock of a base, ``ci/lock-cpu-<base>.txt``, resolved by code.

What ``make venv-vllm BASE=<base>`` installs (uv ``--no-deps``): that vLLM release, the CPU
build of torch this machine has, and upstream's test runner pins. ``uv pip compile`` resolves

- ``vllm==<version>`` and the test pins (pytest, pytest-asyncio, pytest-mock,
  pytest-timeout, tblib) at the versions of the release's own ``requirements/test/cpu.txt``;
- with the base's **rules** (``["<base>".seam.cpu]`` in ``bases.toml``, or the table of the
  base it is carried from): torch overridden (``local``: the CPU build in ``$PIP_FIND_LINKS``,
  ``torch-<v>+cpu-….whl``, since PyPI has no ``+cpu`` builds and uv ignores pip's config; or a
  version), and the packages the lock leaves out, each with its reason (PyPI's torchvision,
  torchaudio and torchcodec need CUDA libraries; vLLM 0.34.0's flashinfer-python pin is not on
  the index). Carrying a release edits this data, never this code: ``lock-cpu --exclude NAME``
  adds one (``make lock-cpu EXCLUDE=``), as a pin the index does not serve suggests;
- for Python 3.11 on ``x86_64-manylinux_2_28`` (the torch wheel's platform), with
  ``--exclude-newer`` the time of the run, so the header's command gives the same lock again.

The lock's header (``#`` lines, which ``uv pip install -r`` skips) says all of this, each rule
with its reason, and the one command that remakes it. A lock that changes is replaced; the old
one is kept under ``build/dropped/``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from .. import hints, layout
from ..answer import Answer
from ..bases import file as basesfile
from ..bases.pins import TORCH_LOCAL, TRITON_STAND_IN, Base, CpuVenv, Exclusion, cpu_rules
from ..bases.sdist import fetch_sdist
from ..errors import SeamError, UsageError
from ..bases.index import default_index_url, listing, no_credentials
from ..tree.kept import keep
from ..lock import locked
from ..progress import QUIET, Progress

TEST_PACKAGES = ("pytest", "pytest-asyncio", "pytest-mock", "pytest-timeout", "tblib")
PYTHON_VERSION = "3.11"
PLATFORM = "x86_64-manylinux_2_28"
TEST_REQUIREMENTS = "requirements/test/cpu.txt"
CPU_REQUIREMENTS = "requirements/cpu.txt"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")
# uv's two ways of saying the index does not serve a pinned package (uv 0.13)
_NO_VERSION = re.compile(r"there is no version of ([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s,]+)")
_NOT_FOUND = re.compile(
    r"([A-Za-z0-9][A-Za-z0-9._-]*) was not found in the (?:package registry|provided package locations)"
)


@dataclass
class Torch:
    version: str  # e.g. 2.13.0+cpu
    source: str  # the wheel file, or "given"
    asked: str = ""  # what the release's requirements/cpu.txt pins ("" when it does not say)


class LockStatus(StrEnum):
    WRITTEN = "written"  # there was none
    REPLACED = "replaced"  # other pins; the old lock is ``kept``
    UNCHANGED = "unchanged"  # the same pins (the old header stays)


@dataclass
class LockResult(Answer):
    base: str
    path: str
    status: LockStatus
    pins: list[str]
    torch: Torch
    test_pins: list[str] = field(default_factory=list)
    exclude_newer: str = ""
    kept: str | None = None  # where the replaced lock was kept
    excluded: list[str] = field(default_factory=list)  # what the lock leaves out (the base's rules)

    def lines(self) -> list[str]:
        where = f" (the old one is kept in {self.kept})" if self.kept else ""
        asked = f" (the release asks for {self.torch.asked})" if self.torch.asked else ""
        return [
            f"{self.path}: {self.status}{where}: {len(self.pins)} pins, torch {self.torch.version}{asked}"
        ]


def uv_executable() -> str:
    """``$UV``, else the uv beside this Python (``make venv`` installs it), else ``uv`` on PATH."""
    for candidate in (os.environ.get("UV"), str(Path(sys.executable).with_name("uv")), shutil.which("uv")):
        if candidate and Path(candidate).is_file():
            return candidate
    raise SeamError("no uv executable found", hint="make venv   (installs uv into .venv)")


def find_links_default() -> list[str]:
    """The directories of ``$PIP_FIND_LINKS`` (pip's setting; uv does not read it)."""
    return os.environ.get("PIP_FIND_LINKS", "").split()


# --------------------------------------------------------------------------- inputs


def _member(tar: tarfile.TarFile, rel: str) -> str:
    roots = {m.name.split("/", 1)[0] for m in tar.getmembers()}
    for root in roots:
        try:
            member = tar.getmember(f"{root}/{rel}")
        except KeyError:
            continue
        f = tar.extractfile(member)
        return f.read().decode() if f else ""
    return ""


def release_pins(tarball: Path) -> tuple[dict[str, str], str]:
    """From the verified sdist: the test pins of ``requirements/test/cpu.txt`` and the torch
    version ``requirements/cpu.txt`` asks for on x86_64 ("" when it names none)."""
    with tarfile.open(tarball) as tar:
        tests, cpu = _member(tar, TEST_REQUIREMENTS), _member(tar, CPU_REQUIREMENTS)
    pins = {}
    for line in tests.splitlines():
        m = _PIN.match(line.strip())
        if m and canonicalize_name(m.group(1)) in TEST_PACKAGES:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    asked = ""
    for line in cpu.splitlines():
        m = _PIN.match(line.strip())
        if m and canonicalize_name(m.group(1)) == "torch" and ("x86_64" in line or ";" not in line):
            asked = m.group(2)
            break
    return pins, asked


def cpu_torch(find_links: list[str], asked: str = "", python_tag: str = "cp311") -> Torch:
    """The CPU torch wheel of the local ``find_links`` directories: the one the release asks
    for when it is there, else the newest one."""
    found: dict[Version, Path] = {}
    for entry in find_links:
        directory = Path(entry.removeprefix("file://"))
        if not directory.is_dir():
            continue
        for wheel in directory.glob("torch-*.whl"):
            try:
                name, version, _, tags = parse_wheel_filename(wheel.name)
            except (InvalidWheelFilename, InvalidVersion):
                continue
            if (
                name == "torch"
                and version.local == "cpu"
                and any(t.interpreter in (python_tag, "py3") for t in tags)
            ):
                found[version] = wheel
    if not found:
        where = " ".join(find_links) or "(PIP_FIND_LINKS is unset)"
        raise SeamError(
            f"no CPU torch wheel (torch-<version>+cpu-{python_tag}-….whl) in the find-links directories: {where}",
            hint=".venv/bin/tkv-seam lock-cpu <base> --find-links <dir>   (a directory with the wheel; or --torch <version> for "
            "PyPI's CUDA build, which also runs on CPU)",
        )
    try:
        want = Version(asked) if asked else None
    except InvalidVersion:
        want = None
    version = want if want in found else max(found)
    return Torch(str(version), found[version].name, asked)


# --------------------------------------------------------------------------- resolution


def compile_args(
    requirements: Path,
    overrides: Path,
    excludes: Path,
    find_links: list[str],
    exclude_newer: str,
    index_url: str | None,
    no_index: bool,
) -> list[str]:
    args = ["pip", "compile", str(requirements), "--overrides", str(overrides), "--excludes", str(excludes)]
    args += ["--python-version", PYTHON_VERSION, "--python-platform", PLATFORM]
    args += ["--exclude-newer", exclude_newer, "--no-header", "--no-annotate", "--quiet"]
    for link in find_links:
        args += ["--find-links", link]
    if no_index:
        args.append("--no-index")
    elif index_url:
        args += ["--index-url", index_url]
    return args


def resolve(
    version: str,
    torch: Torch,
    test_pins: dict[str, str],
    find_links: list[str],
    exclude_newer: str,
    index_url: str | None = None,
    no_index: bool = False,
    excluded: tuple[str, ...] = (),
    base: str = "<base>",
) -> list[str]:
    """``name==version`` lines of the resolution (sorted as ``uv pip freeze`` output sorts)."""
    tmp = Path(tempfile.mkdtemp(prefix="tkv-seam-lock-"))
    try:
        reqs, overrides, excludes = tmp / "requirements.in", tmp / "overrides.txt", tmp / "excludes.txt"
        reqs.write_text(
            f"vllm=={version}\n" + "".join(f"{n}=={v}\n" if v else f"{n}\n" for n, v in test_pins.items())
        )
        overrides.write_text(f"torch=={torch.version}\n")
        excludes.write_text("".join(f"{n}\n" for n in excluded))
        args = compile_args(reqs, overrides, excludes, find_links, exclude_newer, index_url, no_index)
        proc = subprocess.run([uv_executable(), *args], capture_output=True, text=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if proc.returncode != 0:
        detail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        unserved = unserved_pin(proc.stderr)
        if unserved is not None and unserved[0] not in ("vllm", "torch"):  # those two are never left out
            raise unserved_error(base, version, *unserved, find_links, index_url, no_index, detail)
        raise SeamError(
            f"uv could not resolve vllm=={version} with torch=={torch.version}:\n{detail}",
            hint="check network access to the package index (or --index-url / --find-links), then run again",
        )
    pins = sorted(line.strip() for line in proc.stdout.splitlines() if _PIN.match(line.strip()))
    if not any(canonicalize_name(p.split("==")[0]) == "vllm" for p in pins):
        raise SeamError(f"uv's resolution of vllm=={version} lists no vllm: {proc.stdout[:500]!r}")
    return pins


def unserved_pin(stderr: str) -> tuple[str, str] | None:
    """(package, pinned version or "") when uv says the index does not serve a pinned package."""
    text = " ".join(stderr.split())  # uv wraps its sentences
    m = _NO_VERSION.search(text)
    if m:
        return canonicalize_name(m.group(1)), m.group(2)
    m = _NOT_FOUND.search(text)
    return (canonicalize_name(m.group(1)), "") if m else None


def available_versions(
    name: str, find_links: list[str], index_url: str | None, no_index: bool
) -> tuple[list[Version], str]:
    """The versions of ``name`` the find-links directories and the index have (wheels and
    sdists by file name), and where they were looked for; an index that cannot be asked is
    said, not raised (the resolution failed already)."""
    found: set[Version] = set()
    looked = []
    for entry in find_links:
        directory = Path(entry.removeprefix("file://"))
        if directory.is_dir():
            looked.append(str(directory))
            found |= {v for f in directory.iterdir() if (v := _file_version(f.name, name)) is not None}
    if not no_index:
        url = index_url or default_index_url()
        try:
            found |= {
                v for f in listing(name, url).files if (v := _file_version(f.filename, name)) is not None
            }
            looked.append(url)
        except SeamError as e:
            looked.append(f"{url} (not read: {e})")
    return sorted(found), ", ".join(looked) or "nowhere (no index, no find-links)"


def _file_version(filename: str, name: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            found, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            found, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return version if found == canonicalize_name(name) else None


def _around(versions: list[Version], pin: str, each_side: int = 2) -> str:
    """The versions nearest ``pin``, a few below and above (all of them when there are few)."""
    try:
        at = Version(pin)
    except InvalidVersion:
        return ", ".join(map(str, versions[-2 * each_side :]))
    below = [v for v in versions if v < at][-each_side:]
    above = [v for v in versions if v > at][:each_side]
    more = " …" if len(below) + len(above) < len(versions) else ""
    return ", ".join(map(str, below + above)) + more


def unserved_error(
    base: str,
    version: str,
    name: str,
    pin: str,
    find_links: list[str],
    index_url: str | None,
    no_index: bool,
    detail: str,
) -> SeamError:
    """The lock step's stop for a pin the index does not serve: the package, the pin, what the
    index has, and the command that leaves the package out of the CPU lock (a rule in bases.toml)."""
    versions, looked = available_versions(name, find_links, index_url, no_index)
    pinned = f"{name}=={pin}" if pin else name
    has = f"it has {_around(versions, pin)}" if versions else "it has no version of it"
    why = f"vllm {version} needs {pinned}, which the index does not serve ({has})"
    return SeamError(
        f"{base}: the CPU lock cannot be resolved: vllm {version} needs {pinned}, which the index does not "
        f"serve; {has} (looked in {looked}).\nuv said:\n{detail}",
        hint=f"if the CPU tests need no {name} (a CUDA kernel library, say), leave it out of the lock: `"
        + hints.make("lock-cpu", BASE=base, EXCLUDE=name, WHY=why)
        + "` (recorded with its reason in bases.toml), or give an index that has it (--index-url)",
        kind="lock",  # a decision for the user, not a failure: carry stops here (exit 12)
    )


def _uv_version() -> str:
    out = subprocess.run([uv_executable(), "--version"], capture_output=True, text=True).stdout.split()
    return out[1] if len(out) > 1 else "?"


def header(
    base: Base,
    torch: Torch,
    test_pins: dict[str, str],
    exclude_newer: str,
    find_links: list[str],
    index: str,
    remake: tuple[str, str],
    rules: CpuVenv,
    rules_from: str,
) -> str:
    pinned = " ".join(f"{n}=={v}" for n, v in test_pins.items() if v) or "none"
    unpinned = " ".join(n for n, v in test_pins.items() if not v)
    asked = f"; the release asks for torch=={torch.asked}" if torch.asked else ""
    whose = "its own" if rules_from == base.name else f"{rules_from}'s, the base it is carried from"
    built = {"given": "as given (--torch)", "rules": "as the rules say"}.get(
        torch.source, f"this machine's CPU build ({torch.source})"
    )
    lines = [
        f"CPU test venv of vLLM {base.version}: `make venv-vllm BASE={base.name}` installs it "
        "(uv pip install --no-deps -r).",
        f"Made by `tkv-seam lock-cpu {base.name}` with uv {_uv_version()} "
        f"(uv pip compile for Python {PYTHON_VERSION}, {PLATFORM}):",
        f"  vllm=={base.version}; from the sdist's {TEST_REQUIREMENTS}: {pinned}",
        *([f"  (not pinned there, resolved: {unpinned})"] if unpinned else []),
        f'  rules: ["{base.name}".seam.cpu] of bases.toml ({whose})',
        f"  torch overridden to {torch.version}, {built}{asked}",
        f"  excluded: {' '.join(rules.excluded) or 'nothing'}",
        *(f"    {e.name}: {e.why}" for e in rules.exclude),
        *(
            ["  Triton: a stand-in reports it present to vLLM (docs/tests.md, 'Triton on CPU')"]
            if rules.triton == TRITON_STAND_IN
            else []
        ),
        f"  index: {index}; find-links: {' '.join(find_links) or 'none'}",
        f"  only files uploaded before {exclude_newer} (--exclude-newer)",
        "Remake: {}   (the same pins again: {})".format(*remake),
    ]
    return "".join(f"# {line}\n" for line in lines)


def remake_commands(
    name: str,
    exclude_newer: str,
    find_links: list[str] | None = None,
    torch_version: str | None = None,
    index_url: str | None = None,
    no_index: bool = False,
) -> tuple[str, str]:
    """The command that remakes the lock, and the one that gives the same pins again.

    Made with the defaults ($PIP_FIND_LINKS, PyPI, the local torch): ``make lock-cpu``. Made
    with options: the tool's own command with those options (make passes none of them).
    """
    options = [word for link in find_links or () for word in ("--find-links", link)]
    options += ["--torch", torch_version] if torch_version else []
    options += ["--no-index"] if no_index else (["--index-url", index_url] if index_url else [])
    if not options:
        again = f"make lock-cpu BASE={name}"
        return again, f"{again} EXCLUDE_NEWER={exclude_newer}"
    words = [".venv/bin/tkv-seam", "lock-cpu", name, *options]
    again = shlex.join(words)
    return again, f"{again} {shlex.join(['--exclude-newer', exclude_newer])}"


def _pins(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def lock_cpu(
    root: Path,
    base: Base,
    cache: Path,
    find_links: list[str] | None = None,
    torch_version: str | None = None,
    exclude_newer: str | None = None,
    index_url: str | None = None,
    no_index: bool = False,
    progress: Progress = QUIET,
    bases: dict[str, Base] | None = None,
    exclude: list[Exclusion] | None = None,
    bases_file: Path | None = None,
) -> LockResult:
    """Resolve and write ``base``'s CPU lock (see the module docstring).

    The rules are the base's (``cpu_rules`` of ``bases``); ``exclude`` adds packages to leave
    out, written first into the base's own ``["<base>".seam.cpu]`` table of ``bases_file``.
    """
    links = find_links_default() if find_links is None else find_links
    stamp = exclude_newer or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?", stamp):
        raise UsageError(f"--exclude-newer {stamp!r}: expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ")
    if torch_version:
        try:
            Version(torch_version)
        except InvalidVersion:
            raise UsageError(f"--torch {torch_version!r} is not a version (e.g. 2.13.0+cpu)") from None
    if index_url:
        no_credentials(index_url)  # the lock's header (a committed file) names the index
    path = root / base.cpu_lock
    ci = (root / "ci").resolve()
    if "/" in base.name or not ci.is_relative_to(root.resolve()) or path.parent.resolve() != ci:
        raise SeamError(
            f"{base.name}: its lock {path} would not be a file of the project's ci/ directory",
            hint="check the base's name in bases.toml, and that ci/ is a directory of the project (not a link)",
        )
    for e in exclude or ():
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", e.name):
            raise UsageError(f"--exclude {e.name!r} is not a package name (e.g. flashinfer-python)")
        if canonicalize_name(e.name) in ("vllm", "torch"):  # as resolve() never offers them
            raise UsageError(
                f"--exclude {e.name!r}: vllm and torch are never left out of the CPU lock (it is the lock of "
                "that vLLM; torch has its own rule, --torch or the table's torch = ...); nothing was recorded",
                hint=hints.make("lock-cpu", BASE=base.name),
            )
        if not e.why.strip():
            raise UsageError(f"--exclude {e.name!r}: its reason (--why) is empty; nothing was recorded")
    exclude = [Exclusion(canonicalize_name(e.name), e.why) for e in exclude or ()]
    rules, rules_from = cpu_rules(bases or {base.name: base}, base)
    if exclude:
        rules, rules_from = rules.with_exclusions(exclude), base.name
        if bases_file is None:
            raise UsageError("--exclude needs the bases file to record the rule in")
        basesfile.set_cpu(bases_file, base.name, rules)
    if not rules.given:
        raise SeamError(
            f'{base.name}: no CPU test venv rules: no ["{base.name}".seam.cpu] table in bases.toml, nor one '
            "of an older base to carry over",
            hint=hints.make("seam-table", BASE=base.name)
            + "   (writes the table, carried from the base before)",
        )
    tarball, _ = fetch_sdist(base, cache, progress=progress)
    test_pins, asked = release_pins(tarball)
    test_pins = {n: test_pins.get(n, "") for n in TEST_PACKAGES}
    if torch_version:
        torch = Torch(torch_version, "given", asked)
    elif rules.torch and rules.torch != TORCH_LOCAL:
        torch = Torch(rules.torch, "rules", asked)
    else:
        torch = cpu_torch(links, asked)
    progress.step(f"resolve vllm=={base.version} with torch=={torch.version} (uv pip compile)")
    pins = resolve(
        base.version, torch, test_pins, links, stamp, index_url, no_index, rules.excluded, base.name
    )
    index = "none (--no-index)" if no_index else (index_url or "uv's default (PyPI)")
    remake = remake_commands(base.name, stamp, find_links, torch_version, index_url, no_index)
    text = header(base, torch, test_pins, stamp, links, index, remake, rules, rules_from)
    text += "".join(f"{p}\n" for p in pins)
    result = LockResult(
        base.name,
        base.cpu_lock,
        LockStatus.WRITTEN,
        pins,
        torch,
        [f"{n}=={v}" for n, v in test_pins.items() if v],
        stamp,
        excluded=list(rules.excluded),
    )
    with locked(layout.cpu_lock_lock(root, base.name), str(path), progress):
        _write(root, path, text, pins, result)
    return result


def _write(root: Path, path: Path, text: str, pins: list[str], result: LockResult) -> None:
    """Write the lock (atomically: a killed run leaves the old lock whole); keep a replaced one."""
    for stale in path.parent.glob(f".{path.name}.tmp-*"):  # left by a killed run: this writer's shape only
        if (
            stale.name.removeprefix(f".{path.name}.tmp-").isdigit()
            and stale.is_file()
            and not stale.is_symlink()
        ):
            stale.unlink()
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise SeamError(f"{path} is not a plain file; a lock is one", hint=f"ls -l {path}")
    if path.exists():
        if _pins(path.read_text()) == pins:
            result.status = LockStatus.UNCHANGED  # same pins: the old header (and its exclude-newer) stays
            return
        result.kept = str(keep(root, [path], f"lock-cpu-{result.base}"))
        result.status = LockStatus.REPLACED
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
