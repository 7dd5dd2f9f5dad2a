"""The overlay commands: ``overlay files|stage|install|restore`` and ``image`` (the Docker overlay image)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from .. import hints, layout
from ..errors import SeamError
from .options import (
    Context,
    absolute,
    base_option,
    emit,
    json_option,
    pass_ctx,
    python_option,
    say,
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
    from ..overlay.stage import OverlayFiles

    emit(OverlayFiles(base_name, queue_overlay_paths(ctx.root, ctx.base(base_name))))


@overlay.command("stage")
@base_option
@tree_option
@click.option("--commit", default="HEAD", show_default=True, help="Commit of the build tree to stage.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Stage directory, new or a previous stage [default: {layout.default(layout.overlay_stage)}].",
)
@json_option
@pass_ctx
def overlay_stage(ctx: Context, base_name, tree, commit, out, as_json):
    """Write manifest.json + overlay/vllm/... (+ the installer) for one commit.

    --out is created (or empty), or must be a previous stage tkv-seam wrote and nobody
    changed since; any other directory is refused (exit 5) and left as it is.
    """
    from ..overlay.venv import refuse_stage_dir, stage_tree

    out = absolute(out) if out else layout.overlay_stage(ctx.root, base_name)
    refuse_stage_dir(ctx.root, base_name, out)
    tree_path = ctx.tree(tree, base_name)
    emit(stage_tree(ctx.root, ctx.base(base_name), tree_path, commit, out, ctx.progress))


def _install(ctx: Context, base_name, tree, python, commit):
    """``overlay install`` (``commit``) or ``overlay restore`` (``commit`` None)."""
    from ..overlay.venv import install_overlay

    target, verb = ("overlay", "install") if commit is not None else ("overlay-restore", "restore")
    if python is None and tree is None:
        known = f"make {target} BASE={{}}"
    else:  # the same venv and tree, the base a known one ({} is filled in; a brace in a path stays)
        given = [("--tree", tree), ("--python", python)]
        words = [w for opt, value in given if value is not None for w in (opt, absolute(value))]
        known = hints.tool("overlay", verb, "--base", "@BASE@", *words).replace("{", "{{").replace("}", "}}")
        known = known.replace("@BASE@", "{}")
    base = ctx.base(base_name, hint=known)  # an unknown base is a usage error before any tree is looked at
    venv_python = ctx.venv_python(python, base_name)
    own_venv = venv_python == ctx.venv_python(None, base_name)
    tree_path = ctx.tree(tree, base_name)
    emit(
        install_overlay(
            ctx.root, ctx.bases_file, base, tree_path, venv_python, own_venv, commit, ctx.progress
        )
    )


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
    _install(ctx, base_name, tree, python, commit)


@overlay.command("restore")
@base_option
@tree_option
@python_option
@json_option
@pass_ctx
def overlay_restore(ctx: Context, base_name, tree, python, as_json):
    """Put the pristine base files back into the venv."""
    _install(ctx, base_name, tree, python, None)


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
    from ..image.build import build
    from ..image.engine import client
    from ..image.engine import push as do_push
    from ..image.names import parse_reference, registry_of

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
        log=say,
        cache=ctx.cache,
        registry=registry,
        repository=repository,
        source=source,
        progress=ctx.progress,
    )
    if push:
        result.push = do_push(client(), result.tag, say, ctx.progress)
    emit(result)


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
    from ..image.standin import make_stand_in

    base = ctx.base(base_name, hint="make standin BASE={}")
    emit(
        make_stand_in(
            client(), ctx.root, ctx.tree(tree, base_name), base, ctx.cache, installer, tag, ctx.progress
        )
    )


COMMANDS = [overlay, image, standin]
