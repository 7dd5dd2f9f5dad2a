"""The overlay commands: ``overlay files|stage|install|restore`` and ``image`` (the Docker overlay image)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import click

from ..errors import TOOL
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
    from ..overlay import queue_overlay_paths

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
    from ..overlay import queue_overlay_paths, stage_locked

    out = absolute(out) if out else ctx.root / "build" / f"overlay-{base_name}"
    paths = queue_overlay_paths(ctx.root, ctx.base(base_name))
    manifest = stage_locked(ctx.tree(tree, base_name), paths, out, commit, ctx.progress)
    if as_json:
        emit_json({"out": str(out), **manifest})
        return
    changed = sum(f["pristine_sha256"] != f["patched_sha256"] for f in manifest["files"])
    click.echo(f"{out}: {len(manifest['files'])} files ({changed} patched) for {manifest['commit'][:12]}")


def _install(ctx: Context, base_name, tree, python, commit_of, as_json, rerun):
    from ..overlay import install_commit, queue_overlay_paths
    from ..seamtree import SeamTree

    tree_path = ctx.tree(tree, base_name)
    commit = commit_of(SeamTree(tree_path).state())
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


@click.command()
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
def image(ctx: Context, base_name, tree, base_image, turbo_attn, stand_in, tag, as_json):
    """Build the overlay image: the base image + exactly the patched vllm/ files (docker SDK).

    Checks the base image's revision label against the pin before building (exit 7
    when refused or when no Docker engine is reachable); streams the build log.
    """
    from ..image import build

    log = (lambda line: click.echo(line, err=True)) if as_json else click.echo
    result = build(
        ctx.root,
        ctx.tree(tree, base_name),
        ctx.base(base_name, hint="make image BASE={}"),
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


COMMANDS = [overlay, image]
