"""The ``port`` verbs: ``report``, ``start``, ``continue``, ``skip``, ``abort``, ``status``, ``finish``.

One subcommand per verb, each with its own options, so two modes can never be combined.
The bodies call ``port.session.PortSession`` (and ``port.report``) and print what they return.
"""

from __future__ import annotations

import os
import sys

import click

from .. import hints, layout
from ..errors import EXIT_LINT, EXIT_PORT
from .options import Context, absolute, emit_json, force_option, json_option, pass_ctx

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


@click.group()
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
    port status --to B       done, stopped, todo
    port abort --to B        remove the port tree, keeping all of it in build/dropped/*.bundle
    port finish --to B [--force]   write B's queue and PORT.md, lint them

    Exit 12 when the port stopped or the report has a patch that did not apply.
    """


def _shown(ctx: Context, path) -> str:
    """``path`` relative to the project root when it is inside it (as a user types it there)."""
    try:
        return str(path.relative_to(ctx.root))
    except ValueError:
        return str(path)


def _session(ctx: Context, to_name: str, tree: str | None):
    from ..port.session import PortSession

    to_base = ctx.base(to_name, hint="make port VERB=status TO={}")
    return PortSession(ctx.root, to_base, absolute(tree) if tree else None, ctx.cache, ctx.progress)


def _pin_hint(to_name: str) -> str:
    """An unknown target is a release not pinned yet: carrying it pins it and ports onto it."""
    version = to_name.removeprefix("v")
    return f"make carry VERSION={version}   (pins it and ports onto it; or only pin it: make pin VERSION={version})"


def _from_base(ctx: Context, base_name: str | None, to_base, verb: str):
    """``--base``, else the newest carried base older than ``to_base`` (where a port starts from)."""
    from ..bases.pins import load_bases
    from ..bases.carried import carried_before
    from ..errors import UsageError

    if base_name:
        return ctx.base(
            base_name, hint=f"make port VERB={verb} BASE={{}} TO={to_base.name}", avoid=to_base.name
        )
    source = carried_before(load_bases(ctx.bases_file, ctx.root), ctx.root, to_base.version)
    if source is None:
        raise UsageError(
            f"no carried base is older than {to_base.name}: nothing to port onto it (a port goes forward only)",
            hint=".venv/bin/tkv-seam carried   (the bases with a queue; name one with BASE=)",
        )
    return source


@port.command("report")
@from_option
@to_option
@json_option
@pass_ctx
def port_report(ctx: Context, base_name, to_name, as_json):
    """Walk the whole queue onto the new base without stopping; print the report, keep nothing."""
    from ..port import render
    from ..port.report import report
    from ..port.reportfile import report_json, write_report

    to_base = ctx.base(to_name, hint=_pin_hint(to_name), avoid=base_name)
    from_base = _from_base(ctx, base_name, to_base, "report")
    base_name = from_base.name
    reports = report(ctx.root, from_base, to_base, ctx.cache, ctx.progress)
    files = write_report(ctx.root, from_base, to_base, reports, ctx.progress)
    if as_json:
        emit_json(
            report_json(reports, base_name, to_name)
            | {"files": {"markdown": str(files.markdown), "json": str(files.json)}}
        )
    else:
        for line in render.report_lines(reports):
            click.echo(line)
        click.echo("\n" + render.verdict_table(reports, base_name, to_name))
        click.echo(render.summary_line(reports, base_name, to_name))
        click.echo(f"report kept in {_shown(ctx, files.markdown)} and {_shown(ctx, files.json)}")
    if not all(r.applied for r in reports):
        sys.exit(EXIT_PORT)


@port.command("start")
@from_option
@to_option
@tree_option
@force_option
@json_option
@prove_option
@pass_ctx
def port_start(ctx: Context, base_name, to_name, tree, force, prove, as_json):
    """Start the port in the port tree; stop (exit 12) at the first patch needing you, else finish."""
    to_base = ctx.base(to_name, hint=_pin_hint(to_name), avoid=base_name)
    from_base = _from_base(ctx, base_name, to_base, "start")
    _finished(_proving(ctx, _session(ctx, to_name, tree), prove).start(from_base, force), as_json)


@port.command("continue")
@to_option
@tree_option
@click.option("--verdict", default=None, help="The Verdict line of the resolved patch (one line).")
@click.option("--reason", default=None, help="The Reason line of the resolved patch (one line).")
@force_option
@json_option
@prove_option
@pass_ctx
def port_continue(ctx: Context, to_name, tree, verdict, reason, force, prove, as_json):
    """Commit the staged resolution of the stopped patch and go on (after a crash: go on from there)."""
    _finished(_proving(ctx, _session(ctx, to_name, tree), prove).continue_(verdict, reason, force), as_json)


@port.command("skip")
@to_option
@tree_option
@click.option("--reason", required=True, help="Why the patch goes (one line; recorded in PORT.md).")
@click.option("--verdict", type=click.Choice(["obsolete", "dropped"]), default="obsolete", show_default=True)
@force_option
@json_option
@prove_option
@pass_ctx
def port_skip(ctx: Context, to_name, tree, reason, verdict, force, prove, as_json):
    """Leave the stopped patch out of the new queue (what the tree held of it is kept in a ref)."""
    _finished(_proving(ctx, _session(ctx, to_name, tree), prove).skip(reason, verdict, force), as_json)


@port.command("abort")
@to_option
@tree_option
@json_option
@pass_ctx
def port_abort(ctx: Context, to_name, tree, as_json):
    """Remove the port tree after keeping every commit, staged and unstaged change in a bundle."""
    done = _session(ctx, to_name, tree).abort()
    if as_json:
        emit_json({"ok": True, "removed": str(done.tree), "bundle": str(done.bundle)})
        return
    click.echo(
        f"removed {done.tree}; no queue was written; everything it held (commits, staged and unstaged "
        f"changes, the port's state) is in {done.bundle} (git clone {done.bundle} gets it back)"
    )


@port.command("status")
@to_option
@tree_option
@json_option
@pass_ctx
def port_status(ctx: Context, to_name, tree, as_json):
    """Where the port stands: done, stopped (and its unmerged files), todo, and the next command."""
    from ..port import render

    session = _session(ctx, to_name, tree)
    state = session.status()
    unmerged = session.unmerged() if state.port.current else []
    next_step = session.next_step(state, unmerged)
    hints.record(next_step)
    if as_json:
        emit_json(render.status_json(session.path, state, unmerged, next_step))
        return
    for line in render.status_lines(session.path, state, unmerged, next_step):
        click.echo(line)


@port.command("finish")
@to_option
@tree_option
@force_option
@json_option
@pass_ctx
def port_finish(ctx: Context, to_name, tree, force, as_json):
    """Write the new base's queue and PORT.md from the port tree, lint them (refuses a changed queue)."""
    _finished(_session(ctx, to_name, tree).finish(force), as_json)


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


def _finished(done, as_json) -> None:
    from ..port import render

    state, queue = done.state, done.queue
    if as_json:
        emit_json(
            {
                "state": render.status_json(done.tree, state),
                "exported": [vars(e) for e in done.exported],
                "problems": done.problems,
                "backup": str(done.backup) if done.backup else None,
                "by_themselves": done.by_themselves,
                "ok": not done.problems,
            }
        )
    else:
        from ..port.gate import by_themselves_lines

        for e in done.exported:
            click.echo(e.line(queue.patches))
        for line in by_themselves_lines(done.by_themselves):
            click.echo(line)
        for prob in done.problems:
            click.echo(prob, err=True)
        skipped = [d for d in state.port.done if d.status == "skipped"]
        click.echo(
            f"port -> {state.base} finished: {sum(e.status != 'removed' for e in done.exported)} patches in "
            f"{queue.series}, {len(skipped)} skipped (see {queue.patches}/PORT.md); "
            + (
                "lint + style gate: ok"
                if not done.problems
                else f"NOT ready: {len(done.problems)} lint/style problem(s) (listed above); fix them in "
                f"build/vllm-{state.base} (`make apply BASE={state.base}`, amend the patch's commit, "
                f"`make refresh BASE={state.base}`), then `make lint-patches BASE={state.base}`"
            )
            + (f"; the files it replaced are in {done.backup}" if done.backup else "")
        )
    if done.problems:
        sys.exit(EXIT_LINT)


COMMANDS = [port]
