"""The overlay commands: ``overlay files|stage|install|restore`` and ``image`` (the Docker overlay image)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from .. import hints, layout
from ..errors import RefusedError, SeamError
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

    --out is created, or must be a previous stage tkv-seam wrote and nobody changed
    since; any other directory is refused (exit 5) and left as it is.
    """
    from ..bases.carried import queue_overlay_paths
    from ..overlay.stage import stage_locked
    from ..tree.seamtree import SeamTree
    from ..tree.state import Kind

    out = absolute(out) if out else layout.overlay_stage(ctx.root, base_name)
    _refuse_stage_dir(ctx, base_name, out)
    tree_path = ctx.tree(tree, base_name)
    SeamTree(tree_path, ctx.root).require(Kind.APPLY, ctx.base(base_name).name, "overlay stage")
    paths = queue_overlay_paths(ctx.root, ctx.base(base_name))
    emit(stage_locked(tree_path, paths, out, commit, ctx.progress))


def _refuse_stage_dir(ctx: Context, base_name: str, out: Path) -> None:
    """A stage goes beside the project's trees, never over the project or into a tree tkv-seam made."""
    from ..tree.seamtree import SeamTree

    again = hints.tool(
        "overlay", "stage", "--base", base_name, "--out", layout.overlay_stage(Path(), base_name)
    )
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


def _other_bases(ctx: Context, base_name: str, verb: str, python: Path) -> dict[str, str]:
    """vLLM version -> the command doing ``verb`` with that carried base's overlay in ``python``'s venv
    (a venv holding another carried release is answered with its own base)."""
    from ..bases.carried import carried_bases
    from ..bases.pins import load_bases

    bases = load_bases(ctx.bases_file, ctx.root)
    out = {}
    for name in carried_bases(bases, ctx.root):
        if name == base_name:
            continue
        cmd = hints.tool("overlay", verb, "--base", name, "--python", python)
        if not ctx.tree(None, name).is_dir():
            cmd = f"{hints.make('apply', BASE=name)} && {cmd}"
        out[bases[name].version] = cmd
    return out


def _install(ctx: Context, base_name, tree, python, commit_of, verb):
    from ..bases.carried import queue_overlay_paths
    from ..overlay.stage import install_commit, restore_paths
    from ..tree.seamtree import SeamTree
    from ..tree.state import Kind

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
    # a tree of this base whose commits are a queue's (not another base's, a port in progress, half-switched)
    commit = commit_of(SeamTree(tree_path, ctx.root).require(Kind.APPLY, base_name, f"overlay {verb}"))
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
        layout.overlay_venv_stage(ctx.root),
        commit,
        venv_python,
        own_venv,
        again,
        ctx.progress,
        others=_other_bases(ctx, base_name, verb, venv_python),
        restore=verb == "restore",
    )
    emit(done)


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
    _install(ctx, base_name, tree, python, lambda state: commit, "install")


@overlay.command("restore")
@base_option
@tree_option
@python_option
@json_option
@pass_ctx
def overlay_restore(ctx: Context, base_name, tree, python, as_json):
    """Put the pristine base files back into the venv."""
    _install(ctx, base_name, tree, python, lambda state: state.base_commit, "restore")


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
