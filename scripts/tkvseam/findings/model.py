"""What a port finds, as data: statuses are enums, evidence and notes are records.

Text is made only when rendering (``render``); nothing here, or in the code that decides,
parses a sentence back. ``to_json`` gives the report's JSON (the shape ``port report
--json`` prints, ``build/drift/*.json`` holds and a stopped port keeps in its state).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum

from ..queue.patch import PlacementKind, placement_text
from .auto import Did


class PatchStatus(StrEnum):
    EXACT = "exact"
    THREE_WAY = "3-way"
    CONFLICT = "conflict"
    TEST_ONLY = "test-only conflict"  # only test files fail
    BLOCKED = "blocked"  # a Depends-on patch did not apply
    OBSOLETE = "likely obsolete"
    SKIPPED = "skipped"  # the port left it out (``port skip``): never a report's finding
    BREAKS = "breaks"  # it went in, but fails the gate (or its own tests) on the new base (port/gate.py)


APPLIED = (PatchStatus.EXACT, PatchStatus.THREE_WAY)
# What a report finds for a patch, in the order every rendering counts them.
REPORTED = (
    PatchStatus.EXACT,
    PatchStatus.THREE_WAY,
    PatchStatus.TEST_ONLY,
    PatchStatus.CONFLICT,
    PatchStatus.BLOCKED,
    PatchStatus.OBSOLETE,
)


class FileStatus(StrEnum):
    EXACT = "exact"
    THREE_WAY = "3-way"
    CONFLICT = "conflict"
    FAILS = "fails"
    MISSING = "missing"  # the new base has no such file
    MOVED = "moved"  # applied where its content went
    REFUSED = "refused"  # goes through a symlink of the new base
    # what the port did by itself where the 3-way merge conflicted (findings/auto.py)
    OFFSET = "offset"  # every hunk placed with its full context, as quilt does
    IMPORTS = "imports merged"  # only imports conflicted: merged and sorted by the base's ruff
    REPLAYED = "replayed"  # a resolution recorded before put back (git rerere)


FILE_APPLIED = (
    FileStatus.EXACT,
    FileStatus.THREE_WAY,
    FileStatus.MOVED,
    FileStatus.OFFSET,
    FileStatus.IMPORTS,
    FileStatus.REPLAYED,
)
# applied where the patch's file is (not moved): what a later patch's test file can build on
MERGED = (FileStatus.EXACT, FileStatus.THREE_WAY, FileStatus.OFFSET, FileStatus.IMPORTS, FileStatus.REPLAYED)


class EvidenceKind(StrEnum):
    """Why a patch looks obsolete on the new base."""

    REVERSE_APPLIES = "reverse-applies"  # every hunk is already there
    NO_CHANGE = "no change"  # applying it changes nothing
    NAMES_UPSTREAM = "names upstream"  # most names it adds are defined upstream
    LINES_UPSTREAM = "lines upstream"  # most of its added code lines appeared upstream

    @property
    def already_there(self) -> bool:
        """The new base holds the change itself (not only names or lines like it)."""
        return self in (EvidenceKind.REVERSE_APPLIES, EvidenceKind.NO_CHANGE)


@dataclass(frozen=True)
class Evidence:
    kind: EvidenceKind
    text: str


class HunkNote(StrEnum):
    """What the port found about one hunk beyond its placement."""

    NONE = ""
    ALREADY_UPSTREAM = "already upstream"  # its added lines appeared in the new base
    MOVED_FILE = "moved file"  # its file was moved; placed in the new file
    MOVED_TO = "moved to"  # its context is found where the file's content went
    NOT_IN_MOVED = "not in moved"  # not found where the file's content went either
    FILE_MISSING = "file missing"


class HunkPlace(StrEnum):
    """Where a hunk goes on the new base: the one word every rendering of the report counts it by."""

    EXACT = "exact"  # at the line it names
    OFFSET = "offset/fuzz"  # elsewhere in its file: an offset, fuzz, or the end of the file
    MOVED = "moved"  # in the file its file's content went to (git diff -M -C)
    UPSTREAM = "already upstream"  # its added lines appeared in the new base
    FAILS = "fails"  # found nowhere


@dataclass
class UpstreamRegion:
    """A failing hunk's region: upstream's diff of it between the bases and its new line numbers."""

    old_lines: str
    new_lines: str
    new_file: str
    diff: str
    changed: bool


@dataclass
class HunkReport:
    file: str
    hunk: int
    header: str
    section: str  # the function/class line git puts after @@ (what the hunk is in)
    kind: PlacementKind = PlacementKind.EXACT
    line: int | None = None
    delta: int = 0
    fuzz: int = 0
    note: str = ""  # rendered from note_kind when the report is made
    note_kind: HunkNote = HunkNote.NONE
    upstream: UpstreamRegion | None = None

    @property
    def status(self) -> str:
        """Its placement as text (``patch.placement_text``): exact, offset +N, fuzz N, fails..."""
        return placement_text(self.kind, self.line, self.delta, self.fuzz)

    @property
    def place(self) -> HunkPlace:
        """The hunk's one word (``HunkPlace``), from its placement and its note."""
        if self.note_kind == HunkNote.ALREADY_UPSTREAM:
            return HunkPlace.UPSTREAM
        if self.note_kind == HunkNote.MOVED_TO or (
            self.note_kind == HunkNote.MOVED_FILE and self.kind != PlacementKind.FAILS
        ):
            return HunkPlace.MOVED
        if self.kind == PlacementKind.EXACT:
            return HunkPlace.EXACT
        return HunkPlace.FAILS if self.kind == PlacementKind.FAILS else HunkPlace.OFFSET


@dataclass
class FileReport:
    path: str
    status: FileStatus
    note: str = ""
    test: bool = False
    moved_to: str | None = None


@dataclass
class PatchReport:
    name: str
    slug: str = ""
    summary: str = ""
    status: PatchStatus = PatchStatus.EXACT
    own: PatchStatus = PatchStatus.EXACT  # how the patch itself applied
    files: list[FileReport] = field(default_factory=list)
    hunks: list[HunkReport] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    blocked_by: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    note: str = ""
    verdict: str = ""  # draft, for the verdict table
    reason: str = ""
    remove_when: str = ""  # the header's removal condition (Remove-when), if any
    problems: list[str] = field(default_factory=list)  # a breaks stop's: file:line rule message, test ids
    did: list[Did] = field(default_factory=list)  # what the port did by itself

    @property
    def applied(self) -> bool:
        return self.status in APPLIED

    @property
    def obsolete(self) -> list[str]:
        return [e.text for e in self.evidence]

    def to_json(self) -> dict:
        data = asdict(self)
        data["obsolete"] = self.obsolete  # the evidence as sentences ("evidence" has the kinds)
        for row, hunk in zip(data["hunks"], self.hunks):
            row["status"] = hunk.status  # the placement as text
            row["place"] = str(hunk.place)  # the word the summary counts it by
        return data

    @classmethod
    def from_json(cls, data: dict) -> PatchReport:
        """The report ``to_json`` gave (a stopped port keeps it in its state); a field of an
        unknown name is ignored, a value of the wrong kind raises (TypeError, ValueError, KeyError)."""
        hunks = []
        for h in data.get("hunks", []):
            up = h.get("upstream")
            hunks.append(
                HunkReport(
                    **{
                        **_known(HunkReport, h),
                        "kind": PlacementKind(h.get("kind", PlacementKind.EXACT)),
                        "note_kind": HunkNote(h.get("note_kind", HunkNote.NONE)),
                        "upstream": UpstreamRegion(**_known(UpstreamRegion, up)) if up is not None else None,
                    }
                )
            )
        return cls(
            **{
                **_known(cls, data),
                "status": PatchStatus(data.get("status", PatchStatus.EXACT)),
                "own": PatchStatus(data.get("own", PatchStatus.EXACT)),
                "files": [
                    FileReport(**{**_known(FileReport, f), "status": FileStatus(f["status"])})
                    for f in data.get("files", [])
                ],
                "hunks": hunks,
                "evidence": [Evidence(EvidenceKind(e["kind"]), e["text"]) for e in data.get("evidence", [])],
                "did": [d for d in (Did.from_json(x) for x in data.get("did", [])) if d is not None],
            }
        )


def _known(cls, data: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or name.startswith("test_") or name == "conftest.py"
