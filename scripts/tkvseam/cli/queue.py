"""The queue commands: ``bases``, ``fetch``, ``apply``, ``refresh``, ``lint``, ``stylecheck``, ``drift``, ``clean``.

Each body parses options and calls the library; errors are not handled here (the top
group, ``cli.SeamGroup``, maps them once). ``COMMANDS`` lists what ``cli`` registers.
"""

from __future__ import annotations

import os

import click

from .. import hints
from ..errors import TOOL, SeamError
from .options import Context, base_option, emit, force_option, json_option, pass_ctx, tree_option

git_option = click.option(
    "--git",
    "git_url",
    default=lambda: os.environ.get("VLLM_GIT") or None,
    help="Take the base from this git URL or path (env VLLM_GIT; a relative path is the project "
    "root's) instead of the PyPI sdist.",
)


@click.command()
@click.argument("name", required=False)
@pass_ctx
@json_option
def bases(ctx: Context, name, as_json):
    """List the known bases and their pins (NAME: that one; an unknown name is a usage error)."""
    from ..bases.pins import KnownBases, load_bases

    known = load_bases(ctx.bases_file, ctx.root)
    if name is not None:
        known = {name: ctx.base(name)}
    emit(KnownBases(known))


@click.command()
@base_option
@git_option
@json_option
@pass_ctx
def fetch(ctx: Context, base_name, git_url, as_json):
    """Download and verify the base (sdist sha256 + commit id, or git tag commit).

    Also re-checks every object of the cached base repository (rebuilt from the sdist
    when damaged).
    """
    from ..bases.repo import Fetched, base_repo

    from ..bases.repo import git_source

    base = ctx.base(base_name, hint=TOOL + " fetch --base {}")
    git_url = git_source(ctx.root, git_url) if git_url else None
    emit(Fetched(base_name, *base_repo(base, ctx.cache, git_url, progress=ctx.progress, full_check=True)))


@click.command()
@base_option
@tree_option
@git_option
@force_option
@json_option
@pass_ctx
def apply(ctx: Context, base_name, tree, git_url, force, as_json):
    """Build the patched work tree: pristine base + one commit per patch (strict, atomic).

    Refuses to replace a tree with uncommitted edits or unrefreshed commits
    (exit 5) unless --force. A hunk that does not match exactly exits 3.
    """
    from ..bases.repo import git_source
    from ..edit.apply import apply_series

    base = ctx.base(base_name)
    tree_path = ctx.tree(tree, base_name)
    git_url = git_source(ctx.root, git_url) if git_url else None
    emit(
        apply_series(
            ctx.root, base, tree_path, ctx.cache, git_url=git_url, force=force, progress=ctx.progress
        )
    )


@click.command()
@base_option
@tree_option
@force_option
@json_option
@pass_ctx
def refresh(ctx: Context, base_name, tree, force, as_json):
    """Export the tree's commits after the base back to patches/ and series."""
    from ..edit.refresh import refresh as do_refresh

    base = ctx.base(base_name, hint="make refresh BASE={}")
    emit(do_refresh(ctx.root, base, ctx.tree(tree, base_name), force=force, progress=ctx.progress))


@click.command()
@click.option(
    "--base", "base_name", default=None, help="Lint this base's queue [default: the top-level one]."
)
@json_option
@pass_ctx
def lint(ctx: Context, base_name, as_json):
    """Check a queue (series + patches): agreement, parsing, header fields, paths, markers."""
    from ..queue.lint import Linted
    from ..queue.lint import lint as do_lint
    from ..queue.series import DEFAULT_QUEUE

    emit(Linted(do_lint(ctx.root, ctx.base(base_name).queue if base_name else DEFAULT_QUEUE)))


@click.command()
@base_option
@tree_option
@click.option("--ruff", default=None, help="ruff executable [default: the one beside this Python].")
@json_option
@pass_ctx
def stylecheck(ctx: Context, base_name, tree, ruff, as_json):
    """Run the base's style gate (its ruff pin, the tree's pyproject) on every patched .py file."""
    from ..edit.stylecheck import gate

    emit(gate(ctx.root, ctx.tree(tree, base_name), ctx.base(base_name), ctx.cache, ruff))


@click.command()
@click.option(
    "--diff",
    "slug",
    default=lambda: os.environ.get("DIFF") or None,
    help="One patch (slug, file name or number; env DIFF): what changed against the previous base.",
)
@click.option(
    "--base",
    "base_name",
    default=lambda: os.environ.get("BASE") or None,
    help="With --diff: only this base against the one before it [default: every pair].",
)
@json_option
@click.pass_context
def drift(click_ctx: click.Context, slug, base_name, as_json):
    """Per patch: how its version on each base differs from the previous base's, and the matrix.

    With --diff SLUG: that patch's range-diff between bases (header and files, line
    numbers dropped), i.e. what `re-expressed` in the matrix consists of.
    """
    from ..bases.carried import carried_bases
    from ..bases.pins import load_bases
    from ..queue.drift import drift as do_drift
    from ..queue.interdiff import patch_drift

    ctx = click_ctx.find_object(Context)
    bases = load_bases(ctx.bases_file, ctx.root)
    queues = {name: base.queue for name, base in bases.items()}
    if slug:
        emit(patch_drift(ctx.root, queues, slug, base_name))
        return
    if base_name:
        # BASE alone: --base on the command line is a usage error; BASE from the environment (make
        # passes it so) is noted and the matrix shown, a base that is not carried with the one meant
        carried = carried_bases(bases, ctx.root)
        meant = [base_name] if base_name in carried else hints.close(base_name, carried)
        with_diff = [b for b in meant if b != carried[0]]  # the first base has none before it
        hint = f"make drift DIFF=<slug> BASE={with_diff[0]}" if with_diff else "make drift"
        if click_ctx.get_parameter_source("base_name") == click.core.ParameterSource.COMMANDLINE:
            raise SeamError("--base goes with --diff <slug>", hint=hint, exit_code=2)
        if base_name in carried:
            one = f"{hint}: one patch" if with_diff else f"{base_name} is the first base, with none before it"
            ctx.progress.warn(f"BASE={base_name} without DIFF: the matrix covers every base ({one})")
        else:
            ctx.progress.warn(
                f"BASE={base_name!r} is no carried base ({', '.join(carried)}){hints.did_you_mean(meant)}; "
                f"the matrix covers every base (next: {hint})"
            )
    emit(do_drift(ctx.root, queues))


@click.command()
@force_option
@json_option
@pass_ctx
def clean(ctx: Context, force, as_json):
    """Remove what tkv-seam made under build/ but build/dropped/ (what make clean runs).

    A tree or output holding work the tool did not record (edits, files git ignores,
    commits not refreshed, a port in progress) is refused, naming it and the command that
    keeps it, and nothing is removed (exit 5); --force keeps each in build/dropped/ first.
    Anything the tool did not make is left as it is and named.
    """
    from ..bases.pins import load_bases
    from ..edit.clean import clean as do_clean

    load_bases(ctx.bases_file, ctx.root)  # a tkv-seam project: never the build/ of another one
    emit(do_clean(ctx.root, force, ctx.progress))


COMMANDS = [bases, fetch, apply, refresh, lint, stylecheck, drift, clean]
