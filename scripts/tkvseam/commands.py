"""Subcommands of ``tkv-seam``. Each body parses options and calls the library."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .cli import (
    Context,
    base_option,
    emit_json,
    force_option,
    handle_errors,
    json_option,
    main,
    tree_option,
)
from .errors import EXIT_LINT, SeamError

pass_ctx = click.make_pass_decorator(Context)
git_option = click.option(
    "--git",
    "git_url",
    default=lambda: os.environ.get("VLLM_GIT") or None,
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


@main.command()
@base_option
@git_option
@pass_ctx
@handle_errors
def fetch(ctx: Context, base_name, git_url):
    """Download and verify the base (sdist sha256 + commit id, or git tag commit)."""
    from .bases import base_repo

    repo, fetched = base_repo(ctx.base(base_name), ctx.cache, git_url, progress=ctx.progress)
    click.echo(
        f"{base_name}: pristine base {repo.commit[:12]} ({repo.source}, upstream "
        f"{repo.upstream_commit[:12]}) in {repo.path}; fetched {fetched} bytes"
    )


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

    result = apply_series(
        ctx.root,
        ctx.base(base_name),
        ctx.tree(tree, base_name),
        ctx.cache,
        git_url=git_url,
        force=force,
        progress=ctx.progress,
    )
    if as_json:
        emit_json(result.to_json())
    else:
        state = "up to date" if result.up_to_date else "applied"
        click.echo(
            f"{result.tree}: {state}: {len(result.patches)} patches on {result.base} "
            f"({result.base_commit[:12]}), HEAD {result.head[:12]} ({result.seconds:.1f} s)"
        )


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


# --------------------------------------------------------------------------- overlay

python_option = click.option(
    "--python",
    "python",
    type=click.Path(dir_okay=False, path_type=Path),
    default=".venv-vllm/bin/python",
    show_default=True,
    help="Python of the venv holding stock vLLM.",
)


@main.group()
def overlay():
    """The patched vllm/ files: stage them, install them into a venv, restore it."""


@overlay.command("files")
@json_option
@pass_ctx
@handle_errors
def overlay_files(ctx: Context, as_json):
    """List the vllm/ files the series patches (derived from the patches)."""
    from .overlay import overlay_paths
    from .series import read_series

    paths = overlay_paths(read_series(ctx.root).load())
    if as_json:
        emit_json(paths)
    else:
        click.echo("\n".join(paths))


@overlay.command("stage")
@base_option
@tree_option
@click.option("--commit", default="HEAD", show_default=True, help="Commit of the build tree to stage.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Stage directory [default: build/overlay-<base>].",
)
@pass_ctx
@handle_errors
def overlay_stage(ctx: Context, base_name, tree, commit, out):
    """Write manifest.json + overlay/vllm/... (+ the installer) for one commit."""
    from .overlay import overlay_paths, stage
    from .series import read_series

    out = out or ctx.root / "build" / f"overlay-{base_name}"
    manifest = stage(ctx.tree(tree, base_name), overlay_paths(read_series(ctx.root).load()), out, commit)
    changed = sum(f["pristine_sha256"] != f["patched_sha256"] for f in manifest["files"])
    click.echo(f"{out}: {len(manifest['files'])} files ({changed} patched) for {manifest['commit'][:12]}")


def _install(ctx: Context, base_name, tree, python, commit_of):
    from .apply import tree_state
    from .overlay import install_into_venv, overlay_paths, stage
    from .series import read_series

    tree_path = ctx.tree(tree, base_name)
    commit = commit_of(tree_state(tree_path))
    out = ctx.root / "build" / "overlay-venv"
    stage(tree_path, overlay_paths(read_series(ctx.root).load()), out, commit)
    click.echo(install_into_venv(python, out).rstrip())


@overlay.command("install")
@base_option
@tree_option
@python_option
@click.option("--commit", default="HEAD", show_default=True, help="Commit of the build tree to install.")
@pass_ctx
@handle_errors
def overlay_install(ctx: Context, base_name, tree, python, commit):
    """Install the overlay of a commit into the venv (each file checked pristine first)."""
    _install(ctx, base_name, tree, python, lambda state: commit)


@overlay.command("restore")
@base_option
@tree_option
@python_option
@pass_ctx
@handle_errors
def overlay_restore(ctx: Context, base_name, tree, python):
    """Put the pristine base files back into the venv."""
    _install(ctx, base_name, tree, python, lambda state: state["base_commit"])


# --------------------------------------------------------------------------- seam tests


def _runner(ctx: Context, base_name, tree, python):
    from .hfcache import build
    from .seamtest import Runner

    if not python.exists():
        raise SeamError(f"no Python at {python}: the vLLM test venv is missing", hint="make venv-vllm")
    work = ctx.root / "build" / "seamtest"
    hf_home = work / "hf-home"
    build(hf_home, ctx.root / "tests" / "data" / "hf-configs")
    return Runner(ctx.root, ctx.tree(tree, base_name), python.absolute(), work, hf_home, ctx.progress)


@main.group()
def seamtest():
    """Run the series' tests (bisect, full) and upstream's tests against the venv."""


def seamtest_command(name: str):
    """A ``seamtest`` subcommand with the options every test run takes."""

    def decorate(fn):
        for deco in (
            handle_errors,
            pass_ctx,
            json_option,
            python_option,
            tree_option,
            base_option,
            seamtest.command(name),
        ):
            fn = deco(fn)
        return fn

    return decorate


@seamtest_command("bisect")
def seamtest_bisect(ctx: Context, base_name, tree, python, as_json):
    """Each patch's Tests pass at k and fail at k-1; Guards pass at k; every prefix compiles."""
    from .errors import EXIT_TESTS
    from .seamtest import bisect

    rows, problems = bisect(_runner(ctx, base_name, tree, python))
    bad = [r for r in rows if not r.ok]
    if as_json:
        emit_json(
            {
                "ok": not bad and not problems,
                "problems": problems,
                "rows": [dict(vars(r), ok=r.ok) for r in rows],
            }
        )
    else:
        click.echo(f"{'k':>2}  {'kind':5}  {'at k':7}  {'at k-1':7}  test")
        for r in rows:
            mark = "" if r.ok else "   <-- NOT BISECTABLE"
            click.echo(f"{r.k:>2}  {r.kind:5}  {r.at_k:7}  {r.at_prev:7}  {r.test}{mark}")
        for p in problems:
            click.echo(f"compile: {p}", err=True)
        click.echo(f"bisect: {len(rows) - len(bad)} passed, {len(bad)} failed")
    if bad or problems:
        sys.exit(EXIT_TESTS)


@seamtest_command("full")
@click.option(
    "--cuda-alike",
    is_flag=True,
    help="Run with the platform reporting is_cuda_alike()/is_cuda() (CUDA-only branches).",
)
def seamtest_full(ctx: Context, base_name, tree, python, as_json, cuda_alike):
    """Every test the series names, on the full series."""
    from .errors import EXIT_TESTS
    from .seamtest import full

    results = full(_runner(ctx, base_name, tree, python), cuda_alike=cuda_alike)
    bad = {n: o for n, o in results.items() if o != "passed"}
    if as_json:
        emit_json({"ok": not bad, "results": results})
    else:
        for n, o in results.items():
            click.echo(f"{o:8} {n}")
        click.echo(f"seam tests: {len(results) - len(bad)} passed, {len(bad)} failed")
    if bad:
        sys.exit(EXIT_TESTS)


@seamtest_command("upstream")
@click.option("--file", "files", multiple=True, help="Upstream test file (repeatable) [default: the six].")
def seamtest_upstream(ctx: Context, base_name, tree, python, as_json, files):
    """Upstream test files on stock and on the full series: no new failure."""
    from .errors import EXIT_TESTS
    from .seamtest import UPSTREAM_FILES, upstream

    results = upstream(_runner(ctx, base_name, tree, python), tuple(files) or UPSTREAM_FILES)
    bad = [r for r in results if r.regressions]
    if as_json:
        emit_json({"ok": not bad, "files": [r.to_json() for r in results]})
    else:
        for r in results:
            fmt = lambda c: ", ".join(f"{v} {k}" for k, v in sorted(c.items())) or "nothing ran"  # noqa: E731
            click.echo(f"{r.file}\n    stock:   {fmt(r.stock)}\n    patched: {fmt(r.patched)}")
            for nid in r.regressions:
                click.echo(f"    NEW FAILURE: {nid}")
        click.echo(
            f"upstream: {len(results) - len(bad)} passed, {len(bad)} failed (files without new failures)"
        )
    if bad:
        sys.exit(EXIT_TESTS)


@main.command()
@base_option
@tree_option
@click.option("--ruff", default=None, help="ruff executable [default: the one beside this Python].")
@pass_ctx
@handle_errors
def stylecheck(ctx: Context, base_name, tree, ruff):
    """Run vLLM's style gate (ruff check + format, the tree's pyproject) on every patched .py file."""
    from .stylecheck import stylecheck as run_stylecheck

    problems = run_stylecheck(ctx.root, ctx.tree(tree, base_name), ruff)
    for p in problems:
        click.echo(p, err=True)
    click.echo(f"stylecheck: {len(problems)} problem(s)" if problems else "stylecheck: ok")
    if problems:
        sys.exit(EXIT_LINT)


@seamtest_command("plugin")
def seamtest_plugin(ctx: Context, base_name, tree, python, as_json):
    """turbo-attn 0.70.1: breaks stock v0.31.0, loads and plans on the patched vLLM."""
    from .errors import EXIT_TESTS
    from .seamtest import plugin

    results = plugin(_runner(ctx, base_name, tree, python))
    bad = {(label, n): o for label, rows in results.items() for n, o in rows.items() if o != "passed"}
    empty = [label for label, rows in results.items() if not rows]
    if as_json:
        emit_json({"ok": not bad and not empty, "results": results})
    else:
        for label, rows in results.items():
            for n, o in rows.items():
                click.echo(f"{label:8} {o:8} {n}")
        total = sum(len(rows) for rows in results.values())
        click.echo(f"plugin: {total - len(bad)} passed, {len(bad)} failed")
    if bad or empty:
        sys.exit(EXIT_TESTS)


# --------------------------------------------------------------------------- image


@main.command()
@base_option
@tree_option
@click.option(
    "--base-image",
    envvar="BASE_IMAGE",
    default=None,
    help="Base image [default: the pinned official image of the base].",
)
@click.option(
    "--turbo-attn",
    # not envvar=: click treats an empty variable as unset, and TURBO_ATTN= must skip the plugin
    default=lambda: os.environ.get("TURBO_ATTN", "turbo-attn==0.70.1"),
    show_default="turbo-attn==0.70.1",
    help="Plugin requirement installed in the image (env TURBO_ATTN); empty skips it.",
)
@click.option(
    "--stand-in",
    is_flag=True,
    envvar="STAND_IN",
    help="Accept a base image whose revision label does not match (a local stand-in).",
)
@click.option("--tag", default=None, help="Image tag [default: tkv-seam/vllm-openai:<base>-<series digest>].")
@json_option
@pass_ctx
@handle_errors
def image(ctx: Context, base_name, tree, base_image, turbo_attn, stand_in, tag, as_json):
    """Build the overlay image: the base image + exactly the patched vllm/ files (docker SDK).

    Checks the base image's revision label against the pin before building (exit 7
    when refused or when no Docker engine is reachable); streams the build log.
    """
    from .image import build

    log = (lambda line: click.echo(line, err=True)) if as_json else click.echo
    result = build(
        ctx.root,
        ctx.tree(tree, base_name),
        ctx.base(base_name),
        base_image,
        turbo_attn,
        stand_in,
        tag,
        log=log,
    )
    if as_json:
        emit_json(result.to_json())
        return
    for layer in result.added_layers:
        click.echo(f"layer {layer['size'] / 1e6:8.2f} MB  {layer['created_by']}")
    click.echo(
        f"built {result.tag} ({result.image_id[:19]}) on {result.base_image} "
        f"(revision {result.base_revision}); added {result.added_bytes / 1e6:.2f} MB"
    )
    click.echo(f"run:  docker run --gpus all -p 8000:8000 {result.tag} <model> --kv-cache-dtype tkv")


# --------------------------------------------------------------------------- port


@main.command()
@base_option
@click.option("--to", "to_name", required=True, help="The newer base to port onto (e.g. v0.32.0).")
@click.option("--tree", default=None, help="Port tree [default: build/port-<to>].")
@click.option(
    "--stop", is_flag=True, help="Stop at the first conflict, leaving its markers for you to resolve."
)
@json_option
@pass_ctx
@handle_errors
def port(ctx: Context, base_name, to_name, tree, stop, as_json):
    """Forward-port report: apply the series onto a newer base, per patch and per hunk.

    The port tree is a tkv-seam tree: resolve conflicts there, commit, then
    `tkv-seam refresh --base <to> --tree <port tree>` rewrites the patches.
    """
    from .port import port as do_port

    dest = Path(tree) if tree else ctx.root / "build" / f"port-{to_name}"
    reports = do_port(ctx.root, ctx.base(base_name), ctx.base(to_name), ctx.cache, dest, stop, ctx.progress)
    if as_json:
        emit_json(
            {
                "from": base_name,
                "to": to_name,
                "tree": str(dest),
                "patches": [vars(r) | {"hunks": [vars(h) for h in r.hunks]} for r in reports],
            }
        )
        return
    for r in reports:
        moved = [h for h in r.hunks if h.status != "exact"]
        click.echo(
            f"{r.status:9} {r.name}" + (f"  ({len(moved)}/{len(r.hunks)} hunks moved)" if moved else "")
        )
        for h in moved:
            click.echo(f"            {h.file} hunk {h.hunk} {h.header}: {h.status}")
        for c in r.conflicts:
            click.echo(f"            CONFLICT {c}")
        if r.note:
            click.echo(f"            {r.note}")
    clean = sum(r.status in ("exact", "3-way") for r in reports)
    click.echo(f"port {base_name} -> {to_name}: {clean} of {len(reports)} patches apply; tree {dest}")
