"""The ``seamtest`` commands: the test lanes of ``make test`` (bisect, full, upstream, plugin, differential, all)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import click

from .. import hints, layout
from ..answer import Answer
from ..errors import EXIT_TESTS, SeamError, UsageError
from .options import Context, base_option, emit, json_option, pass_ctx, python_option, tree_option


def _fresh() -> bool:
    from ..seamtest.passes import fresh_from_env

    return fresh_from_env()


def _runner(ctx: Context, base_name, tree, python, slots):
    from ..seamtest.hfcache import build
    from ..seamtest.passes import PassBook
    from ..seamtest.runner import Runner

    python = ctx.venv_python(python, base_name)
    if not python.exists():
        raise SeamError(
            f"no Python at {python}: the vLLM test venv is missing", hint=f"make venv-vllm BASE={base_name}"
        )
    work = layout.seamtest_work(ctx.root, base_name)
    hf_home = build(work.parent, ctx.root / "tests" / "data" / "hf-configs")
    return Runner.open(
        ctx.root,
        ctx.tree(tree, base_name),
        python,
        work,
        hf_home,
        ctx.base(base_name),
        ctx.cache,
        ctx.progress,
        slots=slots,
        passes=PassBook(ctx.root, base_name, fresh=ctx.fresh),
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


@dataclass
class Lanes(Answer):
    """The reports of one run's lanes (``seamtest.runner.LaneReport``): one lane's data as it is,
    several under ``lanes``, keyed by lane; exit 9 when any failed."""

    reports: list

    def lines(self) -> list[str]:
        many = len(self.reports) > 1
        return [line for rep in self.reports for line in ([f"== {rep.lane}"] if many else []) + rep.lines]

    def to_json(self) -> dict:
        if len(self.reports) == 1:
            return self.reports[0].data
        return {"lanes": {rep.lane: rep.data for rep in self.reports}}

    def exit_code(self) -> int:
        return 0 if all(rep.ok for rep in self.reports) else EXIT_TESTS


def _run_lanes(ctx: Context, runner, lanes) -> None:
    from ..seamtest.runner import run_lanes

    reports = run_lanes(runner, lanes)
    for rep in reports:  # what a run says on the way (a cached baseline used): stderr, in both modes
        for note in rep.notes:
            click.echo(note, err=True)
    emit(Lanes(reports))


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
            raise _no_such_patch(runner, want)
    return out


def _no_such_patch(runner, want: str):
    """A usage error (exit 2) naming the patch ``want`` most likely meant; the hint bisects that one
    patch (or asks for one: never every patch, which is slower than what was asked)."""
    names = ", ".join(p.name for p in runner.patches)
    slugs = [p.name.removesuffix(".patch").split("-", 1)[-1] for p in runner.patches]
    meant = hints.close(want, slugs)
    return UsageError(
        f"no patch {want!r} in the series ({names}){hints.did_you_mean(meant)}",
        hint=hints.make("bisect", BASE=runner.base.name, PATCH=meant[0] if meant else "<n>"),
    )


@seamtest_command("bisect")
@click.option(
    "--patch",
    "patches",
    multiple=True,
    help="Only this patch (number, slug or file name; repeatable): its Tests at k and k-1.",
)
def seamtest_bisect(ctx: Context, base_name, tree, python, slots, as_json, patches):
    """Each patch's Tests pass at k and fail at k-1; Guards pass at k; every prefix compiles."""
    from ..seamtest.bisect import BisectLane

    runner = _runner(ctx, base_name, tree, python, slots)
    _run_lanes(ctx, runner, [BisectLane(_patch_numbers(runner, patches))])


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


@dataclass
class LaneDone(Answer):
    """``seamtest lane``: ran (its exit code) or a recorded pass stood in (when it was recorded)."""

    run: object  # seamtest.command_lane.LaneRun

    def lines(self) -> list[str]:
        return []  # the lane's own line is said on stderr as it happens

    def to_json(self) -> dict:
        r = self.run
        return {
            "ok": r.code == 0,
            "lane": r.lane,
            "cached": r.cached_from is not None,
            "cached_from": r.cached_from,
            "seconds": r.seconds,
            "command_exit": r.code,
        }

    def exit_code(self) -> int:
        return 0 if self.run.code == 0 else EXIT_TESTS


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

    load_bases(ctx.bases_file, ctx.root)  # a tkv-seam project, its bases file readable
    base = ctx.base(base_name) if base_name else None
    lane = CommandLane(name, ctx.root, list(command), tuple(reads), base, tuple(env), plugin)
    book = PassBook(ctx.root, base_name, fresh=ctx.fresh)
    run = lane.run(book, ctx.progress, lambda line: click.echo(line, err=True), quiet_stdout=as_json)
    emit(LaneDone(run))


@dataclass
class Times(Answer):
    """The timing record of the lanes (build/passes/*/timings.jsonl): each step's last run."""

    rows: list

    def lines(self) -> list[str]:
        out = [f"{'step':34} {'base':8} {'seconds':>8}  {'load':>5} {'cores':>5}  when"]
        for row in self.rows:
            out.append(
                f"{row['name']:34} {str(row.get('base') or '-'):8} {row['seconds']:>8.1f}  "
                f"{str(row.get('load') or '-'):>5} {str(row.get('cores') or '-'):>5}  {row['when']}"
            )
        return out if self.rows else ["no timing recorded yet (make test records one)"]

    def to_json(self) -> dict:
        return {"timings": self.rows}


@seamtest.command("times")
@json_option
@pass_ctx
def seamtest_times(ctx: Context, as_json):
    """Each lane step's last measured run (not a cached one): seconds, load, cores, date."""
    from ..bases.pins import load_bases
    from ..seamtest.passes import PassBook, read_timings

    known = load_bases(ctx.bases_file, ctx.root)
    last: dict = {}
    books = [PassBook(ctx.root, name) for name in [None, *known]]
    for path in [book.dir / "timings.jsonl" for book in books if book.linked is None]:
        for row in read_timings(path):
            if not row.get("cached"):
                last[(str(row.get("base") or ""), row["name"])] = row
    emit(Times([last[k] for k in sorted(last)]))
