"""The gate at every patch of a port: what goes into the new base compiles and passes its style gate.

After a patch goes into the port tree (by itself: exact, offset or 3-way; or a resolution the
user continues with), and before it is committed, ``check_patch`` runs on what is staged (the
port tree at that prefix): every changed ``.py`` byte-compiles, and the new base's own style
gate (its ruff pin in ``bases.toml``, the tree's ``pyproject.toml``; ``stylecheck``, as
``bisect`` runs it per prefix) passes on the ``.py`` files the patch touches. A failure stops
the port there (``PatchBreaks``, exit 12, stop kind ``breaks``): the patch stays applied and
staged, not committed, and each problem is named ``file:line rule message``. ``continue``
runs the gate again on what the user staged; ``skip`` leaves the patch out as at any stop.

Before the gate fails a patch, the base's own fixers run on the files it touches
(``fixers.run_fixers``: ``ruff check --fix``, safe fixes only, and ``ruff format``); what they
changed is recorded and said, and what remains stops the port as before.

How each patch went in is recorded in the port tree (``.git/tkv-seam-port-gate.json``): how,
gate, proven, what the port did by itself on it (``did``) and the blob of each ``.py`` file it
gated (``files``). ``patches_by_themselves`` lists, at the end, those no human looked at and
those the port changed by itself (to be re-read). ``regate`` gates again, at its own prefix,
a committed patch whose files changed after it was gated (an amend, a rebase, a fixup).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from .. import git, hints
from ..bases.pins import Base
from ..edit.stylecheck import file_problems, gate_ruff
from ..findings.auto import Auto, Did, did_lines
from .fixers import run_fixers
from ..errors import PortStopped, SeamError
from ..fsutil import atomic_write
from ..progress import Progress
from ..queue.patch import Patch, PlacementKind
from ..tree.seamtree import SeamTree
from ..tree.state import DoneStatus, TreeState
from .journal import PORT_MSG, stamp, still_so
from ..findings.model import FileStatus, PatchReport, PatchStatus
from .render import WHY, git_c, port_command

GATE_FILE = "tkv-seam-port-gate.json"  # in the port tree's .git: how each patch went in, what was checked
_WARNED: set[str] = set()  # port trees whose missing ruff pin was said (once a run)


class How(StrEnum):
    """How a patch went into the port tree."""

    EXACT = "exact"
    THREE_WAY = "3-way"
    OFFSET = "offset"  # a hunk moved or needed fuzz, or every hunk placed with its full context
    IMPORTS = "imports merged"  # its conflicts were imports only, merged by the port
    REPLAYED = "replayed"  # a resolution recorded before was put back
    RESOLVED = "resolved"  # a human resolved it


class Gate(StrEnum):
    """What the gate said of a patch."""

    OK = "ok"
    BREAKS = str(PatchStatus.BREAKS)  # it went in but fails the gate or its own tests (the stop's kind)
    NOT_RUN = "not run"  # the record holds no entry for it (lost): said, never made up


class Proof(StrEnum):
    """Whether a patch's own tests passed at its prefix."""

    PROVEN = "proven"
    NOT_PROVEN = "not proven"
    NO_TESTS = "no tests"  # it names none to run
    ENVIRONMENT = "not proven (environment)"  # its tests fail on stock too

    def to_json(self) -> bool | str:
        """``true`` or ``false``, else why not: what the record and ``--json`` hold."""
        return {Proof.PROVEN: True, Proof.NOT_PROVEN: False}.get(self, str(self))

    @classmethod
    def from_json(cls, value: object) -> Proof:
        if value is True:
            return cls.PROVEN
        return cls(value) if isinstance(value, str) and value in cls._value2member_map_ else cls.NOT_PROVEN


@dataclass
class Entry:
    """One patch's entry in the gate record: how it went in, what the gate and its tests said, what
    the port did by itself on it, and the blob of each ``.py`` file gated (what ``regate`` compares)."""

    how: How | None
    gate: Gate = Gate.OK
    proven: Proof = Proof.NOT_PROVEN
    did: list[Did] = field(default_factory=list)
    files: dict[str, str] | None = None

    def to_json(self) -> dict:
        data = {
            "how": str(self.how or ""),
            "gate": str(self.gate),
            "proven": self.proven.to_json(),
            "did": [d.to_json() for d in self.did],
        }
        return data if self.files is None else {**data, "files": self.files}

    @classmethod
    def from_json(cls, data: dict) -> Entry:
        """An entry as read (a value of the wrong kind reads as not said: the gate not run, no files)."""
        how, gate, files = data.get("how"), data.get("gate"), data.get("files")
        return cls(
            How(how) if how in How._value2member_map_ else None,
            Gate(gate) if gate in Gate._value2member_map_ else Gate.NOT_RUN,
            Proof.from_json(data.get("proven")),
            _did(data.get("did") if isinstance(data.get("did"), list) else []),
            files if isinstance(files, dict) else None,
        )


@dataclass
class WentIn:
    """A patch to re-read at the end of a port: it went in without a human, or the port changed it
    by itself (``did``: what it did, as lines)."""

    name: str
    how: How
    gate: Gate
    proven: Proof
    did: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        row = {
            "name": self.name,
            "how": str(self.how),
            "gate": str(self.gate),
            "proven": self.proven.to_json(),
        }
        return {**row, "did": self.did} if self.did else row


class PatchBreaks(PortStopped):
    """The port stopped at a patch that went in but breaks the new base (exit 12, kind ``breaks``)."""

    kind = "breaks"

    def __init__(self, message: str, hint: str, patch: str, problems: list[str]):
        super().__init__(message, hint=hint, patch=patch)
        self.problems = problems


class ChangedBreaks(PatchBreaks):
    """A committed patch changed after it passed the gate fails it now (``regate``): fixed by amending
    its commit, not by staging (its hint says how)."""


class Gated(Protocol):
    """What the gate reads of the port it checks (``session.PortSession`` is one)."""

    root: Path
    to_base: Base
    path: Path
    default_tree: Path
    seam: SeamTree
    cache: Path
    progress: Progress

    def save(self, state: TreeState) -> None:
        """Record ``state`` in the port tree."""


def how_applied(r: PatchReport | None) -> How:
    """How a patch went in: exact, offset (a hunk moved or needed fuzz), 3-way, its conflicts
    resolved by the port (imports merged, a recorded resolution replayed); resolved (a human)."""
    if r is None:
        return How.RESOLVED
    kinds = {f.status for f in r.files}
    for status, how in (
        (FileStatus.REPLAYED, How.REPLAYED),
        (FileStatus.IMPORTS, How.IMPORTS),
        (FileStatus.OFFSET, How.OFFSET),
    ):
        if status in kinds:
            return how
    if r.own == PatchStatus.EXACT and any(h.kind != PlacementKind.EXACT for h in r.hunks):
        return How.OFFSET
    return How(str(r.own))


def _py_paths(tree: Path, patch: Patch) -> list[str]:
    """The .py files the patch leaves, and any other .py file staged (a resolution may touch more)."""
    paths = {fc.new for fc in patch.files if fc.new} | set(git.index.staged_paths(tree))
    return sorted(p for p in paths if p.endswith(".py"))


def _ruff_line(line: str) -> str:
    """``ruff check: f.py:3:5: F821 msg`` / ``ruff format: f.py:3: would rewrite …`` as ``f.py:3 RULE msg``."""
    kind, _, rest = line.partition(": ")
    parts = rest.split(":", 3)
    if kind == "ruff check" and len(parts) == 4 and parts[1].isdigit():
        return f"{parts[0]}:{parts[1]} {parts[3].strip()}"
    if kind == "ruff format" and len(parts) >= 3 and parts[1].isdigit():
        return f"{parts[0]}:{parts[1]} format: ruff format {':'.join(parts[2:]).strip()}"
    return rest or line


def _ruff(session: Gated) -> str | None:
    """The base's ruff, or None (no pin: said once a run, the gate only byte-compiles)."""
    try:
        return gate_ruff(session.to_base, session.cache)
    except SeamError as e:
        if str(session.path) not in _WARNED:
            _WARNED.add(str(session.path))
            session.progress.warn(f"gate: {e.message}: only byte-compiling each patch (next: {e.hint})")
        return None


def blob_problems(session: Gated, ruff: str | None, path: str, data: bytes) -> list[str]:
    """The gate on one file's content: ``file:line rule message`` per problem."""
    try:
        compile(data, path, "exec")
    except SyntaxError as e:
        return [f"{path}:{e.lineno} syntax {e.msg}"]
    return [_ruff_line(line) for line in file_problems(ruff, session.path, path, data)] if ruff else []


def staged_problems(session: Gated, patch: Patch) -> list[str]:
    """The gate on what is staged in the port tree: ``file:line rule message`` per problem."""
    tree = session.path
    paths = _py_paths(tree, patch)
    ruff = _ruff(session) if paths else None
    problems = []
    for path in paths:
        data = git.repo.show(tree, "", path)  # ":path": the index
        if data is not None:  # None: deleted by the patch
            problems += blob_problems(session, ruff, path, data)
    return problems


def _fix(session: Gated, patch: Patch) -> list[Did]:
    """The base's own fixers on the patch's staged .py files (nothing without a ruff pin)."""
    ruff = _ruff(session)
    if ruff is None:
        return []
    did = run_fixers(ruff, session.path, _py_paths(session.path, patch))
    for d in did:
        session.progress.step(f"{patch.name}: {d.line()}")
    return did


def _gated_files(tree: Path, patch: Patch) -> dict[str, str]:
    """The blob of each .py file the gate checked, as staged (what ``regate`` compares with)."""
    return {path: blob for path in _py_paths(tree, patch) if (blob := git.repo.blob_id(tree, "", path))}


def check_patch(
    session: Gated, state: TreeState, patch: Patch, r: PatchReport | None, message: str | None = None
) -> None:
    """Gate ``patch`` as staged in the port tree (the base's fixers first, when it fails), and
    prove it when the session proves (``session.prove``, a ``prove.Prover``); record how it went
    in and what the port did by itself, or stop there (PatchBreaks).

    ``r``: its report when it went in by itself (None: a resolution being continued);
    ``message``: the commit message the user gave (kept for the next ``continue``).
    """
    how = how_applied(r)
    p = state.port
    n = p.next + 1
    session.progress.step(f"gate [{n}/{len(p.series)}] {patch.name} ({how}): compile + style")
    stopped_how = _went_in_before(state) if r is None else None
    if r is not None:
        did = list(r.did)
    else:  # a resolution: a step on a file it changed since is said to be so
        did = still_so(session.path, p.stopped.did if p.stopped is not None else [])
    problems = staged_problems(session, patch)
    if problems and getattr(session, "auto", Auto()).fix:
        fixed = _fix(session, patch)
        if fixed:
            did += fixed
            problems = staged_problems(session, patch)
    proven = Proof.NOT_PROVEN
    prover = getattr(session, "prove", None)
    if not problems and prover is not None:
        from .prove import prove_patch

        failing = prove_patch(session, state, patch, prover, message)
        if failing:
            problems = [f"test {f}" for f in failing]
        elif failing is not None:
            proven = Proof.PROVEN
        elif prover.off.startswith("environment"):
            proven = Proof.ENVIRONMENT  # its tests fail on stock too: said once, as its own stop
        elif not (patch.header.tests or patch.header.guards or message):
            proven = Proof.NO_TESTS
    if not problems:
        _record(session, patch.name, Entry(how, Gate.OK, proven, did, _gated_files(session.path, patch)))
        return
    did = stamp(session.path, did)
    p.current = patch.name
    p.stopped = PatchReport(
        patch.name,
        patch.header.slug,
        patch.header.summary,
        status=PatchStatus.BREAKS,
        own=r.own if r is not None else p.stopped.own if p.stopped is not None else PatchStatus.EXACT,
        note=f"went in {stopped_how or how}; fails on {session.to_base.name}",
        problems=problems,
        did=did,
    )
    msg = session.seam.git_dir / PORT_MSG
    if message is not None or not msg.exists():
        atomic_write(msg, message if message is not None else patch.header.message)
    session.save(state)
    _record(session, patch.name, Entry(how, Gate.BREAKS, Proof.NOT_PROVEN, did))
    message_text = breaks_message(session.to_base.name, patch.name, how, problems, did, was=stopped_how)
    if prover is not None and prover.environment:  # said here, with the stop it came with
        message_text += (
            f"\n  not this patch's (the environment: they fail on stock too): {prover.environment}"
        )
        prover.environment = ""
    raise PatchBreaks(message_text, breaks_hint(session, msg), patch.name, problems)


def _did(rows: list) -> list[Did]:
    return [d for d in (Did.from_json(x) for x in rows) if d is not None]


_WENT_IN = re.compile(r"^went in (.+?); fails on ")


def _went_in_before(state: TreeState) -> How | None:
    """How the stopped patch went in when it stopped as ``breaks`` after going in by itself (a
    continue then gates the port's placement, with the user's fix if any); None otherwise."""
    stopped = state.port.stopped
    if stopped is None or stopped.status != PatchStatus.BREAKS:
        return None
    m = _WENT_IN.match(stopped.note)
    try:
        how = How(m.group(1)) if m else None
    except ValueError:
        return None
    return how if how != How.RESOLVED else None


def breaks_message(
    to_name: str,
    name: str,
    how: How | None,
    problems: list[str],
    did: list[Did] | None = None,
    what: str = "",
    was: How | None = None,
) -> str:
    """``was``: how the patch went in by itself before an earlier breaks stop, when this is its
    continue (what is staged is the port's placement, and the user's fix if any)."""
    if not what:
        tests = all(p.startswith("test ") for p in problems)
        if how == How.RESOLVED and was is not None:
            what = f"it went in {was}; with what you staged since, it " + (
                "passes the gate, but its own tests fail" if tests else "fails the gate"
            )
        elif how == How.RESOLVED:
            what = "the staged resolution " + (
                "passes the gate, but its own tests fail" if tests else "fails the gate"
            )
        else:
            what = f"it went in {how}, but " + ("its own tests fail" if tests else "fails the gate")
    return "\n".join(
        [
            f"port to {to_name} stopped at {name}: {Gate.BREAKS} ({what} on {to_name}: {len(problems)} problem(s))",
            *(f"  {p}" for p in problems),
            *did_lines(did or []),
        ]
    )


def breaks_hint(session: Gated, msg: Path, again: str | None = None) -> str:
    """Fix it in the port tree (the patch is applied and staged, not committed), then continue."""
    tree = session.path
    cont = again or port_command("continue", session.to_base.name, tree, session.default_tree)
    skip = port_command("skip", session.to_base.name, tree, session.default_tree, REASON=WHY)
    return (
        f"fix it in {tree} (the patch is applied and staged there, not committed): edit the file(s), "
        f"`{hints.shell('git', '-C', tree, 'add', '<files>')}`, edit Verdict/Reason in {msg} if the fix changes them, then `{cont}` "
        f"(it runs the gate again); or `{skip}`"
    )


# -- the record --------------------------------------------------------------------


def _path(tree: Path) -> Path:
    return tree / ".git" / GATE_FILE


def read_record(tree: Path) -> dict[str, Entry]:
    """The gate record; what is not an object of objects (edited by hand, cut short) is none:
    a patch without an entry says ``gate not run``."""
    try:
        record = json.loads(_path(tree).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    return {k: Entry.from_json(v) for k, v in record.items() if isinstance(v, dict)}


def _write(tree: Path, record: dict[str, Entry]) -> None:
    data = {name: entry.to_json() for name, entry in record.items()}
    atomic_write(_path(tree), json.dumps(data, indent=1, sort_keys=True) + "\n")


def _record(session: Gated, name: str, entry: Entry) -> None:
    record = read_record(session.path)
    record[name] = entry
    _write(session.path, record)


def regate(session: Gated, state: TreeState) -> None:
    """Gate again, at its own prefix, each committed patch whose ``.py`` files changed after it
    was gated (an amend, a rebase, a fixup in the port tree); stop (PatchBreaks) at the first
    that fails, naming it. A patch whose entry holds no ``files`` (lost) is taken as it is."""
    record = read_record(session.path)
    ruff = None
    for i, d in enumerate(state.port.done):
        entry = record.get(d.name)
        gated = entry.files if entry is not None else None
        if not d.commit or gated is None:
            continue
        paths = sorted(
            set(gated)
            | {
                p
                for p in git.repo.changed_paths(session.path, f"{d.commit}^", d.commit, only="d")
                if p.endswith(".py")
            }
        )
        now = {e.path: e.id for e in git.repo.ls_tree(session.path, d.commit, paths)}
        if now == gated:
            continue
        ruff = ruff or _ruff(session)
        session.progress.step(f"gate again: {d.name} changed after it was gated ({d.commit[:12]})")
        problems = [
            line
            for path, blob in sorted(now.items())
            for line in blob_problems(session, ruff, path, git.repo.read_blob(session.path, blob))
        ]
        entry.files, entry.gate = now, Gate.BREAKS if problems else Gate.OK
        entry.proven = Proof.NOT_PROVEN  # what was proven is not what the commit holds now
        _write(session.path, record)
        if problems:
            raise ChangedBreaks(
                breaks_message(
                    session.to_base.name,
                    d.name,
                    entry.how,
                    problems,
                    what=f"its commit {d.commit[:12]} was changed after it passed the gate, and fails it",
                ),
                _amend_hint(session, d.slug, bool(git.index.staged_paths(session.path))),
                d.name,
                problems,
            )


def _amend_hint(session: Gated, slug: str, staged: bool) -> str:
    """Fix a committed patch of the port tree: amend its commit, rebase the later ones, run again.
    ``staged``: the stopped patch's work is staged, kept aside meanwhile (``git stash``)."""
    tree = session.path
    status = port_command("status", session.to_base.name, tree, session.default_tree)
    fix = (
        f"`{git_c(tree, 'commit', '-a', f'--fixup=:/^{slug}:')}`, "
        f"`GIT_SEQUENCE_EDITOR=: {git_c(tree, 'rebase', '-i', '--autosquash', 'tkv-seam-base')}`"
    )
    if staged:
        fix = (
            f"`{git_c(tree, 'stash')}` (the stopped patch's work aside), fix the file(s), {fix}, "
            f"`{git_c(tree, 'stash', 'pop', '--index')}`"
        )
    else:
        fix = f"fix the file(s) in {tree}, {fix}"
    return f"{fix}, then run the same command again (it gates that commit again); `{status}` shows where the port stands"


def patches_by_themselves(tree: Path, state: TreeState) -> list[WentIn]:
    """The patches to re-read: those that went in without a human (exact, offset, 3-way, imports
    merged, replayed), and those the port changed by itself (its fixers on a resolution)."""
    record = read_record(tree)
    out = []
    for d in state.port.done:
        entry = record.get(d.name) or Entry(None, Gate.NOT_RUN)
        did = [x.line() for x in entry.did]
        if d.status not in (DoneStatus.EXACT, DoneStatus.THREE_WAY) and not did:
            continue
        if d.status == DoneStatus.SKIPPED:
            continue
        out.append(WentIn(d.name, entry.how or How(str(d.status)), entry.gate, entry.proven, did))
    return out


def by_themselves_lines(rows: list[WentIn]) -> list[str]:
    if not rows:
        return ["no patch went in by itself: a human resolved or skipped each"]
    out = [f"{len(rows)} patch(es) went in by themselves or were changed by the port; re-read them:"]
    if not any(row.did for row in rows):
        out[0] = f"{len(rows)} patch(es) went in by themselves; re-read them:"
    for row in rows:
        out.append(f"  {row.name}  ({row.how}; gate {row.gate}; {row.proven})")
        out += [f"      {line}" for line in row.did]
    return out
