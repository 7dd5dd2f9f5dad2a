"""The next step an answer names, spelled as it runs from the project root.

Every ``next:`` hint that names a command builds it here: ``make(target, VAR=value)`` for
a Makefile target (the form the README uses), ``tool(...)`` for a ``tkv-seam`` command
make has no target or variable for (``.venv/bin/tkv-seam``: not on PATH), ``shell(...)``
for any other command (``git -C <tree> ...``, ``ls -ld <path>``). Values are shell-quoted,
so a path with a space or a quote stays one word; a placeholder the user fills in
(``<slug>``, ``'<why>'``) is left as written.

``record`` appends every hint the CLI prints to the file ``$TKV_SEAM_HINT_LOG`` names (one
JSON line each), so a test run can check that each hint printed is a command that runs.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
from collections.abc import Iterable
from pathlib import Path

from . import layout

TOOL = ".venv/bin/tkv-seam"  # the tool as the Makefile runs it
LOG_ENV = "TKV_SEAM_HINT_LOG"
_PLACEHOLDER = re.compile(r"'?<[^<>']*>'?")


def quote(value: object) -> str:
    """``value`` as one shell word (a placeholder such as ``<slug>`` stays as written)."""
    text = str(value)
    return text if _PLACEHOLDER.fullmatch(text) else shlex.quote(text)


def make(target: str, **variables: object) -> str:
    """``make <target> VAR=value ...``; a variable given None or "" is left out."""
    words = ["make", target] + [f"{k}={quote(v)}" for k, v in variables.items() if v not in (None, "")]
    return " ".join(words)


def make_again(**override: object) -> str | None:
    """The make command being run, as the user typed it, with ``override`` put in (``BASE=`` the
    base a mistyped one most likely is): the goal the Makefile exports (``TKV_SEAM_MAKE_GOAL``)
    and the variables given on make's command line (``MAKEFLAGS`` after ``--``). None outside make."""
    goal = os.environ.get("TKV_SEAM_MAKE_GOAL", "").strip()
    if not goal:
        return None
    flags = os.environ.get("MAKEFLAGS", "")
    given: dict[str, str] = {}
    if " -- " in f" {flags}":
        words = re.split(r"(?<!\\) ", f" {flags}".split(" -- ", 1)[1].strip())
        for word in reversed(words):  # make lists them last first
            # make escapes a space as "\ " and a "$" as "$$" there: the value as the user gave it
            name, eq, value = word.replace("\\ ", " ").replace("$$", "$").partition("=")
            if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name not in ("VENV", "TOOL"):
                given[name] = value
    given.update({k: str(v) for k, v in override.items()})
    return make(goal, **given)


def tool_again(wrong: str, right: str) -> str | None:
    """The tool command being run, as given, with the value ``wrong`` replaced by ``right``
    (outside make); None when no command line is known or it does not hold ``wrong``."""
    import click

    ctx = click.get_current_context(silent=True)
    args = list(ctx.find_root().meta.get("tkv_seam.args", ())) if ctx else []
    if wrong not in args:
        return None
    return tool(*(right if a == wrong else a for a in args))


def tool(*args: object) -> str:
    """``.venv/bin/tkv-seam <args>`` (for what no make target or variable takes, e.g. ``--tree``)."""
    return shell(TOOL, *args)


def shell(*words: object) -> str:
    """Any other command, each word quoted."""
    return " ".join(quote(w) for w in words)


def port(verb: str, to_name: str, tree: object = None, **variables: object) -> str:
    """``make port VERB=<verb> TO=<base>`` (``PORT_TREE=`` when the port tree is not the default)."""
    return make("port", VERB=verb, TO=to_name, **variables, PORT_TREE=tree)


def close(wanted: str, known: Iterable[str]) -> list[str]:
    """The names of ``known`` a mistyped ``wanted`` most likely meant, best first (empty: none is
    close): the same name in other case, the names holding it (``0.33.0`` -> ``v0.33.0``,
    ``lifecycle`` -> ``backend-lifecycle-hooks``), else difflib's close matches (``reprot`` -> ``report``)."""
    names = list(dict.fromkeys(known))
    low = wanted.strip().lower()
    if not low:
        return []
    same = [n for n in names if n.lower() == low]
    if same:
        return same
    holding = [n for n in names if low in n.lower()]
    if holding:
        return sorted(holding, key=lambda n: -difflib.SequenceMatcher(None, low, n.lower()).ratio())
    by_low = {n.lower(): n for n in names}
    return [by_low[m] for m in difflib.get_close_matches(low, list(by_low), n=3, cutoff=0.6)]


def did_you_mean(matches: list[str]) -> str:
    """``; did you mean 'x'?`` (or ``'x' or 'y'``) to end a message with; empty when nothing is close."""
    return f"; did you mean {' or '.join(repr(m) for m in matches[:2])}?" if matches else ""


def record(hint: str | None) -> None:
    """Append ``hint`` to ``$TKV_SEAM_HINT_LOG`` when it is set (never fails the run)."""
    path = os.environ.get(LOG_ENV)
    if not hint or not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"hint": hint, "pid": os.getpid()}) + "\n")
    except OSError:
        pass


def rerun(verb: str, root: object, base: str, tree: object, force: bool = False) -> str:
    """The command repeating ``apply``/``refresh`` on ``tree``: ``make <verb> BASE=<base>`` for the
    base's own build tree (``layout.build_tree`` of ``root``), the tool with ``--tree`` for any other."""
    if Path(str(tree)) == layout.build_tree(Path(str(root)), base):
        return make(verb, BASE=base, FORCE="1" if force else None)
    return tool(verb, "--base", base, "--tree", tree, *(["--force"] if force else []))


def aside(root: Path | None, path: Path, then: str, option: str = "--tree") -> str:
    """The way past a path that is in the way: `` `mv <path> <path>.mine`, then <then>`` when it is
    an entry of the project's build/ (``layout.in_build``: the tool's own place, moved aside without
    harm), else only "choose another <option>": a hint never tells to move a directory that is not
    the tool's (``/etc``, ``$HOME``, ``/usr``, the project, a directory given by hand), nor to run
    the command again on it."""
    if layout.in_build(root, path):
        return f"`{shell('mv', path, f'{path}.mine')}` (or choose another {option}), then {then}"
    return f"choose another {option} ({quote(path)} is not a directory tkv-seam made: it is left as it is)"
