"""The state of a tree tkv-seam made: one versioned schema, in the tree's ``.git/tkv-seam.json``.

Schema 2 (this one): ``kind`` is ``apply`` (a build tree: base + the queue's commits) or
``port`` (a port tree: the new base + the ported commits so far, with the port's progress
in ``port``). The state never names the tree it lives in: a tree is found by its path, so a
copied or moved project works and no state ever points at another tree.

Unknown fields are ignored; a file of a newer schema is refused (``NewerState``); a file of
no known schema reads as no state (the tree is then not one the tool replaces or removes).
tkv-seam is 0.1.0 and was never released: no other schema was ever written by a release, so
none is read (the development versions' schema 1 and ``tkv-seam-port.json`` are not).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path

from ..errors import RefusedError, SeamError
from ..fsutil import atomic_write
from ..findings.model import PatchReport

SCHEMA = 2
STATE = "tkv-seam.json"  # inside the tree's .git directory


class Kind(StrEnum):
    APPLY = "apply"
    PORT = "port"


class DoneStatus(StrEnum):
    """How a patch went into the port tree (or did not)."""

    EXACT = "exact"
    THREE_WAY = "3-way"
    RESOLVED = "resolved"  # a human resolved it (port continue)
    SKIPPED = "skipped"


class NewerState(SeamError):
    """The tree's state was written by a newer tkv-seam."""


@dataclass
class AppliedPatch:
    name: str
    commit: str
    files: list[str]


@dataclass
class DonePatch:
    """One patch the port is through with."""

    name: str
    slug: str
    status: DoneStatus
    commit: str | None
    verdict: str = ""
    reason: str = ""
    note: str = ""


@dataclass
class Committing:
    """Written before the port commits a patch: what the commit is, so a run killed right after
    it records the commit as what it was (``status``), not as a guess."""

    name: str
    status: DoneStatus
    parent: str  # HEAD before the commit
    note: str = ""


@dataclass
class PortProgress:
    """Where a port stands. ``series`` lists the old queue's patch files (project-relative);
    ``next`` is the index of the first patch not yet through; ``current`` names it when the
    port stopped there for a human (``stopped``: what the port found of it, its ``PatchReport``)."""

    from_base: str
    old_commit: str
    series: list[str]
    next: int = 0
    current: str | None = None
    stopped: PatchReport | None = None
    done: list[DonePatch] = field(default_factory=list)
    finished: bool = False
    queue_digest: str = ""  # the target queue as the port found it (finish refuses another)
    committing: Committing | None = None
    finishing: str | None = None  # finish started writing the queue: the name of its backup ("" if none)

    @property
    def todo(self) -> list[str]:
        return self.series[self.next + (1 if self.current else 0) :]


@dataclass
class TreeState:
    """What tkv-seam recorded about a tree it made.

    ``head`` is the HEAD the tool last recorded (an apply's result; a port's tree at its last
    save). ``pending`` marks an in-place switch to ``head`` that started from ``switch_from``
    and has not finished. ``inputs`` maps each applied patch file to its sha256 (to name the
    ones edited since). ``clone_refs``: the refs the base's clone brought (the cached repository's
    branch, a git source's tags and branches), which are not the user's while they point there.
    """

    kind: Kind
    base: str
    source: str
    base_commit: str
    upstream_commit: str
    head: str
    digest: str = ""
    patches: list[AppliedPatch] = field(default_factory=list)
    inputs: dict[str, str] = field(default_factory=dict)
    pending: bool = False
    switch_from: str | None = None
    port: PortProgress | None = None
    clone_refs: dict[str, str] = field(default_factory=dict)  # what the clone brought: not the user's

    @property
    def port_in_progress(self) -> bool:
        return self.kind == Kind.PORT and self.port is not None and not self.port.finished

    # -- storage -----------------------------------------------------------------

    @staticmethod
    def path(tree: Path) -> Path:
        return tree / ".git" / STATE

    def to_json(self) -> dict:
        data = asdict(self)
        if self.port is not None and self.port.stopped is not None:
            data["port"]["stopped"] = self.port.stopped.to_json()  # as ``port report --json`` shows it
        return {"schema": SCHEMA, **data}

    def save(self, tree: Path) -> None:
        """Write the state atomically (a crash leaves the old file or the new one, never half)."""
        atomic_write(self.path(tree), json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, tree: Path) -> TreeState | None:
        """The state of ``tree``, or None when tkv-seam did not make it (or it is unreadable).

        Raises NewerState for a state of a newer schema than this tool's.
        """
        data = _read_json(cls.path(tree))
        if data is None:
            return None
        schema = data.get("schema")
        if schema is not None and (not isinstance(schema, int) or schema > SCHEMA):
            raise NewerState(
                f"{tree}: its state ({STATE}) has schema {schema!r}; this tkv-seam reads schema {SCHEMA}",
                hint="use the tkv-seam that made it (pip install -e . in that checkout)",
            )
        if schema != SCHEMA:  # no schema: a development version's (never released), not read
            return None
        try:
            return _from_dict(data)
        except (TypeError, ValueError, KeyError, AttributeError):
            return None


def tree_above(path: Path, itself: bool = False) -> Path | None:
    """The nearest directory above ``path`` (``itself``: or ``path``) that is a tree tkv-seam made
    (it has a state), or None: a tree, or any output, there would be files that tree does not hold."""
    for parent in ([Path(path)] if itself else []) + list(Path(path).parents):
        if parent.is_dir() and not parent.is_symlink() and TreeState.load(parent) is not None:
            return parent
    return None


def refuse_in_git_dir(path: Path, option: str = "--tree") -> None:
    """Refuse (exit 5) a tree (or venv) at or under a ``.git`` directory: files git would read as its
    own (``--tree .git/refs/heads/x``: refs it cannot parse, ``git gc`` failing)."""
    git_dir = next((d for d in (path, *path.parents) if d.name == ".git"), None)
    if git_dir is not None:
        raise RefusedError(
            f"{path} is inside the git directory {git_dir}: files there would be files git reads as its "
            "own (refs, objects); nothing was changed",
            hint=f"choose another {option} (outside {git_dir})",
        )


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _known(cls, data: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _from_dict(data: dict) -> TreeState:
    data = _known(TreeState, data)
    data["kind"] = Kind(data.get("kind", Kind.APPLY))
    data["patches"] = [AppliedPatch(**_known(AppliedPatch, p)) for p in data.get("patches", [])]
    port = data.get("port")
    data["port"] = _progress(port) if isinstance(port, dict) else None
    return TreeState(**data)


def _progress(data: dict) -> PortProgress:
    data = _known(PortProgress, data)
    data["done"] = [
        DonePatch(**{**_known(DonePatch, d), "status": DoneStatus(d["status"])}) for d in data.get("done", [])
    ]
    stopped = data.get("stopped")
    data["stopped"] = PatchReport.from_json(stopped) if stopped is not None else None
    c = data.get("committing")
    data["committing"] = (
        Committing(**{**_known(Committing, c), "status": DoneStatus(c["status"])})
        if isinstance(c, dict)
        else None
    )
    return PortProgress(**data)
