"""A lane that is one command (``make``'s tooling, series and image lanes): run it unless it
passed before with the same inputs.

``tkv-seam seamtest lane <name> [--reads <path>]... [--base <b>] [--env <VAR>]... -- <command>``:
the key (``passes``) is a digest of the tool's source, every project file the command can read
(``keys.project``: all of them but ``build/``, venvs, bytecode and ``keys.NOT_READ``, of which
``--reads`` names those the command does read), the command line, the interpreter, the installed
state of every venv the command names (``.venv/bin/python``: ``keys.venv_state``), the variables
named by ``--env`` (the image lane's Docker engine) and, with ``--base``, the base's sdist and
lock, its own queue and the build tree's tree id (the full series as applied) and, with
``--plugin``, the base's plugin pin. A recorded pass: the command is not run and the lane says
``cached pass from <time>``. Otherwise it runs (its output as it is; a heartbeat every 10 s on
stderr) and, when it exits 0 and its key is still the one it started with (nothing it reads
changed meanwhile), its pass is recorded; a failure removes the pass recorded under its key, a
kill records nothing, and neither does a pytest run whose tests all skipped
(tests/conftest.py writes the counts to ``$TKV_SEAM_LANE_COUNTS``): a skip is no pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import git, hints, layout
from ..errors import UsageError
from ..progress import Progress, run_with_heartbeat, took
from . import keys
from .passes import Clock, PassBook, digest


@dataclass
class CommandLane:
    name: str
    root: Path
    command: list[str]
    reads: tuple[str, ...] = ()
    base: object | None = None  # bases.pins.Base
    env: tuple[str, ...] = ()
    plugin: bool = False

    def __post_init__(self) -> None:
        for rel in self.reads:
            inside = os.path.normpath(os.path.join(self.root, rel))
            if os.path.relpath(inside, self.root).split(os.sep)[0] == os.pardir:
                raise UsageError(
                    f"lane {self.name}: --reads {rel} is not a path in the project {self.root} "
                    "(the key digests project files; name what the command reads there)",
                    hint=hints.tool("seamtest", "lane", "--help"),
                )
            made = os.path.relpath(layout.build(self.root), self.root)
            there = os.path.relpath(inside, self.root)
            if there == os.curdir or there == made or there.startswith(made + os.sep):
                raise UsageError(
                    f"lane {self.name}: --reads {rel} holds {made}/, the tool's own trees and pass "
                    "records (a key over them changes with every run; --base keys the build tree)",
                    hint=hints.tool("seamtest", "lane", "--help"),
                )

    def venvs(self) -> list[Path]:
        """The venvs the command names (a word that is a file inside one: ``.venv/bin/python``)."""
        found = []
        for word in self.command:
            path = Path(word) if os.sep in word else None
            if path is None or not path.is_file():
                continue
            venv = Path(os.path.abspath(path)).parent.parent
            if (venv / "pyvenv.cfg").is_file() and venv not in found:
                found.append(venv)
        return found

    def key(self) -> str:
        parts = {
            "tool": keys.files(Path(keys.__file__).resolve().parents[2], ["tkvseam"]),
            "project": keys.project(self.root, self.reads),
            "reads": keys.files(self.root, self.reads),
            "command": self.command,
            "interpreter": [sys.version, keys.interpreter(Path(sys.executable))],
            "venvs": {str(v): keys.venv_state(v) for v in self.venvs()},
            "env": {name: os.environ.get(name) for name in self.env},
            "environ": keys.environment(os.environ),
        }
        if self.base is not None:
            # Not the base's test venv: a command lane runs its own interpreter, and the venv
            # may not exist yet when it runs (a fresh clone's series lane comes before it).
            inputs = keys.base_inputs(self.root, self.base)
            parts["base"] = {k: v for k, v in inputs.items() if k != "interpreter"}
            parts["queue"] = keys.queue(self.root, self.base)
            tree = layout.build_tree(self.root, self.base.name)
            parts["tree"] = git.repo.rev_parse(tree, "HEAD^{tree}") if tree.is_dir() else "missing"
            if self.plugin:
                parts["plugin_pin"] = self.base.seam.plugin.requirements_txt()
        return digest(parts)

    def touched(self) -> tuple[str, list[dict]]:
        """What the key holds of the project and the venvs, by inode, size, mode and times
        (``keys.files``, ``keys.venv_touched``): a file written while the command ran shows, its
        bytes put back or not."""
        return keys.project(self.root, self.reads, touched=True), [keys.venv_touched(v) for v in self.venvs()]

    def untouched_since(self, before) -> bool:
        now = self.touched()
        return now[0] == before[0] and all(map(keys.untouched, before[1], now[1]))

    def run(self, book: PassBook, progress: Progress, say, quiet_stdout: bool = False) -> LaneRun:
        """Run the command unless recorded; ``say`` prints the lane's own line (stderr).
        ``quiet_stdout``: the command's stdout goes to stderr (``--json``: stdout holds the answer)."""
        key = self.key()
        where = f" ({self.base.name})" if self.base is not None else ""
        rec = book.lookup(self.name, key)
        if rec is not None:
            book.time(self.name, 0.0, cached=True)
            say(f"lane {self.name}{where}: {rec.line}")
            return LaneRun(self.name, 0, rec.seconds, rec.when)
        last = book.last_seconds(self.name)
        say(f"lane {self.name}{where}: running" + (f" (last took ~{took(last)})" if last else ""))
        clock = Clock()
        out = sys.stderr.fileno() if quiet_stdout else None
        before = self.touched()

        with tempfile.TemporaryDirectory(prefix="tkv-seam-lane-") as scratch:
            counts_file = Path(scratch) / "counts.json"
            env = {**os.environ, "TKV_SEAM_LANE_COUNTS": str(counts_file)}

            def command() -> int:
                try:
                    return subprocess.run(self.command, stdout=out, env=env).returncode
                except OSError as e:  # not found, not executable: as a shell says it
                    say(f"lane {self.name}{where}: cannot run {self.command[0]}: {e.strerror}")
                    return 127

            code = run_with_heartbeat(progress, f"lane {self.name}{where}", command, last)
            counts = _counts(counts_file)
        book.time(self.name, clock.seconds, cached=False, ok=code == 0)
        skipped = counts.get("skipped", 0)
        if code == 0 and skipped and not counts.get("passed"):
            # a skipped test is no coverage: a lane whose tests all skipped ran nothing to record
            say(f"lane {self.name}{where}: no test ran ({skipped} skipped); nothing recorded")
        elif code == 0:
            data = {"skipped": skipped} if skipped else None
            if self.key() != key or not self.untouched_since(before):
                note = "not recorded: what it reads changed while it ran; the next run runs it again"
            elif book.record(self.name, key, clock.seconds, data) is not None:
                note = "recorded"
            elif book.linked is not None:
                note = f"not recorded: {book.linked} is a symlink (records are never kept through one)"
            else:
                note = f"not recorded: {book.dir} is not writable as records"
            also = f", {skipped} skipped" if skipped else ""
            say(f"lane {self.name}{where}: passed in {took(clock.seconds)}{also} ({note})")
        else:
            book.forget(self.name, key)
            spent = took(clock.seconds)
            say(f"lane {self.name}{where}: FAILED (exit {code}) after {spent}; nothing recorded")
        return LaneRun(self.name, code, round(clock.seconds, 1), None)


def _counts(path: Path) -> dict:
    """What the lane's pytest wrote (tests/conftest.py's ``pytest_sessionfinish``); {} for a
    command that is not pytest or wrote nothing readable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}


@dataclass
class LaneRun:
    """What one command lane did: its command's exit code, its seconds, and when the pass that
    stood in for it was recorded (None: it ran now)."""

    lane: str
    code: int
    seconds: float
    cached_from: str | None
