"""The ``seamtest`` commands' use cases: open a run on a base's build tree, pick its patches, and
what a run, a command lane and the timing record answer.

``open_runner`` checks the test venv (``require_test_venv``) and builds the run's HF home; ``patch_numbers`` reads
``--patch`` (a number, slug or file name); ``Lanes`` is the reports of the lanes one run ran
(exit 9 when any failed); ``LaneDone`` what ``seamtest lane`` did; ``last_timings`` each lane
step's last measured run (``Times``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import hints, layout
from ..answer import Answer
from ..bases.pins import Base, load_bases
from ..errors import EXIT_TESTS, SeamError, UsageError
from ..progress import QUIET, Progress
from .command_lane import LaneRun
from .hfcache import build
from .passes import PassBook, read_timings
from .runner import LaneReport, Runner


def require_test_venv(python: Path, base_name: str) -> None:
    """A missing test venv is an error naming the command that builds it (said before the base is
    looked up: ``--python`` given names its own venv)."""
    if not python.exists():
        raise SeamError(
            f"no Python at {python}: the vLLM test venv is missing", hint=f"make venv-vllm BASE={base_name}"
        )


def open_runner(
    root: Path,
    base: Base,
    tree: Path,
    python: Path,
    cache: Path,
    progress: Progress = QUIET,
    slots: int = 1,
    fresh: bool = False,
) -> Runner:
    """A run of the seam tests on ``tree`` (a build tree of ``base``) with the test venv's ``python``
    (``require_test_venv``: it is there)."""
    require_test_venv(python, base.name)
    work = layout.seamtest_work(root, base.name)
    hf_home = build(work.parent, root / "tests" / "data" / "hf-configs")
    return Runner.open(
        root,
        tree,
        python,
        work,
        hf_home,
        base,
        cache,
        progress,
        slots=slots,
        passes=PassBook(root, base.name, fresh=fresh),
    )


def patch_numbers(patches: list, base_name: str, selected: tuple[str, ...]) -> set[int] | None:
    """--patch 0009 / 9 / fused-kv-pages / 0009-fused-kv-pages.patch -> {9}, over the series'
    ``patches`` (anything with a ``name``) of base ``base_name``."""
    if not selected:
        return None
    out = set()
    for want in selected:
        for k, patch in enumerate(patches, 1):
            stem = patch.name.removesuffix(".patch")
            if want in (patch.name, stem, stem.split("-", 1)[1]) or (
                want.isascii() and want.isdigit() and int(want) == k
            ):
                out.add(k)
                break
        else:
            raise _no_such_patch(patches, base_name, want)
    return out


@dataclass
class PatchesChosen(Answer):
    """What ``seamtest bisect --check-only`` found: the series' patches the selection names."""

    base: str
    patches: list[str]
    selected: bool = True  # False: no --patch given, so every patch

    def lines(self) -> list[str]:
        if not self.selected:
            return [f"bisect {self.base}: no PATCH given: all {len(self.patches)} patches of the series"]
        return [f"bisect {self.base}: {', '.join(self.patches)} (in the series; PATCH is fine)"]


def chosen(series: list, base_name: str, selected: tuple[str, ...]) -> PatchesChosen:
    """``--check-only``: the patches ``selected`` names (every patch when none is named)."""
    numbers = patch_numbers(series, base_name, selected) or set(range(1, len(series) + 1))
    return PatchesChosen(base_name, [series[k - 1].name for k in sorted(numbers)], bool(selected))


def _no_such_patch(patches: list, base_name: str, want: str) -> UsageError:
    """A usage error (exit 2) naming the patch ``want`` most likely meant; the hint bisects that one
    patch (or asks for one: never every patch, which is slower than what was asked)."""
    names = ", ".join(p.name for p in patches)
    slugs = [p.name.removesuffix(".patch").split("-", 1)[-1] for p in patches]
    meant = hints.close(want, slugs)
    n = len(patches)
    which = meant[0] if meant else "<n>"
    hint = hints.make("bisect", BASE=base_name, PATCH=which)
    if not meant and n:
        hint += f"   (<n>: 1 to {n}, a file name or a slug)"
    return UsageError(f"no patch {want!r} in the series ({names}){hints.did_you_mean(meant)}", hint=hint)


@dataclass
class Lanes(Answer):
    """The reports of one run's lanes (``runner.LaneReport``): one lane's data as it is,
    several under ``lanes``, keyed by lane; exit 9 when any failed."""

    reports: list[LaneReport]

    def lines(self) -> list[str]:
        many = len(self.reports) > 1
        return [line for rep in self.reports for line in ([f"== {rep.lane}"] if many else []) + rep.lines]

    def to_json(self) -> dict:
        if len(self.reports) == 1:
            return self.reports[0].data
        return {"lanes": {rep.lane: rep.data for rep in self.reports}}

    def exit_code(self) -> int:
        return 0 if all(rep.ok for rep in self.reports) else EXIT_TESTS


@dataclass
class LaneDone(Answer):
    """``seamtest lane``: ran (its exit code) or a recorded pass stood in (when it was recorded)."""

    run: LaneRun

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


@dataclass
class Times(Answer):
    """The timing record of the lanes (build/passes/*/timings.jsonl): each step's last run."""

    rows: list[dict]

    def lines(self) -> list[str]:
        out = [f"{'step':34} {'base':8} {'seconds':>8}  {'load':>5} {'cores':>5}  when"]
        for row in self.rows:
            out.append(
                f"{row['name']:34} {str(row.get('base') or '-'):8} {row['seconds']:>8.1f}  "
                f"{str(row.get('load') or '-'):>5} {str(row.get('cores') or '-'):>5}  {row['when']}"
            )
        if any(row["name"].startswith("lane-") for row in self.rows):
            out.append(
                "(a lane-<name> row is the sum of its jobs' seconds, which run side by side on the "
                "slots: the lane took less wall time; its line in make test says both)"
            )
        return out if self.rows else ["no timing recorded yet (make test records one)"]

    def to_json(self) -> dict:
        return {"timings": self.rows}


def last_timings(root: Path, bases_file: Path) -> Times:
    """Each lane step's last measured run (not one a recorded pass stood in for), of the tooling
    lanes and of every known base, sorted by base and step."""
    known = load_bases(bases_file, root)
    last: dict = {}
    books = [PassBook(root, name) for name in [None, *known]]
    for path in [book.dir / "timings.jsonl" for book in books if book.linked is None]:
        for row in read_timings(path):
            if not row.get("cached"):
                last[(str(row.get("base") or ""), row["name"])] = row
    return Times([last[k] for k in sorted(last)])
