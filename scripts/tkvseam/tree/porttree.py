"""The port tree's mechanics: the new base plus the old base's objects, and applying into it.

A port tree is a clone of the new base's pristine repository with the old base's commit
fetched into it (``OLD_TAG``), so the patches' full ``index`` lines give git the preimages
for a 3-way merge. ``apply_files`` applies one patch file by file: strictly (every hunk
where it says), else ``git apply --3way``, else at the file its content went to; a
conflict is parked (markers and index stages kept aside) so the next file can merge, and
put back at the end. Where the 3-way merge conflicts, the port's own steps (``findings.auto.Auto``)
come first: every hunk placed with its full context (offset, no fuzz), then, after the
conflicts are back, import-only conflicts merged (``importmerge``) and recorded resolutions
replayed (``replay``); what they did is in the file's report (``FileStatus.OFFSET``,
``IMPORTS``, ``REPLAYED``) and the patch's ``did``. A path that is, or goes through, a symlink of the new base is
refused, never written through (the guard apply uses: ``commits.symlinked_path``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from .. import git
from ..bases.repo import BaseRepo
from .commits import symlinked_path
from ..errors import ApplyError
from ..queue.patch import (
    ChangeKind,
    FileChange,
    Patch,
    PlacementKind,
    file_sections,
    place_file,
    replay_file,
    split_lines,
)
from ..layout import BASE_TAG, BRANCH
from ..findings.auto import Auto, Did
from .importmerge import Sort, merge_conflicts
from ..findings.analysis import (
    by_file,
    decide,
    draft_verdict,
    first_sentence,
    obsolete_evidence,
    place_hunks,
    retry_moved,
    upstream_region,
)
from ..findings.model import (
    Evidence,
    EvidenceKind,
    FileReport,
    FileStatus,
    HunkNote,
    HunkReport,
    PatchReport,
    is_test_file,
)

OLD_TAG = "tkv-seam-old-base"

Parked = list[tuple[str, bytes, bytes | None]]  # (path, its unmerged index stages, its file)


FULL_CONTEXT = (PlacementKind.EXACT, PlacementKind.OFFSET, PlacementKind.EOF)  # with fuzz 0


class PortTree:
    def __init__(self, path: Path, auto: Auto = Auto(), isort: Sort | None = None, resolutions=None):
        self.path = Path(path)
        self.auto = auto
        self.isort = isort  # the base's import sort (``imports.Isort``); None: imports are not merged
        self.resolutions = resolutions  # ``replay.Resolutions``; None: nothing replayed

    @classmethod
    def build(cls, dest: Path, old: BaseRepo, new: BaseRepo) -> PortTree:
        """A clone of the new base at ``dest`` with the old base's objects, both tagged."""
        git.repo.clone_local(new.path, dest)
        git.index.checkout_branch(dest, BRANCH, new.commit)
        git.repo.tag(dest, BASE_TAG, new.commit)
        git.repo.fetch(dest, old.path, old.commit)
        git.repo.tag(dest, OLD_TAG, old.commit)
        return cls(dest)

    # -- reading ------------------------------------------------------------------

    def lines(self, rel: str) -> list[str] | None:
        """The work-tree file ``rel`` as lines, or None (absent, or reached through a symlink)."""
        if self.symlink_on(rel):
            return None
        p = self.path / rel
        return split_lines(p.read_bytes().decode("utf-8", "surrogateescape")) if p.is_file() else None

    def lines_at(self, rev: str, rel: str) -> list[str] | None:
        data = git.repo.show(self.path, rev, rel)
        return split_lines(data.decode("utf-8", "surrogateescape")) if data is not None else None

    def old_lines(self, rel: str) -> list[str] | None:
        """``rel`` on the old base."""
        return self.lines_at(OLD_TAG, rel)

    def new_lines(self, rel: str) -> list[str] | None:
        """``rel`` on the new base (pristine, whatever the port applied since)."""
        return self.lines_at(BASE_TAG, rel)

    def symlink_on(self, rel: str) -> str | None:
        """The symlink of HEAD that ``rel`` is or goes through, or None."""
        parts = Path(rel).parts
        prefixes = [str(Path(*parts[: i + 1])) for i in range(len(parts))]
        for entry in git.repo.ls_tree(self.path, "HEAD", prefixes):
            if entry.mode == git.core.SYMLINK_MODE:
                return entry.path
        return None

    def moves(self, patches: list[Patch]) -> dict[str, list[str]]:
        """Old path -> new paths its content went to between the bases (renames and copies).

        Limited to the directories of the files the queue touches (a whole-tree -C pass over
        thousands of changed files exceeds git's rename limit and finds nothing).
        """
        dirs = sorted({str(Path(fc.old).parent) for p in patches for fc in p.files if fc.old})
        return git.repo.renames(self.path, OLD_TAG, BASE_TAG, dirs)

    def region_diff(self, old_path: str, new_path: str) -> str:
        """Upstream's diff of a file between the bases (the old path on the old base, the new on the new)."""
        return git.repo.diff_files(self.path, f"{OLD_TAG}:{old_path}", f"{BASE_TAG}:{new_path}")

    def grep_def(self, name: str, defs_only: bool = False) -> str | None:
        """Where the new base defines ``name`` (def/class, or a module-level assignment unless ``defs_only``)."""
        pattern = rf"^\s*((async\s+)?def|class)\s+{re.escape(name)}\b"
        if not defs_only:
            pattern += rf"|^{re.escape(name)}\s*(:[^=]*)?="
        first = git.repo.grep(self.path, pattern, BASE_TAG, "vllm")[:1]
        if not first:
            return None
        _, path, line, *_ = first[0].split(":", 3)
        return f"{path}:{line}"

    def reverse_applies(self, section: str) -> bool:
        return git.index.reverse_applies(self.path, section)

    def unmerged(self) -> list[str]:
        return git.index.unmerged_paths(self.path)

    def changes_nothing(self, paths: list[str]) -> bool:
        """The patch's own files staged (ignored ones too: a base tree from an sdist holds files its
        .gitignore names): does the index equal HEAD? Nothing else in the tree is staged (a linter's
        cache, a user's notes never enter the patch's commit)."""
        there = [
            p
            for p in dict.fromkeys(paths)
            if (self.path / p).exists() or git.repo.exists_at(self.path, "HEAD", p)
        ]
        if there:
            git.index.stage(self.path, there, force=True)
        return git.index.index_matches(self.path, "HEAD")

    # -- applying -----------------------------------------------------------------

    def _write(self, rel: str, text: str | None) -> None:
        dest = self.path / rel
        if text is None:
            dest.unlink()
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(text.encode("utf-8", "surrogateescape"))
        git.index.stage(self.path, [rel])

    def _apply_3way(self, section: str, parked: Parked) -> tuple[FileStatus, str, list[str]]:
        """``git apply --3way`` one file's section: (status, note, unmerged paths).

        A conflict is parked (markers and index stages saved, file reset) so that the patch's
        next file can be merged; ``unpark`` puts every parked conflict back.
        """
        clean, errors = git.index.apply_3way(self.path, section)
        unmerged = self.unmerged()
        if clean and not unmerged:
            return FileStatus.THREE_WAY, "", []
        if unmerged:
            for path in unmerged:
                stages = git.index.index_stages(self.path, path)
                text = (self.path / path).read_bytes() if (self.path / path).exists() else None
                parked.append((path, stages, text))
            self.resolve_ours(unmerged)
            return FileStatus.CONFLICT, "", unmerged
        return FileStatus.FAILS, errors, []

    def unpark(self, parked: Parked) -> None:
        """Put parked conflicts back: the file with git's markers and its unmerged index stages."""
        for path, stages, text in parked:
            git.index.restore_stages(self.path, path, stages)
            if text is not None:
                (self.path / path).write_bytes(text)

    def resolve_ours(self, paths: list[str]) -> None:
        """Leave the conflicting files of a patch out: back to the tree's version."""
        for p in paths:
            if git.repo.exists_at(self.path, "HEAD", p):
                git.index.checkout_paths(self.path, "HEAD", [p])
            else:
                git.index.unstage_remove(self.path, p)
                (self.path / p).unlink(missing_ok=True)

    def apply_files(
        self, patch: Patch, moves: dict[str, list[str]]
    ) -> tuple[list[FileReport], list[HunkReport]]:
        """Apply ``patch`` file by file: strict, else 3-way, else at the file its content went to.

        Files that merge stay in the work tree and index; conflicting ones keep git's markers;
        a file through a symlink of the new base is refused and left alone.
        """
        files, hunks, parked = [], [], []
        link = symlinked_path(self.path, "HEAD", patch)
        for fc, section in zip(patch.files, file_sections(patch)):
            fr, rows = self._apply_file(patch, fc, section, moves, parked, link)
            hunks += rows
            files.append(fr)
        self.unpark(parked)
        self._merge_imports(files)
        self._replay(patch, files)
        return files, hunks

    def _merge_imports(self, files: list[FileReport]) -> None:
        """Each conflicting file whose every conflict is imports alone: merged, sorted, staged."""
        if not (self.auto.imports and self.isort is not None):
            return
        for fr in files:
            if fr.status != FileStatus.CONFLICT or fr.path not in self.unmerged():
                continue
            done = merge_conflicts(self.path, fr.path, self.isort)
            if done is None:
                continue
            self._write(fr.path, done[0])
            version = getattr(self.isort, "version", lambda: "?")()
            fr.status, fr.note = FileStatus.IMPORTS, f"{done[1]}; sorted by ruff {version} (isort rules I)"

    def _replay(self, patch: Patch, files: list[FileReport]) -> None:
        """Conflicts resolved before (git rerere): their resolution put back and staged, with the
        rest of the whole resolution recorded with them; a file of it that is no longer where it
        was stops the patch (a conflict to resolve by hand)."""
        conflicted = [f for f in files if f.status == FileStatus.CONFLICT]
        if not (self.auto.replay and self.resolutions is not None and conflicted):
            return
        replayed = set(self.resolutions.replay(self.path, [f.path for f in conflicted]))
        for fr in conflicted:
            if fr.path in replayed:
                fr.status, fr.note = (
                    FileStatus.REPLAYED,
                    "the resolution recorded for this conflict, replayed (git rerere)",
                )
        if not replayed:
            return
        rest = self.resolutions.replay_rest(self.path, patch, sorted(replayed))
        if rest.unrecorded:  # what the rest of the patch's resolution was is not known: a human looks
            for fr in conflicted:
                if fr.path in replayed:
                    fr.status, fr.note = (
                        FileStatus.CONFLICT,
                        "git rerere put back a resolution recorded for this conflict (staged), but no "
                        "record of this patch's whole resolution goes with it: check the patch's other "
                        "files, then continue",
                    )
            return
        by_path = {f.path: f for f in files}

        def report(path: str, status: FileStatus, note: str) -> None:
            """The file's report (a file the patch does not change gets one), said to be ``status``."""
            if path not in by_path:
                by_path[path] = FileReport(path, FileStatus.EXACT, test=is_test_file(path))
                files.append(by_path[path])
            by_path[path].status, by_path[path].note = status, note

        for path in rest.restored:
            report(path, FileStatus.REPLAYED, "changed by the resolution recorded with it, put back")
        for path in rest.differs:
            report(
                path,
                FileStatus.CONFLICT,
                "the resolution recorded with this patch's conflicts changed this file too, but it is "
                "no longer where it was then (the base or the patch changed): not replayed; change it "
                "as the resolution needs, then continue",
            )

    def _apply_file(self, patch, fc: FileChange, section, moves, parked, link):
        target = fc.old or fc.new
        fr = FileReport(fc.path, FileStatus.EXACT, test=is_test_file(fc.path))
        through = (self.symlink_on(target) or (fc.new and self.symlink_on(fc.new))) if link else None
        if through:
            fr.status, fr.note = (
                FileStatus.REFUSED,
                f"goes through the symlink {through} of the new base: refused",
            )
            return fr, [_failed(r) for r in place_hunks([], fc)]
        lines = self.lines(target)
        if fc.kind == ChangeKind.ADD:
            rows = place_hunks([], fc)
            if lines is not None:
                fr.status, fr.note = FileStatus.FAILS, "the patch creates it, but the new base has it"
                rows = [_failed(r) for r in rows]
        elif lines is None:
            return self._apply_moved(fc, section, moves, parked, fr)
        else:
            rows = place_hunks(lines, fc)
        if fr.status == FileStatus.EXACT:
            try:
                new_text = replay_file(patch, fc, "".join(lines) if lines is not None else None)
            except ApplyError:
                fr.status, fr.note, unmerged = self._apply_3way(section, parked)
                if fr.status in (FileStatus.CONFLICT, FileStatus.FAILS) and self._by_offset(fc, lines, rows):
                    parked[:] = [entry for entry in parked if entry[0] not in unmerged]
                    fr.status, fr.note = FileStatus.OFFSET, _offset_note(fr.status, rows)
            else:
                self._write(fc.new or fc.old, new_text)
        if fr.status != FileStatus.EXACT:
            retry_moved(fc, rows, [(d, self.lines(d)) for d in moves.get(fc.old or fc.path, [])])
        return fr, rows

    def _by_offset(self, fc: FileChange, lines: list[str] | None, rows: list[HunkReport]) -> bool:
        """Where the 3-way merge did not go: every hunk placed with its whole context (quilt's
        default: offset, no fuzz), written and staged. False when a hunk needs fuzz or fails."""
        if not (self.auto.offset and lines is not None and fc.kind == ChangeKind.MODIFY and fc.old == fc.new):
            return False
        if not rows or any(r.kind not in FULL_CONTEXT or r.fuzz or r.line is None for r in rows):
            return False
        text = place_file(fc, lines, [r.line - 1 for r in rows])  # type: ignore[operator]
        if text is None:
            return False
        self.resolve_ours([fc.path])  # the 3-way attempt's leftovers, if any
        self._write(fc.path, text)
        return True

    def _apply_moved(self, fc, section, moves, parked, fr):
        """The new base has no such file: retry where git diff -M -C says its content went."""
        target = fc.old or fc.new
        rows = [
            HunkReport(
                fc.path,
                i,
                "",
                (h.section_header or "").strip(),
                PlacementKind.FAILS,
                note="file missing",
                note_kind=HunkNote.FILE_MISSING,
            )
            for i, h in enumerate(fc.pfile, 1)
        ]
        fr.status, fr.note = FileStatus.MISSING, "the new base has no such file"
        for dest in moves.get(target, []):
            moved = self.lines(dest)
            if moved is None:
                continue
            rows = place_hunks(moved, fc, dest)
            for r in rows:
                r.note, r.note_kind = f"moved: {fc.path} -> {dest}", HunkNote.MOVED_FILE
            status, note, _ = self._apply_3way(section.replace(f"/{target}", f"/{dest}"), parked)
            fr.moved_to = dest
            fr.note = f"content moved to {dest} (git diff -M -C); retried there: {status}" + (
                f" ({note})" if note else ""
            )
            fr.status = status if status in (FileStatus.CONFLICT, FileStatus.FAILS) else FileStatus.MOVED
            break
        return fr, rows


def _offset_note(merge: FileStatus, rows: list[HunkReport]) -> str:
    how = "conflicted" if merge == FileStatus.CONFLICT else "did not apply"
    places = ", ".join(f"hunk {r.hunk} {r.status}" for r in rows)
    return f"the 3-way merge {how} (upstream changed lines next to its hunks); placed with every hunk's full context: {places}"


def did_of(files: list[FileReport]) -> list[Did]:
    """What the port did by itself on a patch's files (``Did`` kinds offset, imports, replay)."""
    kinds = {FileStatus.OFFSET: "offset", FileStatus.IMPORTS: "imports", FileStatus.REPLAYED: "replay"}
    return [Did(kinds[f.status], f.path, f.note) for f in files if f.status in kinds]


def _failed(row: HunkReport) -> HunkReport:
    return replace(row, kind=PlacementKind.FAILS)


# --------------------------------------------------------------------------- one trial


def try_patch(
    tree: PortTree,
    patch: Patch,
    moves: dict[str, list[str]],
    by_slug: dict[str, PatchReport],
    failed_tests: dict,
) -> PatchReport:
    """Apply ``patch`` into the port tree (what merges stays, conflicts keep their markers) and report it."""
    report = PatchReport(patch.name, patch.header.slug, patch.header.summary)
    report.evidence, marks = obsolete_evidence(tree, patch, file_sections(patch))
    report.files, report.hunks = tree.apply_files(patch, moves)
    touched = [p for f in report.files for p in (f.path, f.moved_to) if p]
    if not tree.unmerged() and tree.changes_nothing(touched):
        report.evidence.insert(
            0,
            Evidence(
                EvidenceKind.NO_CHANGE, "applying it changes nothing: the new base already holds every change"
            ),
        )
    for h in report.hunks:
        if marks.get((h.file, h.hunk)) and h.note_kind == HunkNote.NONE:
            h.note, h.note_kind = (
                "already upstream (its added lines appeared in the new base)",
                HunkNote.ALREADY_UPSTREAM,
            )
    decide(report, patch, by_slug, failed_tests)
    for fc, h_rows in by_file(patch, report.hunks):
        status = next(f.status for f in report.files if f.path == fc.path)
        if (
            status in (FileStatus.EXACT, FileStatus.THREE_WAY, FileStatus.REPLAYED)
            or fc.kind != ChangeKind.MODIFY
        ):
            continue
        for row, hunk in zip(h_rows, fc.pfile):
            if row.kind == PlacementKind.EXACT:
                continue
            moved = next((f.moved_to for f in report.files if f.path == fc.path and f.moved_to), None)
            if moved is None and row.note_kind in (HunkNote.MOVED_TO, HunkNote.NOT_IN_MOVED):
                moved = moves[fc.old or fc.path][0]  # the region is compared with where it went
            old = tree.old_lines(fc.old or fc.path)
            if old is not None and tree.new_lines(moved or fc.path) is not None:
                diff = tree.region_diff(fc.old or fc.path, moved or fc.path)
                row.upstream = upstream_region(old, diff, hunk, moved or fc.path)
    draft_verdict(report, first_sentence(" ".join(patch.header.get("Reason"))))
    report.remove_when = patch.header.remove_when
    report.did = did_of(report.files)
    return report
