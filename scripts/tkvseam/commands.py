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


def _runner(ctx: Context, base_name, tree, python, slots):
    from .seamtest.hfcache import build
    from .seamtest.runner import Runner

    if not python.exists():
        raise SeamError(f"no Python at {python}: the vLLM test venv is missing", hint="make venv-vllm")
    work = ctx.root / "build" / "seamtest"
    hf_home = work / "hf-home"
    build(hf_home, ctx.root / "tests" / "data" / "hf-configs")
    return Runner(
        ctx.root,
        ctx.tree(tree, base_name),
        python.absolute(),
        work,
        hf_home,
        ctx.base(base_name),
        ctx.cache,
        ctx.progress,
        slots=slots,
    )


def _default_slots() -> int:
    return int(os.environ.get("TKV_SEAM_JOBS") or min(4, os.cpu_count() or 1))


@main.group()
def seamtest():
    """Run the series' tests (bisect, full) and upstream's tests against the venv.

    Every lane's pytest processes run on --jobs venv slots at once (hard-linked
    copies of the test venv); `all` schedules the lanes of `make test` together.
    """


def seamtest_command(name: str):
    """A ``seamtest`` subcommand with the options every test run takes."""

    def decorate(fn):
        for deco in (
            handle_errors,
            pass_ctx,
            json_option,
            click.option(
                "-j",
                "--jobs",
                "slots",
                type=click.IntRange(1, 16),
                default=_default_slots,
                show_default="TKV_SEAM_JOBS or cores, at most 4",
                help="pytest processes at once (each in its own venv slot).",
            ),
            python_option,
            tree_option,
            base_option,
            seamtest.command(name),
        ):
            fn = deco(fn)
        return fn

    return decorate


def _run_lanes(ctx: Context, runner, lanes, as_json) -> None:
    from .errors import EXIT_TESTS
    from .seamtest.runner import run_lanes

    reports = run_lanes(runner, lanes)
    for rep in reports:
        for note in rep.notes:
            click.echo(note, err=True)
    if as_json:
        data = {rep.lane: rep.data for rep in reports}
        emit_json(data if len(reports) > 1 else reports[0].data)
    else:
        for rep in reports:
            if len(reports) > 1:
                click.echo(f"== {rep.lane}")
            for line in rep.lines:
                click.echo(line)
    if not all(rep.ok for rep in reports):
        sys.exit(EXIT_TESTS)


def _patch_numbers(runner, selected: tuple[str, ...]) -> set[int] | None:
    """--patch 0009 / 9 / fused-kv-pages / 0009-fused-kv-pages.patch -> {9}."""
    if not selected:
        return None
    out = set()
    for want in selected:
        for k, patch in enumerate(runner.patches, 1):
            stem = patch.name.removesuffix(".patch")
            if want in (patch.name, stem, stem.split("-", 1)[1]) or (want.isdigit() and int(want) == k):
                out.add(k)
                break
        else:
            names = ", ".join(p.name for p in runner.patches)
            raise SeamError(f"no patch {want!r} in the series ({names})", hint="tkv-seam seamtest bisect")
    return out


@seamtest_command("bisect")
@click.option(
    "--patch",
    "patches",
    multiple=True,
    help="Only this patch (number, slug or file name; repeatable): its Tests at k and k-1.",
)
def seamtest_bisect(ctx: Context, base_name, tree, python, slots, as_json, patches):
    """Each patch's Tests pass at k and fail at k-1; Guards pass at k; every prefix compiles."""
    from .seamtest.bisect import BisectLane

    runner = _runner(ctx, base_name, tree, python, slots)
    _run_lanes(ctx, runner, [BisectLane(_patch_numbers(runner, patches))], as_json)


@seamtest_command("full")
def seamtest_full(ctx: Context, base_name, tree, python, slots, as_json):
    """Every test the series names, on the full series."""
    from .seamtest.full import FullLane

    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), [FullLane()], as_json)


no_cache_option = click.option(
    "--no-cache", is_flag=True, help="Re-run the stock baseline of upstream's tests (and re-cache it)."
)


@seamtest_command("upstream")
@click.option("--file", "files", multiple=True, help="Upstream test file (repeatable) [default: the base's].")
@no_cache_option
def seamtest_upstream(ctx: Context, base_name, tree, python, slots, as_json, files, no_cache):
    """Upstream test files on stock and on the full series: no new failure."""
    from .seamtest.upstream import UpstreamLane

    lane = UpstreamLane(tuple(files), use_cache=not no_cache)
    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), [lane], as_json)


@seamtest_command("plugin")
def seamtest_plugin(ctx: Context, base_name, tree, python, slots, as_json):
    """The base's turbo-attn pin: breaks stock vLLM, loads and plans on the patched vLLM."""
    from .seamtest.plugin import PluginLane

    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), [PluginLane()], as_json)


@seamtest_command("all")
@no_cache_option
def seamtest_all(ctx: Context, base_name, tree, python, slots, as_json, no_cache):
    """Every lane of `make test` (bisect, full, upstream, plugin) in one schedule."""
    from .seamtest.lanes import DEFAULT, LANES
    from .seamtest.upstream import UpstreamLane

    lanes = [UpstreamLane(use_cache=not no_cache) if n == "upstream" else LANES[n]() for n in DEFAULT]
    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), lanes, as_json)


@main.command()
@base_option
@tree_option
@click.option("--ruff", default=None, help="ruff executable [default: the one beside this Python].")
@pass_ctx
@handle_errors
def stylecheck(ctx: Context, base_name, tree, ruff):
    """Run the base's style gate (its ruff pin, the tree's pyproject) on every patched .py file."""
    from .stylecheck import stylecheck as run_stylecheck

    problems = run_stylecheck(ctx.root, ctx.tree(tree, base_name), ctx.base(base_name), ctx.cache, ruff)
    for p in problems:
        click.echo(p, err=True)
    click.echo(f"stylecheck: {len(problems)} problem(s)" if problems else "stylecheck: ok")
    if problems:
        sys.exit(EXIT_LINT)


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
    default=lambda: os.environ.get("TURBO_ATTN"),
    show_default="the base's plugin pin in bases.toml",
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
