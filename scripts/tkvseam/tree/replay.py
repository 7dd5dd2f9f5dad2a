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

rerere knows only the conflicted files; a resolution often changes more (a file of the patch
that merged, or another file). So a continued resolution is also recorded whole, in
``files/<patch>.json`` (the newest few; each file's bytes in ``blobs/<sha256>``): for every file
the resolution staged and every file of the patch (one it put back to HEAD included), the blob it had before (the tree's HEAD) and the bytes it was given, with
the patch's own diff. When rerere replays a conflict of that patch again, every other file of the
record is put back too if it is where it was then (same HEAD blob, same patch diff); a file that
is not stays as the port merged it and the patch stops there (a conflict: resolve it by hand),
never goes on with half of a resolution.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import git, layout
from ..fsutil import atomic_write
from ..queue.header import PatchFormatError
from ..queue.message import message_header, set_trailer
from ..queue.patch import Patch, file_sections

_RESOLVED = re.compile(r"^Resolved '(.+)' using previous resolution\.$")
_MARKERS = ("<" * 7 + " ", ">" * 7 + " ")
_KEEP = 8  # whole resolutions kept per patch, newest first


@dataclass
class Rest:
    """What a whole recorded resolution did beyond rerere's files (``Resolutions.replay_rest``)."""

    restored: list[str] = field(default_factory=list)  # put back and staged
    differs: list[str] = field(default_factory=list)  # changed then, but not where it was: left
    unrecorded: bool = False  # no whole resolution of this patch covers what rerere put back


def _diff_key(patch: Patch) -> str:
    """The patch's diff (not its header): a resolution is for this diff."""
    return hashlib.sha256("".join(file_sections(patch)).encode("utf-8", "surrogateescape")).hexdigest()


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
        """Record the resolution being continued (rerere's postimages; the whole staged resolution;
        the message, and the patch's own message it was written from): rerere's lines."""
        self._link(tree)
        said = git.merge.rerere(tree)
        self._record_whole(tree, patch)
        kept = self._message_path(patch.name)
        kept.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(kept, message)
        atomic_write(kept.with_name(kept.name + ".header"), patch.header.message)
        return [line for line in said if line.startswith("Recorded resolution")]

    def _whole_path(self, patch: Patch) -> Path:
        return self.dir / "files" / f"{patch.name}.json"

    def _whole_records(self, patch: Patch) -> list[dict]:
        path = self._whole_path(patch)
        try:
            records = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return []
        return records if isinstance(records, list) else []

    def _record_whole(self, tree: Path, patch: Patch) -> None:
        """Every file the staged resolution changes, and every file of the patch (one resolved to
        HEAD is a resolution too: the patch's change to it dropped): its blob at HEAD and its
        resolved bytes."""
        files = {}
        paths = set(git.index.staged_paths(tree))
        paths.update(p for fc in patch.files for p in (fc.old, fc.new) if p)
        for path in sorted(paths):
            data = git.repo.show(tree, "", path)  # the index's bytes; None: the resolution deletes it
            blob = None
            if data is not None:
                blob = hashlib.sha256(data).hexdigest()
                kept = self.dir / "blobs" / blob
                if not kept.is_file():
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(kept, data)
            files[path] = {"head": git.repo.blob_id(tree, "HEAD", path), "result": blob}
        if not files:
            return
        record = {"diff": _diff_key(patch), "files": files}
        records = [record] + [r for r in self._whole_records(patch) if r != record]
        out = self._whole_path(patch)
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, json.dumps(records[:_KEEP], indent=1, sort_keys=True) + "\n")

    def replay_rest(self, tree: Path, patch: Patch, replayed: list[str]) -> Rest:
        """rerere put back ``replayed`` (files of ``patch``): put back the rest of the whole
        resolution recorded with them, where each file is where it was then. No whole resolution of
        the patch covers those files (rerere's record is another patch's, or older than whole
        records): ``unrecorded``, so the patch stops for a human instead of going on by half."""
        records = [
            r
            for r in self._whole_records(patch)
            if isinstance(r.get("files"), dict) and set(replayed) <= set(r["files"])
        ]
        if not records:
            return Rest(unrecorded=True)
        key = _diff_key(patch)

        def here(path: str, entry: dict) -> bool:
            return entry.get("head") == git.repo.blob_id(tree, "HEAD", path)

        # the newest record for this diff whose every file is where it was; else the newest
        whole = [
            r for r in records if r.get("diff") == key and all(here(p, e) for p, e in r["files"].items())
        ]
        record = (whole or records)[0]
        rest = Rest()
        for path, entry in record["files"].items():
            if path in replayed:
                continue
            data = None
            if entry.get("result") is not None:
                kept = self.dir / "blobs" / str(entry["result"])
                data = kept.read_bytes() if kept.is_file() else None
                if data is None or hashlib.sha256(data).hexdigest() != entry["result"]:
                    rest.differs.append(path)  # its bytes are gone or damaged: not replayed
                    continue
            if record.get("diff") != key or not here(path, entry):
                rest.differs.append(path)
                continue
            full = tree / path
            if data is None:
                full.unlink(missing_ok=True)
            else:
                full.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(full, data)
            git.index.stage(tree, [path])
            rest.restored.append(path)
        return rest

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
