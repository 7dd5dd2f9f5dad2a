"""Forward-port: the queue of one base onto a newer base, as a report or as a resumable operation.

Both build a *port tree*: the new base's pristine tree plus the old base's objects,
so the patches' full ``index`` lines give git the preimages for a 3-way merge.

- ``report``: walks the whole series without stopping. Each file of each patch is
  tried strictly, then 3-way; what merged stays (later patches see it, as if merged),
  what conflicts is left out. Per hunk: where GNU patch would place it (whole-file
  search, ``patch.Placement``), the upstream change of that region, a move to the
  file its content went to (``git diff -M -C``). Per patch: the status, dependencies
  (``Depends-on``, ``Test-depends-on``), likely obsolescence with evidence, and a
  draft verdict. Nothing is kept but the report.
- ``start`` / ``resume`` / ``skip`` / ``abort`` / ``finish``: like ``git rebase``.
  Patch after patch in series order; the first that needs a human stops the port
  with its state in ``<tree>/.git/tkv-seam-port.json``; ``finish`` writes the new
  base's own queue (never another's) and lints it.

A run killed between a step on the port tree and the save of the state leaves one of
two states, both recovered by the next ``--continue``/``--skip``/``--status``/``--finish``
(``_recover``): the patch's commit made but not recorded (the state's ``head`` is its
parent and its subject is the patch's: recorded as done), or a patch half applied
(the tree dirty, no stop recorded: ``--continue`` keeps those files in a
``refs/tkv-seam/dropped/`` ref, resets and applies the patch again).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from unidiff import PatchSet

from . import git
from .apply import BASE_TAG, BRANCH, inputs_digest
from .bases import Base, base_repo, default_cache_dir
from .errors import ApplyError, PortStopped, RefusedError, SeamError
from .patch import Patch, _diagnose, hunk_start, parse_text, replay_file, split_lines
from .progress import QUIET, Progress
from .series import read_series
from .state import AppliedPatch, TreeState, check_removable, describe_dir, keep_dropped, uncommitted_work

PORT_STATE = "tkv-seam-port.json"  # in the port tree's .git: the resumable port's own state
PORT_MSG = "tkv-seam-port-msg"  # the stopped patch's commit message, for the user to edit
OLD_TAG = "tkv-seam-old-base"
VERDICTS = "PORT.md"  # the finished port's verdict table, beside the new queue's patches
APPLIED = ("exact", "3-way")
_NAME_RE = re.compile(
    r"^\s*(?:async\s+)?def\s+(\w+)|^\s*class\s+(\w+)|^([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)", re.M
)
_MARKERS = ("<<<<<<< ", ">>>>>>> ", "=======\n")


# --------------------------------------------------------------------------- report rows


@dataclass
class HunkReport:
    file: str
    hunk: int
    header: str
    section: str  # the function/class line git puts after @@ (what the hunk is in)
    status: str  # Placement.status: exact, offset +N, fuzz N, end of file (now line N), fails
    kind: str = "exact"
    line: int | None = None
    delta: int = 0
    fuzz: int = 0
    note: str = ""  # "already upstream", "moved to <file>:<line> (...)"
    upstream: dict | None = None  # failing hunk: the upstream diff of its region, old/new lines


@dataclass
class FileReport:
    path: str
    status: str  # exact, 3-way, conflict, fails, missing, moved
    note: str = ""
    test: bool = False
    moved_to: str | None = None


@dataclass
class PatchReport:
    name: str
    slug: str = ""
    summary: str = ""
    status: str = "exact"  # exact, 3-way, conflict, test-only conflict, blocked, likely obsolete
    own: str = "exact"  # how the patch itself applied: exact, 3-way, conflict, test-only conflict
    files: list[FileReport] = field(default_factory=list)
    hunks: list[HunkReport] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    blocked_by: list[str] = field(default_factory=list)
    obsolete: list[str] = field(default_factory=list)  # evidence
    note: str = ""
    verdict: str = ""  # draft, for the verdict table
    reason: str = ""

    @property
    def applied(self) -> bool:
        return self.status in APPLIED

    def to_json(self) -> dict:
        return asdict(self)


def is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or name.startswith("test_") or name == "conftest.py"


# --------------------------------------------------------------------------- the port tree


def _build_tree(tmp_parent: Path, old, new) -> Path:
    """A clone of the new base with the old base's objects (3-way preimages) and both tagged."""
    tree = tmp_parent / "tree"
    git.run(None, "clone", "--quiet", "--no-checkout", "--local", str(new.path), str(tree))
    git.run(tree, "-c", "checkout.workers=0", "checkout", "--quiet", "-B", BRANCH, new.commit)
    git.run(tree, "remote", "remove", "origin", check=False)
    git.run(tree, "tag", "-f", BASE_TAG, new.commit)
    git.run(tree, "fetch", "--quiet", "--no-tags", str(old.path), old.commit)
    git.run(tree, "tag", "-f", OLD_TAG, old.commit)
    return tree


def _sections(patch: Patch) -> list[str]:
    """The patch's text cut into one ``diff --git`` section per file (same order as ``patch.files``)."""
    body = patch.text[patch.text.find("\ndiff --git ") + 1 :]
    parts = re.split(r"(?m)^(?=diff --git )", body)
    return [p for p in parts if p.startswith("diff --git ")]


def _moves(tree: Path, patches: list[Patch]) -> dict[str, list[str]]:
    """Old path -> new paths its content went to between the bases (renames and copies).

    Limited to the directories of the files the queue touches (a whole-tree -C pass over
    thousands of changed files exceeds git's rename limit and finds nothing).
    """
    dirs = sorted({str(Path(fc.old).parent) for p in patches for fc in p.files if fc.old})
    out = git.out(
        tree,
        "-c",
        "diff.renameLimit=0",
        "diff",
        "-M",
        "-C30%",
        "--name-status",
        OLD_TAG,
        BASE_TAG,
        "--",
        *dirs,
    )
    moves: dict[str, list[str]] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if parts[0][:1] in ("R", "C") and len(parts) == 3:
            moves.setdefault(parts[1], []).append(parts[2])
    return moves


def _read(tree: Path, rel: str) -> list[str] | None:
    p = tree / rel
    return split_lines(p.read_bytes().decode("utf-8", "surrogateescape")) if p.is_file() else None


def _show(tree: Path, rev: str, rel: str) -> list[str] | None:
    proc = git.run(tree, "show", f"{rev}:{rel}", check=False)
    return split_lines(proc.stdout.decode("utf-8", "surrogateescape")) if proc.returncode == 0 else None


def place_hunks(lines: list[str], fc, path: str | None = None) -> list[HunkReport]:
    """Each hunk of ``fc`` placed in ``lines`` as GNU patch would, in order (floor, carried offset)."""
    rows = []
    floor = shift = 0
    for i, hunk in enumerate(fc.pfile, 1):
        head = f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
        pl = _diagnose(lines, hunk, floor=floor, shift=shift)
        rows.append(
            HunkReport(
                path or fc.path,
                i,
                head,
                (hunk.section_header or "").strip(),
                pl.status,
                pl.kind,
                pl.line,
                pl.delta,
                pl.fuzz,
            )
        )
        if pl.line is not None:
            floor = pl.line - 1 + hunk.source_length
            shift = pl.delta
        else:
            floor = max(floor, hunk_start(hunk))
    return rows


def _significant(text: str) -> bool:
    s = text.strip()
    return len(s) >= 12 and not s.startswith("#") and any(c.isalnum() for c in s)


def _added(fc) -> list[str]:
    return [ln.value.rstrip("\n") for h in fc.pfile for ln in h if ln.is_added]


def _already_upstream(hunk, old_text: set[str], new_text: set[str]) -> bool:
    added = [ln.value.strip() for ln in hunk if ln.is_added and _significant(ln.value)]
    return bool(added) and all(a in new_text and a not in old_text for a in added)


def upstream_region(tree: Path, old_path: str, new_path: str, hunk) -> dict | None:
    """The upstream change of the hunk's region between the two bases, and its new line numbers."""
    old = _show(tree, OLD_TAG, old_path)
    if old is None:
        return None
    pl = _diagnose(old, hunk)
    start = (pl.line - 1) if pl.line is not None else hunk_start(hunk)
    end = start + max(hunk.source_length, 1)
    diff = git.run(tree, "diff", "-U3", "--no-renames", f"{OLD_TAG}:{old_path}", f"{BASE_TAG}:{new_path}")
    text = diff.stdout.decode("utf-8", "surrogateescape")
    pieces, shift = [], 0
    if text.strip():
        for uh in PatchSet(text)[0]:
            a, b = uh.source_start - 1, uh.source_start - 1 + uh.source_length
            if b < start:
                shift += uh.target_length - uh.source_length
            elif a <= end:
                pieces.append(str(uh))
    return {
        "old_lines": f"{start + 1}-{end}",
        "new_lines": f"{start + 1 + shift}-{end + shift}",
        "new_file": new_path,
        "diff": "".join(pieces),
        "changed": bool(pieces),
    }


# --------------------------------------------------------------------------- applying one patch


def _unmerged(tree: Path) -> list[str]:
    return git.out(tree, "diff", "--name-only", "--diff-filter=U").split()


def _git_errors(stderr: bytes) -> str:
    lines = [x for x in stderr.decode(errors="replace").splitlines() if x.startswith("error:")]
    return "; ".join(x.removeprefix("error: ") for x in lines) or "git apply failed"


def _apply_section(tree: Path, section: str, parked: list) -> tuple[str, str, list[str]]:
    """``git apply --3way`` one file's section: (status, note, unmerged paths).

    A conflict is parked (markers and index stages saved, file reset) so that the patch's
    next file can be merged; ``_unpark`` puts every parked conflict back.
    """
    proc = git.run(tree, "apply", "--3way", "--whitespace=nowarn", "-", input=section.encode(), check=False)
    unmerged = _unmerged(tree)
    if proc.returncode == 0 and not unmerged:
        return "3-way", "", []
    if unmerged:
        for path in unmerged:
            stages = git.run(tree, "ls-files", "-u", "--", path).stdout
            text = (tree / path).read_bytes() if (tree / path).exists() else None
            parked.append((path, stages, text))
        _resolve_ours(tree, unmerged)
        return "conflict", "", unmerged
    return "fails", _git_errors(proc.stderr), []


def _unpark(tree: Path, parked: list) -> None:
    """Put parked conflicts back: the file with git's markers and its unmerged index stages."""
    for path, stages, text in parked:
        info = f"0 {'0' * 40}\t{path}\n".encode() + stages
        git.run(tree, "update-index", "--index-info", input=info)
        if text is not None:
            (tree / path).write_bytes(text)


def apply_files(
    tree: Path, patch: Patch, moves: dict[str, list[str]]
) -> tuple[list[FileReport], list[HunkReport]]:
    """Apply ``patch`` file by file into ``tree``: strict, else 3-way, else at the file its content went to.

    Files that merge stay in the work tree and index; conflicting ones keep git's markers.
    """
    files, hunks, parked = [], [], []
    for fc, section in zip(patch.files, _sections(patch)):
        target = fc.old or fc.new
        lines = _read(tree, target)
        fr = FileReport(fc.path, "exact", test=is_test_file(fc.path))
        if fc.kind == "add":
            rows = place_hunks([], fc)
            if lines is not None:
                fr.status, fr.note = "fails", "the patch creates it, but the new base has it"
                rows = [HunkReport(**{**asdict(r), "status": "fails", "kind": "fails"}) for r in rows]
        elif lines is None:
            rows = [
                HunkReport(
                    fc.path, i, "", (h.section_header or "").strip(), "fails", "fails", note="file missing"
                )
                for i, h in enumerate(fc.pfile, 1)
            ]
            fr.status, fr.note = "missing", "the new base has no such file"
            for dest in moves.get(target, []):
                moved = _read(tree, dest)
                if moved is None:
                    continue
                rows = place_hunks(moved, fc, dest)
                for r in rows:
                    r.note = f"moved: {fc.path} -> {dest}"
                status, note, unmerged = _apply_section(
                    tree, section.replace(f"/{target}", f"/{dest}"), parked
                )
                fr.status, fr.moved_to = "moved", dest
                fr.note = f"content moved to {dest} (git diff -M -C); retried there: {status}" + (
                    f" ({note})" if note else ""
                )
                if status == "conflict":
                    fr.status = "conflict"
                elif status == "fails":
                    fr.status = "fails"
                break
            hunks += rows
            files.append(fr)
            continue
        else:
            rows = place_hunks(lines, fc)
        if fr.status == "exact":
            try:
                new_text = replay_file(patch, fc, "".join(lines) if lines is not None else None)
            except ApplyError:
                fr.status, fr.note, unmerged = _apply_section(tree, section, parked)
            else:
                dest = tree / (fc.new or fc.old)
                if new_text is None:
                    dest.unlink()
                else:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(new_text.encode("utf-8", "surrogateescape"))
                git.run(tree, "add", "-A", "--", fc.new or fc.old)
        if fr.status != "exact":
            _retry_moved(tree, fc, rows, moves)
        hunks += rows
        files.append(fr)
    _unpark(tree, parked)
    return files, hunks


def _retry_moved(tree: Path, fc, rows: list[HunkReport], moves: dict[str, list[str]]) -> None:
    """A failing hunk of a file that still exists: is its context in the file its content went to?"""
    for row, hunk in zip(rows, fc.pfile):
        if row.kind != "fails":
            continue
        dests = [d for d in moves.get(fc.old or fc.path, []) if (tree / d).is_file()]
        for dest in dests:
            pl = _diagnose(_read(tree, dest) or [], hunk, start=0)
            if pl.line is not None:
                how = "exact lines" if not pl.fuzz else f"fuzz {pl.fuzz}"
                row.note = (
                    f"moved to {dest}:{pl.line} ({how}; git diff -M -C: content of {fc.path} went there)"
                )
                break
        else:
            if dests:
                row.note = (
                    f"not in {', '.join(dests)} either (where git diff -M -C sees {fc.path}'s content go)"
                )


def _resolve_ours(tree: Path, paths: list[str]) -> None:
    """Leave the conflicting files of a patch out: back to the tree's version (report mode)."""
    for p in paths:
        if git.run(tree, "cat-file", "-e", f"HEAD:{p}", check=False).returncode == 0:
            git.run(tree, "checkout", "HEAD", "--", p)
        else:
            git.run(tree, "rm", "-q", "--cached", "-f", "--", p, check=False)
            (tree / p).unlink(missing_ok=True)


# --------------------------------------------------------------------------- obsolescence


def _names(lines: list[str]) -> set[str]:
    return {next(g for g in m.groups() if g) for m in _NAME_RE.finditer("\n".join(lines))}


def _tokens(name: str) -> set[str]:
    return {t for t in name.lower().split("_") if t}


def obsolete_evidence(tree: Path, patch: Patch) -> tuple[list[str], dict[tuple[str, int], str]]:
    """Evidence that the new base already does what ``patch`` does; per-hunk 'already upstream' notes.

    - every modified file's hunks reverse-apply on the new base;
    - the names the patch adds (def/class/assignments, code files) are defined upstream,
      or a name upstream added in the same file has all of the name's words;
    - most of the patch's significant added code lines appeared upstream.
    """
    evidence: list[str] = []
    notes: dict[tuple[str, int], str] = {}
    code = [fc for fc in patch.files if not is_test_file(fc.path) and fc.path.endswith(".py")]
    modified = [(fc, s) for fc, s in zip(patch.files, _sections(patch)) if fc.kind == "modify"]
    if modified and all(
        git.run(tree, "apply", "--reverse", "--check", "-", input=s.encode(), check=False).returncode == 0
        for _, s in modified
    ):
        evidence.append("reverse-applies: every hunk is already in the new base")
    found, total = [], 0
    lines_in, lines_total = 0, 0
    for fc in code:
        old = _show(tree, OLD_TAG, fc.old or fc.path) or []
        new = _show(tree, BASE_TAG, fc.path) or []
        removed = [ln.value for h in fc.pfile for ln in h if ln.is_removed]
        added_names = _names(_added(fc)) - _names(old) - _names(removed)
        added_names = {n for n in added_names if len(n) > 3 and not n.startswith("_")}
        new_names = _names(new)
        upstream_new = new_names - _names(old)
        old_set, new_set = {x.strip() for x in old}, {x.strip() for x in new}
        for i, hunk in enumerate(fc.pfile, 1):
            if _already_upstream(hunk, old_set, new_set):
                notes[(fc.path, i)] = "already upstream (its added lines appeared in the new base)"
        for name in sorted(added_names):
            total += 1
            if name in new_names:
                found.append(f"{name} (defined in {fc.path})")
                continue
            hit = _grep_def(tree, name, defs_only=True)  # a module variable elsewhere (logger) is no evidence
            if hit:
                found.append(f"{name} (defined in {hit})")
                continue
            similar = [m for m in upstream_new if _tokens(name) - {"plugin"} <= _tokens(m) and m != name]
            if similar:
                where = _grep_def(tree, similar[0]) or fc.path
                found.append(f"{name} ~ {similar[0]} ({where}, new upstream)")
        sig = [a.strip() for a in _added(fc) if _significant(a)]
        lines_total += len(sig)
        lines_in += sum(1 for a in sig if a in new_set and a not in old_set)
    if found and len(found) * 2 >= total:
        evidence.append(f"{len(found)} of {total} names it adds are upstream: " + ", ".join(found))
    if lines_total and lines_in * 10 >= lines_total * 6:
        evidence.append(f"{lines_in} of {lines_total} added code lines appeared upstream")
    return evidence, notes


def _grep_def(tree: Path, name: str, defs_only: bool = False) -> str | None:
    """Where the new base defines ``name`` (def/class, or a module-level assignment unless ``defs_only``)."""
    pattern = rf"^\s*((async\s+)?def|class)\s+{re.escape(name)}\b"
    if not defs_only:
        pattern += rf"|^{re.escape(name)}\s*(:[^=]*)?="
    proc = git.run(tree, "grep", "-n", "-E", pattern, BASE_TAG, "--", "vllm", check=False)
    first = proc.stdout.decode(errors="replace").splitlines()[:1]
    if not first:
        return None
    _, path, line, *_ = first[0].split(":", 3)
    return f"{path}:{line}"


# --------------------------------------------------------------------------- report


def _decide(report: PatchReport, patch: Patch, by_slug: dict[str, PatchReport], failed_tests: dict) -> None:
    """The patch's status from its files, dependencies and evidence (hunks never contradict it).

    ``own`` is how the patch itself applied; ``status`` adds what the maintainer must know
    first: likely obsolete, blocked by a ``Depends-on`` patch that did not apply (or, for a
    patch failing only in test files, by the patch its test file needs: ``Test-depends-on``,
    or an earlier patch that failed in the same test file).
    """
    bad = [f for f in report.files if f.status not in ("exact", "3-way", "moved")]
    code_bad = [f for f in bad if not f.test]
    report.conflicts = [f.path for f in report.files if f.status == "conflict"]
    if not bad:
        report.own = "exact" if all(f.status == "exact" for f in report.files) else "3-way"
        moved = [f for f in report.files if f.status == "moved"]
        if moved:
            report.note = "; ".join(f"{f.path}: {f.note}" for f in moved)
    else:
        report.own = "conflict" if code_bad else "test-only conflict"
    report.status = report.own
    deps = [d for d in patch.header.depends_on if d in by_slug and not by_slug[d].applied]
    test_deps = [
        d
        for d in ", ".join(patch.header.get("Test-depends-on")).replace(",", " ").split()
        if d != "none" and d in by_slug and not by_slug[d].applied
    ]
    already = any(e.startswith(("reverse-applies", "applying it changes nothing")) for e in report.obsolete)
    if report.obsolete and (bad or already):
        report.status = "likely obsolete"
    elif deps:
        report.status = "blocked"
        report.blocked_by = _root_causes(deps, by_slug)
        report.note = f"Depends-on {', '.join(deps)} did not apply; on its own: {report.own}"
    elif bad and not code_bad:
        culprits = test_deps or [
            s for f in bad for s in failed_tests.get(f.path, []) if s != patch.header.slug
        ]
        if culprits:
            report.status = "blocked"
            report.blocked_by = sorted({by_slug[s].name[:4] for s in culprits})
            report.note = "test file only: " + ", ".join(f.path for f in bad)


def _root_causes(deps: list[str], by_slug: dict[str, PatchReport]) -> list[str]:
    """The patches that failed themselves: a dependency that applied but was blocked passes on its causes."""
    causes: set[str] = set()
    for d in deps:
        dep = by_slug[d]
        if dep.status == "blocked" and dep.own in APPLIED and dep.blocked_by:
            causes.update(dep.blocked_by)
        else:
            causes.add(dep.name[:4])
    return sorted(causes)


def _draft_verdict(r: PatchReport, reason: str) -> None:
    if r.status == "exact":
        r.verdict, r.reason = "still needed", f"applies exactly; {reason}"
    elif r.status == "3-way":
        r.verdict, r.reason = "still needed", f"3-way merge onto the new base; {reason}"
    elif r.status == "likely obsolete":
        r.verdict, r.reason = "obsolete?", "upstream has it: " + "; ".join(r.obsolete)
    elif r.status == "blocked":
        r.verdict = "blocked"
        r.reason = f"blocked by {', '.join(r.blocked_by)}" + (f" ({r.note})" if r.note else "")
    elif r.status == "test-only conflict":
        r.verdict, r.reason = (
            "still needed, fix tests",
            "only its test files conflict: " + ", ".join(r.conflicts),
        )
    else:
        r.verdict = "conflicting → re-express"
        r.reason = "conflicts in " + ", ".join(
            r.conflicts or [f.path for f in r.files if f.status != "exact"]
        )


def _try_patch(tree: Path, patch: Patch, moves, by_slug, failed_tests, progress) -> PatchReport:
    report = PatchReport(patch.name, patch.header.slug, patch.header.summary)
    report.obsolete, notes = obsolete_evidence(tree, patch)
    report.files, report.hunks = apply_files(tree, patch, moves)
    if not _unmerged(tree) and (
        git.run(tree, "add", "-A", "--force", "--", ".") is not None
        and git.run(tree, "diff", "--cached", "--quiet", "HEAD", check=False).returncode == 0
    ):
        report.obsolete.insert(0, "applying it changes nothing: the new base already holds every change")
    for h in report.hunks:
        if (h.file, h.hunk) in notes and not h.note:
            h.note = notes[(h.file, h.hunk)]
    _decide(report, patch, by_slug, failed_tests)
    for fc, h_rows in _by_file(patch, report.hunks):
        status = next(f.status for f in report.files if f.path == fc.path)
        if status in ("exact", "3-way"):
            continue
        for row, hunk in zip(h_rows, fc.pfile):
            if row.kind != "exact" and fc.kind == "modify":
                moved = next((f.moved_to for f in report.files if f.path == fc.path and f.moved_to), None)
                if moved is None and row.note.startswith(("moved to", "not in")):
                    moved = moves[fc.old or fc.path][0]  # the region is compared with where it went
                row.upstream = upstream_region(tree, fc.old or fc.path, moved or fc.path, hunk)
    _draft_verdict(report, _first_sentence(" ".join(patch.header.get("Reason"))))
    return report


def _first_sentence(text: str, limit: int = 120) -> str:
    first = re.split(r"(?<=[.;])\s", text, maxsplit=1)[0].rstrip(".;")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _by_file(patch: Patch, rows: list[HunkReport]):
    i = 0
    for fc in patch.files:
        n = len(fc.pfile)
        yield fc, rows[i : i + n]
        i += n


def report(
    root: Path, from_base: Base, to_base: Base, cache: Path, progress: Progress = QUIET
) -> list[PatchReport]:
    """Walk the whole queue of ``from_base`` onto ``to_base``; keep nothing but the report."""
    patches = read_series(root, from_base.queue, from_base.name).load()
    old, _ = base_repo(from_base, cache, progress=progress)
    new, _ = base_repo(to_base, cache, progress=progress)
    parent = root / "build"
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".port-report-{to_base.name}-", dir=parent))
    try:
        progress.step(f"report tree: {to_base.name} + objects of {from_base.name}")
        tree = _build_tree(tmp, old, new)
        moves = _moves(tree, patches)
        reports: list[PatchReport] = []
        by_slug: dict[str, PatchReport] = {}
        failed_tests: dict[str, list[str]] = {}
        for k, patch in enumerate(patches, 1):
            progress.step(f"report [{k}/{len(patches)}] {patch.name}")
            r = _try_patch(tree, patch, moves, by_slug, failed_tests, progress)
            for f in r.files:
                if f.test and f.status not in ("exact", "3-way"):
                    failed_tests.setdefault(f.path, []).append(patch.header.slug)
            if r.conflicts:
                _resolve_ours(tree, r.conflicts)
            git.commit(tree, patch.header.message, patch.header.author)
            reports.append(r)
            by_slug[patch.header.slug] = r
        return reports
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def summary(reports: list[PatchReport]) -> dict:
    counts: dict[str, int] = {}
    for r in reports:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {
        "patches": len(reports),
        "applied": sum(r.applied for r in reports),
        "blocked_but_apply_on_their_own": sum(r.status == "blocked" and r.own in APPLIED for r in reports),
        "by_status": counts,
    }


def verdict_table(reports: list[PatchReport], from_name: str, to_name: str) -> str:
    """The draft verdict table in the seed's format (per patch and per hunk), as Markdown."""
    out = [
        f"### Per-hunk review against {to_name} (draft: `tkv-seam port --base {from_name} --to {to_name} --report`)",
        "",
        "| file / hunk | what it does | verdict | reason | evidence |",
        "|---|---|---|---|---|",
    ]
    cell = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    for r in reports:
        out.append(
            f"| **{r.name[:4]} {r.slug}** | {cell(r.summary)} | {cell(r.verdict)} | {cell(r.reason)} "
            f"| {cell('; '.join(r.obsolete) or r.status)} |"
        )
        for h in r.hunks:
            if h.kind == "exact" and not h.note:
                continue
            verdict = {
                "exact": "still needed",
                "offset": "still needed (rebase)",
                "fuzz": "still needed (rebase)",
                "eof": "still needed (rebase)",
            }.get(h.kind, "conflicting")
            if "already upstream" in h.note:
                verdict = "obsolete?"
            elif h.note.startswith("moved"):
                verdict = "moved → re-anchor"
            evidence = h.status + (f"; {h.note}" if h.note else "")
            if h.upstream and h.upstream.get("changed"):
                evidence += (
                    f"; upstream changed lines {h.upstream['old_lines']} (now {h.upstream['new_lines']})"
                )
            out.append(
                f"| {cell(h.file)} hunk {h.hunk} `{cell(h.section)[:50]}` | | {verdict} | | {cell(evidence)} |"
            )
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- resumable port


@dataclass
class PortState:
    from_base: str
    to_base: str
    tree: str
    base_commit: str
    old_commit: str
    upstream_commit: str
    series: list[str]
    next: int = 0
    current: str | None = None
    stopped: dict | None = None  # the stopped patch's report
    done: list[dict] = field(default_factory=list)  # name, status, verdict, reason, commit
    finished: bool = False
    head: str = ""  # the port tree's HEAD when the state was saved (what a crash is measured against)

    @classmethod
    def load(cls, tree: Path) -> PortState | None:
        try:
            return cls(**json.loads((tree / ".git" / PORT_STATE).read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def save(self) -> None:
        self.head = git.head(Path(self.tree))
        path = Path(self.tree) / ".git" / PORT_STATE
        tmp = path.with_name(PORT_STATE + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1) + "\n")
        os.replace(tmp, path)


def port_tree(root: Path, to_name: str) -> Path:
    return root / "build" / f"port-{to_name}"


def _load(dest: Path, to_name: str) -> PortState:
    state = PortState.load(dest) if dest.exists() else None
    if state is None:
        raise SeamError(f"no port to {to_name} in progress ({dest})", hint=f"tkv-seam port --to {to_name}")
    return state


def start(
    root: Path, from_base: Base, to_base: Base, cache: Path, dest: Path, progress: Progress = QUIET
) -> PortState:
    """Start porting ``from_base``'s queue onto ``to_base`` in ``dest``; stop at the first patch needing you."""
    if dest.exists():
        state = PortState.load(dest)
        if state is None:
            raise RefusedError(
                f"{dest} exists but was not made by tkv-seam port; it holds: {describe_dir(dest)}",
                hint=f"mv {dest} {dest}.mine (or choose another --tree), then tkv-seam port --to {to_base.name}",
            )
        if not state.finished:
            where = f"stopped at {state.current}" if state.current else "in progress"
            raise RefusedError(
                f"a port to {state.to_base} is already in progress in {dest} ({where})",
                hint=f"tkv-seam port --to {to_base.name} --status   (then --continue, --skip --reason '...', "
                "or --abort)",
            )
        # a finished port: replaced only when it holds nothing the user added since
        check_removable(dest, f"tkv-seam port --to {to_base.name}")
    series = read_series(root, from_base.queue, from_base.name)
    series.load()  # every patch parses before anything is made
    old, _ = base_repo(from_base, cache, progress=progress)
    new, _ = base_repo(to_base, cache, progress=progress)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        progress.step(f"port tree: {to_base.name} + objects of {from_base.name}")
        tree = _build_tree(tmp, old, new)
        if dest.exists():  # a finished port of ours holding nothing new (checked above): replaced
            check_removable(dest, f"tkv-seam port --to {to_base.name}")
            shutil.rmtree(dest)
        os.replace(tree, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    state = PortState(
        from_base.name,
        to_base.name,
        str(dest),
        new.commit,
        old.commit,
        new.upstream_commit,
        [str(series.path(n).relative_to(root)) for n in series.names],
    )
    state.save()
    return _advance(root, state, to_base, progress)


def _recover(root: Path, state: PortState) -> str | None:
    """Record the commit a killed run made for the next patch but did not save; a note, or None.

    Only a commit whose parent is the saved HEAD and whose subject is the next patch's counts
    (a commit of the user's own is left alone: --continue then says what it finds).
    """
    tree = Path(state.tree)
    head = git.head(tree)
    if not state.head or head == state.head or state.next >= len(state.series):
        return None
    parent = git.out(tree, "rev-parse", "--verify", "--quiet", f"{head}^", check=False)
    patch = _patch(root, state, state.next)
    subject = git.out(tree, "log", "-1", "--format=%s", head)
    # git's %s is the message's first paragraph on one line
    patch_subject = " ".join(patch.header.message.split("\n\n")[0].split())
    if parent != state.head or subject != patch_subject:
        return None
    trailers = _message_header(patch, git.out(tree, "log", "-1", "--format=%B", head))
    status = "resolved" if state.current else "exact"
    verdict, reason = " ".join(trailers.get("Verdict")), " ".join(trailers.get("Reason"))
    state.done.append(_done(patch, status, head, verdict, reason, note="recorded after an interrupted run"))
    state.next += 1
    state.current = state.stopped = None
    (tree / ".git" / PORT_MSG).unlink(missing_ok=True)
    state.save()
    return f"{patch.name}: committed by an interrupted run ({head[:12]}); recorded as {status}"


def _message_header(patch: Patch, message: str):
    """The header fields (Verdict, Reason, ...) of a commit message written for ``patch``."""
    return parse_text(
        f"From: {patch.header.author}\nSubject: {message}\ndiff --git a/x b/x\n", patch.name
    ).header


def _patch(root: Path, state: PortState, k: int) -> Patch:
    rel = state.series[k]
    return parse_text((root / rel).read_text(), Path(rel).name, root / rel)


def _advance(root: Path, state: PortState, to_base: Base, progress: Progress) -> PortState:
    """Apply patches from ``state.next`` on; stop (PortStopped) at the first that needs a human."""
    tree = Path(state.tree)
    moves = _moves(tree, [_patch(root, state, k) for k in range(len(state.series))])
    by_slug: dict[str, PatchReport] = {}
    for d in state.done:
        by_slug[d["slug"]] = PatchReport(d["name"], d["slug"], status="exact" if d["commit"] else "skipped")
    while state.next < len(state.series):
        patch = _patch(root, state, state.next)
        progress.step(f"port [{state.next + 1}/{len(state.series)}] {patch.name}")
        r = _try_patch(tree, patch, moves, by_slug, {}, progress)
        if r.own in APPLIED and r.status != "likely obsolete":
            # a patch blocked by a skipped dependency that still applies goes in; noted
            commit = git.commit(tree, patch.header.message, patch.header.author)
            state.done.append(_done(patch, r.own, commit, note=r.note))
            by_slug[patch.header.slug] = r
            state.next += 1
            state.save()
            continue
        state.current, state.stopped = patch.name, r.to_json()
        (tree / ".git" / PORT_MSG).write_text(patch.header.message)
        state.save()
        raise PortStopped(_stop_message(state, r), hint=_stop_hint(state, r))
    state.current = state.stopped = None
    state.save()
    return state


def _done(
    patch: Patch, status: str, commit: str | None, verdict: str = "", reason: str = "", note: str = ""
) -> dict:
    return {
        "note": note,
        "name": patch.name,
        "slug": patch.header.slug,
        "status": status,
        "commit": commit,
        "verdict": verdict or " ".join(patch.header.get("Verdict")),
        "reason": reason or " ".join(patch.header.get("Reason")),
    }


def _stop_message(state: PortState, r: PatchReport) -> str:
    lines = [f"port to {state.to_base} stopped at {r.name}: {r.status}"]
    if r.blocked_by:
        lines.append(f"  blocked by {', '.join(r.blocked_by)}" + (f" ({r.note})" if r.note else ""))
    for e in r.obsolete:
        lines.append(f"  likely obsolete: {e}")
    for f in r.files:
        if f.status in APPLIED:
            continue
        lines.append(f"  {f.path}: {f.status}" + (f" ({f.note})" if f.note else ""))
        for h in r.hunks:
            if h.file in (f.path, f.moved_to) and h.kind != "exact":
                note = f"; {h.note}" if h.note else ""
                lines.append(f"    hunk {h.hunk} {h.header} {h.section[:40]}: {h.status}{note}")
    return "\n".join(lines)


def _stop_hint(state: PortState, r: PatchReport) -> str:
    tree = state.tree
    msg = Path(tree) / ".git" / PORT_MSG
    return (
        f"resolve in {tree} and `git -C {tree} add <files>`, edit Verdict/Reason in {msg}, then "
        f"`tkv-seam port --to {state.to_base} --continue`; or "
        f"`tkv-seam port --to {state.to_base} --skip --verdict obsolete --reason '<why>'`"
    )


def _set_trailer(message: str, key: str, value: str) -> str:
    """``message`` with its ``key:`` trailer (and continuation lines) replaced by ``value``."""
    lines = message.rstrip("\n").split("\n")
    out, skipping, done = [], False, False
    for line in lines:
        if line.startswith(f"{key}:"):
            if not done:
                out.append(f"{key}: {value}")
                done = True
            skipping = True
            continue
        if skipping and line.startswith(" "):
            continue
        skipping = False
        out.append(line)
    if not done:
        out.append(f"{key}: {value}")
    return "\n".join(out) + "\n"


def resume(
    root: Path,
    to_base: Base,
    dest: Path,
    verdict: str | None = None,
    reason: str | None = None,
    progress: Progress = QUIET,
) -> PortState:
    """--continue: commit the staged resolution of the stopped patch (its message and author), go on.

    After an interrupted run (``_recover``) it goes on from where that run was killed.
    """
    state = _load(dest, to_base.name)
    note = _recover(root, state)
    if note:
        progress.step(note)
    if state.current is None:
        if state.next >= len(state.series) and not state.finished:
            return state
        if not state.finished:  # killed while applying patch `next`: keep its leftovers, apply it again
            tree = Path(state.tree)
            left = uncommitted_work(tree)
            if left:
                ref = keep_dropped(tree, left, f"retrying {Path(state.series[state.next]).name}")
                progress.step(
                    f"an interrupted run left {len(left.dirty)} changed file(s) in {tree}: kept in {ref}"
                )
                git.run(tree, "reset", "--quiet", "--hard", "HEAD")
                git.run(tree, "clean", "-fdq")
            return _advance(root, state, to_base, progress)
        raise SeamError(
            f"the port to {to_base.name} is not stopped at a patch",
            hint=f"tkv-seam port --to {to_base.name} --status",
        )
    tree = Path(state.tree)
    unmerged = _unmerged(tree)
    if unmerged:
        raise RefusedError(
            f"{state.current}: still unmerged: {', '.join(unmerged)}",
            hint=f"resolve them, `git -C {tree} add {' '.join(unmerged)}`, then --continue",
        )
    staged = git.out(tree, "diff", "--cached", "--name-only").split()
    unstaged = (
        git.out(tree, "diff", "--name-only").split()
        + git.out(tree, "ls-files", "--others", "--exclude-standard").split()
    )
    if unstaged:
        raise RefusedError(
            f"{state.current}: changes not staged: {', '.join(unstaged)}",
            hint=f"stage them (git -C {tree} add <files>) or drop them (git -C {tree} checkout -- <files>), "
            "then --continue",
        )
    if not staged:
        raise RefusedError(
            f"{state.current}: nothing staged to commit",
            hint=f"stage your resolution (git -C {tree} add <files>), or "
            f"`tkv-seam port --to {to_base.name} --skip --reason '<why>'`",
        )
    marked = [
        line
        for line in git.out(tree, "diff", "--cached", "-U0").splitlines()
        if line.startswith("+") and line[1:].startswith(_MARKERS)
    ]
    if marked:
        raise RefusedError(
            f"{state.current}: conflict markers staged ({marked[0][1:8]!r})",
            hint="remove them, stage again, then --continue",
        )
    patch = _patch(root, state, state.next)
    msg_path = tree / ".git" / PORT_MSG
    message = msg_path.read_text() if msg_path.exists() else patch.header.message
    if verdict:
        message = _set_trailer(message, "Verdict", verdict)
    if reason:
        message = _set_trailer(message, "Reason", reason)
    header = _message_header(patch, message)
    git.run(
        tree,
        "commit",
        "-q",
        "--no-verify",
        "-F",
        "-",
        "--author",
        patch.header.author,
        env={"GIT_AUTHOR_DATE": git.FIXED_DATE},
        input=message.encode(),
    )
    state.done.append(
        _done(
            patch, "resolved", git.head(tree), " ".join(header.get("Verdict")), " ".join(header.get("Reason"))
        )
    )
    state.next += 1
    state.current = state.stopped = None
    msg_path.unlink(missing_ok=True)
    state.save()
    return _advance(root, state, to_base, progress)


def skip(
    root: Path, to_base: Base, dest: Path, reason: str, verdict: str = "obsolete", progress: Progress = QUIET
) -> PortState:
    """--skip: leave the stopped patch out of the new queue, recording verdict and reason."""
    if not reason or not reason.strip():
        raise SeamError("--skip needs --reason '<why the patch goes>'", exit_code=2)
    if verdict not in ("obsolete", "dropped"):
        raise SeamError(f"--verdict {verdict!r}: a skipped patch is 'obsolete' or 'dropped'", exit_code=2)
    state = _load(dest, to_base.name)
    _recover(root, state)
    if state.current is None:
        raise SeamError(
            f"the port to {to_base.name} is not stopped at a patch",
            hint=f"tkv-seam port --to {to_base.name} --status",
        )
    tree = Path(state.tree)
    git.run(tree, "reset", "--quiet", "--hard", "HEAD")
    git.run(tree, "clean", "-fdq")
    patch = _patch(root, state, state.next)
    state.done.append(_done(patch, "skipped", None, verdict, reason.strip()))
    state.next += 1
    state.current = state.stopped = None
    (tree / ".git" / PORT_MSG).unlink(missing_ok=True)
    state.save()
    return _advance(root, state, to_base, progress)


def abort(to_base: Base, dest: Path) -> Path:
    """--abort: remove the port tree (only a tree this port made; no queue was written yet)."""
    state = _load(dest, to_base.name)
    if state.finished:
        raise RefusedError(
            f"the port to {to_base.name} has finished; its queue is written",
            hint=f"drop the queue with git (git checkout -- {to_base.queue.patches}) and rm -r {dest}",
        )
    if Path(state.tree).resolve() != dest.resolve() or not (dest / ".git" / PORT_STATE).is_file():
        raise RefusedError(f"{dest} is not the tree this port made", hint=f"inspect {dest}")
    shutil.rmtree(dest)
    return dest


@dataclass
class Finished:
    state: PortState
    exported: list
    problems: list[str]


def finish(
    root: Path,
    to_base: Base,
    dest: Path,
    force: bool = False,
    ruff: str | None = None,
    cache: Path | None = None,
) -> Finished:
    """Write ``to_base``'s own queue from the port tree's commits; lint it and run the style gate."""
    from .export import export_texts, write_queue
    from .lint import lint
    from .stylecheck import stylecheck

    state = _load(dest, to_base.name)
    _recover(root, state)
    left = len(state.series) - state.next
    if state.current is not None or left:
        raise RefusedError(
            f"{left} patch(es) not yet ported" + (f" (stopped at {state.current})" if state.current else ""),
            hint=f"tkv-seam port --to {to_base.name} --continue (or --skip --reason '<why>')",
        )
    tree = Path(state.tree)
    texts, order = export_texts(tree, state.base_commit)
    exported = write_queue(
        root, to_base.queue, texts, order, force, again=f"tkv-seam port --to {to_base.name} --finish --force"
    )
    (root / to_base.queue.patches / VERDICTS).write_text(_port_md(state))
    series = read_series(root, to_base.queue, to_base.name)
    TreeState(
        tree=str(tree),
        base=to_base.name,
        source="sdist",
        base_commit=state.base_commit,
        upstream_commit=state.upstream_commit,
        head=git.head(tree),
        digest=inputs_digest(to_base, "sdist", series),
        patches=[
            AppliedPatch(n, c, git.out(tree, "diff-tree", "--no-commit-id", "--name-only", "-r", c).split())
            for n, c in zip(
                order, git.out(tree, "rev-list", "--reverse", f"{state.base_commit}..HEAD").split()
            )
        ],
        inputs=series.file_digests(),
        kind="port",
    ).save(tree)
    problems = [f"lint: {p}" for p in lint(root, to_base.queue)]
    try:
        problems += stylecheck(root, tree, to_base, cache or default_cache_dir(), ruff)
    except SeamError as e:
        problems.append(f"stylecheck: {e.message}")
    state.finished = True
    state.save()
    return Finished(state, exported, problems)


def _port_md(state: PortState) -> str:
    rows = [
        f"# Port {state.from_base} -> {state.to_base}",
        "",
        "| patch | status | verdict | reason |",
        "|---|---|---|---|",
    ]
    for d in state.done:
        rows.append(f"| {d['name']} | {d['status']} | {d['verdict']} | {d['reason'].replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def status(root: Path, to_base: Base, dest: Path) -> PortState:
    """The port's state, with a commit an interrupted run made recorded (``_recover``)."""
    state = _load(dest, to_base.name)
    _recover(root, state)
    return state
