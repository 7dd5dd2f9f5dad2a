"""The ``tkv-seam`` command line: a thin click layer over the library.

One error boundary (``SeamGroup.invoke``): a ``SeamError`` or ``OSError`` from any
command becomes ``Error: …`` + ``next: …`` on stderr (and, under ``--json``, one JSON
object on stdout) and the documented exit code (``tkvseam.errors``, README.md).
"""

from __future__ import annotations

import errno
import shlex
from pathlib import Path

import click

from . import __version__, commands, commands_carry, commands_release
from .errors import EXIT_FAILURE, SeamError
from .options import Context, emit_json


def _os_error(e: OSError) -> tuple[str, str]:
    """Message and next step for an OSError (unreadable patch, read-only build/, …)."""
    where = " -> ".join(str(f) for f in (e.filename, e.filename2) if f)
    message = f"{e.strerror or e}: {where}" if where else f"{e.strerror or e}"
    if e.filename is None:
        return message, "check free space (df -h .) and permissions, then run the command again"
    path = Path(e.filename)
    look = path if path.exists() else path.parent
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            message,
            f"ls -ld {shlex.quote(str(look))}  (make it readable/writable for you, then run again)",
        )
    return message, f"ls -ld {shlex.quote(str(look))}  (check the path, then run the command again)"


class SeamGroup(click.Group):
    """The top group: maps library errors to ``Error:``/``next:`` and exit codes, once."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SeamError as e:
            self._fail(ctx, e.message, e.hint, e.exit_code)
        except OSError as e:
            self._fail(ctx, *_os_error(e), EXIT_FAILURE)

    @staticmethod
    def _fail(ctx: click.Context, message: str, hint: str | None, code: int):
        click.echo(f"Error: {message}" + (f"\n  next: {hint}" if hint else ""), err=True)
        obj = ctx.find_object(Context)
        if obj is not None and obj.as_json:
            emit_json({"ok": False, "error": message, "hint": hint, "exit_code": code})
        raise click.exceptions.Exit(code)


@click.group(cls=SeamGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tkv-seam")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Project root holding series, patches/ and bases.toml.",
)
@click.option(
    "--bases",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Bases data file [default: <root>/bases.toml].",
)
@click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    envvar="TKV_SEAM_CACHE",
    help="Download cache [default: ~/.cache/tkv-seam].",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress output on stderr (warnings still show).")
@click.pass_context
def main(ctx, root, bases, cache, quiet):
    """tkv-seam: carry the turbo-attn seam as a patch queue on a pinned vLLM."""
    ctx.obj = Context(root, bases, cache, quiet)


for _command in commands.COMMANDS + commands_release.COMMANDS + commands_carry.COMMANDS:
    main.add_command(_command)
