"""The queue commands: ``bases``, ``fetch``, ``apply``, ``refresh``, ``lint``, ``stylecheck``, ``drift``, ``clean``.

Each body parses options and calls the library; errors are not handled here (the top
group, ``cli.SeamGroup``, maps them once). ``COMMANDS`` lists what ``cli`` registers.
"""

from __future__ import annotations

import os
import sys

import click

from .. import layout
from ..errors import EXIT_LINT, TOOL, SeamError
from .options import Context, base_option, emit_json, force_option, json_option, pass_ctx, tree_option

git_option = click.option(
    "--git",
    "git_url",
    default=lambda: os.environ.get("VLLM_GIT") or None,
    help="Take the base from this git URL or path (env VLLM_GIT) instead of the PyPI sdist.",
)


@click.command()
@pass_ctx
@json_option
def bases(ctx: Context, as_json):
    """List the known bases and their pins."""
    from ..bases.pins import load_bases

    known = load_bases(ctx.bases_file, ctx.root)
    if as_json:
        emit_json(
            {
                n: {"commit_prefix": b.commit_prefix, "sdist": vars(b.sdist), "image": vars(b.image)}
                for n, b in known.items()
            }
        )
        return
    for name, b in known.items():
        click.echo(
            f"{name}\tcommit {b.commit_prefix}\t{b.sdist.filename} sha256 {b.sdist.sha256[:16]}…"
            f"\timage {b.image.name}"
        )


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
    from ..bases.repo import base_repo

    base = ctx.base(base_name, hint=TOOL + " fetch --base {}")
    repo, fetched = base_repo(base, ctx.cache, git_url, progress=ctx.progress, full_check=True)
    if as_json:
        emit_json(
            {
                "base": base_name,
                "commit": repo.commit,
                "source": repo.source,
                "upstream_commit": repo.upstream_commit,
                "path": str(repo.path),
                "fetched_bytes": fetched,
            }
        )
        return
    click.echo(
        f"{base_name}: pristine base {repo.commit[:12]} ({repo.source}, upstream "
        f"{repo.upstream_commit[:12]}) in {repo.path}; fetched {fetched} bytes"
    )


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
    from ..edit.apply import apply_series

    base = ctx.base(base_name)
    result = apply_series(
        ctx.root,
        base,
        ctx.tree(tree, base_name),
        ctx.cache,
        git_url=git_url,
        force=force,
        progress=ctx.progress,
    )
    if as_json:
        emit_json(result.to_json() | {"upstream_commit_prefix": base.commit_prefix})
    else:
        state = "up to date" if result.up_to_date else "applied"
        click.echo(
            f"{result.tree}: {state}: {len(result.patches)} patches on {result.base} "
            f"(upstream vLLM commit {base.commit_prefix}; local base commit {result.base_commit[:12]}), "
            f"HEAD {result.head[:12]} ({result.seconds:.1f} s)"
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
    report = do_refresh(
        ctx.root,
        base,
        ctx.tree(tree, base_name),
        force=force,
        progress=ctx.progress,
    )
    if as_json:
        emit_json([vars(r) for r in report])
        return
    changed = [r for r in report if r.status != "unchanged"]
    for r in changed:
        click.echo(f"{r.status:9} {base.queue.patches}/{r.name}")
    click.echo(f"{len(report) - len(changed)} unchanged, {len(changed)} changed")


@click.command()
@click.option(
    "--base", "base_name", default=None, help="Lint this base's queue [default: the top-level one]."
)
@json_option
@pass_ctx
def lint(ctx: Context, base_name, as_json):
    """Check a queue (series + patches): agreement, parsing, header fields, paths, markers."""
    from ..queue.lint import lint as do_lint
    from ..queue.series import DEFAULT_QUEUE

    problems = do_lint(ctx.root, ctx.base(base_name).queue if base_name else DEFAULT_QUEUE)
    if as_json:
        emit_json({"ok": not problems, "problems": [p.to_json() for p in problems]})
    else:
        for p in problems:
            click.echo(str(p), err=True)
        click.echo(f"lint: {len(problems)} problem(s)" if problems else "lint: ok")
    if problems:
        sys.exit(EXIT_LINT)


@click.command()
@base_option
@tree_option
@click.option("--ruff", default=None, help="ruff executable [default: the one beside this Python].")
@json_option
@pass_ctx
def stylecheck(ctx: Context, base_name, tree, ruff, as_json):
    """Run the base's style gate (its ruff pin, the tree's pyproject) on every patched .py file."""
    from ..edit.stylecheck import stylecheck as run_stylecheck

    problems = run_stylecheck(ctx.root, ctx.tree(tree, base_name), ctx.base(base_name), ctx.cache, ruff)
    if as_json:
        emit_json({"ok": not problems, "problems": problems})
    for p in problems:
        click.echo(p, err=True)
    if not as_json:
        click.echo(f"stylecheck: {len(problems)} problem(s)" if problems else "stylecheck: ok")
    if problems:
        sys.exit(EXIT_LINT)


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
    from ..bases.pins import load_bases
    from ..queue.drift import drift as do_drift
    from ..queue.drift import matrix

    ctx = click_ctx.find_object(Context)
    bases = load_bases(ctx.bases_file, ctx.root)
    if slug:
        from ..queue.interdiff import patch_drift, render

        diffs = patch_drift(ctx.root, bases, slug, base_name)
        if as_json:
            emit_json({"slug": diffs[0].slug if diffs else slug, "diffs": [d.to_json() for d in diffs]})
            return
        click.echo("\n".join(render(d) for d in diffs) if diffs else f"{slug}: on no two consecutive bases")
        return
    if base_name and click_ctx.get_parameter_source("base_name") == click.core.ParameterSource.COMMANDLINE:
        raise SeamError(
            "--base goes with --diff <slug>", hint=f"make drift DIFF=<slug> BASE={base_name}", exit_code=2
        )
    names, rows = do_drift(ctx.root, bases)
    if as_json:
        emit_json({"bases": names, "rows": [vars(r) for r in rows], "matrix": matrix(names, rows)})
        return
    for row in rows:
        click.echo(row.slug)
        for name in names:
            click.echo(
                f"    {name:10} {row.cells.get(name) or 'no queue'}"
                + (f"  ({row.names[name]})" if name in row.names else "")
            )
    click.echo("\n" + matrix(names, rows))


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
    result = do_clean(ctx.root, force, ctx.progress)
    if as_json:
        emit_json(result.to_json())
        return
    for line in result.kept:
        click.echo(f"kept     {line}")
    for line in result.left:
        click.echo(f"left     {line}")
    click.echo(
        f"clean: {len(result.removed)} removed, {len(result.kept)} kept first, {len(result.left)} left"
    )
    if layout.dropped(ctx.root).is_dir():
        where = layout.shown(layout.dropped(ctx.root), ctx.root)
        click.echo(
            f"clean: {where}/ stays (what the tool kept; remove it by hand when you no longer need it)"
        )


COMMANDS = [bases, fetch, apply, refresh, lint, stylecheck, drift, clean]
