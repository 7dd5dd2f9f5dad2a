"""Release watch: vLLM releases on the index newer than the newest carried base, and their drift.

``watch`` reads the project's Simple API page (PEP 691 JSON), groups its files by
PEP 440 version (``packaging``; 0.10.0 sorts after 0.9.0), and keeps the releases
newer than the newest carried base (or ``since``); pre-releases and yanked releases
only when asked. With ``report`` it pins each one (into ``build/drift/bases.toml``,
a scratch copy of the bases file, unless ``write``) and runs the forward-port report
onto it from the newest carried queue older than it (``carried.carried_before``: never
itself, never a newer one), writing ``build/drift/<version>.md`` (a draft
verdict table: file / hunk, what it does, verdict, reason), ``build/drift/<version>.json`` and one summary
line per release into ``build/drift/summary.txt``.

``drift_report`` is the one place that knows how the port report is produced.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from .. import hints, layout
from ..answer import Answer
from ..bases.index import default_index_url
from ..bases.pins import Base, get_base, load_bases
from ..bases.carried import carried_bases, source_of
from ..errors import EXIT_NEWER, EXIT_USAGE, NetworkError, SeamError
from ..bases.index import IndexFile, Listing, listing
from ..lock import locked
from ..outputs import replace_output_dir, seal_output_dir
from .pin import PROJECT, PinStatus, parse_release, pin
from ..port import render
from ..port.report import report as port_report
from ..progress import QUIET, Progress

DRIFT_KIND = "a drift report directory"


@dataclass
class Release:
    version: Version
    files: list[IndexFile] = field(default_factory=list)

    @property
    def yanked(self) -> bool:
        """PEP 592: a release is yanked when every one of its files is."""
        return all(f.yanked for f in self.files)

    @property
    def sdist(self) -> str | None:
        return next((f.filename for f in self.files if f.filename.endswith(".tar.gz")), None)


def _file_version(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion):
        return None
    return version if name == PROJECT else None


def index_releases(index_url: str | None = None) -> tuple[list[Release], Listing]:
    """Every release of the project on the index, oldest first (PEP 440 order); and the page."""
    by_version: dict[Version, Release] = {}
    page = listing(PROJECT, index_url or default_index_url())
    for entry in page.files:
        version = _file_version(entry.filename)
        if version is not None:
            by_version.setdefault(version, Release(version)).files.append(entry)
    return [by_version[v] for v in sorted(by_version)], page


def newer_releases(
    releases: list[Release], since: Version, pre: bool = False, yanked: bool = False
) -> list[Release]:
    """The releases after ``since``, oldest first; pre-releases and yanked ones only when asked."""
    return [
        r
        for r in releases
        if r.version > since and (pre or not r.version.is_prerelease) and (yanked or not r.yanked)
    ]


# --------------------------------------------------------------------------- the report adapter


def summary_line(version: str, summary: dict, where: str = "") -> str:
    """One release's line (``summary.txt``): the port report's own summary (``render.summary``)."""
    return f"{version}: {render.summary_text(summary)}" + (f"  ({where})" if where else "")


def drift_report(
    root: Path, from_base: Base, to_base: Base, cache: Path, progress: Progress = QUIET
) -> tuple[str, dict, dict]:
    """The port report of ``from_base``'s queue onto ``to_base``: (markdown, json, its summary).

    ``port.report`` walks the whole queue in a scratch tree and keeps nothing; the Markdown
    and the summary are the port report's own (``render``), as ``port report`` writes them.
    """
    reports = port_report(root, from_base, to_base, cache, progress)
    summary = render.summary(reports)
    data = {
        "from": {"name": from_base.name, "version": from_base.version},
        "to": {
            "name": to_base.name,
            "version": to_base.version,
            "commit_prefix": to_base.commit_prefix,
            "sdist": asdict(to_base.sdist),
        },
        "summary": summary,
        "patches": [r.to_json() for r in reports],
        "source": f"tkv-seam port report --base {from_base.name} --to {to_base.name}",
    }
    return render.report_markdown(from_base, to_base, reports), data, summary


# --------------------------------------------------------------------------- watch


@dataclass
class WatchedRelease:
    """One release newer than the carried base; with a report, what became of it."""

    version: str
    sdist: str | None
    yanked: bool
    prerelease: bool
    pinned: bool  # in the bases file before the run
    # with --report:
    from_base: str | None = None  # the queue the report ports
    error: SeamError | None = None  # why it has no report
    pin: PinStatus | None = None
    summary: dict | None = None  # the port report's summary (render.summary)
    markdown: Path | None = None
    report_json: Path | None = None
    shown: str = ""  # the report's Markdown as the summary line names it (project-relative)

    def line(self) -> str:
        if self.error is not None:
            return f"{self.version}: no report: {self.error.message}"
        if self.summary is not None:
            return summary_line(self.version, self.summary, self.shown)
        flags = ", ".join(f for f, on in (("pre-release", self.prerelease), ("yanked", self.yanked)) if on)
        return f"{self.version}: {'pinned' if self.pinned else 'not pinned'}" + (
            f" ({flags})" if flags else ""
        )

    def to_json(self) -> dict:
        out: dict = {
            "version": self.version,
            "sdist": self.sdist,
            "yanked": self.yanked,
            "prerelease": self.prerelease,
            "pinned": self.pinned,
        }
        if self.from_base is not None:
            out["from_base"] = self.from_base
        if self.error is not None:
            out["error"] = str(self.error)
        if self.summary is not None:
            out |= {
                "pin": str(self.pin),
                "summary": self.summary,
                "markdown": str(self.markdown),
                "json": str(self.report_json),
            }
        if self.error is not None or self.summary is not None:
            out["line"] = self.line()
        return out


@dataclass
class WatchResult(Answer):
    since: str
    since_version: str
    from_base: str
    releases: list[WatchedRelease]
    errors: list[SeamError] = field(default_factory=list)

    def lines(self) -> list[str]:
        versions = ", ".join(r.version for r in self.releases)
        last = (
            f"watch: {len(self.releases)} release(s) newer than {self.since} ({self.since_version}): {versions}"
            if self.releases
            else f"watch: no release newer than {self.since} ({self.since_version})"
        )
        return [r.line() for r in self.releases] + [last]

    def notes(self) -> list[str]:
        return [f"Error: {self.errors[0]}"] if self.errors else []

    def to_json(self) -> dict:
        return {
            "since": self.since,
            "since_version": self.since_version,
            "from_base": self.from_base,
            "releases": [r.to_json() for r in self.releases],
            "errors": [str(e) for e in self.errors],
        }

    def success(self) -> bool:
        """A newer release (exit 11) is not a failure: ok unless a report could not be made."""
        return not self.errors

    def exit_code(self) -> int:
        """The first report's error, else 11 when a newer release exists (not a failure), else 0."""
        if self.errors:
            return self.errors[0].exit_code
        return EXIT_NEWER if self.releases else 0


def _since(bases: dict[str, Base], since: str) -> Version:
    """A known base's version, or a bare version (``0.30.0`` / ``v0.30.0``)."""
    if since in bases:
        return Version(bases[since].version)
    try:
        return parse_release(since)
    except SeamError as e:
        raise SeamError(
            f"--since {since!r} is neither a base in the bases file ({', '.join(bases)}) nor a PEP 440 version",
            hint=hints.make("watch", SINCE=next(iter(bases), "0.31.0")),
            exit_code=e.exit_code,
        ) from e


def _source(bases: dict[str, Base], root: Path, version: str) -> Base:
    """The queue release ``version`` is ported from: the newest carried base older than it (never
    itself, never a newer one: a port goes forward)."""
    return source_of(
        bases,
        root,
        version,
        f"v{version}",
        hint=f"make watch REPORT=1 SINCE={carried_bases(bases, root)[0]}",
        exit_code=EXIT_USAGE,
    )


def watch(
    root: Path,
    bases_file: Path,
    cache: Path,
    since: str | None = None,
    pre: bool = False,
    yanked: bool = False,
    report: bool = False,
    write: bool = False,
    index_url: str | None = None,
    progress: Progress = QUIET,
) -> WatchResult:
    """Releases newer than the newest carried base (or ``since``); with ``report`` their drift."""
    bases = load_bases(bases_file, root)
    carried = carried_bases(bases, root)
    if not carried:
        raise SeamError(
            f"no carried base: no base of {bases_file} has its queue yet",
            hint=f"give a base of bases.toml its queue (`{hints.port('start', '<base>')}`), then watch again",
        )
    from_base = get_base(bases, carried[-1])
    since = since or from_base.name
    since_version = _since(bases, since)
    releases, page = index_releases(index_url)
    found = newer_releases(releases, since_version, pre, yanked)
    if not found and page.skipped:  # what it could not read may be the release: not "nothing new"
        raise NetworkError(
            f"{page.url}: no release newer than {since} that tkv-seam can read, and {len(page.skipped)} "
            f"entr{'y' if len(page.skipped) == 1 else 'ies'} it cannot ({'; '.join(page.skipped[:3])}): "
            "the page cannot say that nothing is new",
            hint="check TKV_SEAM_INDEX_URL: it must be a PEP 691 Simple API root",
        )
    result = WatchResult(since, str(since_version), from_base.name, [])
    for rel in found:
        result.releases.append(
            WatchedRelease(
                str(rel.version), rel.sdist, rel.yanked, rel.version.is_prerelease, f"v{rel.version}" in bases
            )
        )
    if report:
        out = layout.drift(root)
        with locked(layout.lock_of(out), str(out), progress):  # one report run at a time
            _report(root, bases_file, cache, from_base, result, out, yanked, write, index_url, progress)
    return result


def _report(
    root: Path,
    bases_file: Path,
    cache: Path,
    from_base: Base,
    result: WatchResult,
    out: Path,
    yanked: bool,
    write: bool,
    index_url: str | None,
    progress: Progress,
) -> None:
    """Pin each release of ``result`` and write its drift report into ``out`` (build/drift/)."""
    # build/drift/ holds one run's reports: a previous run's is replaced, anything else refused
    replace_output_dir(out, DRIFT_KIND, rerun="make watch REPORT=1")
    target = bases_file
    if not write:
        target = out / "bases.toml"
        shutil.copyfile(bases_file, target)
    for row in result.releases:
        version = row.version
        try:
            # a release no carried queue is older than gets no report: refused before it is pinned
            # (with --write, into bases.toml itself) or downloaded, as carry refuses it
            _source(load_bases(target, root), root, version)
            progress.step(f"pin {version} into {target}")
            pinned = pin(target, version, cache, index_url, yanked, progress, root)
            target_bases = load_bases(target, root)
            to_base = get_base(target_bases, pinned.name)
            source = _source(target_bases, root, to_base.version)
            row.from_base = source.name
            markdown, data, counts = drift_report(root, source, to_base, cache, progress)
        except SeamError as e:
            result.errors.append(e)
            row.error = e
            continue
        md, js = out / f"{version}.md", out / f"{version}.json"
        md.write_text(markdown)
        js.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        row.pin, row.summary, row.markdown, row.report_json = pinned.status, counts, md, js
        row.shown = str(md.relative_to(root))
    (out / "summary.txt").write_text("".join(f"{row.line()}\n" for row in result.releases))
    (out / "watch.json").write_text(json.dumps(result.to_json(), indent=1, sort_keys=True) + "\n")
    seal_output_dir(out)
