"""The overlay commands: ``overlay files|stage|install|restore`` and ``image`` (the Docker overlay image)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from .. import hints
from ..errors import RefusedError, SeamError
from .options import (
    Context,
    absolute,
    base_option,
    emit_json,
    json_option,
    pass_ctx,
    python_option,
    tree_option,
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
    from ..bases.carried import queue_overlay_paths

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
    from ..bases.carried import queue_overlay_paths
    from ..overlay.stage import stage_locked

    out = absolute(out) if out else ctx.root / "build" / f"overlay-{base_name}"
    _refuse_stage_dir(ctx, base_name, out)
    paths = queue_overlay_paths(ctx.root, ctx.base(base_name))
    manifest = stage_locked(ctx.tree(tree, base_name), paths, out, commit, ctx.progress)
    if as_json:
        emit_json({"out": str(out), **manifest})
        return
    changed = sum(f["pristine_sha256"] != f["patched_sha256"] for f in manifest["files"])
    click.echo(f"{out}: {len(manifest['files'])} files ({changed} patched) for {manifest['commit'][:12]}")


def _refuse_stage_dir(ctx: Context, base_name: str, out: Path) -> None:
    """A stage goes beside the project's trees, never over the project or into a tree tkv-seam made."""
    from ..tree.seamtree import SeamTree

    again = hints.tool("overlay", "stage", "--base", base_name, "--out", f"build/overlay-{base_name}")
    real = Path(os.path.realpath(out))
    if real == Path(os.path.realpath(ctx.root)) or real in Path(os.path.realpath(ctx.root)).parents:
        raise RefusedError(
            f"{out} exists and is not an overlay stage tkv-seam made: it is the project (or holds it); "
            "nothing was deleted",
            hint=again,
        )
    for parent in (out, *out.parents):
        if SeamTree(parent).load() is not None:
            raise RefusedError(
                f"--out {out} is inside {parent}, a tree tkv-seam made: the stage would be files the tree "
                "does not hold (apply and refresh then refuse the tree)",
                hint=again,
            )


def _install(ctx: Context, base_name, tree, python, commit_of, as_json, verb):
    from ..bases.carried import queue_overlay_paths
    from ..overlay.stage import install_commit, restore_paths
    from ..tree.seamtree import SeamTree

    target = "overlay" if verb == "install" else "overlay-restore"
    if python is None and tree is None:
        known = f"make {target} BASE={{}}"
    else:  # the same venv and tree, the base a known one ({} is filled in; a brace in a path stays)
        given = [("--tree", tree), ("--python", python)]
        words = [w for opt, value in given if value is not None for w in (opt, absolute(value))]
        known = hints.tool("overlay", verb, "--base", "@BASE@", *words).replace("{", "{{").replace("}", "}}")
        known = known.replace("@BASE@", "{}")
    ctx.base(base_name, hint=known)  # an unknown base is a usage error before any tree is looked at
    tree_path = ctx.tree(tree, base_name)
    commit = commit_of(SeamTree(tree_path).state())
    venv_python = ctx.venv_python(python, base_name)
    own_venv = venv_python == ctx.venv_python(None, base_name)
    if own_venv and tree_path == ctx.tree(None, base_name):
        again = hints.make(target, BASE=base_name)
    else:
        again = hints.tool("overlay", verb, "--base", base_name, "--tree", tree_path, "--python", venv_python)
    # restore: what the venv's record says its overlay replaced (the queue's files only help a
    # venv an older tkv-seam overlaid); install: the queue's overlay set
    paths = (queue_overlay_paths if verb == "install" else restore_paths)(ctx.root, ctx.base(base_name))
    done = install_commit(
        tree_path,
        paths,
        ctx.root / "build" / "overlay-venv",
        commit,
        venv_python,
        own_venv,
        again,
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
    _install(ctx, base_name, tree, python, lambda state: commit, as_json, "install")


@overlay.command("restore")
@base_option
@tree_option
@python_option
@json_option
@pass_ctx
def overlay_restore(ctx: Context, base_name, tree, python, as_json):
    """Put the pristine base files back into the venv."""
    _install(ctx, base_name, tree, python, lambda state: state.base_commit, as_json, "restore")


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
    from ..image.build import build, parse_reference, registry_of
    from ..image.engine import client
    from ..image.build import push as do_push

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
    from ..image.build import REPOSITORY

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
    from ..image.engine import client
    from ..image.standin import default_tag, make_stand_in

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


COMMANDS = [overlay, image, standin]
