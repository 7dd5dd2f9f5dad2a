"""The ``seamtest`` commands: the test lanes of ``make test`` (bisect, full, upstream, plugin, differential, all)."""

from __future__ import annotations

import os

import click

from .options import Context, base_option, emit, json_option, pass_ctx, python_option, tree_option


def _fresh() -> bool:
    from ..seamtest.passes import fresh_from_env

    return fresh_from_env()


def _runner(ctx: Context, base_name, tree, python, slots):
    from ..seamtest.run import open_runner, require_test_venv

    python = ctx.venv_python(python, base_name)
    require_test_venv(python, base_name)  # before the base: --python names its own venv
    base = ctx.base(base_name)
    return open_runner(
        ctx.root, base, ctx.tree(tree, base_name), python, ctx.cache, ctx.progress, slots, ctx.fresh
    )


def _default_slots() -> int:
    return int(os.environ.get("TKV_SEAM_JOBS") or min(4, os.cpu_count() or 1))


@click.group()
def seamtest():
    """Run the series' tests (bisect, full) and upstream's tests against the venv.

    Every lane's pytest processes run on --jobs venv slots at once (hard-linked
    copies of the test venv); `all` schedules the lanes of `make test` together.
    """


def _set_fresh(ctx: click.Context, _param, value: bool) -> bool:
    ctx.find_object(Context).fresh = bool(value)
    return value


fresh_option = click.option(
    "--fresh",
    is_flag=True,
    default=_fresh,
    expose_value=False,
    callback=_set_fresh,
    show_default="FRESH=1 in the environment",
    help="Run every job, also those whose inputs passed before (records them anew).",
)


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
            fresh_option,
            seamtest.command(name),
        ):
            fn = deco(fn)
        return fn

    return decorate


def _run_lanes(ctx: Context, runner, lanes) -> None:
    from ..seamtest.run import Lanes
    from ..seamtest.runner import run_lanes

    reports = run_lanes(runner, lanes)
    for rep in reports:  # what a run says on the way (a cached baseline used): stderr, in both modes
        for note in rep.notes:
            click.echo(note, err=True)
    emit(Lanes(reports))


@seamtest_command("bisect")
@click.option(
    "--patch",
    "patches",
    multiple=True,
    help="Only this patch (number, slug or file name; repeatable): its Tests at k and k-1.",
)
@click.option(
    "--check-only",
    is_flag=True,
    help="Check the --patch selection against the base's series and exit (no tree or venv needed).",
)
def seamtest_bisect(ctx: Context, base_name, tree, python, slots, as_json, patches, check_only):
    """Each patch's Tests pass at k and fail at k-1; Guards pass at k; every prefix compiles."""
    from ..queue.series import read_series
    from ..seamtest.bisect import BisectLane
    from ..seamtest.run import chosen, patch_numbers

    if check_only:  # before the tree and the venv are made: a mistyped PATCH costs nothing
        base = ctx.base(base_name)
        emit(chosen(read_series(ctx.root, base.queue, base.name).load(), base.name, patches))
        return
    runner = _runner(ctx, base_name, tree, python, slots)
    _run_lanes(ctx, runner, [BisectLane(patch_numbers(runner.patches, runner.base.name, patches))])


@seamtest_command("full")
@click.option(
    "--cuda-alike",
    is_flag=True,
    help="Run with the platform reporting is_cuda_alike()/is_cuda() (CUDA-only branches).",
)
def seamtest_full(ctx: Context, base_name, tree, python, slots, as_json, cuda_alike):
    """Every test the series names, on the full series."""
    from ..seamtest.full import CudaAlikeLane, FullLane

    lane = CudaAlikeLane() if cuda_alike else FullLane()
    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), [lane])


no_cache_option = click.option(
    "--no-cache", is_flag=True, help="Re-run the stock baseline of upstream's tests (and re-cache it)."
)


@seamtest_command("upstream")
@click.option("--file", "files", multiple=True, help="Upstream test file (repeatable) [default: the base's].")
@no_cache_option
def seamtest_upstream(ctx: Context, base_name, tree, python, slots, as_json, files, no_cache):
    """Upstream test files on stock and on the full series: no new failure."""
    from ..seamtest.upstream import UpstreamLane

    lane = UpstreamLane(tuple(files), use_cache=not (no_cache or ctx.fresh))
    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), [lane])


@seamtest_command("plugin")
def seamtest_plugin(ctx: Context, base_name, tree, python, slots, as_json):
    """The base's turbo-attn pin: breaks stock vLLM, loads and plans on the patched vLLM."""
    from ..seamtest.plugin import PluginLane

    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), [PluginLane()])


@seamtest_command("all")
@no_cache_option
def seamtest_all(ctx: Context, base_name, tree, python, slots, as_json, no_cache):
    """Every lane of `make test` (bisect, full, full-cuda, upstream, plugin, differential) in one schedule."""
    from ..seamtest.lanes import DEFAULT, LANES
    from ..seamtest.upstream import UpstreamLane

    upstream = UpstreamLane(use_cache=not (no_cache or ctx.fresh))
    lanes = [upstream if n == "upstream" else LANES[n]() for n in DEFAULT]
    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), lanes)


@seamtest_command("differential")
def seamtest_differential(ctx: Context, base_name, tree, python, slots, as_json):
    """Patched vs pristine base modules on random inputs (tests/differential), full series."""
    from ..seamtest.differential import DifferentialLane

    _run_lanes(ctx, _runner(ctx, base_name, tree, python, slots), [DifferentialLane()])


COMMANDS = [seamtest]


@seamtest.command("lane")
@click.argument("name")
@click.option("--reads", "reads", multiple=True, help="A file or directory the command reads (repeatable).")
@click.option(
    "--base", "base_name", default=None, help="The base the command checks (its tree, sdist, lock)."
)
@click.option(
    "--env", "env", multiple=True, help="An environment variable whose value the outcome depends on."
)
@click.option("--plugin", is_flag=True, help="The command loads the base's plugin pin.")
@fresh_option
@json_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_ctx
def seamtest_lane(ctx: Context, name, reads, base_name, env, plugin, as_json, command):
    """Run COMMAND as lane NAME unless it passed before with the same inputs (FRESH=1: run it).

    `make test` runs its tooling, series and image lanes so: the key digests the tool's source,
    the --reads files, the command, the interpreter, the --env values and, with --base, the base's
    sdist, lock and venv and the build tree; a pass is recorded under build/passes/, a failure
    or a kill records nothing. Exit 9 when the command fails. Give the command after `--`.
    """
    from ..bases.pins import load_bases
    from ..seamtest.command_lane import CommandLane
    from ..seamtest.passes import PassBook
    from ..seamtest.run import LaneDone

    load_bases(ctx.bases_file, ctx.root)  # a tkv-seam project, its bases file readable
    base = ctx.base(base_name) if base_name else None
    lane = CommandLane(name, ctx.root, list(command), tuple(reads), base, tuple(env), plugin)
    book = PassBook(ctx.root, base_name, fresh=ctx.fresh)
    run = lane.run(book, ctx.progress, lambda line: click.echo(line, err=True), quiet_stdout=as_json)
    emit(LaneDone(run))


@seamtest.command("times")
@json_option
@pass_ctx
def seamtest_times(ctx: Context, as_json):
    """Each lane step's last measured run (not a cached one): seconds, load, cores, date."""
    from ..seamtest.run import last_timings

    emit(last_timings(ctx.root, ctx.bases_file))
