"""The overlay: the patched ``vllm/`` files of the series, derived from the patches.

``stage`` writes ``manifest.json`` (per file: path, pristine sha256, patched
sha256) and ``overlay/vllm/...`` for one commit of the build tree; the same
stage feeds the Docker build and the test venv (``overlay_install``). A stage
directory is one the tool creates, or a previous stage it recognises (``outputs``
output marker): anything else is refused, nothing deleted. ``install_into_venv``
runs the stage's installer with the venv's python and turns its exit status into
an error a user can act on (the venv is the project's test venv, or the user's own).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .. import git, hints, layout
from ..answer import Answer, plain
from ..errors import BusyError, SeamError, UsageError, VerifyError
from ..lock import locked, venv_locked
from ..outputs import replace_output_dir, seal_output_dir
from ..progress import QUIET, Progress
from ..queue.footprint import PACKAGE_PREFIX
from ..queue.patch import ChangeKind
from ..queue.series import read_series
from ..tree.seamtree import SeamTree

INSTALLER = Path(__file__).with_name("install.py")
STAGE_KIND = "an overlay stage"
STAGE_NAMES = ("manifest.json", "overlay", "overlay_install.py")
CONTEXT_KIND = "an image build context"
CONTEXT_NAMES = ("Dockerfile", "tkv-seam")
# The installer's exit statuses (overlay_install.py's docstring).
NOT_PRISTINE, NO_VLLM, CANNOT_WRITE, BUSY = 1, 2, 3, 4


@dataclass
class OverlayFiles(Answer):
    """``overlay files``: the vllm/ files a base's queue patches (what the overlay replaces)."""

    base: str
    files: list[str]

    def lines(self) -> list[str]:
        return list(self.files)


@dataclass
class StagedFile:
    path: str  # vllm/...
    pristine_sha256: str  # the base's file
    patched_sha256: str  # the file the overlay installs

    @property
    def patched(self) -> bool:
        return self.pristine_sha256 != self.patched_sha256


@dataclass
class Manifest:
    """A stage's ``manifest.json`` (read by ``overlay_install.py``, in the image and in a venv)."""

    base: str
    upstream_commit: str
    commit: str  # of the build tree, staged
    series_digest: str
    files: list[StagedFile] = field(default_factory=list)

    def to_json(self) -> dict:
        return plain(self)


@dataclass
class Staged(Answer):
    """``overlay stage``: where the stage is, and its manifest."""

    out: Path
    manifest: Manifest

    def lines(self) -> list[str]:
        m = self.manifest
        changed = sum(f.patched for f in m.files)
        return [f"{self.out}: {len(m.files)} files ({changed} patched) for {m.commit[:12]}"]

    def to_json(self) -> dict:
        return {"out": str(self.out), **self.manifest.to_json()}


def _blob(tree: Path, commit: str, path: str) -> bytes:
    return git.repo.show_required(tree, commit, path)


def stage(
    tree: Path, paths: list[str], dest: Path, commit: str = "HEAD", series_digest: str = ""
) -> Manifest:
    """Write manifest.json and overlay/ for ``commit`` of the build tree into ``dest``."""
    state = SeamTree(tree).state()
    base_commit = state.base_commit
    named = None if commit.startswith("-") else git.repo.resolve(tree, f"{commit}^{{commit}}")
    if named is None:
        raise UsageError(
            f"--commit {commit}: no such commit in {tree}",
            hint=hints.shell("git", "-C", tree, "log", "--oneline", "-5") + "  (the commits of the tree)",
        )
    commit = named
    replace_output_dir(dest, STAGE_KIND, STAGE_NAMES)
    (dest / "overlay").mkdir()
    manifest = Manifest(state.base, state.upstream_commit, commit, series_digest or state.digest)
    for path in paths:
        pristine = _blob(tree, base_commit, path)
        patched = _blob(tree, commit, path)
        out = dest / "overlay" / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(patched)
        manifest.files.append(
            StagedFile(path, hashlib.sha256(pristine).hexdigest(), hashlib.sha256(patched).hexdigest())
        )
    (dest / "manifest.json").write_text(json.dumps(manifest.to_json(), indent=1) + "\n")
    shutil.copy2(INSTALLER, dest / "overlay_install.py")
    seal_output_dir(dest)
    return manifest


def replace_context_dir(dest: Path) -> None:
    """The image's build context directory, created or a previous context emptied (else refused)."""
    replace_output_dir(dest, CONTEXT_KIND, rerun="make image")


def restore_paths(root: Path, base) -> list[str]:
    """The vllm/ files ``base``'s queue modifies, for a restore to stage as they are in the base.

    Only a help for a venv an older tkv-seam overlaid (its record holds no copy of the pristine
    files): the venv's own record says what its overlay replaced, whatever the queue is now, so
    a queue that cannot say (a patch adding a vllm/ file, one that does not parse) gives none.
    """
    try:
        patches = read_series(root, base.queue, base.name).load()
    except (SeamError, OSError):
        return []
    return sorted(
        {
            fc.old
            for p in patches
            for fc in p.files
            if fc.kind == ChangeKind.MODIFY and fc.old.startswith(PACKAGE_PREFIX)
        }
    )


def stage_locked(
    tree: Path, paths: list[str], dest: Path, commit: str = "HEAD", progress: Progress = QUIET
) -> Staged:
    """``stage`` holding ``dest``'s lock: two runs staging into one directory take turns."""
    with locked(layout.lock_of(dest), str(dest), progress):
        return Staged(dest, stage(tree, paths, dest, commit))


def install_commit(
    tree: Path,
    paths: list[str],
    stage_dir: Path,
    commit: str,
    python: Path,
    own_venv: bool,
    rerun: str = "",
    progress: Progress = QUIET,
    others: dict[str, str] | None = None,
    restore: bool = False,
) -> Installed:
    """Stage ``commit`` of the build tree into ``stage_dir`` and install it into ``python``'s venv,
    holding the stage's lock and the venv's (``lock.venv_locked``: a seam lane running its tests
    in that venv holds it; two installs take turns). ``others``: see ``install_into_venv``.
    ``restore``: the commit is the pristine base, put back (said as restored)."""
    with locked(layout.lock_of(stage_dir), str(stage_dir), progress):
        with venv_locked(Path(os.path.abspath(python)).parent.parent, progress):
            stage(tree, paths, stage_dir, commit)
            done = install_into_venv(python, stage_dir, own_venv, rerun, others)
    done.restored = restore
    if restore:  # the installer's words are an overlay's; its output in --json says what was done
        done.output = done.output.replace("overlay: replaced ", "overlay: restored ").replace(
            " file(s) replaced,", " file(s) restored,"
        )
    return done


@dataclass
class Installed(Answer):
    """What the installer did in one venv (``restored``: it put the pristine base's files back)."""

    python: str
    vllm_dir: str
    vllm_version: str
    replaced: list[str]
    output: str
    restored: bool = False

    def lines(self) -> list[str]:
        if not self.restored:
            return self.output.rstrip().split("\n")
        return [
            f"tkv-seam overlay: vllm package at {self.vllm_dir}",
            *(f"tkv-seam overlay: restored {path}" for path in self.replaced),
            f"tkv-seam overlay: {len(self.replaced)} file(s) restored (vLLM {self.vllm_version}'s own)",
        ]

    def to_json(self) -> dict:
        """A restore says what it put back (``put_back``, none when the venv held the pristine
        files already: ``already_pristine``); an install what it replaced."""
        data = {k: v for k, v in plain(self).items() if k != "replaced"}
        if self.restored:
            data.update(put_back=self.replaced, already_pristine=not self.replaced)
        else:
            data["replaced"] = self.replaced
        return data


def _same_release(a: str, b: str) -> bool:
    """One vLLM release (a local version such as ``+cpu`` aside)."""
    try:
        return Version(a).public == Version(b).public
    except InvalidVersion:
        return a == b


def _pip(python: Path, verb: str, *args: str) -> str:
    """``pip <verb> <args>`` for the venv of ``python``: its own pip, else uv's (a uv venv has no
    pip); ``--reinstall`` is pip's ``--force-reinstall``."""
    q = shlex.quote(str(python))
    if (python.parent / "pip").exists():
        words = ["--force-reinstall" if a == "--reinstall" else a for a in args]
        return f"{q} -m pip {verb} {' '.join(words)}"
    return f".venv/bin/uv pip {verb} --python {q} {' '.join(args)}"


def install_into_venv(
    python: Path,
    stage_dir: Path,
    own_venv: bool = True,
    rerun: str = "",
    others: dict[str, str] | None = None,
) -> Installed:
    """Run the stage's installer with the venv's python (so it finds that venv's vllm).

    ``own_venv``: the venv is the project's test venv (``make venv-vllm`` made it, so the
    fix may recreate it); else it is the user's and the hint never removes it.
    ``rerun``: the command that repeats this step (for the hints). ``others``: vLLM version ->
    the command doing this step with the carried base of that release (a venv holding another
    release is answered with its own base's overlay).
    """
    manifest = json.loads((stage_dir / "manifest.json").read_text())
    base = manifest.get("base", "<base>")
    if not python.exists():
        raise SeamError(
            f"no Python at {python}",
            hint=f"make venv-vllm BASE={base}" if own_venv else "pass --python <your venv>/bin/python",
        )
    # The venv's own vllm: not one a PYTHONPATH of this process points at (a build tree, say).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    installer = [str(stage_dir / "overlay_install.py"), str(stage_dir), "--keep-state", "--venv"]
    proc = subprocess.run([str(python), *installer, "--result-json"], capture_output=True, text=True, env=env)
    lines = proc.stdout.splitlines()
    result = _result(lines)
    if proc.returncode == 0 and result.get("status") == 0:
        return Installed(
            str(python),
            result.get("vllm_dir", ""),
            result.get("vllm_version", ""),
            result.get("replaced") or [],
            "".join(f"{line}\n" for line in lines),
        )
    said = result.get("error") if isinstance(result.get("error"), str) else ""
    message = (
        said or proc.stderr.strip() or "\n".join(lines).strip() or f"{python}: the overlay installer failed"
    )
    again = rerun or "run the command again"
    q = shlex.quote(str(python))
    status = result.get("status")  # None: the installer itself crashed (not its verdict)
    if status == NOT_PRISTINE:
        version = base.removeprefix("v")
        found = str(result.get("vllm_version") or "")
        other = (
            None
            if _same_release(found, version)
            else next((cmd for v, cmd in (others or {}).items() if _same_release(found, v)), None)
        )
        if own_venv:
            venv = python.parent.parent
            hint = f"recreate the test venv: rm -rf {shlex.quote(str(venv))} && make venv-vllm BASE={base}"
        elif other:  # another carried release: that base's overlay is the one for this venv
            hint = f"the venv holds vLLM {found}, a carried base of its own: `{other}`"
        else:  # the user's venv: put vLLM's own files back, remove nothing
            hint = (
                f"`{_pip(python, 'install', '--reinstall', '--no-deps', f'vllm=={version}')}`, then {again}"
            )
        raise VerifyError(message, hint=hint)
    if status == CANNOT_WRITE:
        where = shlex.quote(result.get("path") or str(python.parent.parent))
        raise SeamError(message, hint=f"ls -ld {where}  (make it writable for you), then {again}")
    if status == BUSY:
        raise BusyError(message, hint=f"let the other overlay run finish, then {again}")
    if status == NO_VLLM:
        if own_venv:
            raise SeamError(message, hint=f"make venv-vllm BASE={base}  (installs vLLM {base} into it)")
        raise SeamError(
            message, hint=f"`{_pip(python, 'show', 'vllm')}`  (install vLLM {base} into that venv)"
        )
    raise SeamError(
        f"{python}: the overlay installer failed (exit {proc.returncode}): {message}",
        hint=f"{q} --version  (a Python 3 of the venv holding vLLM {base}), then {again}",
    )


def _result(lines: list[str]) -> dict:
    """The installer's outcome (its last stdout line, removed from ``lines``); {} when absent."""
    try:
        result = json.loads(lines[-1]) if lines else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        return {}
    lines.pop()
    return result
