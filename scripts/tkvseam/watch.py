"""Release watch: vLLM releases on the index newer than the newest carried base, and their drift.

``watch`` reads the project's Simple API page (PEP 691 JSON), groups its files by
PEP 440 version (``packaging``; 0.10.0 sorts after 0.9.0), and keeps the releases
newer than the newest carried base (or ``since``); pre-releases and yanked releases
only when asked. With ``report`` it pins each one (into ``build/drift/bases.toml``,
a scratch copy of the bases file, unless ``write``) and runs the forward-port report
from the newest carried queue onto it, writing ``build/drift/<version>.md`` (a draft
verdict table in the seed's format), ``build/drift/<version>.json`` and one summary
line per release into ``build/drift/summary.txt``.

``drift_report`` is the one place that knows how the port report is produced.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from .bases import Base, default_index_url, get_base, load_bases, simple_listing
from .errors import SeamError
from .pin import PROJECT, parse_release, pin
from .progress import QUIET, Progress

DRIFT_DIR = Path("build") / "drift"
# The summary's fixed columns, in order; other categories are appended when they occur.
CATEGORIES = ("exact", "offset/fuzz", "3-way", "conflict", "likely obsolete", "moved")


@dataclass
class Release:
    version: Version
    files: list[dict] = field(default_factory=list)

    @property
    def yanked(self) -> bool:
        """PEP 592: a release is yanked when every one of its files is."""
        return all(f.get("yanked") for f in self.files)

    @property
    def sdist(self) -> str | None:
        return next((f["filename"] for f in self.files if f["filename"].endswith(".tar.gz")), None)


def _file_version(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion):
        return None
    return version if name == PROJECT else None


def index_releases(index_url: str | None = None) -> list[Release]:
    """Every release of the project on the index, oldest first (PEP 440 order)."""
    _, listing = simple_listing(PROJECT, index_url or default_index_url())
    by_version: dict[Version, Release] = {}
    for entry in listing.get("files", []):
        version = _file_version(entry.get("filename", ""))
        if version is not None:
            by_version.setdefault(version, Release(version)).files.append(entry)
    return [by_version[v] for v in sorted(by_version)]


def newer_releases(
    releases: list[Release], since: Version, pre: bool = False, yanked: bool = False
) -> list[Release]:
    """The releases after ``since``, oldest first; pre-releases and yanked ones only when asked."""
    return [
        r
        for r in releases
        if r.version > since and (pre or not r.version.is_prerelease) and (yanked or not r.yanked)
    ]


def carried_bases(root: Path, bases_file: Path, top_level: str) -> list[str]:
    """The bases that have a queue, oldest first.

    The top-level ``series``/``patches/`` queue belongs to ``top_level``; another
    base counts as carried when its bases-file entry names a ``queue`` or
    ``patches/<base>/series`` exists (the one-queue-per-base layout).
    """
    raw = tomllib.loads(bases_file.read_text())
    names = {n for n, e in raw.items() if n == top_level or e.get("queue")}
    names |= {n for n in raw if (root / "patches" / n / "series").is_file()}
    return sorted(names, key=lambda n: Version(raw[n]["version"]))


# --------------------------------------------------------------------------- the report adapter


def _category(status: str, hunks: list[str]) -> str:
    """One summary column for a patch status; statuses this code does not know keep their own name."""
    s = status.lower()
    if s == "exact":
        return "exact" if all(h == "exact" for h in hunks) else "offset/fuzz"
    if s == "3-way":
        # every hunk placed (exact, offset or fuzz): git would take it without merging content
        placed = all(h == "exact" or h.startswith(("offset", "fuzz")) for h in hunks)
        return "offset/fuzz" if hunks and placed else "3-way"
    if s.startswith(("offset", "fuzz")):
        return "offset/fuzz"
    if s in ("conflict", "fails"):
        return "conflict"
    if "obsolete" in s:
        return "likely obsolete"
    if s.startswith("moved"):
        return "moved"
    if s.startswith("blocked"):
        return "blocked"
    return s or "unknown"


def summarize(patches: list[dict]) -> dict[str, int]:
    """Count patches per category: the fixed columns always, unknown ones when they occur."""
    counts = Counter(_category(p["status"], [h["status"] for h in p.get("hunks", [])]) for p in patches)
    return {c: counts.get(c, 0) for c in CATEGORIES} | {
        c: n for c, n in sorted(counts.items()) if c not in CATEGORIES
    }


def summary_line(version: str, counts: dict[str, int], where: str = "") -> str:
    total = sum(counts.values())
    cols = ", ".join(f"{n} {c}" for c, n in counts.items())
    return f"{version}: {total} patches: {cols}" + (f"  ({where})" if where else "")


_VERDICT = {
    "exact": "applies exactly",
    "offset/fuzz": "applies moved (refresh rebases it)",
    "3-way": "applies by 3-way merge (review the merge)",
    "conflict": "needs a human",
    "likely obsolete": "likely obsolete",
    "moved": "file moved",
    "blocked": "blocked",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(data: dict) -> str:
    """A draft verdict table in the seed's format (file / hunk, what it does, verdict, reason)."""
    to, frm = data["to"], data["from"]
    lines = [
        f"# Drift: the {frm['name']} queue on vLLM {to['name']}",
        "",
        f"Target: {to['name']} (commit {to['commit_prefix']}, {to['sdist']['filename']}, "
        f"sha256 {to['sdist']['sha256'][:16]}…). Queue: {frm['name']}, {len(data['patches'])} patches.",
        "",
        summary_line(to["version"], data["summary"]),
        "",
        "Draft verdicts from the port report; edit them into the port's pull request.",
        "",
        "| patch / hunk | what it does | verdict | reason |",
        "|---|---|---|---|",
    ]
    for p in data["patches"]:
        category = p["category"]
        verdict = _VERDICT.get(category, p["status"])
        reason = p.get("note") or ""
        if p.get("conflicts"):
            reason = "conflict in " + ", ".join(p["conflicts"]) + (f"; {reason}" if reason else "")
        lines.append(f"| {_cell(p['name'])} | {_cell(p.get('summary', ''))} | {verdict} | {_cell(reason)} |")
        for h in p.get("hunks", []):
            if h["status"] != "exact":
                lines.append(f"| {_cell(h['file'])} `{h['header']}` |  | {_cell(h['status'])} |  |")
    return "\n".join(lines) + "\n"


def drift_report(
    root: Path, from_base: Base, to_base: Base, cache: Path, progress: Progress = QUIET
) -> tuple[str, dict, dict[str, int]]:
    """The port report of the queue of ``from_base`` onto ``to_base``: (markdown, json, summary counts).

    Adapter over today's ``port.port``, which reads only the top-level queue (so
    ``from_base`` must be its base; refused otherwise), run in a scratch port tree
    under build/ that is removed afterwards. Re-wire this one function to the
    structured ``port --to <b> --report`` when it lands; callers only need the
    three return values.
    """
    from .port import port
    from .series import read_series

    if (root / "patches" / from_base.name / "series").is_file():
        raise SeamError(
            f"{from_base.name} has a queue of its own (patches/{from_base.name}/) and today's port "
            "reads only the top-level queue: the drift report would be wrong",
            hint=f"tkv-seam --bases build/drift/bases.toml port --to {to_base.name}   (the top-level queue)",
        )
    summaries = {p.name: p.header.summary for p in read_series(root).load()}
    scratch = root / "build" / f".drift-port-{to_base.name}"
    try:
        reports = port(root, from_base, to_base, cache, scratch, stop=False, progress=progress)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    patches = []
    for r in reports:
        row = asdict(r)
        row["summary"] = summaries.get(r.name, "")
        row["category"] = _category(r.status, [h.status for h in r.hunks])
        patches.append(row)
    counts = summarize(patches)
    data = {
        "from": {"name": from_base.name, "version": from_base.version},
        "to": {
            "name": to_base.name,
            "version": to_base.version,
            "commit_prefix": to_base.commit_prefix,
            "sdist": asdict(to_base.sdist),
        },
        "summary": counts,
        "patches": patches,
        "source": "tkvseam.port.port (one-shot port onto the new base)",
    }
    return render_markdown(data), data, counts


# --------------------------------------------------------------------------- watch


@dataclass
class WatchResult:
    since: str
    since_version: str
    from_base: str
    releases: list[dict]
    errors: list[SeamError] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "since": self.since,
            "since_version": self.since_version,
            "from_base": self.from_base,
            "releases": self.releases,
            "errors": [str(e) for e in self.errors],
        }


def _since(bases: dict[str, Base], since: str) -> Version:
    """A known base's version, or a bare version (``0.30.0`` / ``v0.30.0``)."""
    if since in bases:
        return Version(bases[since].version)
    try:
        return parse_release(since)
    except SeamError as e:
        raise SeamError(
            f"--since {since!r} is neither a base in the bases file ({', '.join(bases)}) nor a PEP 440 version",
            hint=f"tkv-seam watch --since {next(iter(bases), '0.31.0')}",
            exit_code=e.exit_code,
        ) from e


def watch(
    root: Path,
    bases_file: Path,
    cache: Path,
    top_level: str,
    since: str | None = None,
    pre: bool = False,
    yanked: bool = False,
    report: bool = False,
    write: bool = False,
    index_url: str | None = None,
    progress: Progress = QUIET,
) -> WatchResult:
    """Releases newer than the newest carried base (or ``since``); with ``report`` their drift."""
    bases = load_bases(bases_file)
    carried = carried_bases(root, bases_file, top_level)
    if not carried:
        raise SeamError(
            f"no carried base: {top_level} (the top-level queue's base) is not in {bases_file}",
            hint=f"tkv-seam watch --base {next(iter(bases), '<a base in ' + bases_file.name + '>')}",
        )
    from_base = get_base(bases, carried[-1])
    since = since or from_base.name
    since_version = _since(bases, since)
    found = newer_releases(index_releases(index_url), since_version, pre, yanked)
    result = WatchResult(since, str(since_version), from_base.name, [])
    out = root / DRIFT_DIR
    if report:
        shutil.rmtree(out, ignore_errors=True)  # build/drift/ holds this run's reports only
        out.mkdir(parents=True)
        target = bases_file
        if not write:
            target = out / "bases.toml"
            shutil.copyfile(bases_file, target)
    lines = []
    for rel in found:
        version = str(rel.version)
        row = {
            "version": version,
            "sdist": rel.sdist,
            "yanked": rel.yanked,
            "prerelease": rel.version.is_prerelease,
            "pinned": f"v{version}" in bases,
        }
        result.releases.append(row)
        if not report:
            continue
        try:
            progress.step(f"pin {version} into {target}")
            pinned = pin(target, version, cache, index_url, allow_yanked=yanked, progress=progress)
            to_base = get_base(load_bases(target), pinned.name)
            markdown, data, counts = drift_report(root, from_base, to_base, cache, progress)
        except SeamError as e:
            result.errors.append(e)
            row["error"] = str(e)
            row["line"] = f"{version}: no report: {e.message}"
            lines.append(row["line"])
            continue
        md, js = out / f"{version}.md", out / f"{version}.json"
        md.write_text(markdown)
        js.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        row |= {"pin": pinned.status, "summary": counts, "markdown": str(md), "json": str(js)}
        row["line"] = summary_line(version, counts, str(md.relative_to(root)))
        lines.append(row["line"])
    if report:
        (out / "summary.txt").write_text("".join(f"{line}\n" for line in lines))
        (out / "watch.json").write_text(json.dumps(result.to_json(), indent=1, sort_keys=True) + "\n")
    return result
