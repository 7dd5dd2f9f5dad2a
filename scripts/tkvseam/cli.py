"""The ``tkv-seam`` command line: a thin click layer over the library.

Exit codes are documented in ``tkvseam.errors`` and README.md.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import click

from . import __version__
from .bases import default_cache_dir, get_base, load_bases
from .errors import SeamError
from .progress import QUIET, StderrProgress

DEFAULT_BASE = "v0.31.0"


class Context:
    def __init__(self, root: Path, bases: Path | None, cache: Path | None, quiet: bool):
        self.root = root
        self.bases_file = bases or root / "bases.toml"
        self.cache = cache or default_cache_dir()
        self.progress = QUIET if quiet else StderrProgress()

    def base(self, name: str):
        return get_base(load_bases(self.bases_file), name)

    def tree(self, tree: str | None, base: str) -> Path:
        return Path(tree) if tree else self.root / "build" / f"vllm-{base}"


def emit_json(data) -> None:
    click.echo(json.dumps(data, indent=1, sort_keys=True))


def handle_errors(fn):
    """Map SeamError to 'Error: ...' on stderr and its documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SeamError as e:
            click.echo(f"Error: {e}", err=True)
            sys.exit(e.exit_code)

    return wrapper


base_option = click.option(
    "--base",
    "base_name",
    default=lambda: os.environ.get("BASE", DEFAULT_BASE),
    show_default=DEFAULT_BASE,
    help="Known base name (see `tkv-seam bases`).",
)
tree_option = click.option("--tree", default=None, help="Work tree [default: build/vllm-<base>].")
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
force_option = click.option("--force", is_flag=True, help="Override the refusal (may drop work).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
@click.option("-q", "--quiet", is_flag=True, help="No progress output on stderr.")
@click.pass_context
def main(ctx, root, bases, cache, quiet):
    """tkv-seam: carry the turbo-attn seam as a patch queue on a pinned vLLM."""
    ctx.obj = Context(root.resolve(), bases, cache, quiet)


from . import commands  # noqa: E402,F401  (registers the subcommands)
from . import commands_release  # noqa: E402,F401  (pin, watch)
