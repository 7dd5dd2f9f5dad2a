"""The resumable port, like ``git rebase``: a session per port tree, one method per verb.

``PortSession(root, to_base, tree)`` is the port onto ``to_base`` in ``tree`` (default
``build/port-<to>``). ``start`` builds the port tree and applies patch after patch in
series order; the first that needs a human stops the port (``PortStopped``, exit 12) with
its state in the tree (``state``, kind ``port``). ``continue_`` commits the staged
resolution, ``skip`` leaves the patch out with a reason, ``abort`` removes the tree after
keeping all of it in a bundle, ``status`` says where it stands, ``finish`` writes the new
base's own queue (never another's) and lints it; ``start``, ``continue_`` and ``skip``
finish by themselves when the last patch is through. Every verb holds the tree's lock.
Code (``carry``, a script) drives the same methods the CLI does.

The old queue is read as it was when the port started: ``start`` keeps a copy of its patches in
the port tree (``.git/tkv-seam-port-queue/``), so a queue edited, deleted or switched to another
branch in the project meanwhile changes nothing in the port.

Nothing is lost on a crash: every step is recorded in the port tree before or after it is taken
(``journal.PortJournal``, the port's crash journal), so a run killed anywhere is taken up by the
next verb.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import git, hints
from ..answer import Answer
from ..bases.pins import Base, default_cache_dir, load_bases
from ..bases.repo import base_repo
from ..errors import PortStopped, RefusedError, SeamError, UsageError
from ..fsutil import atomic_write
from ..queue.writer import queue_digest
from ..queue.message import SKIP_VERDICTS, VERDICTS, message_problem, set_trailer, verdict_problem
from ..queue.patch import Patch
from ..progress import QUIET, Progress
from ..tree.kept import kept_root
from ..queue.series import read_series
from ..tree.state import STATE, DoneStatus, Kind, PortProgress, TreeState
from ..findings.auto import Auto, Did, did_lines
from .finish import Finished, finish_queue
from .fixers import Isort
from .gate import WentIn, check_patch, patches_by_themselves, read_record, regate
from .environment import ENV_FILE, ENVIRONMENT, EnvironmentStop, anew
from .journal import PORT_MSG, PortJournal
from ..findings.model import APPLIED, FileStatus, PatchReport, PatchStatus
from .render import WHY, git_c, stop_hint, stop_message
from ..tree.replay import Resolutions
from .report import refuse_direction
from ..tree.porttree import PortTree, try_patch

_MARKERS = ("<<<<<<< ", ">>>>>>> ", "=======\n")


def one_line(value: str | None, option: str) -> str | None:
    """``value`` when it fits one header line and one table cell; a usage error (exit 2) otherwise."""
    if value is None:
        return None
    bad = sorted({repr(c) for c in value if ord(c) < 32 or ord(c) == 127})
    if bad:
        raise UsageError(
            f"{option} must be one line of text; it holds {', '.join(bad)} (a line break would end the "
            "patch's header fields and break PORT.md's table)",
            hint=f"give {option} on one line; longer text goes in the patch's description",
        )
    return value.strip()


@dataclass
class Aborted(Answer):
    """``port abort``: the tree removed, and the bundle that holds all of it."""

    tree: Path
    bundle: Path

    def lines(self) -> list[str]:
        return [
            f"removed {self.tree}; no queue was written; everything it held (commits, staged and unstaged "
            f"changes, the port's state) is in {self.bundle}: `git clone {self.bundle} <dir>` brings the "
            f"commits back, `git -C <dir> fetch {self.bundle} 'refs/tkv-seam/*:refs/tkv-seam/*'` the "
            "staged and unstaged changes and the state (refs/tkv-seam/kept/)"
        ]

    def to_json(self) -> dict:
        return {"ok": True, "removed": str(self.tree), "bundle": str(self.bundle)}


class PortSession:
    def __init__(
        self,
        root: Path,
        to_base: Base,
        tree: Path | None = None,
        cache: Path | None = None,
        progress: Progress = QUIET,
        bases_file: Path | None = None,
    ):
        self.root = root
        self.to_base = to_base
        self.bases_file = bases_file or root / "bases.toml"
        self.journal = PortJournal(root, to_base.name, tree, progress)
        self.default_tree = self.journal.default_tree
        self.path = self.journal.path
        self.cache = cache or default_cache_dir()
        self.progress = progress
        self.prove = None  # a prove.Prover: each patch's own tests run at its prefix (gate.check_patch)
        self.auto = Auto()  # what the port does by itself before it stops (findings/auto.py)
        self.resolutions = Resolutions(root, to_base.name)
        self.seam = self.journal.seam
        self.tree = PortTree(self.path)

    def command(self, verb: str, **variables: str) -> str:
        """``make port VERB=<verb>`` for this port (its tree named when it is not the default)."""
        return self.journal.command(verb, **variables)

    def save(self, state: TreeState) -> None:
        """Record ``state`` in the port tree (what ``finish`` calls too)."""
        self.journal.save(state)

    @property
    def message_file(self) -> Path:
        """The stopped patch's commit message, as the user edits it (``journal.PORT_MSG``)."""
        return self.journal.message_file

    # -- where the port stands: a look without the lock (what ``carry`` asks before a verb) ---------

    def in_progress(self) -> bool:
        """A port onto ``to_base`` is started in the tree and not finished."""
        state = self.seam.load()
        return state is not None and state.port_in_progress

    def started_from(self) -> str | None:
        """The base the port in progress started from (None when none is in progress)."""
        state = self.seam.load()
        return state.port.from_base if state is not None and state.port_in_progress else None

    def by_themselves(self) -> list[WentIn]:
        """The patches of the port that went in without a human ([] when there is no port tree)."""
        state = self.seam.load()
        return patches_by_themselves(self.path, state) if state is not None and state.port else []

    # -- the verbs ----------------------------------------------------------------

    def start(self, from_base: Base, force: bool = False) -> Finished:
        """Port ``from_base``'s queue: build the port tree, apply until a patch needs you (PortStopped)."""
        refuse_direction(from_base, self.to_base, self.root)
        with self.seam.locked(self.progress):
            self._refuse_unpinned(from_base)
            old_state, _ = self.seam.check_replaceable(
                (Kind.PORT,), "tkv-seam port", rerun=self.command("start")
            )
            series = read_series(self.root, from_base.queue, from_base.name)
            series.load()  # every patch parses before anything is made
            old, _ = base_repo(from_base, self.cache, progress=self.progress)
            new, _ = base_repo(self.to_base, self.cache, progress=self.progress)

            def build(tmp: Path) -> tuple[Path, TreeState]:
                self.progress.step(f"port tree: {self.to_base.name} + objects of {from_base.name}")
                built = PortTree.build(tmp / "tree", old, new)
                state = TreeState(
                    kind=Kind.PORT,
                    base=self.to_base.name,
                    source="sdist",
                    base_commit=new.commit,
                    upstream_commit=new.upstream_commit,
                    head=new.commit,
                    port=PortProgress(
                        from_base.name,
                        old.commit,
                        [str(series.path(n).relative_to(self.root)) for n in series.names],
                        queue_digest=queue_digest(self.root, self.to_base.queue),
                    ),
                )
                copy = {  # the queue as it is now: what the port reads to its end
                    str(series.path(n).relative_to(self.root)): series.path(n).read_bytes()
                    for n in series.names
                }
                PortJournal.copy_queue(built.path, copy)
                return built.path, state

            state, _ = self.seam.rebuild(
                old_state, build, rerun=self.command("start"), progress=self.progress
            )
            self._advance(state)
            return self._finish(state, force)

    def _refuse_unpinned(self, from_base: Base) -> None:
        """Both bases still pinned, as ``bases.toml`` is now, under the tree's lock: a retire that
        ran after they were read (and before the lock) leaves no port tree for a base it removed."""
        bases = load_bases(self.bases_file, self.root)
        for base in (self.to_base, from_base):
            if base.name not in bases:
                raise RefusedError(
                    f"{base.name} is no longer pinned in {self.bases_file.name} (retired while this port "
                    "was starting?); nothing was made",
                    hint=hints.make("carry", VERSION=self.to_base.version)
                    + f"   (pins {self.to_base.name} again and ports onto it)"
                    if base is self.to_base
                    else f"{hints.tool('carried')}   (the bases with a queue; name one with BASE=)",
                )

    def continue_(
        self, verdict: str | None = None, reason: str | None = None, force: bool = False
    ) -> Finished:
        """Commit the staged resolution of the stopped patch (its message and author) and go on.

        After an interrupted run it goes on from where that run was killed.
        """
        verdict, reason = one_line(verdict, "--verdict"), one_line(reason, "--reason")
        if verdict and verdict_problem(verdict):
            raise UsageError(
                f"--verdict: {verdict_problem(verdict)} (the verdicts of a patch in a queue; a patch that "
                f"goes is skipped: {' or '.join(SKIP_VERDICTS)})",
                hint=self.command("continue", VERDICT=VERDICTS[0]),
            )
        with self.seam.locked(self.progress):
            state = self.journal.load()
            p = state.port
            regate(self, state)  # an earlier commit changed since it was gated is gated again first
            if p.current is None:
                if p.next < len(p.series):  # killed while applying patch `next`: keep its leftovers, again
                    self.journal.keep_leftovers(f"retrying {Path(p.series[p.next]).name}")
                    self._advance(state)
                return self._finish(state, force)
            self._check_resolution(p.current)
            patch = self.journal.patch(p, p.next)
            msg = self.journal.message_file
            message = msg.read_text() if msg.exists() else patch.header.message
            if verdict:
                message = set_trailer(message, "Verdict", verdict)
            if reason:
                message = set_trailer(message, "Reason", reason)
            self._check_message(patch, message, msg)
            check_patch(self, state, patch, None, message)  # a resolution that breaks the base stops again
            if self.auto.replay:  # the same conflict on another port gets this resolution back
                for line in self.resolutions.record(self.path, patch, message):
                    self.progress.step(f"{patch.name}: {line} (git rerere)")
            self.journal.begin(state, patch, DoneStatus.RESOLVED)
            commit = git.index.commit_index(self.path, message, git.core.Person.parse(patch.header.author))
            self.journal.record(state, patch, DoneStatus.RESOLVED, commit, message)
            self._say_environment(patch)
            self._advance(state)
            return self._finish(state, force)

    def skip(self, reason: str, verdict: str = "obsolete", force: bool = False) -> Finished:
        """Leave the stopped patch out of the new queue, recording verdict and reason.

        What the tree holds of the patch (a staged resolution, conflict markers) is kept in a
        ``refs/tkv-seam/dropped/`` ref first.
        """
        reason = one_line(reason, "--reason") or ""
        if not reason:
            raise UsageError(
                "skip needs --reason '<why the patch goes>'", hint=self.command("skip", REASON=WHY)
            )
        if verdict not in SKIP_VERDICTS:
            raise UsageError(f"--verdict {verdict!r}: a skipped patch is 'obsolete' or 'dropped'")
        with self.seam.locked(self.progress):
            state = self.journal.load()
            p = state.port
            if p.current is None:
                raise SeamError(
                    f"the port to {self.to_base.name} is not stopped at a patch", hint=self.command("status")
                )
            regate(self, state)
            patch = self.journal.patch(p, p.next)
            self.resolutions.forget_progress(self.path)
            self.journal.keep_leftovers(f"skipping {patch.name}")
            self.journal.skip(state, patch, verdict, reason)
            self._advance(state)
            return self._finish(state, force)

    def abort(self) -> Aborted:
        """Remove the port tree (only a port tree, unfinished), keeping all of it in a bundle first."""
        with self.seam.locked(self.progress):
            state = self.journal.load(recover=False)
            if state.port.finished:
                raise RefusedError(
                    f"the port to {self.to_base.name} has finished; its queue is written",
                    hint=f"{self._drop_queue_hint()}; the port tree stays until `{hints.make('clean')}` "
                    f"or the next `{self.command('start')}` replaces it",
                )
            extra = {STATE: TreeState.path(self.path).read_bytes()}
            msg = self.journal.message_file
            if msg.exists():
                extra[PORT_MSG] = msg.read_bytes()
            bundle = self.seam.remove_keeping(kept_root(self.root), extra)
            return Aborted(self.path, bundle)

    def _drop_queue_hint(self) -> str:
        """How to drop the queue a finished port wrote: back to git's (a queue git tracks), or
        remove it (a new queue, which git does not track yet)."""
        queue = self.to_base.queue
        if git.index.toplevel(self.root) is not None and git.repo.exists_at(
            self.root, "HEAD", f"./{queue.patches}"
        ):
            return (
                f"drop the queue it wrote: `{hints.shell('git', 'checkout', '--', queue.patches)}` (back to the "
                f"committed queue; `{hints.shell('git', 'status', '--', queue.patches)}` names the files it added)"
            )
        inside = (self.root / queue.series).resolve().is_relative_to((self.root / queue.patches).resolve())
        paths = [queue.patches] + ([] if inside else [queue.series])
        return f"drop the queue it wrote (untracked): `{hints.shell('rm', '-r', '--', *paths)}`"

    def status(self) -> TreeState:
        """The port's state, with a commit an interrupted run made recorded."""
        with self.seam.locked(self.progress):
            return self.journal.load()

    def unmerged(self) -> list[str]:
        """The port tree's paths git still has unmerged (conflicts not yet resolved and added)."""
        return self.tree.unmerged() if self.seam.git_dir.is_dir() else []

    def next_step(self, state: TreeState, unmerged: list[str]) -> str:
        """The command that takes the port on from ``state`` (what ``port status`` ends with)."""
        p = state.port
        if p.finished:
            return (
                f"{hints.shell('git', 'status', '--', self.to_base.queue.patches)}  (review the written "
                "queue and commit it)"
            )
        if p.current and unmerged:
            return (
                f"resolve {', '.join(unmerged)}, `{git_c(self.path, 'add', *unmerged)}`, then "
                f"`{self.command('continue')}` (or `{self.command('skip', REASON=WHY)}`)"
            )
        if p.current and p.stopped and p.stopped.status == PatchStatus.OBSOLETE:
            return f"{self.command('skip', REASON=WHY)}   (it looks obsolete; or change it, stage it and continue)"
        if p.current:
            return f"{self.command('continue')}   (or `{self.command('skip', REASON=WHY)}`)"
        if p.next < len(p.series):  # an interrupted run: continue takes it up
            return self.command("continue")
        return self.command("finish")

    def finish(self, force: bool = False) -> Finished:
        with self.seam.locked(self.progress):
            return self._finish(self.journal.load(), force)

    # -- checks -------------------------------------------------------------------

    def _check_message(self, patch: Patch, message: str, where: Path) -> None:
        """Refuse (before anything is committed) a message whose export would lose the patch's
        identity or header fields (``queue.message.message_problem``)."""
        problem = message_problem(patch, message)
        if problem:
            raise RefusedError(
                f"{where}: {problem}",
                hint=f"edit {where} (subject '<slug>: <summary>'; the fields one per line in the last "
                f"paragraph), then `{self.command('continue')}`",
            )

    def _check_resolution(self, current: str) -> None:
        tree = self.path
        unmerged = self.tree.unmerged()
        if unmerged:
            raise RefusedError(
                f"{current}: still unmerged: {', '.join(unmerged)}",
                hint=f"resolve them, `{git_c(tree, 'add', *unmerged)}`, then `{self.command('continue')}`",
            )
        unstaged = git.index.unstaged_paths(tree)
        if unstaged:
            changed = [p for p in unstaged if git.repo.exists_at(tree, "HEAD", p)]
            new = [p for p in unstaged if p not in changed]  # untracked: the user's, never dropped by a hint
            drop = [f"drop the edits (`{git_c(tree, 'checkout', '--', *changed)}`)"] if changed else []
            drop += [f"move {', '.join(new)} out of {hints.quote(tree)}"] if new else []
            raise RefusedError(
                f"{current}: changes not staged: {', '.join(unstaged)}",
                hint=f"stage them (`{git_c(tree, 'add', *unstaged)}`) or {' and '.join(drop)}, "
                f"then `{self.command('continue')}`",
            )
        if not git.index.staged_paths(tree):
            raise RefusedError(
                f"{current}: nothing staged to commit",
                hint=f"stage your resolution (`{git_c(tree, 'add', '<files>')}`), or `{self.command('skip', REASON=WHY)}`",
            )
        marked = [
            line
            for line in git.index.staged_diff(tree).splitlines()
            if line.startswith("+") and line[1:].startswith(_MARKERS)
        ]
        if marked:
            raise RefusedError(
                f"{current}: conflict markers staged ({marked[0][1:8]!r})",
                hint=f"remove them, stage again, then `{self.command('continue')}`",
            )

    # -- applying and finishing ------------------------------------------------------

    def _advance(self, state: TreeState) -> None:
        """Apply patches from ``next`` on; stop (PortStopped) at the first that needs a human."""
        p = state.port
        self.tree.auto = self.auto
        self.tree.isort = Isort(self.to_base, self.cache, self.path, self.progress)
        self.tree.resolutions = self.resolutions
        moves = self.tree.moves([self.journal.patch(p, k) for k in range(len(p.series))])
        by_slug = {
            d.slug: PatchReport(d.name, d.slug, status=PatchStatus.EXACT if d.commit else PatchStatus.SKIPPED)
            for d in p.done
        }
        earlier: list[str] = []  # what the port did by itself on the patches this run took in
        try:
            while p.next < len(p.series):
                patch = self.journal.patch(p, p.next)
                self.progress.step(f"port [{p.next + 1}/{len(p.series)}] {patch.name}")
                r = try_patch(self.tree, patch, moves, by_slug, {})
                did = r.did
                for d in did:
                    self.progress.step(f"{patch.name}: {d.line()}")
                if r.own in APPLIED and r.status != PatchStatus.OBSOLETE:
                    # a patch blocked by a skipped dependency that still applies goes in; noted
                    self._take(state, patch, r)
                    earlier += [f"    {patch.name}: {line}" for line in self._did_on(patch.name)]
                    by_slug[patch.header.slug] = r
                    self._say_environment(patch)
                    continue
                self.journal.stop(state, patch, r)
                replayed = any(f.status == FileStatus.REPLAYED for f in r.files)
                if replayed and (recorded := self.resolutions.message(patch)):
                    atomic_write(self.journal.message_file, recorded)  # the message a resolution had
                raise PortStopped(
                    "\n".join([stop_message(self.to_base.name, r), *did_lines(did)]),
                    hint=stop_hint(
                        self.to_base.name,
                        self.path,
                        self.journal.message_file,
                        self.default_tree,
                        obsolete=r.status == PatchStatus.OBSOLETE,
                    ),
                    kind=str(r.status),
                    patch=patch.name,
                )
        except PortStopped as e:
            if earlier:
                e.message += "\n  before it, this run took in by itself (re-read them):\n" + "\n".join(
                    earlier
                )
            raise

    def _take(self, state: TreeState, patch: Patch, r: PatchReport) -> None:
        """Gate (and prove) a patch that went in without a human, and commit it; a patch whose every
        conflict got a recorded resolution back goes in as resolved, with that resolution's message."""
        replayed = any(f.status == FileStatus.REPLAYED for f in r.files)
        status = DoneStatus.RESOLVED if replayed else DoneStatus(str(r.own))
        message = (self.resolutions.message(patch) if replayed else None) or patch.header.message
        if replayed and self.resolutions.header_changed(patch):
            did = Did(
                "replay",
                patch.name,
                "the message recorded with it was for an earlier header of the "
                "patch (the queue changed since): the patch's own message kept, with the Verdict and "
                "Reason given then",
            )
            self.progress.step(f"{patch.name}: {did.line()}")
            r.did.append(did)
        check_patch(self, state, patch, r, message if replayed else None)  # stops (breaks) when it fails
        self.journal.begin(state, patch, status, r.note)
        # the patch's own files only: a linter's cache or a user's file left in the tree stays out
        own = [p for f in r.files for p in (f.path, f.moved_to) if p]
        own = [
            p
            for p in dict.fromkeys(own)
            if (self.path / p).exists() or git.repo.exists_at(self.path, "HEAD", p)
        ]
        commit = git.index.commit(self.path, message, patch.header.author, paths=own or None)
        self.journal.record(state, patch, status, commit, message, note=r.note)

    def _say_environment(self, patch: Patch) -> None:
        """Stop once (kind ``environment``, naming no patch as the cause) when proving ``patch``
        found that its tests fail on the pristine base too; later runs go on with the gate alone."""
        prover = self.prove
        if prover is None or not prover.environment:
            return
        error, prover.environment = prover.environment, ""
        venv = prover.python.parent.parent
        cont = self.command("continue")  # carry says its own
        raise EnvironmentStop(
            f"port to {self.to_base.name} stopped: {ENVIRONMENT} (not a patch's fault): the test venv {venv} "
            f"fails on stock {self.to_base.name} too: {error}\n"
            f"  found while proving {patch.name}, which went in and passed the gate (committed, not proven); "
            f"proving is off for this port while {venv} stays as it is (recorded in .git/{ENV_FILE})",
            hint=f"`{cont}` goes on with the gate alone (each patch said as not proven); to prove again, "
            f"fix its cause, then build the venv anew (`{anew(self.root, prover.python, self.to_base.name)}`)",
        )

    def _did_on(self, name: str) -> list[str]:
        """What the gate record says the port did by itself on ``name``."""
        entry = read_record(self.path).get(name)
        return [d.line() for d in entry.did] if entry is not None else []

    def _finish(self, state: TreeState, force: bool) -> Finished:
        p = state.port
        if not p.finished and p.current is None and p.next == len(p.series):
            regate(self, state)  # the last gate before the queue is written
        return finish_queue(self, state, force)
