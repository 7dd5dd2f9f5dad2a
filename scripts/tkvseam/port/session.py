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

Nothing is lost on a crash. The state is written into the port tree before the tree is in
place, so a start killed at any point leaves either a scratch tree (removed by the next
run) or a port the next ``continue`` goes on with. Before each commit the state records
what the commit is (``Committing``: the patch, its status, the HEAD it goes on); a run
killed after the commit records it as that (a 3-way patch as 3-way) on the next verb. A
run killed while applying a patch (files half written, nothing recorded) has its leftovers
kept in ``refs/tkv-seam/dropped/`` by the next ``continue``, which applies the patch again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import git, hints, layout
from ..bases.pins import Base, default_cache_dir
from ..bases.repo import base_repo
from ..errors import PortStopped, RefusedError, SeamError, UsageError
from ..edit.refresh import queue_digest
from ..fsutil import atomic_write
from ..queue.patch import REQUIRED_TRAILERS, Header, Patch, PatchFormatError, parse_text
from ..progress import QUIET, Progress
from ..layout import BRANCH
from ..tree.kept import kept_root
from ..tree.seamtree import SeamTree
from ..queue.series import read_series
from ..tree.state import STATE, Committing, DonePatch, DoneStatus, Kind, PortProgress, TreeState
from .tree import try_patch
from .finish import Finished, finish_queue
from .gate import check_patch
from .model import APPLIED, PatchReport, PatchStatus
from .render import WHY, port_command, stop_hint, stop_message
from .report import refuse_direction
from .tree import PortTree

PORT_MSG = "tkv-seam-port-msg"  # the stopped patch's commit message, for the user to edit
QUEUE_COPY = "tkv-seam-port-queue"  # in the port tree's .git: the old queue's patches as the port started
_MARKERS = ("<<<<<<< ", ">>>>>>> ", "=======\n")
SKIP_VERDICTS = ("obsolete", "dropped")


def port_tree(root: Path, to_name: str) -> Path:
    return layout.port_tree(root, to_name)


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
class Aborted:
    tree: Path
    bundle: Path


class PortSession:
    def __init__(
        self,
        root: Path,
        to_base: Base,
        tree: Path | None = None,
        cache: Path | None = None,
        progress: Progress = QUIET,
    ):
        self.root = root
        self.to_base = to_base
        self.default_tree = port_tree(root, to_base.name)
        self.path = Path(tree) if tree is not None else self.default_tree
        self.cache = cache or default_cache_dir()
        self.progress = progress
        self.prove = None  # a prove.Prover: each patch's own tests run at its prefix (gate.check_patch)
        self.seam = SeamTree(self.path, root)
        self.tree = PortTree(self.path)

    def command(self, verb: str, **variables: str) -> str:
        """``make port VERB=<verb>`` for this port (its tree named when it is not the default)."""
        return port_command(verb, self.to_base.name, self.path, self.default_tree, **variables)

    # -- the verbs ----------------------------------------------------------------

    def exists(self) -> bool:
        """True when a port to the base is in progress (or finished) in the tree."""
        state = self.seam.load()
        return state is not None and state.kind == Kind.PORT and state.port is not None

    def start(self, from_base: Base, force: bool = False) -> Finished:
        """Port ``from_base``'s queue: build the port tree, apply until a patch needs you (PortStopped)."""
        refuse_direction(from_base, self.to_base)
        with self.seam.locked(self.progress):
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
                for name in series.names:  # the queue as it is now: what the port reads to its end
                    rel = series.path(name).relative_to(self.root)
                    (built.path / ".git" / QUEUE_COPY / rel).parent.mkdir(parents=True, exist_ok=True)
                    (built.path / ".git" / QUEUE_COPY / rel).write_bytes(series.path(name).read_bytes())
                return built.path, state

            state, _ = self.seam.rebuild(
                old_state, build, rerun=self.command("start"), progress=self.progress
            )
            self._advance(state)
            return self._finish(state, force)

    def continue_(
        self, verdict: str | None = None, reason: str | None = None, force: bool = False
    ) -> Finished:
        """Commit the staged resolution of the stopped patch (its message and author) and go on.

        After an interrupted run it goes on from where that run was killed.
        """
        verdict, reason = one_line(verdict, "--verdict"), one_line(reason, "--reason")
        with self.seam.locked(self.progress):
            state = self._load()
            p = state.port
            if p.current is None:
                if p.next < len(p.series):  # killed while applying patch `next`: keep its leftovers, again
                    self._keep_leftovers(f"retrying {Path(p.series[p.next]).name}")
                    self._advance(state)
                return self._finish(state, force)
            self._check_resolution(p.current)
            patch = self._patch(p, p.next)
            msg = self.seam.git_dir / PORT_MSG
            message = msg.read_text() if msg.exists() else patch.header.message
            if verdict:
                message = set_trailer(message, "Verdict", verdict)
            if reason:
                message = set_trailer(message, "Reason", reason)
            self._check_message(patch, message, msg)
            check_patch(self, state, patch, None, message)  # a resolution that breaks the base stops again
            p.committing = Committing(patch.name, DoneStatus.RESOLVED, self.seam.head())
            self.save(state)
            commit = git.commit_index(self.path, message, git.Person.parse(patch.header.author))
            self._record(state, patch, DoneStatus.RESOLVED, commit, message)
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
            state = self._load()
            p = state.port
            if p.current is None:
                raise SeamError(
                    f"the port to {self.to_base.name} is not stopped at a patch", hint=self.command("status")
                )
            patch = self._patch(p, p.next)
            self._keep_leftovers(f"skipping {patch.name}")
            p.done.append(DonePatch(patch.name, patch.header.slug, DoneStatus.SKIPPED, None, verdict, reason))
            p.next += 1
            p.current = p.stopped = None
            (self.seam.git_dir / PORT_MSG).unlink(missing_ok=True)
            self.save(state)
            self._advance(state)
            return self._finish(state, force)

    def abort(self) -> Aborted:
        """Remove the port tree (only a port tree, unfinished), keeping all of it in a bundle first."""
        with self.seam.locked(self.progress):
            state = self._load(recover=False)
            if state.port.finished:
                raise RefusedError(
                    f"the port to {self.to_base.name} has finished; its queue is written",
                    hint=f"drop the queue with git (`{hints.shell('git', 'checkout', '--', self.to_base.queue.patches)}`); "
                    f"the tree stays a tree of {self.to_base.name} (`{hints.make('apply', BASE=self.to_base.name)}` "
                    "replaces it)",
                )
            extra = {"tkv-seam.json": TreeState.path(self.path).read_bytes()}
            msg = self.seam.git_dir / PORT_MSG
            if msg.exists():
                extra[PORT_MSG] = msg.read_bytes()
            bundle = self.seam.remove_keeping(kept_root(self.root), extra)
            return Aborted(self.path, bundle)

    def status(self) -> TreeState:
        """The port's state, with a commit an interrupted run made recorded."""
        with self.seam.locked(self.progress):
            return self._load()

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
        if p.current and (p.stopped or {}).get("status") == PatchStatus.OBSOLETE:
            return f"{self.command('skip', REASON=WHY)}   (it looks obsolete; or change it, stage it and continue)"
        if p.current:
            return f"{self.command('continue')}   (or `{self.command('skip', REASON=WHY)}`)"
        if p.next < len(p.series):  # an interrupted run: continue takes it up
            return self.command("continue")
        return self.command("finish")

    def finish(self, force: bool = False) -> Finished:
        with self.seam.locked(self.progress):
            return self._finish(self._load(), force)

    # -- state --------------------------------------------------------------------

    def _load(self, recover: bool = True) -> TreeState:
        state = self.seam.load()
        if state is None or state.kind != Kind.PORT or state.port is None:
            if self.path.is_dir() and not self.path.is_symlink():
                # a tree is there, but not a port this tool can read: say what it is, never touch it
                if state is not None:  # the user's tree of another kind: nothing to move aside
                    raise SeamError(
                        f"{self.path} is a tkv-seam {state.kind} tree of {state.base}, not a port; "
                        "nothing was changed",
                        hint=f"{port_command('status', self.to_base.name)}   (the port's own tree, "
                        f"{layout.shown(self.default_tree, self.root)}; PORT_TREE= names another port tree)",
                    )
                if not self.seam.git_dir.is_dir():
                    what = "no .git: not a git tree (removed by hand?)"
                elif TreeState.path(self.path).exists():
                    what = f"its state .git/{STATE} is unreadable (edited by hand?)"
                else:
                    what = f"no state .git/{STATE} (deleted by hand?)"
                raise SeamError(
                    f"{self.path} is there, but holds no port tkv-seam can go on with: {what}; nothing was changed",
                    hint=f"keep it aside (`{hints.shell('mv', self.path, f'{self.path}.mine')}`; its commits stay "
                    f"there to cherry-pick), then `{self.command('start')}`"
                    if layout.in_build(self.root, self.path)
                    else hints.aside(self.root, self.path, ""),
                )
            raise SeamError(
                f"no port to {self.to_base.name} in progress ({self.path})",
                hint=self.command("start"),
            )
        if state.base != self.to_base.name:
            raise RefusedError(
                f"{self.path} holds the port to {state.base}, not to {self.to_base.name}",
                hint=port_command("status", state.base, self.path, port_tree(self.root, state.base)),
            )
        if recover:
            note = self._recover(state)
            if note:
                self.progress.step(note)
            self._check_head(state)
        return state

    def _check_head(self, state: TreeState) -> None:
        """Go on only from the HEAD the port recorded: a HEAD that carries the ported patches in order
        (commits amended or rebased by hand) is taken, and said; any other HEAD (a branch switched,
        commits dropped or added) is refused, since the queue is exported from HEAD."""
        p = state.port
        head = self.seam.head()
        if p.finished or head == state.head:
            return
        ported = [d for d in p.done if d.commit]
        found = list(reversed(git.subjects(self.path, head, f"^{state.base_commit}")))
        slugs = [subject.split(":", 1)[0] for _, subject in found]
        if slugs == [d.slug for d in ported]:
            for d, (commit, _) in zip(ported, found):
                if d.commit != commit:
                    d.commit, d.note = commit, "; ".join(x for x in (d.note, "edited in the port tree") if x)
            self.progress.warn(
                f"{self.path}: the ported commits were rewritten by hand; taking HEAD {head[:12]}"
            )
            self.save(state)
            return
        branch = git.branch(self.path)
        raise RefusedError(
            f"{self.path}: HEAD is {head[:12]}"
            + (f" ({branch.removeprefix('refs/heads/')})" if branch else " (detached)")
            + f", not the port's {state.head[:12]}: it carries {len(found)} commit(s) after the base "
            f"({', '.join(slugs) or 'none'}), where the port has {len(ported)} "
            f"({', '.join(d.slug for d in ported) or 'none'}); the queue would be exported without the difference",
            hint=(
                f"`{git_c(self.path, 'reset', '--soft', state.head[:12])}` (your commits' changes stay staged), "
                f"then `{self.command('continue')}`"
                if branch == f"refs/heads/{BRANCH}"
                else f"`{git_c(self.path, 'checkout', BRANCH)}` (the port's branch), then `{self.command('status')}`"
            ),
        )

    def save(self, state: TreeState) -> None:
        state.head = self.seam.head()
        self.seam.save(state)

    def _patch(self, p: PortProgress, k: int) -> Patch:
        """Patch ``k`` of the old queue as it was when the port started (its copy in the port tree)."""
        rel = p.series[k]
        kept = self.seam.git_dir / QUEUE_COPY / rel
        if not kept.is_file():
            raise SeamError(
                f"{self.path}: .git/{QUEUE_COPY}/{rel}, patch {k + 1} of the queue as this port started from it, "
                "is gone (removed by hand?); nothing was changed",
                hint=f"abort the port (its tree is kept in a bundle): `{self.command('abort')}`, then `{self.command('start')}`",
            )
        return parse_text(kept.read_text(), Path(rel).name, self.root / rel)

    def _record(
        self,
        state: TreeState,
        patch: Patch,
        status: DoneStatus,
        commit: str,
        message: str | None = None,
        note: str = "",
    ) -> None:
        """``patch`` is through as ``commit``; its verdict and reason are those of the commit's message."""
        header = _message_header(patch, message) if message else patch.header
        p = state.port
        verdict, reason = (" ".join(header.get(key)) for key in ("Verdict", "Reason"))
        p.done.append(DonePatch(patch.name, patch.header.slug, status, commit, verdict, reason, note))
        p.next += 1
        p.current = p.stopped = p.committing = None
        (self.seam.git_dir / PORT_MSG).unlink(missing_ok=True)
        self.save(state)

    def _recover(self, state: TreeState) -> str | None:
        """Record the commit a killed run made for the next patch but did not record; a note, or None.

        Only a commit whose parent is the HEAD the state recorded and whose subject is the
        next patch's counts (a commit of the user's own is left alone: continue says what it
        finds). Its status is the one written before the commit (``Committing``); a commit
        the user made of a stopped patch is ``resolved``.
        """
        p = state.port
        if p.finished or p.next >= len(p.series):
            return None
        head = self.seam.head()
        c = p.committing
        parent = c.parent if c else state.head
        if head == parent:
            if c:  # killed before the commit: nothing to record
                p.committing = None
                self.save(state)
            return None
        info = git.commit_info(self.path, head)
        patch = self._patch(p, p.next)
        if (
            info.parents[:1] != (parent,)
            or info.subject != git.Commit("", (), git.TOOL, patch.header.message).subject
        ):
            return None
        if c:
            status = c.status
        elif p.current:
            status = DoneStatus.RESOLVED
        else:  # every commit the port makes is recorded first (Committing): this one is not the port's
            return None
        note = "; ".join(x for x in ((c.note if c else ""), "recorded after an interrupted run") if x)
        self._record(state, patch, status, head, info.message, note)
        return f"{patch.name}: committed by an interrupted run ({head[:12]}); recorded as {status}"

    def _keep_leftovers(self, why: str) -> None:
        left = self.seam.uncommitted()
        if left:
            ref = self.seam.keep_dropped(left, why)
            self.progress.warn(f"{len(left.dirty)} changed file(s) in {self.path} kept in {ref} before {why}")
            git.reset_clean(self.path, "HEAD")

    def _check_message(self, patch: Patch, message: str, where: Path) -> None:
        """Refuse (before anything is committed) a message whose export would lose the patch's
        identity or header fields: its subject keeps the slug, its last paragraph the fields."""
        fix = f"edit {where} (subject '<slug>: <summary>'; the fields one per line in the last paragraph)"
        try:
            header = _message_header(patch, message)
        except PatchFormatError as e:
            raise RefusedError(
                f"{where}: {e.message}", hint=f"{fix}, then `{self.command('continue')}`"
            ) from e
        if header.slug != patch.header.slug:
            raise RefusedError(
                f"{where}: the subject starts with {header.slug!r}, not the patch's slug {patch.header.slug!r} "
                "(the patch would be renamed)",
                hint=f"{fix}, then `{self.command('continue')}`",
            )
        missing = [key for key in REQUIRED_TRAILERS if not header.get(key)]
        if missing:
            raise RefusedError(
                f"{where}: the message lost the header field(s) {', '.join(missing)} (a blank line inside "
                "the fields, or a field removed, ends them): the exported patch would fail lint",
                hint=f"{fix}, then `{self.command('continue')}`",
            )

    def _check_resolution(self, current: str) -> None:
        tree = self.path
        unmerged = self.tree.unmerged()
        if unmerged:
            raise RefusedError(
                f"{current}: still unmerged: {', '.join(unmerged)}",
                hint=f"resolve them, `{git_c(tree, 'add', *unmerged)}`, then `{self.command('continue')}`",
            )
        unstaged = git.unstaged_paths(tree)
        if unstaged:
            raise RefusedError(
                f"{current}: changes not staged: {', '.join(unstaged)}",
                hint=f"stage them (`{git_c(tree, 'add', *unstaged)}`) or drop them "
                f"(`{git_c(tree, 'checkout', '--', *unstaged)}`), then `{self.command('continue')}`",
            )
        if not git.staged_paths(tree):
            raise RefusedError(
                f"{current}: nothing staged to commit",
                hint=f"stage your resolution (`{git_c(tree, 'add', '<files>')}`), or `{self.command('skip', REASON=WHY)}`",
            )
        marked = [
            line
            for line in git.staged_diff(tree).splitlines()
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
        moves = self.tree.moves([self._patch(p, k) for k in range(len(p.series))])
        by_slug = {
            d.slug: PatchReport(d.name, d.slug, status=PatchStatus.EXACT if d.commit else PatchStatus.SKIPPED)
            for d in p.done
        }
        while p.next < len(p.series):
            patch = self._patch(p, p.next)
            self.progress.step(f"port [{p.next + 1}/{len(p.series)}] {patch.name}")
            r = try_patch(self.tree, patch, moves, by_slug, {})
            if r.own in APPLIED and r.status != PatchStatus.OBSOLETE:
                # a patch blocked by a skipped dependency that still applies goes in; noted
                status = DoneStatus(str(r.own))
                check_patch(self, state, patch, r)  # stops (breaks) when it fails the gate on the new base
                p.committing = Committing(patch.name, status, self.seam.head(), r.note)
                self.save(state)
                commit = git.commit(self.path, patch.header.message, patch.header.author)
                self._record(state, patch, status, commit, note=r.note)
                by_slug[patch.header.slug] = r
                continue
            p.current, p.stopped = patch.name, r.to_json()
            atomic_write(self.seam.git_dir / PORT_MSG, patch.header.message)
            self.save(state)
            msg = self.seam.git_dir / PORT_MSG
            raise PortStopped(
                stop_message(self.to_base.name, r),
                hint=stop_hint(self.to_base.name, self.path, msg, self.default_tree),
            )

    def _finish(self, state: TreeState, force: bool) -> Finished:
        return finish_queue(self, state, force)


def git_c(tree: Path, *args: str) -> str:
    """``git -C <tree> <args>`` as a hint (the tree quoted)."""
    return hints.shell("git", "-C", tree, *args)


def set_trailer(message: str, key: str, value: str) -> str:
    """``message`` with its ``key:`` trailer (and continuation lines) replaced by ``value``."""
    lines = message.rstrip("\n").split("\n")
    out, skipping, done = [], False, False
    for line in lines:
        if line.startswith(f"{key}:"):
            if not done:
                out.append(f"{key}: {value}")
                done = True
            skipping = True
            continue
        if skipping and line.startswith(" "):
            continue
        skipping = False
        out.append(line)
    if not done:
        out.append(f"{key}: {value}")
    return "\n".join(out) + "\n"


def _message_header(patch: Patch, message: str) -> Header:
    """The header fields (Verdict, Reason, ...) of a commit message written for ``patch``."""
    return parse_text(
        f"From: {patch.header.author}\nSubject: {message}\ndiff --git a/x b/x\n", patch.name
    ).header
