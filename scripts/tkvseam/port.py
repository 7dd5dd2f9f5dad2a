"""Forward-port report: how each patch of the series fares on a newer base.

Builds ``build/port-<to>`` from the target base's pristine tree (plus the old
base's objects, so the patches' full ``index`` lines give git the preimages for a
3-way merge), then for each patch in order, per hunk: exact (strict apply would
take it), offset/fuzz (strict apply refuses; a refresh rebases it), or failing;
per patch: applied exactly, applied by 3-way merge, or conflicting (markers left
in the port tree for the user to resolve, commit and ``make refresh``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import git
from .apply import BASE_TAG, BRANCH, ApplyResult, AppliedPatch, inputs_digest
from .bases import Base, base_repo
from .errors import TOOL, ApplyError
from .lock import locked, tree_lock_path
from .state import check_removable, remove_tree_if_ours
from .patch import Patch, _diagnose, _hunk_sides, split_lines
from .progress import QUIET, Progress
from .series import read_series


@dataclass
class HunkReport:
    file: str
    hunk: int
    header: str
    status: str  # "exact", "offset +N", "fuzz N", "fails", "file missing"


@dataclass
class PatchReport:
    name: str
    status: str  # "exact", "3-way", "conflict", "fails"
    hunks: list[HunkReport] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    note: str = ""


def classify_hunks(tree: Path, patch: Patch) -> list[HunkReport]:
    """Where each hunk of ``patch`` stands in ``tree``: exact, offset, fuzz or failing."""
    rows = []
    for fc in patch.files:
        target = tree / (fc.old or fc.new)
        exists = target.exists()
        lines = split_lines(target.read_bytes().decode("utf-8", "surrogateescape")) if exists else []
        for i, hunk in enumerate(fc.pfile, 1):
            head = (
                f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
            )
            src, _ = _hunk_sides(hunk)
            start = hunk.source_start - 1 if hunk.source_length > 0 else hunk.source_start
            if fc.kind == "add":
                status = "exact" if not exists else "fails (file exists)"
            elif not exists:
                status = "file missing"
            elif lines[start : start + len(src)] == src:
                status = "exact"
            else:
                diag = _diagnose(lines, src, start)
                if "(offset " in diag:
                    status = "offset " + diag.split("(offset ", 1)[1].split(")", 1)[0]
                elif "would need fuzz" in diag:
                    status = "fuzz " + diag.split("fuzz ", 1)[1].split(":", 1)[0]
                else:
                    status = "fails"
            rows.append(HunkReport(fc.path, i, head, status))
    return rows


def _exact(tree: Path, patch: Patch) -> bool:
    from .apply import apply_patch

    try:
        apply_patch(tree, patch)
        return True
    except ApplyError:
        git.run(tree, "checkout", "--quiet", "--", ".")
        git.run(tree, "clean", "-fdq")
        return False


def port(
    root: Path,
    from_base: Base,
    to_base: Base,
    cache: Path,
    dest: Path,
    stop: bool = False,
    progress: Progress = QUIET,
) -> list[PatchReport]:
    """Apply the series onto ``to_base`` in ``dest`` and report per patch and hunk.

    A conflicting or failing patch is reported and left out (later patches still
    tried) unless ``stop``: then the first one stays in the tree, markers and all.

    ``dest`` is replaced only when it is a tree tkv-seam made that holds nothing the user
    added and no port stopped for a human (``state.check_removable``); else exit 5.
    """
    rerun = f"{TOOL} port --base {from_base.name} --to {to_base.name} --tree {dest}"
    with locked(tree_lock_path(dest), str(dest), progress):
        check_removable(dest, rerun)  # refuse before downloading anything
        return _port(root, from_base, to_base, cache, dest, stop, progress, rerun)


def _port(
    root: Path,
    from_base: Base,
    to_base: Base,
    cache: Path,
    dest: Path,
    stop: bool,
    progress: Progress,
    rerun: str,
) -> list[PatchReport]:
    series = read_series(root)
    patches = series.load()
    old, _ = base_repo(from_base, cache, progress=progress)
    new, _ = base_repo(to_base, cache, progress=progress)
    remove_tree_if_ours(dest, rerun)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    tree = tmp / "tree"
    progress.step(f"port tree: {to_base.name} + objects of {from_base.name}")
    git.run(None, "clone", "--quiet", "--no-checkout", "--local", str(new.path), str(tree))
    git.run(tree, "checkout", "--quiet", "-B", BRANCH, new.commit)
    git.run(tree, "tag", "-f", BASE_TAG, new.commit)
    git.run(tree, "fetch", "--quiet", "--no-tags", str(old.path), old.commit)
    reports: list[PatchReport] = []
    applied: list[AppliedPatch] = []
    for k, patch in enumerate(patches, 1):
        progress.step(f"port [{k}/{len(patches)}] {patch.name}")
        report = PatchReport(patch.name, "exact", classify_hunks(tree, patch))
        if not _exact(tree, patch):
            proc = git.run(
                tree, "apply", "--3way", "--whitespace=nowarn", "-", input=patch.text.encode(), check=False
            )
            unmerged = git.out(tree, "diff", "--name-only", "--diff-filter=U").split()
            if proc.returncode == 0 and not unmerged:
                report.status = "3-way"
            elif unmerged:
                report.status, report.conflicts = "conflict", unmerged
                report.note = (
                    "markers left in the port tree: resolve, commit, refresh"
                    if stop
                    else "left out of the port tree (rerun with --stop to resolve it there)"
                )
            else:
                report.status = "fails"
                report.note = proc.stderr.decode(errors="replace").strip().splitlines()[-1:][0:1]
                report.note = report.note[0] if report.note else "git apply failed"
        if report.status in ("exact", "3-way"):
            files = [fc.path for fc in patch.files]
            commit = git.commit(tree, patch.header.message, patch.header.author, paths=files)
            applied.append(AppliedPatch(patch.name, commit, files))
        reports.append(report)
        if report.status in ("conflict", "fails"):
            if stop:
                break
            git.run(tree, "reset", "--quiet", "--hard", "HEAD")
            git.run(tree, "clean", "-fdq")
    result = ApplyResult(
        tree=str(dest),
        base=to_base.name,
        source="sdist",
        base_commit=new.commit,
        upstream_commit=new.upstream_commit,
        head=git.head(tree),
        digest=inputs_digest(to_base, "sdist", series),
        patches=applied,
        inputs=series.file_digests(),
    )
    state = result.state()
    state.kind = "port"
    stopped = [r.name for r in reports if r.status in ("conflict", "fails")] if stop else []
    state.port_stopped_at = stopped[0] if stopped else None
    state.save(tree)
    (tree / ".git" / "tkv-seam-port.json").write_text(json.dumps([asdict(r) for r in reports], indent=1))
    tree.rename(dest)
    shutil.rmtree(tmp, ignore_errors=True)
    for p in patches[len(reports) :]:
        reports.append(PatchReport(p.name, "not tried", note="--stop: after the first patch needing a human"))
    return reports
