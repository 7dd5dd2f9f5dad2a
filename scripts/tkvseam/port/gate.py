"""The gate at every patch of a port: what goes into the new base compiles and passes its style gate.

After a patch goes into the port tree (by itself: exact, offset or 3-way; or a resolution the
user continues with), and before it is committed, ``check_patch`` runs on what is staged (the
port tree at that prefix): every changed ``.py`` byte-compiles, and the new base's own style
gate (its ruff pin in ``bases.toml``, the tree's ``pyproject.toml``; ``stylecheck``, as
``bisect`` runs it per prefix) passes on the ``.py`` files the patch touches. A failure stops
the port there (``PatchBreaks``, exit 12, stop kind ``breaks``): the patch stays applied and
staged, not committed, and each problem is named ``file:line rule message``. ``continue``
runs the gate again on what the user staged; ``skip`` leaves the patch out as at any stop.

How each patch went in is recorded in the port tree (``.git/tkv-seam-port-gate.json``):
``patches_by_themselves`` lists, at the end, those no human looked at (to be re-read).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

from .. import git, hints
from ..bases.pins import Base
from ..edit.stylecheck import file_problems, gate_ruff
from ..errors import PortStopped, SeamError
from ..fsutil import atomic_write
from ..progress import Progress
from ..queue.patch import Patch, PlacementKind
from ..tree.seamtree import SeamTree
from ..tree.state import DoneStatus, TreeState
from .journal import PORT_MSG
from .model import PatchReport, PatchStatus
from .render import WHY, port_command

GATE_FILE = "tkv-seam-port-gate.json"  # in the port tree's .git: how each patch went in, what was checked
BREAKS = str(PatchStatus.BREAKS)  # the stop kind of a patch that went in but fails the gate
_WARNED: set[str] = set()  # port trees whose missing ruff pin was said (once a run)


class PatchBreaks(PortStopped):
    """The port stopped at a patch that went in but breaks the new base (exit 12, kind ``breaks``)."""

    def __init__(self, message: str, hint: str, patch: str, problems: list[str]):
        super().__init__(message, hint=hint)
        self.patch = patch
        self.problems = problems


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


def how_applied(r: PatchReport | None) -> str:
    """How a patch went in: exact, offset (a hunk moved or needed fuzz), 3-way; resolved (a human)."""
    if r is None:
        return str(DoneStatus.RESOLVED)
    if r.own == PatchStatus.EXACT and any(h.kind != PlacementKind.EXACT for h in r.hunks):
        return "offset"
    return str(r.own)


def _py_paths(tree: Path, patch: Patch) -> list[str]:
    """The .py files the patch leaves, and any other .py file staged (a resolution may touch more)."""
    paths = {fc.new for fc in patch.files if fc.new} | set(git.staged_paths(tree))
    return sorted(p for p in paths if p.endswith(".py"))


def _ruff_line(line: str) -> str:
    """``ruff check: f.py:3:5: F821 msg`` / ``ruff format: f.py:3: would reformat: x`` as ``f.py:3 RULE msg``."""
    kind, _, rest = line.partition(": ")
    parts = rest.split(":", 3)
    if kind == "ruff check" and len(parts) == 4 and parts[1].isdigit():
        return f"{parts[0]}:{parts[1]} {parts[3].strip()}"
    if kind == "ruff format" and len(parts) >= 3 and parts[1].isdigit():
        return f"{parts[0]}:{parts[1]} format {':'.join(parts[2:]).strip()}"
    return rest or line


def staged_problems(session: Gated, patch: Patch) -> list[str]:
    """The gate on what is staged in the port tree: ``file:line rule message`` per problem."""
    tree = session.path
    paths = _py_paths(tree, patch)
    problems, ruff = [], None
    try:
        ruff = gate_ruff(session.to_base, session.cache) if paths else None
    except SeamError as e:
        if str(tree) not in _WARNED:
            _WARNED.add(str(tree))
            session.progress.warn(f"gate: {e.message}: only byte-compiling each patch (next: {e.hint})")
    for path in paths:
        data = git.show(tree, "", path)  # ":path": the index
        if data is None:
            continue  # deleted by the patch
        try:
            compile(data, path, "exec")
        except SyntaxError as e:
            problems.append(f"{path}:{e.lineno} syntax {e.msg}")
            continue
        if ruff:
            problems += [_ruff_line(line) for line in file_problems(ruff, tree, path, data)]
    return problems


def check_patch(
    session: Gated, state: TreeState, patch: Patch, r: PatchReport | None, message: str | None = None
) -> None:
    """Gate ``patch`` as staged in the port tree, and prove it when the session proves
    (``session.prove``, a ``prove.Prover``); record how it went in, or stop there (PatchBreaks).

    ``r``: its report when it went in by itself (None: a resolution being continued);
    ``message``: the commit message the user gave (kept for the next ``continue``).
    """
    how = how_applied(r)
    n = state.port.next + 1
    session.progress.step(f"gate [{n}/{len(state.port.series)}] {patch.name} ({how}): compile + style")
    problems = staged_problems(session, patch)
    proven: bool | str = False
    prover = getattr(session, "prove", None)
    if not problems and prover is not None:
        from .prove import prove_patch

        failing = prove_patch(session, state, patch, prover, message)
        if failing:
            problems = [f"test {f}" for f in failing]
        elif failing is not None:
            proven = True
        elif not (patch.header.tests or patch.header.guards or message):
            proven = "no tests"
    if not problems:
        _record(session, patch.name, {"how": how, "gate": "ok", "proven": proven})
        return
    p = state.port
    p.current = patch.name
    p.stopped = PatchReport(
        patch.name,
        patch.header.slug,
        patch.header.summary,
        status=PatchStatus.BREAKS,
        own=r.own if r is not None else p.stopped.own if p.stopped is not None else PatchStatus.EXACT,
        note=f"went in {how}; fails on {session.to_base.name}",
        problems=problems,
    )
    msg = session.seam.git_dir / PORT_MSG
    if message is not None or not msg.exists():
        atomic_write(msg, message if message is not None else patch.header.message)
    session.save(state)
    _record(session, patch.name, {"how": how, "gate": BREAKS, "proven": False})
    raise PatchBreaks(
        breaks_message(session.to_base.name, patch.name, how, problems),
        breaks_hint(session, msg),
        patch.name,
        problems,
    )


def breaks_message(to_name: str, name: str, how: str, problems: list[str]) -> str:
    tests = all(p.startswith("test ") for p in problems)
    if how == DoneStatus.RESOLVED:
        what = "the staged resolution " + (
            "passes the gate, but its own tests fail" if tests else "fails the gate"
        )
    else:
        what = f"it went in {how}, but " + ("its own tests fail" if tests else "fails the gate")
    return "\n".join(
        [
            f"port to {to_name} stopped at {name}: {BREAKS} ({what} on {to_name}: {len(problems)} problem(s))",
            *(f"  {p}" for p in problems),
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


def read_record(tree: Path) -> dict[str, dict]:
    """The gate record; what is not an object of objects (edited by hand, cut short) is none:
    a patch without an entry says ``gate not run``."""
    try:
        record = json.loads(_path(tree).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    return {k: v for k, v in record.items() if isinstance(v, dict)}


def _record(session: Gated, name: str, entry: dict) -> None:
    record = read_record(session.path)
    record[name] = entry
    atomic_write(_path(session.path), json.dumps(record, indent=1, sort_keys=True) + "\n")


def mark_proven(tree: Path, name: str, proven: bool | str) -> None:
    record = read_record(tree)
    record.setdefault(name, {"how": "", "gate": "ok"})["proven"] = proven
    atomic_write(_path(tree), json.dumps(record, indent=1, sort_keys=True) + "\n")


def patches_by_themselves(tree: Path, state: TreeState) -> list[dict]:
    """The patches that went in without a human (exact, offset, 3-way): the ones to re-read.

    Each: name, how, gate ("ok", or "not run" for a port a tkv-seam without the gate made), proven.
    """
    record = read_record(tree)
    out = []
    for d in state.port.done:
        if d.status not in (DoneStatus.EXACT, DoneStatus.THREE_WAY):
            continue
        entry = record.get(d.name, {})
        out.append(
            {
                "name": d.name,
                "how": entry.get("how") or str(d.status),
                "gate": entry.get("gate", "not run"),
                "proven": entry.get("proven", False),
            }
        )
    return out


def by_themselves_lines(rows: list[dict]) -> list[str]:
    if not rows:
        return ["no patch went in by itself: a human resolved or skipped each"]
    out = [f"{len(rows)} patch(es) went in by themselves; re-read them:"]
    for row in rows:
        proven = {True: "proven", False: "not proven"}.get(row["proven"], str(row["proven"]))
        out.append(f"  {row['name']}  ({row['how']}; gate {row['gate']}; {proven})")
    return out
