"""Subcommands of ``tkv-seam``. Each body parses options and calls the library."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .cli import (
    Context, base_option, emit_json, force_option, handle_errors, json_option, main, tree_option,
)
from .errors import EXIT_LINT

pass_ctx = click.make_pass_decorator(Context)
git_option = click.option(
    "--git", "git_url", default=lambda: os.environ.get("VLLM_GIT") or None,
    help="Take the base from this git URL or path (env VLLM_GIT) instead of the PyPI sdist.",
)


@main.command()
@pass_ctx
@json_option
def bases(ctx: Context, as_json):
    """List the known bases and their pins."""
    from .bases import load_bases

    known = load_bases(ctx.bases_file)
    if as_json:
        emit_json({n: {"commit_prefix": b.commit_prefix, "sdist": vars(b.sdist), "image": vars(b.image)}
                   for n, b in known.items()})
        return
    for name, b in known.items():
        click.echo(f"{name}\tcommit {b.commit_prefix}\t{b.sdist.filename} sha256 {b.sdist.sha256[:16]}…"
                   f"\timage {b.image.name}")


@main.command()
@base_option
@git_option
@pass_ctx
@handle_errors
def fetch(ctx: Context, base_name, git_url):
    """Download and verify the base (sdist sha256 + commit id, or git tag commit)."""
    from .bases import base_repo

    repo, fetched = base_repo(ctx.base(base_name), ctx.cache, git_url, progress=ctx.progress)
    click.echo(f"{base_name}: pristine base {repo.commit[:12]} ({repo.source}, upstream "
               f"{repo.upstream_commit[:12]}) in {repo.path}; fetched {fetched} bytes")


@main.command()
@base_option
@tree_option
@git_option
@force_option
@json_option
@pass_ctx
@handle_errors
def apply(ctx: Context, base_name, tree, git_url, force, as_json):
    """Build the patched work tree: pristine base + one commit per patch (strict, atomic).

    Refuses to replace a tree with uncommitted edits or unrefreshed commits
    (exit 5) unless --force. A hunk that does not match exactly exits 3.
    """
    from .apply import apply_series

    result = apply_series(ctx.root, ctx.base(base_name), ctx.tree(tree, base_name), ctx.cache,
                          git_url=git_url, force=force, progress=ctx.progress)
    if as_json:
        emit_json(result.to_json())
    else:
        state = "up to date" if result.up_to_date else "applied"
        click.echo(f"{result.tree}: {state}: {len(result.patches)} patches on {result.base} "
                   f"({result.base_commit[:12]}), HEAD {result.head[:12]} ({result.seconds:.1f} s)")


@main.command()
@base_option
@tree_option
@force_option
@json_option
@pass_ctx
@handle_errors
def refresh(ctx: Context, base_name, tree, force, as_json):
    """Export the tree's commits after the base back to patches/ and series."""
    from .export import refresh as do_refresh

    report = do_refresh(ctx.root, ctx.base(base_name), ctx.tree(tree, base_name), force=force)
    if as_json:
        emit_json([vars(r) for r in report])
        return
    changed = [r for r in report if r.status != "unchanged"]
    for r in changed:
        click.echo(f"{r.status:9} patches/{r.name}")
    click.echo(f"{len(report) - len(changed)} unchanged, {len(changed)} changed")


@main.command()
@json_option
@pass_ctx
@handle_errors
def lint(ctx: Context, as_json):
    """Check series and patches/: agreement, parsing, header fields, paths, markers."""
    from .lint import lint as do_lint

    problems = do_lint(ctx.root)
    if as_json:
        emit_json({"ok": not problems, "problems": [p.to_json() for p in problems]})
    else:
        for p in problems:
            click.echo(str(p), err=True)
        click.echo(f"lint: {len(problems)} problem(s)" if problems else "lint: ok")
    if problems:
        sys.exit(EXIT_LINT)
