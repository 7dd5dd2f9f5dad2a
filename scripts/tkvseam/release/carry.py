"""Carry a new vLLM release: one command from "a release shipped" to "it is carried".

``carry <version>`` does, in order, each step only when it is not done yet (so running it
again goes on where it stopped):

1. **pin** the release in ``bases.toml`` (``pin``: verified sdist; a release already pinned is
   not asked of the index again);
2. write its **``.seam`` table** (``seamtable``: ruff of its pre-commit config, the plugin pin
   and upstream test files of the base it is carried from, moves found by ``git diff -M``);
   an existing table is kept as it is;
3. write its **CPU lock** ``ci/lock-cpu-<base>.txt`` (``cpulock``); an existing one is kept;
4. **port** the newest carried queue older than the release onto it (``port``): start it,
   or, when a port is in progress, continue it (after you resolved the stop and staged it).
   The port stops (exit 12) at each patch needing you; when the last one is through the new
   queue and its ``PORT.md`` are written and linted, and the base is carried.

Nothing else is edited by hand: ``make test`` takes the new base from ``bases.toml``
(``tkv-seam carried``), and every per-base expectation of the tests from its queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from packaging.version import Version

from .. import hints, layout
from ..answer import Answer
from ..bases.carried import carried_before, no_source, source_of
from ..bases.pins import Base, load_bases
from ..queue.writer import Exported
from ..errors import EXIT_LINT, PortStopped, SeamError, UsageError
from ..findings.auto import Auto
from ..port.ending import queue_problems
from ..port.environment import EnvironmentStop
from ..port.gate import ChangedBreaks, PatchBreaks, WentIn, breaks_hint, by_themselves_lines
from ..port.prove import Prover
from ..port.session import PortSession
from ..progress import QUIET, Progress
from ..queue.message import VERDICTS, verdict_problem
from ..seamtest.testvenv import build, built_by_tool
from . import seamtable
from .cpulock import lock_cpu
from .pin import parse_release, pin

WHY = "'<why>'"
FROM = "nothing to carry it from"  # the placeholder of a reason, quoted: it runs as written once filled in


class StepName(StrEnum):
    PIN = "pin"
    SEAM_TABLE = "seam-table"
    LOCK = "lock"
    PROVE = "prove"
    PORT = "port"


class StepStatus(StrEnum):
    ADDED = "added"  # pin: the entry was written (PinStatus)
    UNCHANGED = "unchanged"  # pin: another run pinned the same values meanwhile (PinStatus)
    PINNED = "pinned"  # pin: it was in the bases file already
    WRITTEN = "written"  # seam-table, lock; port: the queue is written but has problems
    KEPT = "kept"  # seam-table, lock: there already, kept as it is
    ON = "on"  # prove: each patch's own tests run
    OFF = "off"  # prove: the gate alone (the test venv could not be built)
    STARTED = "started"
    CONTINUED = "continued"
    FINISHED = "finished"
    CARRIED = "carried"


@dataclass
class Step:
    step: StepName
    status: StepStatus
    detail: str = ""

    def line(self) -> str:
        return f"{self.step:10} {self.status}" + (f": {self.detail}" if self.detail else "")


@dataclass
class CarryResult(Answer):
    """What ``carry`` did, step by step; the new queue's files and its lint and style problems (exit 6)."""

    base: str
    source: str  # the base whose queue is ported
    carried: bool = False  # the port finished: the base's queue is written
    steps: list[Step] = field(default_factory=list)
    exported: list[Exported] = field(default_factory=list)  # the new queue's files
    problems: list[str] = field(default_factory=list)  # lint and style gate of the new queue
    backup: str | None = None  # where the port's finish kept queue files it replaced
    by_themselves: list[WentIn] = field(default_factory=list)  # went in without a human: re-read them

    def lines(self) -> list[str]:
        listed = by_themselves_lines(self.by_themselves) if self.by_themselves or self.source else []
        return (
            [f"  {step.line()}" for step in self.steps]
            + [f"  {e.label:9} {e.name}" for e in self.exported]
            + listed
            + [self._end()]
        )

    def _end(self) -> str:
        """ "carried" only with no problem; else NOT carried, the problems counted, and what fixes them."""
        backup = f"; the queue files it replaced are in {self.backup}" if self.backup else ""
        if not self.problems:
            return (
                f"{self.base}: carried"
                + (f" (ported from {self.source})" if self.source else "")
                + backup
                + f"; next: make test BASE={self.base}"
            )
        again = hints.make("carry", VERSION=self.base.removeprefix("v"))
        fix = (
            f"fix them in {layout.default(layout.build_tree, self.base)} (`{hints.make('apply', BASE=self.base)}`, amend the "
            f"patch's commit, `{hints.make('refresh', BASE=self.base)}`), then `{again}` again "
            "(it checks the queue as written again)"
        )
        return (
            f"{self.base}: NOT carried: its queue is written but has {len(self.problems)} lint/style "
            f"problem(s) (listed above){backup}; next: {fix}"
        )

    def notes(self) -> list[str]:
        return list(self.problems)

    def to_json(self) -> dict:
        return {**super().to_json(), "by_themselves": [w.to_json() for w in self.by_themselves]}

    def exit_code(self) -> int:
        return EXIT_LINT if self.problems else 0


@dataclass
class Options:
    """What ``carry`` passes on to its steps (``None``: the step's own default)."""

    plugin: str | None = None  # seam table: another plugin pin (name==version)
    find_links: list[str] | None = None  # lock: the CPU torch's directories
    torch: str | None = None
    lock_index_url: str | None = None
    no_index: bool = False
    verdict: str | None = None  # port continue
    reason: str | None = None
    index_url: str | None = None  # the Simple API of pin (TKV_SEAM_INDEX_URL)
    prove: bool = True  # port: run each patch's own tests at its prefix (with the base's test venv)
    # port: what it does by itself before it stops (findings/auto.py)
    auto: Auto = field(default_factory=Auto)


def _pinned(bases: dict[str, Base], version: Version) -> Base | None:
    return next((b for b in bases.values() if Version(b.version) == version), None)


def _queue_exists(root: Path, base: Base) -> bool:
    return (root / base.queue.series).is_file()


def carry(
    root: Path,
    bases_file: Path,
    version: str,
    cache: Path,
    options: Options | None = None,
    progress: Progress = QUIET,
) -> CarryResult:
    """Carry release ``version`` (see the module docstring); PortStopped (exit 12) at a stop."""
    opts = options or Options()
    wanted = parse_release(version, "carry")
    if opts.verdict and verdict_problem(opts.verdict):
        raise UsageError(
            f"--verdict: {verdict_problem(opts.verdict)} (a patch that goes is skipped: "
            f"{hints.port('skip', f'v{wanted}', REASON=WHY)})",
            hint=hints.make("carry", VERSION=str(wanted), VERDICT=VERDICTS[0]),
        )
    bases = load_bases(bases_file, root)
    steps: list[Step] = []
    base = _pinned(bases, wanted)
    if base is None:
        source_of(bases, root, wanted, str(wanted), FROM)  # refused before anything is written
        pinned = pin(bases_file, str(wanted), cache, opts.index_url, progress=progress, root=root)
        bases = load_bases(bases_file, root)
        base = bases[pinned.name]
        steps.append(
            Step(
                StepName.PIN,
                StepStatus(pinned.status),
                f"commit {pinned.commit_prefix}, {base.sdist.filename}",
            )
        )
    else:
        steps.append(Step(StepName.PIN, StepStatus.PINNED, f"{base.name} is in {bases_file.name} already"))
    session = PortSession(root, base, None, cache, progress, bases_file)
    if _queue_exists(root, base) and not session.in_progress():
        _refuse_another_plugin(base, opts, bases_file)
        problems = queue_problems(root, base, cache, progress)  # said again on every run until fixed
        checked = "; lint + style gate of the queue as written (applied to the pristine base)"
        steps.append(
            Step(
                StepName.PORT,
                StepStatus.CARRIED if not problems else StepStatus.WRITTEN,
                f"{base.queue.series} exists{checked}",
            )
        )
        return CarryResult(
            base.name, "", not problems, steps, problems=problems, by_themselves=session.by_themselves()
        )
    if (opts.verdict or opts.reason) and not session.in_progress():
        raise UsageError(
            "--verdict/--reason are for a port stopped at a patch; none is in progress for " + base.name,
            hint=f"make carry VERSION={base.version}   (the port starts; give them when it stops)",
        )
    started_from = session.started_from()  # a port in progress goes on from the queue it started from
    source = bases.get(started_from) if started_from else carried_before(bases, root, base.version)
    if source is None:
        raise no_source(base.name, FROM)
    result = CarryResult(base.name, source.name, steps=steps)
    for step in (_seam_table, _lock):
        result.steps.append(_step(step, root, bases_file, bases, base, source, cache, opts, progress))
        bases = load_bases(bases_file, root)  # what the step wrote (the .seam table: the gate's ruff)
        base = bases[base.name]
    session = PortSession(root, base, None, cache, progress, bases_file)
    session.auto = opts.auto
    for s in result.steps:
        progress.step(f"carry {base.name}: {s.line()}")
    if opts.prove:
        session.prove, proving = _prover(root, bases, base, opts, progress)
        result.steps.append(proving)
    try:
        if session.in_progress():
            done = session.continue_(opts.verdict, opts.reason)
            result.steps.append(Step(StepName.PORT, StepStatus.CONTINUED, f"from {source.name}"))
        else:
            done = session.start(source)
            result.steps.append(Step(StepName.PORT, StepStatus.STARTED, f"from {source.name}'s queue"))
    except PortStopped as e:
        raise _restop(e, session, base, result.steps) from e
    except SeamError as e:  # a refusal of the port's verb (still unmerged, a message lost a field)
        cont = session.command("continue")  # its next step is the carry, which proves
        e.hint = e.hint.replace(cont, hints.make("carry", VERSION=base.version)) if e.hint else e.hint
        raise
    result.carried = not done.problems
    result.exported = done.exported
    result.problems = done.problems
    result.by_themselves = done.by_themselves
    result.backup = str(done.backup) if done.backup else None
    result.steps.append(
        Step(
            StepName.PORT, StepStatus.FINISHED, f"{len(done.exported)} patch file(s) in {base.queue.patches}/"
        )
    )
    return result


def _restop(e: PortStopped, session: PortSession, base: Base, steps: list[Step]) -> PortStopped:
    """The port's stop, with the next command of a carry (``make carry`` again continues it), and
    why the patches' tests did not run, when they did not."""
    message = e.message + "".join(
        f"\n  ({s.line()})" for s in steps if s.step == StepName.PROVE and s.status == StepStatus.OFF
    )
    if isinstance(e, ChangedBreaks):  # its hint (amend the commit, run again) holds for carry too
        return ChangedBreaks(message, e.hint, e.patch, e.problems)
    if isinstance(e, PatchBreaks):
        hint = breaks_hint(session, session.message_file, again=hints.make("carry", VERSION=base.version))
        return PatchBreaks(message, hint, e.patch, e.problems)
    if isinstance(e, EnvironmentStop):
        again = hints.make("carry", VERSION=base.version)
        return EnvironmentStop(message, hint=(e.hint or "").replace(session.command("continue"), again))
    return PortStopped(message, hint=_stop_hint(session, base), kind=e.kind, patch=e.patch)


def _refuse_another_plugin(base: Base, opts: Options, bases_file: Path) -> None:
    """--plugin given when the .seam table pins another plugin: refused (exit 2), never dropped."""
    pinned = base.seam.plugin.requirement if base.seam.plugin else None
    if opts.plugin and seamtable.has_table(base.seam) and opts.plugin != pinned:
        raise UsageError(
            f"--plugin {opts.plugin}: [{base.name!r}.seam] in {bases_file.name} already pins plugin "
            f"{pinned or '(none)'}; carry keeps the table it finds and would not use {opts.plugin}",
            hint=f"make seam-table BASE={base.name} PLUGIN='{opts.plugin}' FORCE=1   (rewrites the table), "
            f"then make carry VERSION={base.version}; or drop PLUGIN= to carry with {pinned}",
        )


def _prover(root: Path, bases: dict[str, Base], base: Base, opts: Options, progress: Progress):
    """(the base's test venv for proving, the step saying so). The venv is built from the base's
    lock and rules (``seamtest.testvenv``, as ``make venv-vllm`` builds it) and its canary run: a
    venv in which stock vLLM does not start stops the carry as the environment, before any patch
    is blamed for it; one that cannot be built turns proving off (the gate alone), saying why."""
    make = hints.make("venv-vllm", BASE=base.name)
    python = root / base.test_venv / "bin" / "python"
    if python.exists() and not built_by_tool(root / base.test_venv):
        return Prover(python), Step(
            StepName.PROVE,
            StepStatus.ON,
            f"each patch's Tests:/Guard:s with {base.test_venv} (not built by tkv-seam: used as it is)",
        )
    progress.step(f"carry {base.name}: test venv {base.test_venv} (`{make}`, from {base.cpu_lock})")
    try:
        venv = build(
            root,
            base,
            bases,
            find_links=opts.find_links,
            check=True,
            progress=progress,
            no_index=opts.no_index,
        )
    except SeamError as e:
        why = f"`{make}` failed: {e.message.splitlines()[0]}"
        return None, Step(
            StepName.PROVE, StepStatus.OFF, f"{why}; the patches' own tests are not run, the gate is"
        )
    if venv.canary != "ok":
        raise environment_stop(base, venv.canary)
    return Prover(python), Step(
        StepName.PROVE,
        StepStatus.ON,
        f"each patch's Tests:/Guard:s with {base.test_venv} (canary: stock vLLM starts)",
    )


TRITON_REFUSAL = "requires Triton"  # vLLM 0.34.0's x86 CPU platform without triton-cpu


def environment_stop(base: Base, said: str) -> PortStopped:
    """The carry's stop for a test venv in which stock vLLM does not start: no patch is blamed."""
    again = hints.make("carry", VERSION=base.version)
    if TRITON_REFUSAL in said:
        fix = (
            f"{hints.make('venv-vllm', BASE=base.name, TRITON='stand-in')} (records the rule in bases.toml: "
            "vLLM is told Triton is present; docs/tests.md, 'Triton on CPU'), then "
        )
    else:
        fix = f'fix the venv\'s rules (["{base.name}".seam.cpu] in bases.toml, docs/bases.md), then '
    return EnvironmentStop(
        f"{base.name}: environment: stock vLLM {base.version} does not start in its test venv "
        f"{base.test_venv} (no patch is applied there): {said}",
        hint=f"{fix}{again}; or carry with the gate alone: {hints.make('carry', VERSION=base.version, PROVE=0)}",
    )


def _stop_hint(session: PortSession, base: Base) -> str:
    again = hints.make("carry", VERSION=base.version)
    tree = session.path
    return (
        f"resolve in {hints.quote(tree)}, `{hints.shell('git', '-C', tree, 'add', '<files>')}`, edit "
        f"Verdict/Reason in {hints.quote(session.message_file)} (or pass VERDICT= and REASON= "
        f"to make carry), then `{again}` again (it continues the port); to leave the patch out: "
        f"`{hints.port('skip', base.name, REASON=WHY)}`, then `{again}`"
    )


def _step(step, *args) -> Step:
    """Run a carry step before the port; what it raises names the step (``kind``). A stop that
    needs the user's decision (the lock's unserved pin: leave the package out, or give an index)
    is the carry's stop (exit 12, no "Error:"), as the port's are; other failures keep their code."""
    kind = StepName.LOCK.value if step is _lock else StepName.SEAM_TABLE.value
    try:
        return step(*args)
    except PortStopped:
        raise
    except SeamError as e:
        if e.kind == kind:  # the step's own stop
            raise PortStopped(e.message, hint=e.hint, kind=kind) from e
        e.kind = e.kind or kind
        raise


def _seam_table(root, bases_file, bases, base, source, cache, opts, progress) -> Step:
    _refuse_another_plugin(base, opts, bases_file)
    if seamtable.has_table(base.seam):
        return Step(
            StepName.SEAM_TABLE, StepStatus.KEPT, f"[{base.name!r}.seam] is in {bases_file.name} already"
        )
    table = seamtable.derive(root, bases, base, cache, source.name, opts.plugin, progress=progress)
    seamtable.write(bases_file, table)
    if table.status == seamtable.TableStatus.UNCHANGED:  # another run wrote the same table meanwhile
        return Step(
            StepName.SEAM_TABLE, StepStatus.KEPT, f"[{base.name!r}.seam] is in {bases_file.name} already"
        )
    moved = [t.line() for t in table.tests if t.status != seamtable.TestFileStatus.KEPT]
    return Step(
        StepName.SEAM_TABLE,
        StepStatus.WRITTEN,
        f"from {source.name}'s; ruff {table.ruff}" + "".join(f"; {m}" for m in moved),
    )


def _lock(root, bases_file, bases, base, source, cache, opts, progress) -> Step:
    if (root / base.cpu_lock).is_file():
        return Step(
            StepName.LOCK,
            StepStatus.KEPT,
            f"{base.cpu_lock} exists (make lock-cpu BASE={base.name} remakes it)",
        )
    done = lock_cpu(
        root,
        base,
        cache,
        opts.find_links,
        opts.torch,
        None,
        opts.lock_index_url,
        opts.no_index,
        progress=progress,
        bases=bases,
    )
    return Step(
        StepName.LOCK, StepStatus.WRITTEN, f"{done.path}: {len(done.pins)} pins, torch {done.torch.version}"
    )
