"""Subcommands that carry a base in and out: ``carried``, ``seam-table``, ``lock-cpu``,
``venv-vllm``, ``retire``.

Bodies parse options and call the library; the top group maps errors to exit codes.
"""

from __future__ import annotations

from pathlib import Path

import click

from .options import Context, absolute, emit, force_option, json_option, pass_ctx
from .port import auto_options


@click.command()
@json_option
@pass_ctx
def carried(ctx: Context, as_json):
    """The carried bases (those whose queue exists), oldest release first, one per line.

    ``make test`` checks each of them.
    """
    from ..bases.pins import load_bases
    from ..bases.carried import Carried, carried_bases

    emit(Carried(carried_bases(load_bases(ctx.bases_file, ctx.root), ctx.root)))


@click.command("seam-table")
@click.argument("base_name", metavar="BASE")
@click.option(
    "--from", "source", default=None, help="Carry from this base [default: the newest carried older one]."
)
@click.option(
    "--plugin",
    default=None,
    help="Plugin pin (name==version), hashes from the index [default: the source's].",
)
@click.option(
    "--ruff", default=None, help="Style-gate ruff version [default: the sdist's .pre-commit-config.yaml]."
)
@force_option
@json_option
@pass_ctx
def seam_table(ctx: Context, base_name, source, plugin, ruff, force, as_json):
    """Write the ["BASE".seam] table of a pinned base into bases.toml, derived by code.

    ruff from the sdist's .pre-commit-config.yaml; the plugin pin of the base it is carried
    from; that base's upstream test files that exist in BASE's sdist, plus the new paths of
    moved ones (git diff -M). Each test file is listed: kept, moved or dropped.
    """
    from ..release import seamtable
    from ..bases.pins import load_bases
    from ..tree.kept import keep

    bases = load_bases(ctx.bases_file, ctx.root)
    base = ctx.base(base_name, hint="make pin VERSION=<version>   (then make seam-table BASE=v<version>)")
    table = seamtable.derive(ctx.root, bases, base, ctx.cache, source, plugin, ruff, progress=ctx.progress)
    seamtable.write(
        ctx.bases_file,
        table,
        force,
        keep=lambda: str(keep(ctx.root, [ctx.bases_file], f"seam-table-{base.name}")),
    )
    emit(table)


@click.command("lock-cpu")
@click.argument("base_name", metavar="BASE")
@click.option(
    "--find-links",
    "find_links",
    multiple=True,
    help="Directory holding torch-<v>+cpu wheels (repeatable) [default: $PIP_FIND_LINKS].",
)
@click.option(
    "--torch", "torch_version", default=None, help="Lock this torch instead of the local CPU build."
)
@click.option(
    "--exclude-newer", default=None, help="Only files uploaded before this UTC time [default: now]."
)
@click.option("--index-url", default=None, help="Package index for uv [default: uv's, PyPI].")
@click.option("--no-index", is_flag=True, help="Resolve from the find-links directories only.")
@click.option(
    "--exclude",
    "exclude",
    multiple=True,
    help="Leave this package out of the lock (repeatable); recorded in BASE's cpu rules in bases.toml.",
)
@click.option(
    "--why", default=None, help="The reason recorded with --exclude [default: 'given to lock-cpu']."
)
@json_option
@pass_ctx
def lock_cpu(
    ctx: Context,
    base_name,
    find_links,
    torch_version,
    exclude_newer,
    index_url,
    no_index,
    exclude,
    why,
    as_json,
):
    """Resolve BASE's CPU lock (ci/lock-cpu-BASE.txt) with uv: that vLLM, the local CPU torch.

    The release's test pins and the base's rules (["BASE".seam.cpu] in bases.toml, or those of
    the base it is carried from): torch overridden (the machine's +cpu build), the packages left
    out, each with its reason. The file's header says all of it and the one command that remakes
    it. A changed lock is replaced; the old one is kept under build/dropped/.
    """
    from ..bases.pins import Exclusion, load_bases
    from ..errors import UsageError
    from ..release.cpulock import lock_cpu as do_lock

    bases = load_bases(ctx.bases_file, ctx.root)
    base = ctx.base(
        base_name, hint="make pin VERSION=<version>   (then make lock-cpu BASE=v<version>)", again=True
    )
    if why is not None and not exclude:
        raise UsageError("--why is the reason of an --exclude; give the package too", hint="make help")
    reason = " ".join((why or "").split()) or "given to lock-cpu --exclude"  # a blank why too
    links = list(find_links) or None
    emit(
        do_lock(
            ctx.root,
            base,
            ctx.cache,
            links,
            torch_version,
            exclude_newer,
            index_url,
            no_index,
            ctx.progress,
            bases=bases,
            exclude=[Exclusion(name, reason) for name in exclude],
            bases_file=ctx.bases_file,
        )
    )


@click.command("venv-vllm")
@click.argument("base_name", metavar="BASE")
@click.option(
    "--path",
    "path",
    type=click.Path(path_type=Path),
    default=None,
    help="Build it there (a directory that does not exist yet, or one this command built) [default: .venv-vllm-BASE].",
)
@click.option("--python", "python", default="python3.11", show_default=True, help="Interpreter for uv venv.")
@click.option(
    "--find-links",
    "find_links",
    multiple=True,
    help="Directory holding the CPU torch wheel (repeatable) [default: $PIP_FIND_LINKS].",
)
@click.option(
    "--triton",
    type=click.Choice(["stand-in", "none"]),
    default=None,
    help="Record BASE's Triton rule in bases.toml first: stand-in (vLLM is told Triton is present; "
    "docs/tests.md) or none.",
)
@click.option(
    "--check", is_flag=True, help="Then run the canary: import vLLM, a tiny model's engine config, stock."
)
@json_option
@pass_ctx
def venv_vllm(ctx: Context, base_name, path, python, find_links, triton, check, as_json):
    """Build BASE's CPU test venv from its lock (ci/lock-cpu-BASE.txt) and its rules.

    uv venv + uv pip install --no-deps -r the lock (with $PIP_FIND_LINKS for the CPU torch), then
    what BASE's rules (["BASE".seam.cpu] in bases.toml) add. Kept as it is when nothing it is
    built from changed. With --path: the same venv elsewhere, for your own overlay
    (tkv-seam overlay install --python <path>/bin/python).
    """
    from ..bases import file as basesfile
    from ..bases.pins import CpuVenv, cpu_rules, load_bases
    from ..seamtest.testvenv import build

    bases = load_bases(ctx.bases_file, ctx.root)
    base = ctx.base(base_name, hint="make venv-vllm BASE={}")
    if triton is not None:
        rules, _ = cpu_rules(bases, base)
        wanted = "" if triton == "none" else triton
        if rules.triton != wanted or not base.seam.cpu.given:
            basesfile.set_cpu(ctx.bases_file, base.name, CpuVenv(rules.torch, rules.exclude, wanted))
            bases = load_bases(ctx.bases_file, ctx.root)
            base = bases[base.name]
    links = list(find_links) or None
    where = absolute(path) if path is not None else None
    emit(build(ctx.root, base, bases, where, python, links, check, ctx.progress))


@click.command()
@click.argument("base_name", metavar="BASE")
@force_option
@json_option
@pass_ctx
def retire(ctx: Context, base_name, force, as_json):
    """Retire BASE: its queue, pin, CPU lock and the trees built for it.

    A copy of the queue, the lock and bases.toml is kept under build/dropped/ first. Refuses the
    top-level queue (v0.31.0), a base a port is carried from, and trees holding your work
    (--force moves those into the kept directory).
    """
    from ..release.retire import retire as do_retire

    emit(do_retire(ctx.root, ctx.bases_file, base_name, ctx.cache, force, ctx.progress))


@click.command()
@click.argument("version")
@click.option(
    "--plugin", default=None, help="Plugin pin of the new base (name==version) [default: the source's]."
)
@click.option(
    "--find-links", "find_links", multiple=True, help="Lock: CPU torch directory [default: $PIP_FIND_LINKS]."
)
@click.option(
    "--torch", "torch_version", default=None, help="Lock: this torch instead of the local CPU build."
)
@click.option("--lock-index-url", default=None, help="Lock: package index for uv [default: uv's, PyPI].")
@click.option("--no-index", is_flag=True, help="Lock: resolve from the find-links directories only.")
@click.option("--verdict", default=None, help="Port continue: the Verdict line of the resolved patch.")
@click.option("--reason", default=None, help="Port continue: the Reason line of the resolved patch.")
@click.option(
    "--prove/--no-prove",
    default=True,
    show_default=True,
    help="Port: run each patch's own Tests:/Guard:s at its prefix with the base's test venv (make venv-vllm).",
)
@auto_options
@json_option
@pass_ctx
def carry(
    ctx: Context,
    version,
    plugin,
    find_links,
    torch_version,
    lock_index_url,
    no_index,
    verdict,
    reason,
    prove,
    as_json,
    auto,
):
    """Carry vLLM release VERSION: pin it, write its .seam table and CPU lock, port the queue onto it.

    The port starts from the newest carried queue older than the release and stops (exit 12)
    at each patch needing you: resolve it in build/port-vVERSION, `git add`, then run
    `carry VERSION` again (it continues the port; steps already done are kept). When the
    last patch is through, the new base's queue and PORT.md are written and linted: it is
    carried (make test checks it), with nothing else to edit.
    """
    from ..release.carry import Options
    from ..release.carry import carry as do_carry

    opts = Options(
        plugin,
        list(find_links) or None,
        torch_version,
        lock_index_url,
        no_index,
        verdict,
        reason,
        prove=prove,
        auto=auto,
    )
    emit(do_carry(ctx.root, ctx.bases_file, version, ctx.cache, opts, ctx.progress))


COMMANDS = [carried, seam_table, lock_cpu, venv_vllm, retire, carry]
