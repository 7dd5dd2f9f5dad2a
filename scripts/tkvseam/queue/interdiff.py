"""``drift --diff``: what changed in one patch between a base and the previous base.

The drift matrix says *that* a patch was re-expressed; this says *how*. Both versions of
the patch are normalised the way ``git range-diff`` compares commits: the header as its
commit message, each file as its hunks with the line numbers dropped (``@@`` keeps only
the function context) and without ``index`` lines. A unified diff of the two normalised
texts, per section (the header, then each file), shows only what a reviewer must read:
new or changed lines of code, tests and prose; hunks that only moved show nothing.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from .. import hints
from ..answer import Answer, plain
from .drift import Drift, compare
from ..errors import UsageError
from .patch import FileChange, Patch
from .series import Queue, read_series

HEADER = "header"


class SectionStatus(StrEnum):
    """How one section of a patch changed: the header, or a file (a file's cell as ``Drift``'s)."""

    SAME = "same"  # header
    CHANGED = "changed"  # header
    SAME_HUNKS = Drift.SAME_HUNKS.value
    CONTEXT_ONLY = Drift.CONTEXT_ONLY.value
    RE_EXPRESSED = Drift.RE_EXPRESSED.value
    ADDED = "added"  # a file only the new version patches
    DROPPED = "dropped"  # a file only the old version patches


@dataclass
class Section:
    name: str  # "header" or a file path
    status: SectionStatus
    changed: list[str] = field(default_factory=list)  # header: the fields that differ
    diff: list[str] = field(default_factory=list)  # unified diff lines of the normalised texts


@dataclass
class PatchDiff:
    slug: str
    old_base: str
    new_base: str
    old_name: str
    new_name: str
    status: Drift  # the drift matrix's cell
    sections: list[Section] = field(default_factory=list)

    def to_json(self) -> dict:
        return plain(self)


@dataclass
class PatchDrift(Answer):
    """``drift --diff``: one patch's diffs, a pair of consecutive bases each."""

    slug: str  # as asked, or the slug it named
    diffs: list[PatchDiff]

    def lines(self) -> list[str]:
        if not self.diffs:
            return [f"{self.slug}: on no two consecutive bases"]
        return ["\n".join(render(d) for d in self.diffs)]

    def to_json(self) -> dict:
        return {
            "slug": self.diffs[0].slug if self.diffs else self.slug,
            "diffs": [d.to_json() for d in self.diffs],
        }


def _header_lines(patch: Patch) -> list[str]:
    return [f"Author: {patch.header.author}", *patch.header.message.rstrip("\n").split("\n")]


def _file_lines(fc: FileChange) -> list[str]:
    out = [f"{fc.kind} {fc.path}" + (f" (mode {fc.new_mode})" if fc.new_mode else "")]
    for hunk in fc.pfile:
        out.append(f"@@ {hunk.section_header}".rstrip())
        out += [str(line).rstrip("\n") for line in hunk]
    return out


def _changed_fields(old: Patch, new: Patch) -> list[str]:
    a, b = old.header, new.header
    fields = [name for name in ("author", "summary", "description") if getattr(a, name) != getattr(b, name)]
    keys = list(dict.fromkeys([*a.trailers, *b.trailers]))
    return fields + [k for k in keys if a.trailers.get(k) != b.trailers.get(k)]


def _unified(old: list[str], new: list[str], old_label: str, new_label: str) -> list[str]:
    return list(difflib.unified_diff(old, new, old_label, new_label, n=3, lineterm=""))


def diff_patches(old: Patch, new: Patch, old_base: str, new_base: str) -> PatchDiff:
    """Section by section, how ``new`` (on ``new_base``) differs from ``old`` (on ``old_base``)."""
    out = PatchDiff(new.header.slug, old_base, new_base, old.name, new.name, compare(old, new))
    a, b = f"{old_base}/{old.name}", f"{new_base}/{new.name}"
    diff = _unified(_header_lines(old), _header_lines(new), a, b)
    header = SectionStatus.CHANGED if diff else SectionStatus.SAME
    out.sections.append(Section(HEADER, header, _changed_fields(old, new), diff))
    old_files = {fc.path: fc for fc in old.files}
    new_files = {fc.path: fc for fc in new.files}
    for path in list(dict.fromkeys([*new_files, *old_files])):
        fo, fn = old_files.get(path), new_files.get(path)
        if fo is None or fn is None:
            status = SectionStatus.ADDED if fo is None else SectionStatus.DROPPED
            lines = _unified([], _file_lines(fn), a, b) if fo is None else _unified(_file_lines(fo), [], a, b)
            out.sections.append(Section(path, status, diff=lines))
            continue
        status = SectionStatus(compare(_only(old, fo), _only(new, fn)).value)
        out.sections.append(Section(path, status, diff=_unified(_file_lines(fo), _file_lines(fn), a, b)))
    return out


def _only(patch: Patch, fc: FileChange) -> Patch:
    """``patch`` restricted to one file (for ``drift.compare``)."""
    return Patch(patch.name, patch.path, patch.text, patch.header, [fc])


def _queues(root: Path, layouts: dict[str, Queue]) -> dict[str, dict[str, Patch]]:
    """The bases that have a queue, in bases.toml order: slug -> patch."""
    out = {}
    for name, queue in layouts.items():
        if (root / queue.series).exists():
            out[name] = {p.header.slug: p for p in read_series(root, queue, name).load()}
    return out


def _names(wanted: str, name: str) -> bool:
    """``wanted`` is the patch file ``name``, its number as written (``0003``) or as a number (``3``)."""
    number = name.split("-", 1)[0]
    if wanted in (name, number):
        return True
    return wanted.isascii() and wanted.isdigit() and number.isdigit() and int(wanted) == int(number)


def _slug(queues: dict[str, dict[str, Patch]], wanted: str, base: str | None = None) -> str:
    """A slug from a slug, a patch file name (``0003-x.patch``) or its number (``0003`` or ``3``).

    A name or number is a queue's own: ``base``'s when given, else it must name one patch in
    every queue that has it (queues are numbered each on its own).
    """
    if any(wanted in patches for patches in queues.values()):
        return wanted
    named: dict[str, list[str]] = {}  # slug -> the queues where ``wanted`` names it
    for name, patches in queues.items():
        for slug, patch in patches.items():
            if _names(wanted, patch.name):
                named.setdefault(slug, []).append(name)
    if base is not None:
        for slug, where in named.items():
            if base in where:
                return slug
    if len(named) == 1:
        return next(iter(named))
    if named:
        said = ", ".join(f"{slug} in {' and '.join(where)}" for slug, where in named.items())
        raise UsageError(
            f"{wanted!r} names {said}: give the slug (or --base)",
            hint=hints.make("drift", DIFF=next(iter(named))),
        )
    known = sorted({s for patches in queues.values() for s in patches})
    meant = hints.close(wanted, known)
    raise UsageError(
        f"no patch {wanted!r} in any queue; known: {', '.join(known) or 'none'}{hints.did_you_mean(meant)}",
        hint=hints.make("drift", DIFF=meant[0], BASE=base)
        if meant
        else f"{hints.make('drift')}   (the matrix: every patch)",
    )


def patch_drift(root: Path, bases: dict[str, Queue], wanted: str, base: str | None = None) -> PatchDrift:
    """The diffs of one patch: between ``base`` and the base before it, or for every such pair
    (``bases``: each base's queue, in bases.toml order)."""
    queues = _queues(root, bases)
    names = list(queues)
    if base is not None and base not in bases:  # before the slug: one hint that mends both
        meant = hints.close(base, bases)
        compared = [b for b in meant if b in names[1:]]  # a base with a queue before it to compare with
        try:
            slug = _slug(queues, wanted, compared[0] if compared else None)
        except UsageError:
            slug = (hints.close(wanted, {s for patches in queues.values() for s in patches}) or ["<slug>"])[0]
        raise UsageError(
            f"unknown base {base!r}; known bases: {', '.join(bases)}{hints.did_you_mean(meant)}",
            hint=hints.make("drift", DIFF=slug, BASE=compared[0] if compared else None),
        )
    slug = _slug(queues, wanted, base)
    if base is not None:
        if base not in queues:
            raise UsageError(f"{base} has no queue yet", hint=hints.port("report", base))
        i = names.index(base)
        if i == 0:
            if len(names) > 1:
                hint = hints.make("drift", DIFF=slug, BASE=names[1])
            else:  # the only queue: the next base is ported from it, or there is none yet
                after = list(bases)[list(bases).index(base) + 1 :]
                hint = hints.port("report", after[0]) if after else hints.make("pin", VERSION="<version>")
            raise UsageError(
                f"{base} is the first base with a queue: nothing before it to compare with", hint=hint
            )
        pairs = [(names[i - 1], base)]
    else:
        pairs = list(zip(names, names[1:]))
    out = []
    for old_base, new_base in pairs:
        old, new = queues[old_base].get(slug), queues[new_base].get(slug)
        if old is None or new is None:
            if base is not None:
                where = old_base if old is None else new_base
                raise UsageError(
                    f"{slug} is not in {where}'s queue: nothing to compare between {old_base} and {new_base}",
                    hint=f"{hints.make('drift')}  (the matrix: where {slug} is absent or new)",
                )
            continue
        out.append(diff_patches(old, new, old_base, new_base))
    return PatchDrift(wanted, out)


def render(diff: PatchDiff) -> str:
    """Text: one summary line per section, then the sections' diffs."""
    lines = [
        f"{diff.slug}: {diff.old_base} {diff.old_name} -> {diff.new_base} {diff.new_name}: {diff.status}"
    ]
    width = max(len(s.name) for s in diff.sections)
    for s in diff.sections:
        what = s.status + (f" ({', '.join(s.changed)})" if s.changed else "")
        only = {SectionStatus.ADDED: diff.new_base, SectionStatus.DROPPED: diff.old_base}.get(s.status)
        what += f" (only in {only})" if only else ""
        if s.diff and s.name != HEADER and not only:
            plus = sum(1 for x in s.diff[2:] if x.startswith("+"))
            minus = sum(1 for x in s.diff[2:] if x.startswith("-"))
            what += f": +{plus} -{minus} lines of the patch"
        lines.append(f"  {s.name:{width}}  {what}")
    for s in diff.sections:
        if s.diff:
            lines += ["", f"## {s.name}", *s.diff]
    return "\n".join(lines) + "\n"
