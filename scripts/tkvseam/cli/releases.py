"""The release commands ``pin`` and ``watch``: follow upstream releases. Bodies parse options and call the library."""

from __future__ import annotations

import click

from .. import hints
from ..errors import UsageError
from .options import Context, emit, json_option, pass_ctx


@click.command()
@click.argument("version")
@click.option("--yanked", is_flag=True, help="Pin the release even if the index marks its sdist yanked.")
@json_option
@pass_ctx
def pin(ctx: Context, version, yanked, as_json):
    """Pin vLLM release VERSION (e.g. 0.34.0) in bases.toml from its verified sdist.

    Finds the sdist on the index (PEP 691 JSON), downloads it into the cache, checks
    the index's sha256 and size, reads the commit from vllm/_version.py and adds the
    entry, keeping the file's comments and other entries. An existing pin with other
    values is refused (exit 4, both values shown); an agreeing one is left as it is.
    """
    from ..release.pin import pin as do_pin

    emit(
        do_pin(ctx.bases_file, version, ctx.cache, allow_yanked=yanked, progress=ctx.progress, root=ctx.root)
    )


@click.command()
@click.option(
    "--since",
    default=None,
    help="Compare with this base or version [default: the newest carried base].",
)
@click.option("--pre", is_flag=True, help="Include pre-releases (e.g. 0.34.0rc1).")
@click.option("--yanked", is_flag=True, help="Include yanked releases.")
@click.option(
    "--report",
    is_flag=True,
    help="Pin each newer release (into build/drift/bases.toml) and write its drift report to build/drift/.",
)
@click.option("--write", is_flag=True, help="With --report: pin into bases.toml itself, not a scratch copy.")
@json_option
@pass_ctx
def watch(ctx: Context, since, pre, yanked, report, write, as_json):
    """vLLM releases newer than the newest carried base; with --report, their drift.

    The newest carried base is the newest of bases.toml whose queue exists. Each report
    ports the newest carried queue older than the release (a port goes forward only).
    Exit 0 when no newer release exists, 11 when one does (the report, if asked, is
    written), another code when a report could not be made.
    """
    from ..release.watch import watch as do_watch

    if write and not report:  # a SeamError, so that --json prints its object too
        raise UsageError(
            "--write only makes sense with --report", hint=hints.make("watch", REPORT="1", WRITE="1")
        )
    emit(
        do_watch(
            ctx.root, ctx.bases_file, ctx.cache, since, pre, yanked, report, write, progress=ctx.progress
        )
    )


COMMANDS = [pin, watch]
