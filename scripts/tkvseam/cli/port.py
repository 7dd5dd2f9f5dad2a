"""The ``port`` verbs: ``report``, ``start``, ``continue``, ``skip``, ``abort``, ``status``, ``finish``.

One subcommand per verb, each with its own options, so two modes can never be combined.
The bodies call ``port.session.PortSession`` (and ``port.report``) and print what they return.
"""

from __future__ import annotations

import functools
import os

import click

from .. import hints, layout
from ..errors import SeamError, UsageError
from .options import Context, absolute, emit, force_option, json_option, pass_ctx

from_option = click.option(
    "--base",
    "base_name",
    default=lambda: os.environ.get("BASE") or None,
    show_default="$BASE, else the newest carried base older than --to",
    help="The base whose queue is ported.",
)
to_option = click.option("--to", "to_name", required=True, help="The newer base to port onto (e.g. v0.32.0).")
tree_option = click.option(
    "--tree", default=None, help=f"Port tree [default: {layout.default(layout.port_tree, '<to>')}]."
)


prove_option = click.option(
    "--prove",
    is_flag=True,
    help="Run each patch's own Tests:/Guard:s at its prefix too, with TO's test venv (make venv-vllm BASE=TO).",
)


_AUTO_FLAGS = (  # (flag, parameter, what it turns off): findings/auto.py
    ("--no-autoresolve", "autoresolve", "Resolve no conflict by itself (offset, imports, replay all off)."),
    ("--no-offset", "offset", "Do not place a conflicting file's hunks by offset with their full context."),
    ("--no-imports", "imports", "Do not merge import-only conflicts (sorted by the base's ruff)."),
    ("--no-replay", "replay", "Do not replay resolutions recorded before (git rerere), nor record new ones."),
    (
        "--no-fix",
        "fix",
        "Do not run the base's fixers (ruff check --fix, ruff format) before the gate fails a patch.",
    ),
)


def auto_options(f):
    """The switches of what the port does by itself (``auto.Auto``), passed on as ``auto``."""

    @functools.wraps(f)
    def with_auto(*args, autoresolve, offset, imports, replay, fix, **kw):
        from ..findings.auto import Auto

        return f(*args, auto=Auto.from_flags(autoresolve, offset, imports, replay, fix), **kw)

    for flag, name, text in reversed(_AUTO_FLAGS):
        with_auto = click.option(flag, name, is_flag=True, flag_value=False, default=True, help=text)(
            with_auto
        )
    return with_auto


class VerbGroup(click.Group):
    """``port``'s verbs: an unknown one is a usage error (exit 2) naming the verb it most likely is."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        verb = args[0] if args else ""
        if verb and not verb.startswith("-") and verb not in self.commands:
            meant = hints.close(verb, self.commands)
            to = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--to"), "<base>")
            raise UsageError(
                f"no port verb {verb!r} (the verbs: {', '.join(self.commands)}){hints.did_you_mean(meant)}",
                hint=hints.port(meant[0] if meant else "<verb>", to),
            )
        return super().resolve_command(ctx, args)


@click.group(cls=VerbGroup)
def port():
    """Forward-port a base's queue onto a newer base: a report, or a resumable port like git rebase.

    \b
    port report --to B       per patch and hunk: placement, conflicts, blocked-by, likely
                             obsolete, moves, upstream diff, draft verdicts; keeps nothing
    port start --to B        build build/port-B; stop at the first patch needing you
    port continue --to B     after resolving and `git add`: commit (the patch's message and
                             author; edit Verdict/Reason in .git/tkv-seam-port-msg or pass
                             --verdict/--reason), go on
    port skip --to B --reason WHY [--verdict obsolete|dropped]
    port status [--to B]     done, stopped, todo (no --to: every port in progress)
    port abort --to B        remove the port tree, keeping all of it in build/dropped/*.bundle
    port finish --to B [--force]   write B's queue and PORT.md, lint them

    Exit 12 when the port stopped for you; a report that ran exits 0 (its summary says what it found).
    """


def _session(ctx: Context, to_name: str, tree: str | None, verb: str, auto=None):
    from ..port.session import PortSession

    # an unknown TO (a retire raced the carry: its port tree may be left): pin it again, never a
    # port of another base (the oldest one's `status` led to a `start` that is refused)
    to_base = ctx.base(to_name, hint=_pin_hint(ctx, to_name, verb, tree=tree))
    session = PortSession(
        ctx.root, to_base, absolute(tree) if tree else None, ctx.cache, ctx.progress, ctx.bases_file
    )
    if auto is not None:
        session.auto = auto
    return session


def _pin_hint(ctx: Context, to_name: str, verb: str, base: str | None = None, tree: str | None = None) -> str:
    """An unknown target is a release not pinned yet: carrying it pins it and ports onto it, when a
    carried base is older (else carry refuses it too: the carried bases are named). Another
    spelling of a pinned base's version (``9.10.0``, ``V9.10.0``, ``v9.10``) is that base's same
    verb, never a carry (from ``status``, a carry would go on with the port)."""
    from packaging.version import InvalidVersion, Version

    from ..bases.carried import carried_before
    from ..bases.pins import load_bases
    from ..port.render import WHY

    bases = load_bases(ctx.bases_file, ctx.root)
    version = to_name.strip().removeprefix("v").removeprefix("V")
    try:
        source = carried_before(bases, ctx.root, version)
        same = [b.name for b in bases.values() if b.name != base and Version(b.version) == Version(version)]
    except InvalidVersion:
        source, same = None, []
    if same:
        reason = {"REASON": WHY} if verb == "skip" else {}
        return hints.port(verb, same[0], absolute(tree) if tree else None, BASE=base, **reason)
    if source is None:
        return f"{hints.tool('carried')}   (the carried bases: a port goes onto a release newer than one of them)"
    return f"make carry VERSION={version}   (pins it and ports onto it; or only pin it: make pin VERSION={version})"


def _from_base(ctx: Context, base_name: str | None, to_base, verb: str):
    """``--base``, else the newest carried base older than ``to_base`` (where a port starts from)."""
    from ..bases.carried import CARRIED_HINT, carried_before, no_source
    from ..bases.pins import load_bases
    from ..errors import EXIT_USAGE

    source = carried_before(load_bases(ctx.bases_file, ctx.root), ctx.root, to_base.version)
    if base_name:  # unknown: the base a port onto TO starts from by default, never a newer one
        again = (
            hints.make("port", VERB=verb, BASE=source.name, TO=to_base.name)
            if source
            else hints.tool("carried")
        )
        return ctx.base(base_name, hint=again)
    if source is None:
        raise no_source(
            to_base.name,
            "nothing to port onto it",
            hint=f"{CARRIED_HINT[:-1]}; name one with BASE=)",
            exit_code=EXIT_USAGE,
        )
    return source


@port.command("report")
@from_option
@to_option
@json_option
@pass_ctx
def port_report(ctx: Context, base_name, to_name, as_json):
    """Walk the whole queue onto the new base without stopping; print the report, keep nothing."""
    from ..port.report import report
    from ..port.reportfile import PortReported, write_report

    to_base = ctx.base(to_name, hint=_pin_hint(ctx, to_name, "report", base_name), avoid=base_name)
    from_base = _from_base(ctx, base_name, to_base, "report")
    reports = report(ctx.root, from_base, to_base, ctx.cache, ctx.progress)
    files = write_report(ctx.root, from_base, to_base, reports, ctx.progress)
    emit(PortReported(ctx.root, from_base.name, to_name, reports, files))


@port.command("start")
@from_option
@to_option
@tree_option
@force_option
@json_option
@prove_option
@auto_options
@pass_ctx
def port_start(ctx: Context, base_name, to_name, tree, force, prove, as_json, auto):
    """Start the port in the port tree; stop (exit 12) at the first patch needing you, else finish."""
    to_base = ctx.base(to_name, hint=_pin_hint(ctx, to_name, "start", base_name, tree), avoid=base_name)
    from_base = _from_base(ctx, base_name, to_base, "start")
    emit(_proving(ctx, _session(ctx, to_name, tree, "start", auto), prove).start(from_base, force))


@port.command("continue")
@to_option
@tree_option
@click.option(
    "--verdict",
    default=None,
    help="The Verdict line of the resolved patch: 'still needed', 'still needed, fixed' or 're-expressed'.",
)
@click.option("--reason", default=None, help="The Reason line of the resolved patch (one line).")
@force_option
@json_option
@prove_option
@auto_options
@pass_ctx
def port_continue(ctx: Context, to_name, tree, verdict, reason, force, prove, as_json, auto):
    """Commit the staged resolution of the stopped patch and go on (after a crash: go on from there)."""
    emit(
        _proving(ctx, _session(ctx, to_name, tree, "continue", auto), prove).continue_(verdict, reason, force)
    )


@port.command("skip")
@to_option
@tree_option
@click.option("--reason", required=True, help="Why the patch goes (one line; recorded in PORT.md).")
@click.option("--verdict", type=click.Choice(["obsolete", "dropped"]), default="obsolete", show_default=True)
@force_option
@json_option
@prove_option
@auto_options
@pass_ctx
def port_skip(ctx: Context, to_name, tree, reason, verdict, force, prove, as_json, auto):
    """Leave the stopped patch out of the new queue (what the tree held of it is kept in a ref)."""
    emit(_proving(ctx, _session(ctx, to_name, tree, "skip", auto), prove).skip(reason, verdict, force))


@port.command("abort")
@to_option
@tree_option
@json_option
@pass_ctx
def port_abort(ctx: Context, to_name, tree, as_json):
    """Remove the port tree after keeping every commit, staged and unstaged change in a bundle."""
    emit(_session(ctx, to_name, tree, "abort").abort())


@port.command("status")
@click.option("--to", "to_name", help="The newer base the port is onto (default: every port in progress).")
@tree_option
@json_option
@pass_ctx
def port_status(ctx: Context, to_name, tree, as_json):
    """Where the port stands: done, stopped (and its unmerged files), todo, and the next command.
    Without --to: every port in progress in build/."""
    from ..fsutil import lexists
    from ..port.render import NoPort, PortStatus

    if to_name is None:
        if tree:
            raise UsageError("--tree names one port's tree: give its --to too", hint="make port VERB=status")
        emit(_all_ports(ctx))
        return
    session = _session(ctx, to_name, tree, "status")
    if not lexists(session.path):  # no port tree: none in progress (a tree of another kind is refused)
        queue = session.to_base.queue.series
        carried = (ctx.root / queue).is_file()  # a port onto it would write over its queue: never the hint
        # carried already: its queue to work on (apply takes seconds), never a slower step than asked
        next_step = hints.make("apply", BASE=to_name) if carried else session.command("start")
        hints.record(next_step)
        shown = layout.shown(session.path, ctx.root)
        emit(NoPort(to_name, session.path, next_step, shown, queue if carried else ""))
        return
    state = session.status()
    unmerged = session.unmerged() if state.port.current else []
    next_step = session.next_step(state, unmerged)
    hints.record(next_step)
    emit(PortStatus(session.path, state, unmerged, next_step))


def _all_ports(ctx: Context):
    """Every ``build/port-<to>`` of a pinned base, as its ``port status`` says it."""
    from ..bases.pins import load_bases
    from ..port.render import PortStatus, Ports

    bases = load_bases(ctx.bases_file, ctx.root)
    found, unreadable = [], {}
    for to_name in sorted(bases):
        path = layout.port_tree(ctx.root, to_name)
        if path.is_symlink() or (path.exists() and not path.is_dir()):  # as `--to` refuses them
            what = "a symlink" if path.is_symlink() else "not a directory"
            unreadable[layout.shown(path, ctx.root)] = f"{what}, not a port tree"
            continue
        if not path.is_dir():
            continue
        try:
            session = _session(ctx, to_name, None, "status")
            state = session.status()
            unmerged = session.unmerged() if state.port.current else []
            found.append(PortStatus(session.path, state, unmerged, session.next_step(state, unmerged)))
        except SeamError as e:
            unreadable[layout.shown(path, ctx.root)] = e.message.splitlines()[0]
    none_next = "make watch   (a release newer than the carried bases?), then make carry VERSION=<version>"
    hints.record(found[-1].next_step if found else none_next)
    return Ports(found, unreadable, none_next, layout.shown(layout.port_tree(ctx.root, "<base>"), ctx.root))


@port.command("finish")
@to_option
@tree_option
@force_option
@json_option
@pass_ctx
def port_finish(ctx: Context, to_name, tree, force, as_json):
    """Write the new base's queue and PORT.md from the port tree, lint them (refuses a changed queue)."""
    emit(_session(ctx, to_name, tree, "finish").finish(force))


def _proving(ctx: Context, session, prove: bool):
    """``session``, proving each patch with TO's test venv under --prove (without one: said, the gate alone)."""
    if prove:
        from ..port.prove import Prover

        python = ctx.venv_python(None, session.to_base.name)
        if python.exists():
            session.prove = Prover(python)
        else:
            ctx.progress.warn(
                f"--prove: no test venv {python.parent.parent} (`make venv-vllm BASE={session.to_base.name}` "
                "builds it); the port goes on with the gate alone"
            )
    return session


COMMANDS = [port]
