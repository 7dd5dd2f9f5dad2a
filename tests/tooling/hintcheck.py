"""Is a ``next:`` hint a command that runs from the project root as written?

``problems(hint)`` finds the commands in a hint (each backticked span, and each stretch of
the prose around them that starts with a command word: ``make``, ``git``,
``.venv/bin/tkv-seam``, ``ls``, ``mv``, …; prose such as "check access to the index" is
not a command) and says what would not run:

- ``make <target> VAR=…``: the target is in ``make help`` and takes each variable (the
  variables ``make help`` lists under the target, or under "Any target");
- ``.venv/bin/tkv-seam <command> --option …``: the command exists and takes each option
  (bare ``tkv-seam`` is not on PATH);
- ``git [-C dir] <subcommand>``: git knows the subcommand;
- any other command word: an executable on PATH (or one of the system tools the README says
  to install).

Placeholders the user fills in (``<slug>``, ``'<why>'``) are accepted where a value goes.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import click

from tkvseam.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
TOOL = ".venv/bin/tkv-seam"
COMMAND_WORDS = {
    "make", "git", TOOL, "tkv-seam", "ls", "mv", "rm", "df", "export", "apt-get", "pip", "uv",
    "quilt", "cd", "docker", "cat", "chmod", "tar",
}  # fmt: skip
SYSTEM_TOOLS = {"apt-get", "docker", "dockerd", "debootstrap", "quilt"}  # README: install them
_PROSE_AFTER_MAKE = {"it", "sure", "the", "them", "a", "an", "this", "that", "room", "space"}
_PLACEHOLDER = re.compile(r"<[^<>]*>")
_ASSIGN = re.compile(r"^[A-Z_][A-Z0-9_]*=")
_SPLIT = re.compile(r";|, then |\bthen |, or | or | and |&&|\(|\)|: |  +|(?<!\.)\.(?: |$)")


@functools.cache
def make_help() -> tuple[dict[str, set[str]], set[str]]:
    """Target -> the variables ``make help`` lists for it; and the variables of any target."""
    out = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "help"],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")},
    ).stdout
    targets: dict[str, set[str]] = {}
    anywhere: set[str] = set()
    last = None
    for line in out.splitlines():
        m = re.match(r"^  make (\S+)\s", line + " ")
        if m:
            last = m.group(1)
            targets[last] = set()
        elif line.startswith("Any target:"):
            anywhere |= set(re.findall(r"\b([A-Z_][A-Z0-9_]*)=", line))
        elif line.startswith("   ") and last is not None:
            targets[last] |= set(re.findall(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=", line))
    return targets, anywhere


def commands(hint: str) -> list[str]:
    """The commands a hint names, in order."""
    found = []
    spans = re.split(r"`([^`]*)`", hint)
    for i, part in enumerate(spans):
        if i % 2:  # a backticked span: a command (or two, joined by && or ;)
            found += [c.strip() for c in re.split(r"&&|;", part) if c.strip()]
            continue
        for segment in _SPLIT.split(part):
            words = segment.strip().split()
            while words and _ASSIGN.match(words[0]):
                words = words[1:]
            if words[:1] == ["make"] and len(words) > 1 and words[1] in _PROSE_AFTER_MAKE:
                continue  # "make it writable for you": prose
            if words and (words[0] in COMMAND_WORDS or re.search(r"/python[0-9.]*$", words[0])):
                found.append(segment.strip())
    return found


def problems(hint: str) -> list[str]:
    """Why the commands of ``hint`` would not run as written (empty: they would)."""
    return [f"{cmd!r}: {why}" for cmd in commands(hint) for why in command_problems(cmd)]


def command_problems(cmd: str) -> list[str]:
    """Why one shell command (``VAR=value`` words before it allowed) would not run as written."""
    try:
        words = shlex.split(cmd)
    except ValueError as e:
        return [f"not one shell command ({e})"]
    while words and _ASSIGN.match(words[0]):
        words = words[1:]  # VAR=value before the command (GIT_SEQUENCE_EDITOR=: git ...)
    if not words:
        return ["empty"]
    head, args = words[0], words[1:]
    if head == "tkv-seam":
        return [f"tkv-seam is not on PATH: {TOOL} (or a make target)"]
    if head == "make":
        return _make_problems(args)
    if head == TOOL:
        return _tool_problems(args)
    if head == "git":
        return _git_problems(args)
    if re.search(r"/python[0-9.]*$", head) or _PLACEHOLDER.fullmatch(head):
        return []
    if head in SYSTEM_TOOLS or head in ("export", "cd") or shutil.which(head):
        return []
    return [f"{head}: no such command on PATH"]


def _make_problems(args: list[str]) -> list[str]:
    targets, anywhere = make_help()
    wanted = [
        a for a in args if not _ASSIGN.match(a) and not a.startswith("-") and not _PLACEHOLDER.fullmatch(a)
    ]
    given = [a.split("=", 1)[0] for a in args if _ASSIGN.match(a)]
    out = [f"make has no target {t!r} (make help)" for t in wanted if t not in targets]
    if not wanted and not any(_PLACEHOLDER.fullmatch(a) for a in args):
        out.append("no target (make alone shows the help)")
    for var in given:
        if not any(var in targets.get(t, set()) for t in wanted) and var not in anywhere:
            out.append(f"make {' '.join(wanted)} does not take {var}= (make help lists what it takes)")
    return out


def _tool_problems(args: list[str]) -> list[str]:
    command: click.Command = main
    options = _options(main)
    path = []
    rest = list(args)
    while rest:
        word = rest.pop(0)
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            if name not in options:
                return [f"tkv-seam {' '.join(path)} has no option {name}"]
            if "=" not in word and not options[name] and rest:
                rest.pop(0)  # the option's value
            continue
        if isinstance(command, click.Group):
            if word not in command.commands:
                return [f"tkv-seam {' '.join(path)} has no command {word!r}"]
            command = command.commands[word]
            options = _options(command)
            path.append(word)
    if isinstance(command, click.Group):
        return [f"tkv-seam {' '.join(path)} needs a command"]
    return []


def _options(command: click.Command) -> dict[str, bool]:
    """Option spelling -> True when it is a flag (takes no value)."""
    out = {"--help": True, "-h": True}
    for p in command.params:
        if isinstance(p, click.Option):
            for name in (*p.opts, *p.secondary_opts):
                out[name] = p.is_flag or p.count
    return out


@functools.cache
def _git_knows(sub: str) -> bool:
    proc = subprocess.run(["git", sub, "-h"], capture_output=True, text=True)
    return proc.returncode == 129 or "usage:" in proc.stdout + proc.stderr


def _git_problems(args: list[str]) -> list[str]:
    rest = list(args)
    while rest and rest[0] in ("-C", "-c"):
        rest = rest[2:]
    if not rest:
        return ["git needs a subcommand"]
    return [] if _git_knows(rest[0]) else [f"git has no subcommand {rest[0]!r}"]
