"""The ``["<base>".seam]`` table of a newly pinned base, derived by code.

- ``ruff``: the ``rev`` of ruff-pre-commit in the new sdist's own ``.pre-commit-config.yaml``
  (upstream's style gate);
- ``plugin``: the turbo-attn pin of the base the new one is carried from (the newest carried
  base older than it), unless a requirement is given; a given one is hash-pinned from the
  package index (PEP 691: the sha256 of that release's wheels);
- ``upstream_tests``: the source base's upstream test files that exist in the new sdist, plus
  the new path of each one upstream moved (``git diff -M`` between the two pristine repos);
  every file is listed as kept, moved or dropped.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ..bases import file as basesfile
from .. import git, hints, layout
from ..answer import Answer, plain
from ..bases.pins import Base, CpuVenv, Plugin, SeamPins, cpu_rules, load_bases
from ..bases.repo import BaseRepo, base_repo
from ..bases.index import default_index_url, listing
from ..bases.carried import carried_before, source_of
from ..errors import RefusedError, SeamError, UsageError
from ..progress import QUIET, Progress

PRE_COMMIT = ".pre-commit-config.yaml"
RUFF_HOOKS = "astral-sh/ruff-pre-commit"


class TestFileStatus(StrEnum):
    KEPT = "kept"  # at the same path in the new sdist
    MOVED = "moved"  # renamed upstream (``new_path``)
    DROPPED = "dropped"  # not in the new sdist, no rename found


class TableStatus(StrEnum):
    DERIVED = "derived"  # made, not written yet
    WRITTEN = "written"
    UNCHANGED = "unchanged"  # the bases file has these values already


@dataclass
class TestFile:
    """One upstream test file of the source base, and what became of it on the new base."""

    path: str
    status: TestFileStatus
    new_path: str | None = None

    def line(self) -> str:
        if self.status == TestFileStatus.MOVED:
            return f"moved    {self.path} -> {self.new_path}"
        if self.status == TestFileStatus.DROPPED:
            return f"dropped  {self.path} (not in the new sdist, no rename found)"
        return f"kept     {self.path}"


@dataclass
class SeamTable(Answer):
    base: str
    source: str  # the base whose table it starts from
    ruff: str
    ruff_from: str  # where the ruff version was read
    plugin: Plugin
    plugin_from: str
    tests: list[TestFile] = field(default_factory=list)
    cpu: CpuVenv = field(default_factory=CpuVenv)  # the CPU test venv's rules
    cpu_from: str = ""  # the base whose rules they are
    status: TableStatus = TableStatus.DERIVED
    bases_file: str = ""  # where ``write`` wrote it (its name)
    kept: str | None = None  # where ``write --force`` kept the bases file it replaced

    @property
    def upstream_tests(self) -> tuple[str, ...]:
        return tuple(t.new_path or t.path for t in self.tests if t.status != TestFileStatus.DROPPED)

    def pins(self) -> SeamPins:
        return SeamPins(self.ruff, self.plugin, self.upstream_tests, self.cpu)

    def to_json(self) -> dict:
        out = plain(self)
        out.pop("bases_file")
        out["upstream_tests"] = list(self.upstream_tests)
        return out

    def table_lines(self) -> list[str]:
        plugin = self.plugin.requirement + (
            f" ({len(self.plugin.hashes)} hash(es))" if self.plugin.hashes else ""
        )
        cpu = ", ".join(self.cpu.excluded) or "nothing"
        triton = f"; Triton: {self.cpu.triton}" if self.cpu.triton else ""
        return [
            f"ruff     {self.ruff} ({self.ruff_from})",
            f"plugin   {plugin} ({self.plugin_from})",
            *(t.line() for t in self.tests),
            *(
                [
                    f"cpu      torch {self.cpu.torch or 'as asked'}; left out: {cpu}{triton} ({self.cpu_from}'s)"
                ]
                if self.cpu.given
                else []
            ),
        ]

    def lines(self) -> list[str]:
        where = f" (the old file is kept in {self.kept})" if self.kept else ""
        return [f"  {line}" for line in self.table_lines()] + [
            f"{self.base}: .seam table {self.status} in {self.bases_file}, from {self.source}'s{where}"
        ]


# --------------------------------------------------------------------------- ruff


def ruff_from_pre_commit(text: str, where: str, base: str = "<base>") -> str:
    """The ruff version of the ruff-pre-commit repo's ``rev`` in a pre-commit config.

    ``rev: v0.14.0`` (quoted or not) gives ``0.14.0``; a commit id is accepted when its line
    names the version in a comment: ``rev: <sha>  # v0.14.0``, or ``# frozen: v0.17.2`` as
    ``pre-commit autoupdate --freeze`` writes it (vLLM 0.34.0's config).
    """
    give = hints.tool("seam-table", base, "--ruff", "<version>")
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)-\s+repo:\s*['\"]?([^'\"#\s]+)", line)
        if not m or not m.group(2).removesuffix(".git").rstrip("/").endswith(RUFF_HOOKS):
            continue
        indent = len(m.group(1))
        for follow in lines[i + 1 :]:
            if re.match(rf"^\s{{0,{indent}}}-\s", follow) or (follow.strip() and _indent(follow) <= indent):
                break  # the next repo entry (or the end of the list): no rev in this one
            r = re.match(r"^\s*(?:-\s+)?rev:\s*['\"]?([^'\"#\s]+)['\"]?\s*(?:#\s*(.*))?$", follow)
            if r:
                return _ruff_version(r.group(1), r.group(2), where, follow.strip(), give)
        raise SeamError(f"{where}: the {RUFF_HOOKS} entry has no rev", hint=f"read the file, then {give}")
    raise SeamError(
        f"{where}: no {RUFF_HOOKS} repo: upstream's style gate is not ruff-pre-commit any more",
        hint=f"read the file, then give the version: {give}",
    )


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


_DOTTED = re.compile(r"v?\d+(\.\d+)+([.+-]?[A-Za-z0-9.]+)?")


def _ruff_version(rev: str, comment: str | None, where: str, line: str, give: str) -> str:
    """The version ``rev`` is, else the first dotted version a word of the line's comment is
    (``frozen: v0.17.2``); a bare number is never taken for one (a commit id may be digits)."""
    for candidate in (rev, *(comment or "").replace(",", " ").split()):
        candidate = candidate.strip("'\"()[]:;")
        if not _DOTTED.fullmatch(candidate):
            continue
        try:
            return str(Version(candidate.removeprefix("v")))
        except InvalidVersion:
            continue
    raise SeamError(
        f"{where}: ruff-pre-commit `{line}`: {rev!r} is not a version, and no comment on its line names "
        "one ('# v0.17.2', '# frozen: v0.17.2')",
        hint=f"give the ruff version that rev is: {give}",
    )


# --------------------------------------------------------------------------- plugin


def exact_pin(requirement: str, base: str = "<base>") -> Requirement:
    """``name==version`` (one exact version), or a usage error naming the command that takes one."""
    hint = hints.make("seam-table", BASE=base, PLUGIN="turbo-attn==<version>")
    try:
        req = Requirement(requirement)
    except InvalidRequirement as e:
        raise UsageError(f"--plugin {requirement!r}: {e}", hint=hint) from e
    pins = [s for s in req.specifier if s.operator == "=="]
    if len(pins) != 1 or len(req.specifier) != 1 or "*" in pins[0].version:
        raise UsageError(
            f"--plugin {requirement!r}: a plugin pin is one exact version (name==version)", hint=hint
        )
    return req


def plugin_pin(requirement: str, index_url: str | None = None, base: str = "<base>") -> Plugin:
    """``name==version`` hash-pinned from the index: the sha256 of that release's wheels
    (its sdist's when it has no wheel)."""
    req = exact_pin(requirement, base)
    pins = [s for s in req.specifier if s.operator == "=="]
    version = Version(pins[0].version)
    page = listing(canonicalize_name(req.name), index_url or default_index_url())
    url = page.url
    wheels, sdists = [], []
    for entry in page.files:
        name, found, kind = _file(entry.filename)
        if name == canonicalize_name(req.name) and found == version and entry.sha256 and not entry.yanked:
            (wheels if kind == "wheel" else sdists).append(f"sha256:{entry.sha256}")
    hashes = sorted(wheels or sdists)
    if not hashes:
        raise SeamError(
            f"{url} lists no file of {req.name} {version} with a sha256",
            hint=f"check the release on the index, or give another: --plugin {req.name}==<version>",
        )
    return Plugin(f"{req.name}=={version}", tuple(hashes))


def _file(filename: str) -> tuple[str | None, Version | None, str]:
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
            return name, version, "wheel"
        name, version = parse_sdist_filename(filename)
        return name, version, "sdist"
    except (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion):
        return None, None, ""


# --------------------------------------------------------------------------- upstream tests


def _objects(repo: Path) -> Path:
    """The object directory of a pristine repo (non-bare, from the sdist) or a mirror (bare)."""
    return repo / ".git" / "objects" if (repo / ".git").is_dir() else repo / "objects"


def renames(old: BaseRepo, new: BaseRepo, paths: list[str], top: str = "tests") -> dict[str, str]:
    """``{old path: new path}`` for each of ``paths`` that upstream renamed between the bases
    (``git diff -M`` over ``top``, in a scratch repository borrowing both repos' objects)."""
    scratch = Path(tempfile.mkdtemp(prefix="tkv-seam-renames-"))
    try:
        git.repo.init(scratch)
        alternates = scratch / ".git" / "objects" / "info" / "alternates"
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text(f"{_objects(old.path)}\n{_objects(new.path)}\n")
        moved = git.repo.renames(scratch, old.commit, new.commit, [top], similarity="50%")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {p: moved[p][0] for p in paths if moved.get(p)}


def _exists(repo: BaseRepo, path: str) -> bool:
    return git.repo.exists_at(repo.path, repo.commit, path)


def upstream_tests(old: BaseRepo, new: BaseRepo, paths: tuple[str, ...]) -> list[TestFile]:
    """Each of the source base's test files: kept, moved (its new path) or dropped."""
    missing = [p for p in paths if not _exists(new, p)]
    moved = renames(old, new, missing) if missing else {}
    out = []
    for p in paths:
        if p not in missing:
            out.append(TestFile(p, TestFileStatus.KEPT))
        elif p in moved:
            out.append(TestFile(p, TestFileStatus.MOVED, moved[p]))
        else:
            out.append(TestFile(p, TestFileStatus.DROPPED))
    return out


# --------------------------------------------------------------------------- the table


def source_base(root: Path, bases: dict[str, Base], new: Base, given: str | None = None) -> Base:
    """The base a new one is carried from: ``given``, else the newest carried base older than it."""
    if given:
        if given not in bases:
            raise UsageError(
                f"unknown base {given!r}; known bases: {', '.join(bases)}", hint=".venv/bin/tkv-seam carried"
            )
        src = bases[given]
        if Version(src.version) >= Version(new.version):
            hint = (
                f"make seam-table BASE={new.name}   (from the newest carried base older than it)"
                if carried_before(bases, root, new.version) is not None
                else ".venv/bin/tkv-seam carried   (lists the bases with a queue)"
            )
            raise UsageError(
                f"{given} is not older than {new.name}: a base is carried forward, from an older release",
                hint=hint,
            )
        return src
    return source_of(bases, root, new.version, new.name, "nothing to carry it from")


def derive(
    root: Path,
    bases: dict[str, Base],
    new: Base,
    cache: Path,
    source: str | None = None,
    plugin: str | None = None,
    ruff: str | None = None,
    index_url: str | None = None,
    progress: Progress = QUIET,
) -> SeamTable:
    """The ``.seam`` table of ``new`` (see the module docstring); nothing is written."""
    src = source_base(root, bases, new, source)
    if ruff:  # what is given is checked before anything is fetched
        try:
            ruff_version, ruff_from = str(Version(ruff.removeprefix("v"))), "given"
        except InvalidVersion:
            raise UsageError(
                f"--ruff {ruff!r} is not a version (e.g. 0.14.0)",
                hint=hints.tool("seam-table", new.name, "--ruff", "<version>"),
            ) from None
    if plugin:
        exact_pin(plugin, new.name)
    new_repo, _ = base_repo(new, cache, index_url=index_url, progress=progress)
    if not ruff:
        where = f"{new.sdist.filename}:{PRE_COMMIT}"
        config = git.repo.show(new_repo.path, new_repo.commit, PRE_COMMIT)
        if config is None:
            raise SeamError(
                f"{new.sdist.filename} has no {PRE_COMMIT}",
                hint=hints.tool("seam-table", new.name, "--ruff", "<version>"),
            )
        ruff_version, ruff_from = ruff_from_pre_commit(config.decode(), where, new.name), where
    if plugin:
        pin, plugin_from = plugin_pin(plugin, index_url, new.name), "given, hashes from the index"
    elif src.seam.plugin.requirement:
        pin, plugin_from = src.seam.plugin, f"{src.name}'s pin"
    else:
        raise SeamError(
            f"{src.name} pins no plugin release to carry over to {new.name}",
            hint=f"make seam-table BASE={new.name} PLUGIN=turbo-attn==<version>",
        )
    old_repo, _ = base_repo(src, cache, index_url=index_url, progress=progress)
    progress.step(f"upstream test files of {src.name} on {new.name}")
    tests = upstream_tests(old_repo, new_repo, src.seam.upstream_tests)
    cpu, cpu_from = cpu_rules(bases, new)
    return SeamTable(new.name, src.name, ruff_version, ruff_from, pin, plugin_from, tests, cpu, cpu_from)


def toml_table(table: SeamTable) -> tomlkit.items.Table:
    """The table as the hand-written ones look (comments name where each value came from)."""
    out = tomlkit.table()
    out.add(tomlkit.comment(f"written by `tkv-seam seam-table {table.base}` from {table.source}'s table"))
    out.add("ruff", table.ruff)
    out["ruff"].comment(
        f"rev of ruff-pre-commit in the sdist's {PRE_COMMIT}" if table.ruff_from != "given" else "given"
    )
    out["ruff"].trivia.comment_ws = "  "
    out.add(tomlkit.comment(f"plugin: {table.plugin_from}"))
    out.add(
        "plugin",
        basesfile.inline_table(
            {"requirement": table.plugin.requirement, "hashes": list(table.plugin.hashes)}
        ),
    )
    for t in table.tests:
        if t.status != TestFileStatus.KEPT:
            out.add(tomlkit.comment(" ".join(t.line().split())))
    tests = tomlkit.array()
    tests.extend(table.upstream_tests)
    out.add("upstream_tests", tests.multiline(True))
    if table.cpu.given:
        why = f"the CPU test venv's rules, {table.cpu_from}'s (docs/bases.md); make lock-cpu writes them into the lock"
        out.add("cpu", basesfile.cpu_table(table.cpu, why))
    return out


def write(
    bases_file: Path, table: SeamTable, force: bool = False, keep: Callable[[], str] | None = None
) -> str | None:
    """Write the table; ``unchanged`` when the base already has these values.

    A different existing table is refused (a human, or another run, may have written it) unless
    ``force``; then ``keep`` copies the file first and its answer (where) is returned (and kept
    in ``table.kept``). The check is made on the file as it is at the write, holding its lock.
    """
    kept = None
    table.bases_file = bases_file.name

    def check() -> bool:
        nonlocal kept
        base = load_bases(bases_file).get(table.base)
        existing = base.seam if base is not None else None
        if existing is None or not has_table(existing):
            return True
        if existing == table.pins():
            table.status = TableStatus.UNCHANGED
            return False
        if not force:
            raise RefusedError(
                f"{bases_file.name}: {table.base} already has a .seam table with other values:\n"
                + "\n".join(f"  {d}" for d in _differences(existing, table.pins())),
                hint=f"keep it, or replace it: make seam-table BASE={table.base} FORCE=1 "
                f"(the old bases file is kept under {layout.dropped(Path())}/)",
            )
        kept = keep() if keep is not None else None
        return True

    if basesfile.set_seam(bases_file, table.base, toml_table(table), check):
        table.status = TableStatus.WRITTEN
    table.kept = kept
    return kept


def has_table(pins: SeamPins) -> bool:
    return bool(pins.ruff or pins.plugin.requirement or pins.upstream_tests)


def _differences(old: SeamPins, new: SeamPins) -> list[str]:
    rows = [
        ("ruff", old.ruff, new.ruff),
        ("plugin", old.plugin.requirement, new.plugin.requirement),
        ("plugin hashes", list(old.plugin.hashes), list(new.plugin.hashes)),
    ]
    out = [f"{k}: bases file has {a!r}, derived {b!r}" for k, a, b in rows if a != b]
    gone = [p for p in old.upstream_tests if p not in new.upstream_tests]
    added = [p for p in new.upstream_tests if p not in old.upstream_tests]
    out += [f"upstream_tests: only in the bases file: {p}" for p in gone]
    out += [f"upstream_tests: only derived: {p}" for p in added]
    if old.cpu.given and old.cpu != new.cpu:
        out.append(f"cpu: bases file has {old.cpu}, derived {new.cpu}")
    return out
