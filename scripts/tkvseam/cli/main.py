"""The ``tkv-seam`` command line: a thin click layer over the library, one module per command family.

``queue`` (bases, fetch, apply, refresh, lint, stylecheck, drift), ``overlay`` (overlay,
image), ``seamtest``, ``port`` (the port verbs), ``releases`` (pin, watch), ``carry`` (carry,
carried, seam-table, lock-cpu, retire).

One error boundary (``SeamGroup.invoke``): a ``SeamError``, an ``OSError``, a usage error
or an unexpected exception from any command becomes ``Error: …`` (+ ``next: …``) on stderr
and the documented exit code (``tkvseam.errors``, README.md); under ``--json`` the run
prints exactly one JSON object on stdout (the result, or ``{"ok": false, …}``). A port that
stopped for the maintainer (``PortStopped``, exit 12) is said as what it is, without ``Error:``.
"""

from __future__ import annotations

import errno
import shlex
import traceback
from pathlib import Path

import click

from .. import __version__, hints
from ..errors import EXIT_FAILURE, PortStopped, SeamError
from ..fsutil import lexists
from . import carry, overlay, port, queue, releases, seamtest
from .options import Context, emit_json


def _os_error(e: OSError) -> tuple[str, str]:
    """Message and next step for an OSError (unreadable patch, read-only build/, a name too long, …).

    Never raises: the path it names may itself be what the system refused.
    """
    where = " -> ".join(str(f) for f in (e.filename, e.filename2) if f)
    message = f"{e.strerror or e}: {where}" if where else f"{e.strerror or e}"
    if e.filename is None:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return message, "check free space (df -h .), then run the command again"
        return message, "check free space (df -h .) and permissions, then run the command again"
    path = Path(str(e.filename))
    if e.errno == errno.ENAMETOOLONG:
        return message, "give a shorter path (each name at most 255 bytes, the whole path at most 4095)"
    look = path if lexists(path) else path.parent
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            message,
            f"ls -ld {shlex.quote(str(look))}  (make it readable/writable for you, then run again)",
        )
    return message, f"ls -ld {shlex.quote(str(look))}  (check the path, then run the command again)"


def _wants_json(ctx: click.Context) -> bool:
    """``--json`` was given (parsed, or among the arguments a usage error left unparsed)."""
    obj = ctx.find_object(Context)
    return bool(obj and obj.as_json) or "--json" in ctx.meta.get("tkv_seam.args", ())


def _about(e: SeamError) -> dict:
    """What an error says for scripts beside its text: its ``kind`` and ``patch``, when it has them."""
    return {key: value for key, value in (("kind", e.kind), ("patch", e.patch)) if value}


class SeamGroup(click.Group):
    """The top group: maps every error to ``Error:``/``next:``, one JSON object and an exit code, once."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["tkv_seam.args"] = tuple(args)  # the command line as given, for the boundary
        try:
            return super().parse_args(ctx, args)
        except click.ClickException as e:  # the group's own options (before any command runs)
            if not _wants_json(ctx):
                raise
            e.show()
            self._json(ctx, e.format_message(), None, e.exit_code)
            raise click.exceptions.Exit(e.exit_code) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except PortStopped as e:  # an expected stop for the maintainer, not a failure: no "Error:"
            self._fail(ctx, e.message, e.hint, e.exit_code, label="", about=_about(e))
        except SeamError as e:
            self._fail(ctx, e.message, e.hint, e.exit_code, about=_about(e))
        except OSError as e:
            if e.errno == errno.EPIPE:  # whoever read stdout is gone (`| head`): click exits 1, quietly
                raise
            self._fail(ctx, *_os_error(e), EXIT_FAILURE)
        except click.exceptions.Exit:
            raise
        except click.ClickException as e:
            if not _wants_json(ctx):
                raise
            e.show()
            self._json(ctx, e.format_message(), None, e.exit_code)
            raise click.exceptions.Exit(e.exit_code) from None
        except click.exceptions.Abort:
            raise
        except Exception as e:  # a bug: the traceback on stderr, and still one answer
            traceback.print_exc()
            self._fail(ctx, f"internal error: {e!r}", "report it with the traceback above", EXIT_FAILURE)

    @staticmethod
    def _json(
        ctx: click.Context, message: str, hint: str | None, code: int, about: dict | None = None
    ) -> None:
        obj = ctx.find_object(Context)
        if _wants_json(ctx) and not (obj and obj.printed_json):
            emit_json({"ok": False, "error": message, "hint": hint, "exit_code": code, **(about or {})})

    @classmethod
    def _fail(
        cls,
        ctx: click.Context,
        message: str,
        hint: str | None,
        code: int,
        label: str = "Error: ",
        about: dict | None = None,
    ):
        click.echo(f"{label}{message}" + (f"\n  next: {hint}" if hint else ""), err=True)
        hints.record(hint)
        cls._json(ctx, message, hint, code, about)
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


for _family in (queue, overlay, seamtest, port, releases, carry):
    for _command in _family.COMMANDS:
        main.add_command(_command)
