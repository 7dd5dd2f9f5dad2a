"""A port's findings as text: the report, the draft verdict table, PORT.md, stops and status.

The one place port text is made; the CLI prints these lines, ``watch`` writes the tables.
Table cells never break a row: ``|`` is escaped (``\\|``, which Markdown shows as ``|``) and line
breaks become spaces.
"""

from __future__ import annotations

from pathlib import Path

from dataclasses import dataclass, field

from .. import hints
from ..answer import Answer
from ..bases.pins import Base
from ..tree.state import DoneStatus, PortProgress, TreeState
from ..findings.model import APPLIED, REPORTED, FileStatus, HunkPlace, HunkReport, PatchReport, PatchStatus
from ..queue.patch import PlacementKind


def cell(text: object) -> str:
    """``text`` as one Markdown table cell."""
    return " ".join(str(text).replace("|", "\\|").split())


def port_command(
    verb: str, to_name: str, tree: Path | None = None, default: Path | None = None, **variables: str
) -> str:
    """``make port VERB=<verb> TO=<to>`` for this port (``PORT_TREE=`` when not the default tree)."""
    return hints.port(verb, to_name, tree if tree is not None and tree != default else None, **variables)


def git_c(tree: Path, *args: str) -> str:
    """``git -C <tree> <args>`` as a hint (the tree quoted)."""
    return hints.shell("git", "-C", tree, *args)


# --------------------------------------------------------------------------- the report


def summary(reports: list[PatchReport]) -> dict:
    """The report's one count: patches by status, hunks by place (every rendering says these).

    Each patch is counted once, by its status (a blocked patch as ``blocked``; how many of
    those apply on their own is said beside it), each hunk once, by its ``HunkPlace``.
    """
    by_status = {str(s): sum(r.status == s for r in reports) for s in REPORTED}
    hunks = [h for r in reports for h in r.hunks]
    applied = sum(r.applied for r in reports)
    return {
        "patches": len(reports),
        "applied": applied,
        "all_apply": applied == len(reports),
        "by_status": by_status,
        "blocked_but_apply_on_their_own": sum(
            r.status == PatchStatus.BLOCKED and r.own in APPLIED for r in reports
        ),
        "hunks": len(hunks),
        "hunks_by_place": {str(p): sum(h.place == p for h in hunks) for p in HunkPlace},
    }


def summary_text(sm: dict) -> str:
    """``summary`` in words, every status and place once, in order: ``3 of 10 patches apply: 1 exact,
    2 3-way; 7 do not: …, 4 blocked (1 of them apply on their own), …; 140 hunks: 90 exact, …``."""

    def counts(statuses) -> str:
        return ", ".join(
            f"{sm['by_status'][s]} {s}"
            + (
                f" ({sm['blocked_but_apply_on_their_own']} of them apply on their own)"
                if s == PatchStatus.BLOCKED and sm["blocked_but_apply_on_their_own"]
                else ""
            )
            for s in statuses
        )

    places = ", ".join(f"{n} {place}" for place, n in sm["hunks_by_place"].items())
    return (
        f"{sm['applied']} of {sm['patches']} patches apply: {counts(APPLIED)}; "
        f"{sm['patches'] - sm['applied']} do not: {counts(s for s in REPORTED if s not in APPLIED)}; "
        f"{sm['hunks']} hunks: {places}"
    )


def summary_line(reports: list[PatchReport], from_name: str, to_name: str) -> str:
    return f"port {from_name} -> {to_name}: {summary_text(summary(reports))}"


def hunk_counts(r: PatchReport) -> str:
    """One patch's hunks by place, the places it has only (``3 exact, 1 fails``)."""
    return ", ".join(f"{n} {p}" for p in HunkPlace if (n := sum(h.place == p for h in r.hunks)))


def hunk_word(h: HunkReport) -> str:
    """A hunk as every rendering names it: its place (the summary's word), then how git placed it
    when that says more, then its note (``offset/fuzz: offset +12``, ``fails; file missing``)."""
    how = f": {h.status}" if h.status != str(h.place) else ""
    return f"{h.place}{how}" + (f"; {h.note}" if h.note else "")


def hunk_lines(h: HunkReport, indent: int = 23) -> list[str]:
    pad = " " * indent
    out = [f"{pad}hunk {h.hunk} {h.header} {h.section[:40]}: {hunk_word(h)}"]
    up = h.upstream
    if up and up.changed:
        diff = up.diff.splitlines()
        out.append(f"{pad}  upstream changed {up.new_file} lines {up.old_lines} (now {up.new_lines}):")
        out += [f"{pad}    {line}" for line in diff[:12]]
        if len(diff) > 12:
            out.append(f"{pad}    ... {len(diff) - 12} more lines (--json has all)")
    elif up:
        out.append(f"{pad}  upstream left lines {up.old_lines} as they were (now {up.new_lines})")
    return out


def report_lines(reports: list[PatchReport]) -> list[str]:
    """Per patch its status, then each file that is not exact with its non-exact hunks."""
    out = []
    for r in reports:
        extra = f"  blocked by {', '.join(r.blocked_by)}" if r.blocked_by else ""
        out.append(f"{r.status:18} {r.name}{extra}")
        if r.note:
            out.append(f"{'':21}{r.note}")
        if r.remove_when:
            out.append(f"{'':21}remove when: {r.remove_when}")
        out += [f"{'':21}evidence: {e}" for e in r.obsolete]
        for f in r.files:
            rows = [
                h
                for h in r.hunks
                if h.file in (f.path, f.moved_to) and (h.kind != PlacementKind.EXACT or h.note)
            ]
            if f.status == FileStatus.EXACT and not rows:
                continue
            out.append(f"{'':21}{f.path}: {f.status}" + (f" ({f.note})" if f.note else ""))
            for h in rows:
                out += hunk_lines(h)
    return out


# A hunk's draft verdict, by its place: the word the summary counts it by, then what to do.
HUNK_VERDICTS = {
    HunkPlace.EXACT: "exact: still needed",
    HunkPlace.OFFSET: "offset/fuzz: still needed",
    HunkPlace.MOVED: "moved: still needed, re-anchor",
    HunkPlace.UPSTREAM: "already upstream: likely obsolete",
    HunkPlace.FAILS: "fails: resolve or re-express",
}


def _reason(r: PatchReport) -> str:
    return r.reason + (f" (remove when: {r.remove_when})" if r.remove_when else "")


def verdict_table(reports: list[PatchReport], from_name: str, to_name: str) -> str:
    """The draft verdict table (per patch and per hunk: file / hunk, what it does, verdict, reason, evidence), as Markdown."""
    out = [
        f"### Per-hunk review against {to_name} (draft: `{hints.port('report', to_name, BASE=from_name)}`)",
        "",
        "| file / hunk | what it does | verdict | reason | evidence |",
        "|---|---|---|---|---|",
    ]
    for r in reports:
        out.append(
            f"| **{r.name[:4]} {r.slug}** | {cell(r.summary)} | {cell(r.verdict)} | {cell(_reason(r))} "
            f"| {cell('; '.join(r.obsolete) or r.status)} |"
        )
        for h in r.hunks:
            if h.place == HunkPlace.EXACT:
                continue
            verdict = HUNK_VERDICTS[h.place]
            evidence = h.status + (f"; {h.note}" if h.note else "")
            if h.upstream and h.upstream.changed:
                evidence += f"; upstream changed lines {h.upstream.old_lines} (now {h.upstream.new_lines})"
            out.append(
                f"| {cell(h.file)} hunk {h.hunk} `{cell(h.section)[:50]}` | | {verdict} | | {cell(evidence)} |"
            )
    return "\n".join(out) + "\n"


def report_markdown(from_base: Base, to_base: Base, reports: list[PatchReport]) -> str:
    """The report as Markdown (``report.md``, ``watch``'s ``build/drift/<version>.md``): the target,
    the summary, one row per patch (its status, its hunks by place) and the draft verdict table."""
    rows = []
    for r in reports:
        blocked = ", ".join(r.blocked_by) + (f" (on its own: {r.own})" if r.blocked_by else "")
        rows.append(f"| {cell(r.name)} | {r.status} | {hunk_counts(r)} | {cell(blocked)} |")
    return "\n".join(
        [
            f"# Port report: the {from_base.name} queue on vLLM {to_base.name}",
            "",
            f"Target: {to_base.name} (commit {to_base.commit_prefix}, {to_base.sdist.filename}, "
            f"sha256 {to_base.sdist.sha256[:16]}…). Queue: {from_base.name}, {len(reports)} patches.",
            "",
            summary_line(reports, from_base.name, to_base.name),
            "",
            "| patch | status | hunks | blocked by |",
            "|---|---|---|---|",
            *rows,
            "",
            "Draft verdicts from `port report`; edit them into the port's pull request.",
            "",
            verdict_table(reports, from_base.name, to_base.name),
        ]
    )


# --------------------------------------------------------------------------- the resumable port


def stop_message(to_name: str, r: PatchReport) -> str:
    lines = [f"port to {to_name} stopped at {r.name}: {r.status}"]
    if r.blocked_by:
        lines.append(f"  blocked by {', '.join(r.blocked_by)}" + (f" ({r.note})" if r.note else ""))
    lines += [f"  likely obsolete: {e}" for e in r.obsolete]
    for f in r.files:
        if f.status in (FileStatus.EXACT, FileStatus.THREE_WAY):
            continue
        lines.append(f"  {f.path}: {f.status}" + (f" ({f.note})" if f.note else ""))
        for h in r.hunks:
            if h.file in (f.path, f.moved_to) and h.kind != PlacementKind.EXACT:
                lines.append(f"    hunk {h.hunk} {h.header} {h.section[:40]}: {hunk_word(h)}")
    return "\n".join(lines)


def stop_hint(to_name: str, tree: Path, msg: Path, default: Path, obsolete: bool = False) -> str:
    """What to do at a stop: resolve and continue, or leave the patch out, as obsolete only when the
    report found it likely obsolete (else as dropped: a patch the report calls needed is the user's
    call to drop, and the verdict says so)."""
    verdict = "obsolete" if obsolete else "dropped"
    return (
        f"resolve in {tree} and `{hints.shell('git', '-C', tree, 'add', '<files>')}`, edit Verdict/Reason "
        f"in {msg}, then `{port_command('continue', to_name, tree, default)}`; or leave it out: "
        f"`{port_command('skip', to_name, tree, default, VERDICT=verdict, REASON=WHY)}`"
    )


WHY = "'<why>'"  # the placeholder of a reason the user gives


def port_md(from_name: str, to_name: str, progress: PortProgress) -> str:
    """PORT.md of a finished port: every patch's status, verdict and reason."""
    rows = [
        f"# Port {from_name} -> {to_name}",
        "",
        "| patch | status | verdict | reason |",
        "|---|---|---|---|",
    ]
    for d in progress.done:
        rows.append(f"| {cell(d.name)} | {d.status} | {cell(d.verdict)} | {cell(d.reason)} |")
    return "\n".join(rows) + "\n"


def status_lines(
    tree: Path, state: TreeState, unmerged: list[str] | None = None, next_step: str | None = None
) -> list[str]:
    """Done, stopped (with the files still unmerged), todo; then ``next:`` and the command."""
    p = state.port
    out = [f"port {p.from_base} -> {state.base} in {tree}"]
    for d in p.done:
        out.append(
            f"  {d.status:9} {d.name}"
            + (f"  ({d.verdict}: {d.reason})" if d.status == DoneStatus.SKIPPED else "")
        )
    if p.current:
        out.append(f"  STOPPED   {p.current}: {p.stopped.status if p.stopped else ''}")
        out += [f"    unmerged: {path}" for path in unmerged or []]
    out += [f"  todo      {Path(rel).name}" for rel in p.todo]
    if p.finished:
        out.append("  finished: the queue is written")
    if next_step:
        out.append(f"  next: {next_step}")
    return out


def status_json(
    tree: Path, state: TreeState, unmerged: list[str] | None = None, next_step: str | None = None
) -> dict:
    """``port status --json``: where the port stands (the state's progress, and its tree)."""
    p = state.port
    return {
        "unmerged": list(unmerged or []),
        "next_step": next_step,
        "from_base": p.from_base,
        "to_base": state.base,
        "tree": str(tree),
        "base_commit": state.base_commit,
        "old_commit": p.old_commit,
        "head": state.head,
        "series": p.series,
        "next": p.next,
        "current": p.current,
        "stopped": p.stopped.to_json() if p.stopped else None,
        "done": [
            {
                "name": d.name,
                "slug": d.slug,
                "status": str(d.status),
                "commit": d.commit,
                "verdict": d.verdict,
                "reason": d.reason,
                "note": d.note,
            }
            for d in p.done
        ],
        "todo": [Path(rel).name for rel in p.todo],
        "finished": p.finished,
    }


@dataclass
class PortStatus(Answer):
    """``port status``: where the port stands (``status_lines``, ``status_json``) and the next command."""

    tree: Path
    state: TreeState
    unmerged: list[str] = field(default_factory=list)
    next_step: str | None = None

    def lines(self) -> list[str]:
        return status_lines(self.tree, self.state, self.unmerged, self.next_step)

    def to_json(self) -> dict:
        return status_json(self.tree, self.state, self.unmerged, self.next_step)


@dataclass
class Ports(Answer):
    """``port status`` without ``--to``: every port in progress (``build/port-<to>``), each as its own
    ``port status`` says it, or that there is none and what to run instead (exit 0 either way)."""

    ports: list[PortStatus]
    unreadable: dict[str, str] = field(default_factory=dict)  # tree -> why its state could not be read
    none_next: str = ""
    where: str = ""  # where port trees are, as the user reads it

    def lines(self) -> list[str]:
        if not self.ports and not self.unreadable:
            return [f"no port in progress (no {self.where})", f"  next: {self.none_next}"]
        out = []
        for p in self.ports:
            out += p.lines()
        for tree, why in self.unreadable.items():
            out.append(f"{tree}: not a port tree this tool can read: {why}")
        return out

    def to_json(self) -> dict:
        return {
            "ports": [p.to_json() for p in self.ports],
            "unreadable": self.unreadable,
            **({"next_step": self.none_next} if not self.ports else {}),
        }


@dataclass
class NoPort(Answer):
    """``port status`` where no port tree is: no port in progress, which is an answer, not an
    error (exit 0, as ``git status`` or ``quilt applied`` say "none"); ``--json``: ``port: none``."""

    to_name: str
    tree: Path
    next_step: str
    shown: str = ""  # the tree as the user reads it (project-relative)
    carried: str = ""  # the base's queue (its series) when it is carried already

    def lines(self) -> list[str]:
        where = self.shown or self.tree
        done = f"; {self.to_name} is carried ({self.carried})" if self.carried else ""
        return [f"port to {self.to_name}: none in progress (no {where}){done}", f"  next: {self.next_step}"]

    def to_json(self) -> dict:
        return {
            "port": "none",
            "to_base": self.to_name,
            "tree": str(self.tree),
            "next_step": self.next_step,
            "carried": bool(self.carried),
        }
