"""What every ``tkv-seam`` command shares: the run's context and the common options.

Paths given on the command line are made absolute here, once (``git -C`` and the lock
files then never see a relative path).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from ..answer import Answer
from ..bases.pins import default_cache_dir, get_base, load_bases
from .. import layout
from ..progress import QUIET, StderrProgress

DEFAULT_BASE = "v0.31.0"


def absolute(path: Path | str) -> Path:
    """``path`` made absolute and normalised, symlinks left as they are."""
    return Path(os.path.abspath(path))


class Context:
    def __init__(self, root: Path, bases: Path | None, cache: Path | None, quiet: bool):
        self.root = root.resolve()
        self.bases_file = absolute(bases) if bases else self.root / "bases.toml"
        self.cache = absolute(cache or default_cache_dir())
        self.progress = QUIET if quiet else StderrProgress()
        self.as_json = False  # set by --json: the error boundary then prints a JSON object too
        self.printed_json = False  # one JSON object per run: set once one is printed
        self.fresh = False  # --fresh / FRESH=1: run every lane step, recorded passes or not

    def base(
        self, name: str, hint: str = "make apply BASE={}", avoid: str | None = None, again: bool = False
    ):
        """The known base ``name``; a usage error (exit 2) whose hint is ``hint`` with a known name
        (``again``: under make, the command being run with the name meant, when one is close)."""
        return get_base(load_bases(self.bases_file, self.root), name, hint, avoid, again)

    def venv_python(self, python: Path | None, base: str) -> Path:
        """``--python`` made absolute, else the python of the base's test venv (``.venv-vllm-<base>``)."""
        if python is not None:
            return absolute(python)
        return self.root / self.base(base).test_venv / "bin" / "python"

    def tree(self, tree: str | None, base: str) -> Path:
        return absolute(tree) if tree else layout.build_tree(self.root, base)


pass_ctx = click.make_pass_decorator(Context)


def emit_json(data) -> None:
    """Print the run's one JSON object (a second one is never printed: the error boundary checks)."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(Context) if ctx else None
    if obj is not None:
        if obj.printed_json:
            return
        obj.printed_json = True
    click.echo(json.dumps(data, indent=1, sort_keys=True))


def emit(result: Answer) -> None:
    """Print a command's answer, the one way every command does: its one JSON object (``--json``,
    always with ``ok``), or its lines on stdout and then its notes on stderr; then exit with its code when not 0."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(Context) if ctx else None
    if obj is not None and obj.as_json:
        data = result.to_json()
        emit_json(data if "ok" in data else {"ok": result.success(), **data})
    else:
        for line in result.lines():
            click.echo(line)
        for line in result.notes():
            click.echo(line, err=True)
    code = result.exit_code()
    if code:
        sys.exit(code)


def say(line: str) -> None:
    """One line of a long step's own output (a build log): stdout, or stderr under ``--json``
    (where stdout holds only the JSON object)."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(Context) if ctx else None
    click.echo(line, err=bool(obj and obj.as_json))


def _remember_json(ctx: click.Context, _param, value: bool) -> bool:
    obj = ctx.find_object(Context)
    if obj is not None and value:
        obj.as_json = True
        obj.progress = QUIET  # stdout holds the one object; stderr no progress (warnings still)
    return value


base_option = click.option(
    "--base",
    "base_name",
    default=lambda: os.environ.get("BASE", DEFAULT_BASE),
    show_default=DEFAULT_BASE,
    help="Known base name (see `tkv-seam bases`).",
)
tree_option = click.option(
    "--tree", default=None, help=f"Work tree [default: {layout.default(layout.build_tree)}]."
)
json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    callback=_remember_json,
    help="Print the result as JSON on stdout (on failure: ok, error, hint, exit_code).",
)
force_option = click.option(
    "--force", is_flag=True, help="Override the refusal (lists and keeps what it drops)."
)

python_option = click.option(
    "--python",
    "python",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Python of the venv holding stock vLLM [default: .venv-vllm-<base>/bin/python].",
)
