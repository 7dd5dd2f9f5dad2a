"""What a port does by itself where no judgment is needed, and the switches that turn each off.

A port stops only where a human is needed. Before it stops, it takes each step a machine can
take safely, and says so (``Did``: one line per step, shown in the stop or the end summary, and
the patch listed to re-read):

- ``offset``: a file whose 3-way merge conflicts only because upstream changed lines next to
  its hunks goes in where every hunk finds its whole context (no fuzz), as quilt does;
- ``imports``: a conflict whose every region only adds, drops or moves imports on both sides is
  merged (the import statements, 3-way) and sorted by the base's own ruff (isort rules ``I``);
- ``replay``: a conflict resolved before (an aborted carry started again, the same hunk onto
  another release) gets the recorded resolution back (git's rerere);
- ``fix``: before the gate fails a patch, the base's own fixers (``ruff check --fix``, safe
  fixes only, and ``ruff format``) run on the files it touches.

Each is on unless turned off (``Auto``; the CLI's ``--no-offset``, ``--no-imports``,
``--no-replay``, ``--no-autoresolve`` for all three, ``--no-fix``).
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("offset", "imports", "replay", "fix")


@dataclass(frozen=True)
class Auto:
    """Which of the port's own steps it takes (all by default)."""

    offset: bool = True
    imports: bool = True
    replay: bool = True
    fix: bool = True

    @classmethod
    def from_flags(
        cls,
        autoresolve: bool = True,
        offset: bool = True,
        imports: bool = True,
        replay: bool = True,
        fix: bool = True,
    ) -> Auto:
        """The switches of the CLI: ``autoresolve`` False turns offset, imports and replay off."""
        return cls(autoresolve and offset, autoresolve and imports, autoresolve and replay, fix)

    def off(self) -> list[str]:
        return [k for k in KINDS if not getattr(self, k)]


@dataclass(frozen=True)
class Did:
    """One step the port took by itself on a patch: its kind (``KINDS``), the file, what it did;
    ``blob``, once the port stopped at the patch, the file's staged blob as the port left it (a
    resolution that changed the file since makes the step history, not what went in)."""

    kind: str
    file: str
    text: str
    blob: str = ""

    def line(self) -> str:
        return f"{self.kind}: {self.file}: {self.text}"

    def to_json(self) -> dict:
        out = {"kind": self.kind, "file": self.file, "text": self.text}
        return {**out, "blob": self.blob} if self.blob else out

    @classmethod
    def from_json(cls, data: object) -> Did | None:
        """A recorded step; None when it is not one (a record edited by hand)."""
        if isinstance(data, dict) and all(isinstance(data.get(k), str) for k in ("kind", "file", "text")):
            blob = data.get("blob")
            return cls(data["kind"], data["file"], data["text"], blob if isinstance(blob, str) else "")
        return None


def did_lines(did: list[Did], indent: str = "  ") -> list[str]:
    """The steps as lines under a heading (none: no line)."""
    if not did:
        return []
    return [f"{indent}done by itself (re-read it):"] + [f"{indent}  {d.line()}" for d in did]
