"""Subcommands of ``tkv-seam``. Each body parses options and calls the library.

Errors are not handled here: the top group (``cli.SeamGroup``) maps them once.
``COMMANDS`` lists what ``cli`` registers.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import click

from .errors import EXIT_LINT, TOOL, SeamError
from .options import (
    Context,
    absolute,
    base_option,
    emit_json,
    force_option,
    json_option,
    pass_ctx,
    tree_option,
)

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
    from .bases import load_bases

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
@pass_ctx
def fetch(ctx: Context, base_name, git_url):
    """Download and verify the base (sdist sha256 + commit id, or git tag commit).

    Also re-checks every object of the cached base repository (rebuilt from the sdist
    when damaged).
    """
    from .bases import base_repo

    base = ctx.base(base_name, hint=TOOL + " fetch --base {}")
    repo, fetched = base_repo(base, ctx.cache, git_url, progress=ctx.progress, full_check=True)
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


@click.command()
@base_option
@tree_option
@force_option
@json_option
@pass_ctx
def refresh(ctx: Context, base_name, tree, force, as_json):
    """Export the tree's commits after the base back to patches/ and series."""
    from .export import refresh as do_refresh

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
    from .lint import lint as do_lint
    from .series import DEFAULT_QUEUE

    problems = do_lint(ctx.root, ctx.base(base_name).queue if base_name else DEFAULT_QUEUE)
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
    default=None,
    help="Python of the venv holding stock vLLM [default: .venv-vllm-<base>/bin/python].",
)


@click.group()
def overlay():
    """The patched vllm/ files: stage them, install them into a venv, restore it."""


@overlay.command("files")
@base_option
@json_option
@pass_ctx
def overlay_files(ctx: Context, base_name, as_json):
    """List the vllm/ files the base's queue patches (derived from the patches)."""
    from .overlay import queue_overlay_paths

    paths = queue_overlay_paths(ctx.root, ctx.base(base_name))
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
    help="Stage directory, new or a previous stage [default: build/overlay-<base>].",
)
@json_option
@pass_ctx
def overlay_stage(ctx: Context, base_name, tree, commit, out, as_json):
    """Write manifest.json + overlay/vllm/... (+ the installer) for one commit.

    --out is created, or must be a previous stage tkv-seam wrote and nobody changed
    since; any other directory is refused (exit 5) and left as it is.
    """
    from .overlay import queue_overlay_paths, stage_locked

    out = absolute(out) if out else ctx.root / "build" / f"overlay-{base_name}"
    paths = queue_overlay_paths(ctx.root, ctx.base(base_name))
    manifest = stage_locked(ctx.tree(tree, base_name), paths, out, commit, ctx.progress)
    if as_json:
        emit_json({"out": str(out), **manifest})
        return
    changed = sum(f["pristine_sha256"] != f["patched_sha256"] for f in manifest["files"])
    click.echo(f"{out}: {len(manifest['files'])} files ({changed} patched) for {manifest['commit'][:12]}")


def _install(ctx: Context, base_name, tree, python, commit_of, as_json, rerun):
    from .overlay import install_commit, queue_overlay_paths
    from .state import load_state

    tree_path = ctx.tree(tree, base_name)
    commit = commit_of(load_state(tree_path))
    venv_python = ctx.venv_python(python, base_name)
    own_venv = venv_python == ctx.venv_python(None, base_name)
    if python is not None:
        rerun += f" --python {shlex.quote(str(venv_python))}"
    done = install_commit(
        tree_path,
        queue_overlay_paths(ctx.root, ctx.base(base_name)),
        ctx.root / "build" / "overlay-venv",
        commit,
        venv_python,
        own_venv,
        f"{TOOL} {rerun} --base {base_name}",
        ctx.progress,
    )
    if as_json:
        emit_json(done.to_json())
    else:
        click.echo(done.output.rstrip())


@overlay.command("install")
@base_option
@tree_option
@python_option
@click.option("--commit", default="HEAD", show_default=True, help="Commit of the build tree to install.")
@json_option
@pass_ctx
def overlay_install(ctx: Context, base_name, tree, python, commit, as_json):
    """Install the overlay of a commit into the venv (each file checked pristine first).

    --python may name any venv holding the base's stock vLLM (your own); a venv that
    already holds an overlay is told so, and restore puts its pristine files back.
    """
    _install(ctx, base_name, tree, python, lambda state: commit, as_json, "overlay install")


@overlay.command("restore")
@base_option
@tree_option
@python_option
@json_option
@pass_ctx
def overlay_restore(ctx: Context, base_name, tree, python, as_json):
    """Put the pristine base files back into the venv."""
    _install(ctx, base_name, tree, python, lambda state: state.base_commit, as_json, "overlay restore")


# --------------------------------------------------------------------------- seam tests


def _runner(ctx: Context, base_name, tree, python, slots):
    from .seamtest.hfcache import build
    from .seamtest.runner import Runner

    python = ctx.venv_python(python, base_name)
    if not python.exists():
        raise SeamError(
            f"no Python at {python}: the vLLM test venv is missing", hint=f"make venv-vllm BASE={base_name}"
        )
    work = ctx.root / "build" / "seamtest" / base_name
    hf_home = work.parent / "hf-home"
    build(hf_home, ctx.root / "tests" / "data" / "hf-configs")
    return Runner(
        ctx.root,
        ctx.tree(tree, base_name),
        python,
        work,
        hf_home,
        ctx.base(base_name),
        ctx.cache,
        ctx.progress,
        slots=slots,
    )


def _default_slots() -> int:
    return int(os.environ.get("TKV_SEAM_JOBS") or min(4, os.cpu_count() or 1))


@click.group()
def seamtest():
    """Run the series' tests (bisect, full) and upstream's tests against the venv.

    Every lane's pytest processes run on --jobs venv slots at once (hard-linked
    copies of the test venv); `all` schedules the lanes of `make test` together.
    """


def seamtest_command(name: str):
    """A ``seamtest`` subcommand with the options every test run takes."""

    def decorate(fn):
        for deco in (
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
@click.option(
    "--cuda-alike",
    is_flag=True,
    help="Run with the platform reporting is_cuda_alike()/is_cuda() (CUDA-only branches).",
)
def seamtest_full(ctx: Context, base_name, tree, python, slots, as_json, cuda_alike):
    """Every test the series names, on the full series."""
    from .seamtest.full import CudaAlikeLane, FullLane

    lane = CudaAlikeLane() if cuda_alike else FullLane()
    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), [lane], as_json)


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
    """Every lane of `make test` (bisect, full, full-cuda, upstream, plugin, differential) in one schedule."""
    from .seamtest.lanes import DEFAULT, LANES
    from .seamtest.upstream import UpstreamLane

    lanes = [UpstreamLane(use_cache=not no_cache) if n == "upstream" else LANES[n]() for n in DEFAULT]
    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), lanes, as_json)


@seamtest_command("differential")
def seamtest_differential(ctx: Context, base_name, tree, python, slots, as_json):
    """Patched vs pristine base modules on random inputs (tests/differential), full series."""
    from .seamtest.differential import DifferentialLane

    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), [DifferentialLane()], as_json)


@click.command()
@base_option
@tree_option
@click.option("--ruff", default=None, help="ruff executable [default: the one beside this Python].")
@pass_ctx
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


@click.command()
@base_option
@tree_option
@click.option(
    "--base-image",
    envvar="BASE_IMAGE",
    default=None,
    help="Base image [default: the pinned official image; with --stand-in: tkv-seam/stand-in:<base>].",
)
@click.option(
    "--turbo-attn",
    # not envvar=: click treats an empty variable as unset, and TURBO_ATTN= must skip the plugin
    default=lambda: os.environ.get("TURBO_ATTN"),
    show_default="the base's plugin pin in bases.toml",
    help="Plugin to install, hash-checked: the pin, or 'name==version --hash=sha256:<hex>' "
    "(env TURBO_ATTN); empty: none.",
)
@click.option(
    "--stand-in",
    is_flag=True,
    envvar="STAND_IN",
    help="Build on a local stand-in base (make standin); the tag says -standin.",
)
@click.option(
    "--registry",
    default=lambda: os.environ.get("REGISTRY", ""),
    help="Registry host[:port][/path] the tag names (env REGISTRY) [default: none, a local name].",
)
@click.option(
    "--repository",
    default=lambda: os.environ.get("REPOSITORY") or image_repository(),
    show_default=True,
    help="Repository path of the tag (env REPOSITORY).",
)
@click.option(
    "--tag",
    default=lambda: os.environ.get("IMAGE_TAG") or None,
    help="The whole image reference instead (env IMAGE_TAG) [default: "
    "[registry/]repository:<base>-<series digest>[-noplugin][-standin]].",
)
@click.option(
    "--source",
    default=lambda: os.environ.get("IMAGE_SOURCE"),
    help="Source URL for the OCI source label (env IMAGE_SOURCE) [default: the git remote origin].",
)
@click.option(
    "--push", is_flag=True, envvar="PUSH", help="Push the image through the engine (needs a registry)."
)
@json_option
@pass_ctx
def image(
    ctx: Context,
    base_name,
    tree,
    base_image,
    turbo_attn,
    stand_in,
    registry,
    repository,
    tag,
    source,
    push,
    as_json,
):
    """Build the overlay image: the base image + exactly the patched vllm/ files (docker SDK).

    Checks the base image's revision label against the pin before building (exit 7
    when refused, when the build fails or when no Docker engine is reachable); streams
    the build log; with --push, pushes it and prints the pushed digest.
    """
    from .image import build, client, parse_reference, registry_of
    from .image import push as do_push

    log = (lambda line: click.echo(line, err=True)) if as_json else click.echo
    if push and not registry and not (tag and registry_of(parse_reference(tag)[0])):
        raise SeamError(
            "--push needs a registry: REGISTRY=<host[:port]> (or IMAGE_TAG naming one)",
            hint=f"make image BASE={base_name} PUSH=1 REGISTRY=127.0.0.1:5000 REPOSITORY={repository}",
            exit_code=2,
        )
    result = build(
        ctx.root,
        ctx.tree(tree, base_name),
        ctx.base(base_name, hint="make image BASE={}"),
        base_image,
        turbo_attn,
        stand_in,
        tag,
        log=log,
        cache=ctx.cache,
        registry=registry,
        repository=repository,
        source=source,
        progress=ctx.progress,
    )
    if as_json:
        pushed = do_push(client(), result.tag, log, ctx.progress) if push else None
        emit_json({**result.to_json(), "push": pushed})
        return
    for layer in result.added_layers:
        click.echo(f"layer {layer['size'] / 1e6:8.2f} MB  {layer['created_by']}")
    for removed in result.removed:
        click.echo(
            f"removed {removed[:19]}: the image this tag named before (built by tkv-seam, now untagged)"
        )
    click.echo(
        f"built {result.tag} ({result.image_id[:19]}) on {result.base_image} "
        f"(revision {result.base_revision}); added {result.added_bytes / 1e6:.2f} MB"
    )
    click.echo(
        f"plugin: {result.plugin} (hash-checked)" if result.plugin else "plugin: none (TURBO_ATTN= given)"
    )
    if result.stand_in:
        click.echo("stand-in base: for trying the build here, not for serving or shipping")
    if result.run_hint:
        click.echo(f"run:  {result.run_hint}")
    if push:
        pushed = do_push(client(), result.tag, log, ctx.progress)
        click.echo(f"pushed {pushed['reference']}: digest {pushed['digest']}  (pull {pushed['pinned']})")


def image_repository() -> str:
    from .image import REPOSITORY

    return REPOSITORY


@click.command()
@base_option
@tree_option
@click.option(
    "--installer",
    type=click.Choice(["uv", "none"]),
    default=lambda: os.environ.get("INSTALLER") or "uv",
    show_default="uv",
    help="What the stand-in installs packages with (env INSTALLER): uv, as the official image; none.",
)
@click.option(
    "--tag", default=None, help="Image reference [default: tkv-seam/stand-in:<base>[-noinstaller]]."
)
@json_option
@pass_ctx
def standin(ctx: Context, base_name, tree, installer, tag, as_json):
    """Import a local stand-in for the base's official image (no registry needed).

    Debian + python3, the base's vllm/*.py at the official path, metadata of the base's
    locked packages, uv (unless --installer none). Build on it with `make image STAND_IN=1`.
    """
    from .image import client
    from .standin import default_tag, make_stand_in

    base = ctx.base(base_name, hint="make standin BASE={}")
    made = make_stand_in(
        client(), ctx.root, ctx.tree(tree, base_name), base, ctx.cache, installer, tag, ctx.progress
    )
    if as_json:
        emit_json(made.to_json())
        return
    click.echo(
        f"stand-in {made.tag} ({made.image_id[:19]}): {base.name}'s vllm/*.py, {made.packages} package "
        f"records, installer {made.installer}"
    )
    named = "" if made.tag == default_tag(base.name) else f" BASE_IMAGE={made.tag}"
    plugin = "" if installer == "uv" else " TURBO_ATTN="
    click.echo(f"next: make image BASE={base.name} STAND_IN=1{named}{plugin}")


# --------------------------------------------------------------------------- drift


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
    from .bases import load_bases
    from .drift import drift as do_drift
    from .drift import matrix

    ctx = click_ctx.find_object(Context)
    bases = load_bases(ctx.bases_file, ctx.root)
    if slug:
        from .interdiff import patch_drift, render

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


# --------------------------------------------------------------------------- port


@click.command()
@click.option(
    "--base",
    "base_name",
    default=lambda: os.environ.get("BASE", "v0.31.0"),
    show_default="v0.31.0",
    help="The base whose queue is ported.",
)
@click.option("--to", "to_name", required=True, help="The newer base to port onto (e.g. v0.32.0).")
@click.option("--tree", default=None, help="Port tree [default: build/port-<to>].")
@click.option(
    "--report", "mode", flag_value="report", help="One-shot report of the whole queue; keeps nothing."
)
@click.option("--continue", "mode", flag_value="continue", help="Commit the staged resolution, go on.")
@click.option("--skip", "mode", flag_value="skip", help="Leave the stopped patch out (needs --reason).")
@click.option("--abort", "mode", flag_value="abort", help="Remove the port tree (nothing else was made).")
@click.option("--status", "mode", flag_value="status", help="Where the port stands.")
@click.option("--finish", "mode", flag_value="finish", help="Write the new base's queue, lint it.")
@click.option("--verdict", default=None, help="--continue: Verdict line; --skip: obsolete or dropped.")
@click.option("--reason", default=None, help="--continue: Reason line; --skip: why the patch goes.")
@force_option
@json_option
@pass_ctx
def port(ctx: Context, base_name, to_name, tree, mode, verdict, reason, force, as_json):
    """Forward-port the base's queue onto a newer base: a report, or a resumable port like git rebase.

    \b
    port --to B --report     per patch and hunk: placement, conflicts, blocked-by,
                             likely obsolete, moves, upstream diff, draft verdicts
    port --to B              start in build/port-B; stops at the first patch needing you
    port --to B --continue   after resolving and `git add`: commit (the patch's message
                             and author; edit Verdict/Reason in .git/tkv-seam-port-msg
                             or pass --verdict/--reason), go on
    port --to B --skip --reason WHY [--verdict obsolete|dropped]
    port --to B --status | --abort | --finish [--force]

    Exit 12 when the port stopped or the report has a patch that did not apply.
    """
    from . import port as p
    from .errors import EXIT_LINT, EXIT_PORT

    from .lock import locked, tree_lock_path

    from_base = ctx.base(base_name, hint=f"make port BASE={{}} TO={to_name}")
    to_base = ctx.base(to_name, hint=f"make port BASE={base_name} TO={{}}", avoid=base_name)
    dest = absolute(tree) if tree else p.port_tree(ctx.root, to_name)
    if mode == "report":
        reports = p.report(ctx.root, from_base, to_base, ctx.cache, ctx.progress)
        table = p.verdict_table(reports, base_name, to_name)
        if as_json:
            emit_json(
                {
                    "from": base_name,
                    "to": to_name,
                    "summary": p.summary(reports),
                    "patches": [r.to_json() for r in reports],
                    "verdict_table": table,
                }
            )
        else:
            _echo_report(reports)
            click.echo("\n" + table)
            sm = p.summary(reports)
            click.echo(
                f"port {base_name} -> {to_name}: {sm['applied']} of {sm['patches']} patches apply; "
                + ", ".join(f"{v} {k}" for k, v in sorted(sm["by_status"].items()))
                + f" ({sm['blocked_but_apply_on_their_own']} of the blocked apply on their own)"
            )
        if not all(r.applied for r in reports):
            sys.exit(EXIT_PORT)
        return
    # one port run at a time on a port tree (start, continue, skip, abort, finish)
    with locked(tree_lock_path(dest), str(dest), ctx.progress):
        if mode == "abort":
            click.echo(f"removed {p.abort(to_base, dest)}; no queue was written")
            return
        if mode == "status":
            _echo_state(p.status(ctx.root, to_base, dest), as_json)
            return
        if mode == "finish":
            done = p.finish(ctx.root, to_base, dest, force, cache=ctx.cache)
            _echo_finished(done, to_base, as_json)
            if done.problems:
                sys.exit(EXIT_LINT)
            return
        # each raises PortStopped (exit 12) at the next patch needing you
        if mode == "continue":
            p.resume(ctx.root, to_base, dest, verdict, reason, ctx.progress)
        elif mode == "skip":
            p.skip(ctx.root, to_base, dest, reason or "", verdict or "obsolete", ctx.progress)
        else:
            p.start(ctx.root, from_base, to_base, ctx.cache, dest, ctx.progress)
        # every patch is through: the last step writes the queue (as --finish)
        done = p.finish(ctx.root, to_base, dest, force, cache=ctx.cache)
        _echo_finished(done, to_base, as_json)
        if done.problems:
            sys.exit(EXIT_LINT)


def _echo_report(reports) -> None:
    for r in reports:
        extra = f"  blocked by {', '.join(r.blocked_by)}" if r.blocked_by else ""
        click.echo(f"{r.status:18} {r.name}{extra}")
        if r.note:
            click.echo(f"{'':21}{r.note}")
        for e in r.obsolete:
            click.echo(f"{'':21}evidence: {e}")
        for f in r.files:
            rows = [h for h in r.hunks if h.file in (f.path, f.moved_to) and (h.kind != "exact" or h.note)]
            if f.status == "exact" and not rows:
                continue
            click.echo(f"{'':21}{f.path}: {f.status}" + (f" ({f.note})" if f.note else ""))
            for h in rows:
                _echo_hunk(h)


def _echo_hunk(h) -> None:
    note = f"; {h.note}" if h.note else ""
    click.echo(f"{'':23}hunk {h.hunk} {h.header} {h.section[:40]}: {h.status}{note}")
    up = h.upstream
    if up and up["changed"]:
        diff = up["diff"].splitlines()
        click.echo(
            f"{'':25}upstream changed {up['new_file']} lines {up['old_lines']} (now {up['new_lines']}):"
        )
        for line in diff[:12]:
            click.echo(f"{'':27}{line}")
        if len(diff) > 12:
            click.echo(f"{'':27}... {len(diff) - 12} more lines (--json has all)")
    elif up:
        click.echo(f"{'':25}upstream left lines {up['old_lines']} as they were (now {up['new_lines']})")


def _echo_state(state, as_json) -> None:
    from dataclasses import asdict

    if as_json:
        emit_json(asdict(state))
        return
    click.echo(f"port {state.from_base} -> {state.to_base} in {state.tree}")
    for d in state.done:
        click.echo(
            f"  {d['status']:9} {d['name']}"
            + (f"  ({d['verdict']}: {d['reason']})" if d["status"] == "skipped" else "")
        )
    if state.current:
        click.echo(f"  STOPPED   {state.current}: {state.stopped['status'] if state.stopped else ''}")
    for rel in state.series[state.next + (1 if state.current else 0) :]:
        click.echo(f"  todo      {Path(rel).name}")
    if state.finished:
        click.echo("  finished: the queue is written")


def _echo_finished(done, to_base, as_json) -> None:
    if as_json:
        from dataclasses import asdict

        emit_json(
            {
                "state": asdict(done.state),
                "exported": [vars(e) for e in done.exported],
                "problems": done.problems,
            }
        )
        return
    for e in done.exported:
        click.echo(f"{e.status:9} {to_base.queue.patches}/{e.name}")
    for prob in done.problems:
        click.echo(prob, err=True)
    skipped = [d for d in done.state.done if d["status"] == "skipped"]
    click.echo(
        f"port -> {to_base.name} finished: {sum(e.status != 'removed' for e in done.exported)} patches in "
        f"{to_base.queue.series}, "
        f"{len(skipped)} skipped (see {to_base.queue.patches}/PORT.md); "
        + ("lint + style gate: ok" if not done.problems else f"{len(done.problems)} problem(s)")
    )


COMMANDS = [bases, fetch, apply, refresh, lint, overlay, seamtest, stylecheck, image, standin, port, drift]
