"""Upstream's style gate on the patched files: the base's ruff pin with the tree's own pyproject.toml.

The ruff version is the base's (``bases.toml``: ``<base>.seam.ruff``, the rev of
ruff-pre-commit in upstream's .pre-commit-config.yaml). The ruff beside this Python
is used when it is that version; otherwise that version is installed once
(``uv pip install --target``) into the tkv-seam cache.

``stylecheck`` runs the gate on the full series (the work tree); ``prefix_problems``
runs it on every prefix of the series (the bisect lane): each file as it is at that
prefix's commit, read from git and handed to ruff on stdin under its own path, so the
tree's configuration and exclude lists apply and no tree is copied.

Only the tree's own configuration (``config_args``): its ``ruff.toml``, ``.ruff.toml`` or the
``pyproject.toml`` holding a ``[tool.ruff]`` table, given with ``--config``; without one, ruff's
defaults (``--isolated``). A tree inside the project (``build/``) never takes the project's own
``pyproject.toml``, whose ``extend-exclude = ["build"]`` would leave every file unchecked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import git, hints, layout
from ..layout import BASE_TAG
from ..answer import Answer
from ..bases.pins import Base
from ..errors import EXIT_LINT, SeamError, UsageError
from ..queue.patch import Patch
from ..queue.series import read_series
from ..tree.seamtree import SeamTree


@dataclass
class StyleReport(Answer):
    """What the style gate found (exit 6 when anything), and the command that fixes what ruff can."""

    problems: list[str]
    hint: str | None = None

    def notes(self) -> list[str]:
        return self.problems + ([f"next: {self.hint}"] if self.hint else [])

    def lines(self) -> list[str]:
        return [f"stylecheck: {len(self.problems)} problem(s)" if self.problems else "stylecheck: ok"]

    def to_json(self) -> dict:
        return {"ok": not self.problems, "problems": self.problems, "hint": self.hint}

    def exit_code(self) -> int:
        return EXIT_LINT if self.problems else 0


# A gate problem: its file, and its line when ruff check names one (format names the file only).
_PROBLEM = re.compile(r"ruff (?:check|format): (?:Would reformat: )?([^:\s]+)(?::(\d+):)?")


def problem_paths(problems: list[str]) -> list[str]:
    """The files the gate's problem lines name, in order, each once."""
    return list(dict.fromkeys(m.group(1) for p in problems if (m := _PROBLEM.search(p))))


def ruff_fix(root: Path, exe: str, tree: Path, paths: list[str]) -> str:
    """The base's ruff fixing what it can in ``paths`` of ``tree``, as it runs from the project root,
    with the tree's own configuration only (``config_args``: never the project's)."""
    ruff = layout.shown(Path(exe), root)
    files = [layout.shown(tree / p, root) for p in paths]
    own = [layout.shown(Path(a), root) if a.endswith(".toml") else a for a in config_args(tree)]
    # check --fix first (a removed import leaves a blank line format then takes), format whatever it says
    return f"{hints.shell(ruff, 'check', *own, '--fix', *files)}; {hints.shell(ruff, 'format', *own, *files)}"


def fix_hint(
    root: Path, tree: Path, base: Base, exe: str, problems: list[str], owners: dict[str, list[str]]
) -> str:
    """``next:`` for style problems in ``tree``: the base's ruff fixes what it can, the rest by hand,
    folded into the patch's commit (README, "Edit a patch"), then refresh. ``owners``: per file the
    problems name, the patches whose lines they are (one: the fixup names it; several: listed, a
    placeholder in the command). Files of one patch are folded with ``commit -a``; files of several
    patches each into its own patch (``commit -- <files>``), never all into one."""
    where = layout.shown(tree, root)
    slugs = list(dict.fromkeys(s for found in owners.values() for s in found))
    if len(slugs) <= 1 or any(len(found) > 1 for found in owners.values()):
        slug = slugs[0] if len(slugs) == 1 else "<slug>"
        folds = [hints.shell("git", "-C", where, "commit", "-a", f"--fixup=:/^{slug}:")]
        which = "; ".join(
            f"{path}: one of {', '.join(found)}" for path, found in owners.items() if len(found) > 1
        )
        which = f" (<slug>: the patch whose lines you change; {which})" if slug == "<slug>" and which else ""
    else:
        folds = [
            hints.shell(
                "git",
                "-C",
                where,
                "commit",
                f"--fixup=:/^{slug}:",
                "--",
                *(path for path, found in owners.items() if found == [slug]),
            )
            for slug in slugs
        ]
        which = ""
    fold = "`, `".join(folds)
    squash = "GIT_SEQUENCE_EDITOR=: " + hints.shell(
        "git", "-C", where, "rebase", "-i", "--autosquash", BASE_TAG
    )
    return (
        f"`{ruff_fix(root, exe, tree, problem_paths(problems))}` (the base's ruff {base.seam.ruff}), fix the "
        f"rest by hand, fold it into its patch: `{fold}`{which}, `{squash}`, then `{hints.rerun('refresh', root, base.name, tree)}`"
    )


def _version_line(exe: str) -> str:
    return subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()


def _version(exe: str) -> str:
    out = _version_line(exe).split()
    return out[-1] if out else ""


def _explicit(explicit: str, version: str) -> str:
    """``--ruff``: an executable (a path, or a name on PATH) that is ruff ``version``; else exit 2."""
    exe = shutil.which(explicit)
    leave_out = (
        f"leave out --ruff (the gate installs ruff {version} into the cache), or give a ruff {version}"
    )
    if exe is None or Path(exe).is_dir():
        raise UsageError(
            f"--ruff {explicit!r}: no executable there (a path, or a name on PATH)", hint=leave_out
        )
    said = _version_line(exe)
    words = said.split()
    if words[:1] != ["ruff"] or words[-1] != version:
        raise UsageError(
            f"--ruff {explicit}: `--version` says {said.splitlines()[0] if said else 'nothing'!r}; the style "
            f"gate is ruff {version}",
            hint=leave_out,
        )
    return exe


def _ruff(version: str, cache: Path, explicit: str | None) -> str:
    if explicit:
        return _explicit(explicit, version)
    for c in (str(Path(sys.executable).with_name("ruff")), shutil.which("ruff")):
        if c and Path(c).exists() and _version(c) == version:
            return c
    target = cache / "tools" / f"ruff-{version}"
    exe = target / "bin" / "ruff"
    if not exe.exists():
        uv = os.environ.get("UV") or str(Path(sys.executable).with_name("uv"))
        cmd = [uv if Path(uv).exists() else "uv", "pip", "install", "-q", "--target", str(target)]
        proc = subprocess.run([*cmd, f"ruff=={version}"], capture_output=True, text=True)
        if proc.returncode != 0 or not exe.exists():
            raise SeamError(f"cannot install ruff {version}: {proc.stderr.strip()}", hint="make venv")
    return str(exe)


def _gate_ruff(base: Base, cache: Path, explicit: str | None) -> str:
    if not base.seam.ruff:
        raise SeamError(
            f"bases.toml pins no style-gate ruff for {base.name}", hint=f'["{base.name}".seam] ruff'
        )
    return _ruff(base.seam.ruff, cache, explicit)


def config_args(tree: Path) -> list[str]:
    """ruff's options for ``tree``'s own configuration only (see the module docstring)."""
    for name in ("ruff.toml", ".ruff.toml"):
        if (tree / name).is_file():
            return ["--config", str(tree / name)]
    try:
        data = tomllib.loads((tree / "pyproject.toml").read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        data = {}
    if isinstance(data.get("tool"), dict) and "ruff" in data["tool"]:
        return ["--config", str(tree / "pyproject.toml")]
    return ["--isolated"]


def _py_files(patches: Sequence[Patch]) -> list[str]:
    """The .py files the patches leave in the tree (deleted files are not checked)."""
    return sorted({fc.path for p in patches for fc in p.files if fc.new and fc.path.endswith(".py")})


def gate(root: Path, tree: Path, base: Base, cache: Path, ruff: str | None = None) -> StyleReport:
    """``stylecheck``: the gate in ``tree``, which must be a tree tkv-seam made of ``base`` (a build
    or a port tree, ``SeamTree.require``; else exit 5): the files it checks are that base's queue's,
    as the tree holds them."""
    again = hints.make("lint-patches", BASE=base.name) if tree == layout.build_tree(root, base.name) else None
    again = again or hints.tool("stylecheck", "--base", base.name, "--tree", tree)
    SeamTree(tree, root).require(None, base.name, "the style gate", then=again)
    problems = stylecheck(root, tree, base, cache, ruff)
    if not problems:
        return StyleReport(problems)
    patches = read_series(root, base.queue, base.name).load()
    owners = {
        path: [p.header.slug for p in patches if any(fc.path == path for fc in p.files)]
        for path in problem_paths(problems)
    }
    series = {p.header.slug for p in patches}
    for path, found in owners.items():
        if len(found) > 1:  # several patches change the file: whose lines are the problems on?
            owners[path] = _owners_of_the_lines(tree, path, problems, series) or found
    return StyleReport(problems, fix_hint(root, tree, base, _gate_ruff(base, cache, ruff), problems, owners))


def _owners_of_the_lines(tree: Path, path: str, problems: list[str], series: set[str]) -> list[str]:
    """The slugs of the series' patches whose commits wrote the lines the problems in ``path`` name
    (git blame in ``tree``), when every such problem names a line a patch of the series wrote; else
    [] (a format problem names the file, not a line; a line of the base or of a commit that is no
    patch: the caller lists the patches that change the file)."""
    lines = [m.group(2) for p in problems if (m := _PROBLEM.search(p)) and m.group(1) == path]
    if not lines or None in lines:
        return []
    subject = dict(git.repo.subjects(tree, "HEAD", f"^{BASE_TAG}"))
    slugs = []
    for line in lines:
        slug = subject.get(git.repo.line_commit(tree, path, int(line)) or "", "").split(":", 1)[0]
        if slug not in series:
            return []
        slugs.append(slug)
    return list(dict.fromkeys(slugs))


def stylecheck(root: Path, tree: Path, base: Base, cache: Path, ruff: str | None = None) -> list[str]:
    """Problems reported by ``ruff check`` and ``ruff format --check`` on the series' .py files."""
    files = _py_files(read_series(root, base.queue, base.name).load())
    if not files:
        return []
    return tree_problems(_gate_ruff(base, cache, ruff), tree, files)


def tree_problems(exe: str, tree: Path, files: list[str]) -> list[str]:
    """``ruff check`` and ``ruff format --check`` (``exe``) on ``files`` as ``tree``'s work tree holds them
    (a file a later patch deleted is not there: nothing to check, never "No such file")."""
    files = [f for f in files if (tree / f).is_file()]
    if not files:  # ruff given no file would check the whole tree
        return []
    problems = []
    # --force-exclude: honour the tree's exclude lists for explicitly named files, as vLLM's pre-commit does.
    # concise + --quiet: one line per problem (no code frames, no "Found N errors" summary), so that
    # the number of lines is the number of problems; `format --check` too: ruff 0.17 (v0.34.0's pin)
    # frames each file it would change unless told concise (0.14 prints "Would reformat: <path>" either way).
    own = config_args(tree)
    for args in (
        ["check", "--output-format", "concise", "--quiet", "--force-exclude", "--no-cache"],
        ["format", "--check", "--output-format", "concise", "--quiet", "--force-exclude", "--no-cache"],
    ):
        proc = subprocess.run([exe, *args, *own, *files], cwd=tree, capture_output=True, text=True)
        if proc.returncode != 0:
            problems += [
                f"ruff {args[0]}: {line}" for line in (proc.stdout + proc.stderr).splitlines() if line.strip()
            ]
    return problems


def gate_ruff(base: Base, cache: Path, explicit: str | None = None) -> str:
    """The ruff executable of ``base``'s style gate (SeamError when bases.toml pins none)."""
    return _gate_ruff(base, cache, explicit)


def file_problems(exe: str, tree: Path, path: str, data: bytes) -> list[str]:
    """The gate on one file's content (``data``, checked under ``path`` in ``tree``), one line a problem."""
    return _blob_problems(exe, tree, path, data)


def _blob_problems(exe: str, tree: Path, path: str, data: bytes) -> list[str]:
    """The gate on one file's content, as ``<path>:<line>: <rule>: <message>`` lines."""
    common = [*config_args(tree), "--force-exclude", "--no-cache", "--stdin-filename", path, "-"]
    problems = []
    check = subprocess.run(
        [exe, "check", "--output-format", "concise", "--quiet", *common],
        cwd=tree,
        input=data,
        capture_output=True,
    )
    if check.returncode != 0:
        text = (check.stdout + check.stderr).decode(errors="replace")
        problems += [f"ruff check: {line}" for line in text.splitlines() if line.strip()]
    fmt = subprocess.run([exe, "format", "--diff", *common], cwd=tree, input=data, capture_output=True)
    if fmt.returncode != 0:
        line, change = _first_change(fmt.stdout.decode(errors="replace"))
        why = f"would {change}" if change else fmt.stderr.decode(errors="replace").strip()
        problems.append(f"ruff format: {path}:{line}: {why}")
    return problems


def _first_change(diff: str) -> tuple[int, str]:
    """The line (of the checked file) of the first change in ``ruff format --diff``, and what the
    formatter would make of it: ``rewrite line 3 as 'x = 1'``, ``delete line 3 (a blank line)``,
    ``insert a blank line before line 3``."""
    line, removed, added = 0, [], []
    for text in diff.splitlines():
        if text.startswith(("---", "+++")):
            continue
        if text.startswith("@@"):
            if removed or added:
                break
            line = int(text.split()[1].lstrip("-").split(",")[0])
        elif line and text[:1] == "-":
            removed.append(text[1:])
        elif line and text[:1] == "+":
            added.append(text[1:])
        elif line and text[:1] == " ":
            if removed or added:
                break
            line += 1
    if not (removed or added):
        return max(line, 1), ""
    span = f"line {line}" if len(removed) <= 1 else f"lines {line}-{line + len(removed) - 1}"
    if removed and added:
        return line, f"rewrite {span} as {_shown(added)}"
    if removed:
        return line, f"delete {span} ({_shown(removed)})"
    return line, f"insert {_shown(added)} before line {line}"


def _shown(lines: list[str]) -> str:
    """Lines as a message shows them: the first non-blank one quoted, and how many more."""
    text = [x.strip() for x in lines if x.strip()]
    if not text:
        return "a blank line" if len(lines) == 1 else f"{len(lines)} blank lines"
    more = len(lines) - 1
    return repr(text[0]) + (f" (+{more} more line{'s' if more > 1 else ''})" if more else "")


def prefix_problems(
    tree: Path,
    chain: Sequence[str],
    patches: Sequence[Patch],
    base: Base,
    cache: Path,
    only: set[int] | None = None,
    ruff: str | None = None,
) -> list[tuple[int, str]]:
    """The gate on every prefix k of the series (``chain[k]`` holds patches 1..k): the .py files
    patches 1..k touch, as they are at ``chain[k]``. ``only``: just these prefixes.

    Each distinct file version is checked once; a problem is reported for the prefixes that
    hold that version (``prefix 6``, or ``prefixes 6-8`` when later patches leave the file as
    it is), with the patch that made it: ``(that patch's number, message)``.
    """
    ks = [k for k in range(1, len(patches) + 1) if only is None or k in only]
    files_at = {k: _py_files(patches[:k]) for k in ks}
    if not any(files_at.values()):
        return []
    exe = _gate_ruff(base, cache, ruff)
    held: dict[tuple[str, str], list[int]] = {}  # (path, blob id) -> prefixes holding it
    for k in ks:
        if not files_at[k]:
            continue
        for entry in git.repo.ls_tree(tree, chain[k], files_at[k]):
            held.setdefault((entry.path, entry.id), []).append(k)
    problems = []
    for (path, blob), prefixes in sorted(held.items(), key=lambda item: (item[1][0], item[0][0])):
        found = _blob_problems(exe, tree, path, git.repo.read_blob(tree, blob))
        if not found:
            continue
        first, last = prefixes[0], prefixes[-1]
        where = f"prefix {first}" if first == last else f"prefixes {first}-{last}"
        made_by = next(k for k in range(first, 0, -1) if path in {fc.path for fc in patches[k - 1].files})
        problems += [(made_by, f"{where} ({patches[made_by - 1].name}): {p}") for p in found]
    return problems
