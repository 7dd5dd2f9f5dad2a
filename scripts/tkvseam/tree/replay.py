"""Resolutions recorded once and replayed where the same conflict comes back (git's rerere).

Every port of a project shares one store, ``build/port-resolutions/`` (``layout.port_resolutions``):
``rr-cache/``, git rerere's own (a port tree's ``.git/rr-cache`` is a link to it), and
``messages/<to>/<patch>``, the commit message a resolution was continued with (and beside it,
``<patch>.header``, the patch's own message it was written from). When a patch
conflicts, rerere records the conflicts and puts back a resolution recorded before for the
same conflict text (a carry aborted and started again; the same hunk onto another release);
when the user continues a resolution, rerere records it. A file whose conflicts are all
replayed is staged; a patch whose every conflict is replayed goes on by itself (gated and
proven as any patch), said, and listed to re-read. ``git -C <tree> rerere forget <path>``
(at a stop) drops a recorded resolution that should not come back.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from .. import git, layout
from ..fsutil import atomic_write
from ..queue.header import PatchFormatError
from ..queue.message import message_header, set_trailer
from ..queue.patch import Patch

_RESOLVED = re.compile(r"^Resolved '(.+)' using previous resolution\.$")
_MARKERS = ("<" * 7 + " ", ">" * 7 + " ")


class Resolutions:
    """The project's recorded resolutions, for the port onto ``to_name``."""

    def __init__(self, root: Path, to_name: str):
        self.dir = layout.port_resolutions(root)
        self.to_name = to_name

    def _link(self, tree: Path) -> None:
        """The port tree's ``.git/rr-cache``: a relative link to the shared store (a copied project's
        tree links its own store), and ``.git/MERGE_RR`` (the conflicts in progress) naming only
        what the store holds (git 2.39's rerere crashes on an entry whose directory is gone)."""
        git_dir = tree / ".git"
        cache = git_dir / "rr-cache"
        store = self.dir / "rr-cache"
        store.mkdir(parents=True, exist_ok=True)
        if not (cache.is_symlink() and cache.resolve() == store.resolve()):
            if cache.is_dir() and not cache.is_symlink():  # rerere ran here unlinked: keep what it recorded
                for entry in cache.iterdir():
                    if not (store / entry.name).exists():
                        entry.rename(store / entry.name)
                shutil.rmtree(cache)
            elif cache.is_symlink() or cache.exists():
                cache.unlink()
            cache.symlink_to(os.path.relpath(store.resolve(), git_dir.resolve()), target_is_directory=True)
        progress = git_dir / "MERGE_RR"
        if progress.is_file():
            entries = [e for e in progress.read_bytes().split(b"\0") if e]
            known = [e for e in entries if (store / e.split(b"\t", 1)[0].split(b".", 1)[0].decode()).is_dir()]
            if known != entries:
                atomic_write(progress, b"".join(e + b"\0" for e in known))

    def replay(self, tree: Path, conflicted: list[str]) -> list[str]:
        """Record ``conflicted``'s conflicts; the files whose recorded resolution was put back,
        whole (no marker left), staged: those paths."""
        self._link(tree)
        said = git.merge.rerere(tree)
        resolved = {m.group(1) for line in said if (m := _RESOLVED.match(line.strip()))}
        done = []
        for path in conflicted:
            if path not in resolved:
                continue
            text = (tree / path).read_bytes().decode("utf-8", "surrogateescape")
            if any(line.startswith(_MARKERS) for line in text.splitlines()):
                continue
            git.index.stage(tree, [path])
            done.append(path)
        return done

    def record(self, tree: Path, patch: Patch, message: str) -> list[str]:
        """Record the resolution being continued (rerere's postimages; the message, and the patch's
        own message it was written from): the paths."""
        self._link(tree)
        said = git.merge.rerere(tree)
        kept = self._message_path(patch.name)
        kept.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(kept, message)
        atomic_write(kept.with_name(kept.name + ".header"), patch.header.message)
        return [line for line in said if line.startswith("Recorded resolution")]

    def forget_progress(self, tree: Path) -> None:
        """A patch left out: rerere forgets the conflicts in progress (recorded resolutions stay)."""
        (tree / ".git" / "MERGE_RR").unlink(missing_ok=True)

    def _message_path(self, name: str) -> Path:
        return self.dir / "messages" / self.to_name / name

    def header_changed(self, patch: Patch) -> bool:
        """Whether ``patch``'s own message is no longer the one its recorded message was written from
        (the queue was edited since; a record without it: unchanged)."""
        was = self._message_path(patch.name)
        was = was.with_name(was.name + ".header")
        return was.is_file() and was.read_text() != patch.header.message

    def message(self, patch: Patch) -> str | None:
        """The message a resolution of ``patch`` was continued with on this port's target, if any.
        Once the queue changed the patch's header since, the patch's own message with the Verdict
        and Reason recorded (an edit of the queue is never undone by a replay)."""
        path = self._message_path(patch.name)
        if not path.is_file():
            return None
        recorded = path.read_text()
        if not self.header_changed(patch):
            return recorded
        try:
            given = message_header(patch, recorded)
        except PatchFormatError:
            return None
        out = patch.header.message
        for key in ("Verdict", "Reason"):
            if given.get(key):
                out = set_trailer(out, key, " ".join(given.get(key)))
        return out
