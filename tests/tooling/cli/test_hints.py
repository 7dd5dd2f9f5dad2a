"""Every ``next:`` hint is a command that runs from the project root as written.

The hints printed during the whole test session are collected (``hint_log``, conftest) and
checked by the last test (``hintcheck``): a make target that exists with the variables it
takes, a tkv-seam command with its options, a git subcommand, a command on PATH.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess

import pytest

from tkvseam import hints

from ..fixtures.queue import message
from ..fixtures.upstream import NAME, bases_toml
from ..fixtures.hintcheck import ROOT, commands, make_help, problems
from ..fixtures.portcase import NEXT, NEXT_VERSION


def test_the_checker_finds_the_commands_of_a_hint():
    hint = (
        "resolve them, `git -C '/tmp/a b' add x.py`, then `make port VERB=continue TO=v0.32.0`; "
        "or mv /x /x.mine, then run the command again"
    )
    assert commands(hint) == [
        "git -C '/tmp/a b' add x.py",
        "make port VERB=continue TO=v0.32.0",
        "mv /x /x.mine",
    ]
    assert commands(
        "the patch's tests failed, then make bisect BASE=v1 PATCH='$(touch x) or y' and don't"
    ) == ["make bisect BASE=v1 PATCH='$(touch x) or y'"]
    assert (
        commands("check access to the package index (TKV_SEAM_INDEX_URL), then run the command again") == []
    )


@pytest.mark.parametrize(
    "hint, why",
    [
        ("tkv-seam watch --since 0.31.0", "not on PATH"),
        ("make port TO=v0.33.0 REPORT=1", "does not take REPORT="),
        ("make lint-everything", "no target 'lint-everything'"),
        (".venv/bin/tkv-seam port --to v0.33.0 --continue", "has no option --to"),
        (".venv/bin/tkv-seam port", "needs a command"),
        (".venv/bin/tkv-seam port start --to v0.33.0 --tree x --frobnicate", "no option --frobnicate"),
        ("`git -C build/x frobnicate`", "no subcommand 'frobnicate'"),
        ("make image BASE=v0.31.0 ...", "no target '...'"),
    ],
)
def test_the_checker_refuses_a_command_that_does_not_run(hint, why):
    found = problems(hint)
    assert found and why in found[0], found


@pytest.mark.parametrize(
    "hint",
    [
        hints.port("skip", "v0.33.0", "/tmp/a b/port", REASON="'<why>'"),
        hints.make("drift", DIFF="<slug>", BASE="v0.32.0"),
        hints.tool("refresh", "--base", "v0.32.0", "--tree", "build/port-v0.32.0", "--force"),
        hints.tool("pin", "--yanked", "0.34.0"),
        "ls -ld /tmp  (make it writable for you), then run the command again",
        "`GIT_SEQUENCE_EDITOR=: git rebase -i --autosquash tkv-seam-base`",
    ],
)
def test_the_hints_module_renders_commands_that_run(hint):
    assert problems(hint) == []


def test_a_value_with_a_space_stays_one_word():
    assert (
        hints.port("status", "v0.32.0", "/tmp/a b") == "make port VERB=status TO=v0.32.0 PORT_TREE='/tmp/a b'"
    )
    assert hints.make("apply", BASE="v0.31.0", FORCE=None) == "make apply BASE=v0.31.0"


# --------------------------------------------------------------------------- make help


def _makefile_targets() -> set[str]:
    """Every rule target the Makefile spells out (not file targets such as $(VENV)/.done)."""
    text = (ROOT / "Makefile").read_text()
    phony = set(re.search(r"^\.PHONY:((?:.*\\\n)*.*)$", text, re.M).group(1).replace("\\\n", " ").split())
    rules = {m.group(1) for m in re.finditer(r"^([a-z][a-z-]*):(?!=)", text, re.M)}
    return phony | rules


def test_make_help_lists_every_target_of_the_makefile():
    targets, _ = make_help()
    assert sorted(_makefile_targets() - set(targets)) == []
    assert {"lint-code", "lint-workflows"} <= set(targets)


def test_make_help_lists_the_variables_each_target_takes():
    targets, anywhere = make_help()
    assert {"VERB", "TO", "BASE", "REASON", "VERDICT", "PORT_TREE", "JSON", "FORCE"} <= targets["port"]
    assert {"BASE", "FORCE", "VLLM_GIT"} <= targets["apply"]
    assert {"BASE", "PATCH"} <= targets["bisect"]
    assert {"DIFF", "BASE"} <= targets["drift"]
    assert "TKV_SEAM_LOCK_TIMEOUT" in anywhere
    # every variable a recipe reads with $(VAR) / $(value VAR) is listed under some target
    text = (ROOT / "Makefile").read_text()
    read = set(re.findall(r"\$\((?:value |if \$\()?([A-Z][A-Z_]+)\)", text))
    internal = {
        "VENV",
        "TOOL",
        "UV",
        "TREE",
        "VLLM_VENV",
        "LOCK",
        "FORCE_FLAG",
        "AUTO_FLAGS",
        "FIND_LINKS",
        "TEST_BASES",
        "ONE_BASE",
    }
    internal |= {
        "MAKEFILE_LIST",
        "MAKECMDGOALS",
        "MAKE",
        "HOME",
        "PORT_VERBS",
        "WATCH_ARGS",
        "SKIP",
        "STATUS",
        "ABORT",
        "CONTINUE",
    }
    internal |= {"REPORT", "FINISH"} - targets["watch"]
    listed = set().union(*targets.values(), anywhere)
    assert sorted(read - internal - listed) == []


# --------------------------------------------------------------------------- the hints in the code


def _literal(node: ast.expr) -> str | None:
    """A hint as the code spells it, each interpolated value shown as ``<value>``; None if not text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "<value>" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.IfExp):
        return _literal(node.body)
    return None


def code_hints() -> dict[str, str]:
    """``module:line`` -> every hint the tool's code spells out (``hint=``, ``default_hint``, ``force_hint=``,
    ``rerun=``, ``again=``)."""
    package = ROOT / "scripts" / "tkvseam"
    found = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            values = []
            if isinstance(node, ast.keyword) and node.arg in ("hint", "force_hint", "rerun", "again"):
                values.append(node.value)
            if isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id in ("hint", "default_hint") for t in node.targets):
                    values.append(node.value)
            for value in values:
                text = _literal(value)
                if text is not None:
                    found[f"{path.relative_to(package)}:{value.lineno}"] = text
    return found


def test_every_hint_the_code_spells_out_names_commands_that_run():
    found = code_hints()
    assert len(found) > 100
    bad = [
        f"{where}: {text}\n    " + "\n    ".join(p) for where, text in found.items() if (p := problems(text))
    ]
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------- the hints printed


def _failures(project, releases) -> list[str]:
    """Failures whose hints earlier versions spelled wrong, so the check below never runs empty;
    the hints they print (their ``next:`` lines)."""
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    project.apply()
    project.commit_in_tree("vllm/x.py", "X = 1\n", message("add-x"))
    project.refresh()
    runs = [
        project.cli("drift", "--diff", "add-x", "--base", NEXT, expect=2),  # no queue yet: the port report
        project.cli("watch", "--write", expect=2),
        project.cli("pin", "not-a-version", expect=2),
        project.cli("port", "continue", "--to", NEXT, expect=1),  # before start
        project.cli("port", "status", "--to", NEXT),  # none in progress: an answer (exit 0), its next step
    ]
    (project.tree / "vllm/x.py").write_text("X = 2\n")
    runs.append(project.refresh(expect=5))  # uncommitted changes
    return [line.split("next: ", 1)[1] for r in runs for line in r.output.splitlines() if "next: " in line]


def test_every_hint_printed_is_a_command_that_runs(project, releases, hint_log):
    own = _failures(project, releases)
    assert len(own) == 6
    printed = sorted({json.loads(line)["hint"] for line in hint_log.read_text().splitlines()} | set(own))
    bad = [f"{hint}\n    " + "\n    ".join(found) for hint in printed if (found := problems(hint))]
    assert not bad, "hints that do not run as written:\n" + "\n".join(bad)


def test_the_hint_log_takes_hints_from_other_processes_too(project, hint_log):
    """(Other workers of the suite append to the same log meanwhile: this run's hint is looked
    for by its own words, not by counting lines.)"""
    proc = subprocess.run(
        [str(ROOT / ".venv/bin/tkv-seam"), *project.argv("port", "status", "--to", "v0.0.0")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "next:" in proc.stderr
    hint = proc.stderr.split("next: ", 1)[1].strip()
    logged = [json.loads(line)["hint"] for line in hint_log.read_text().splitlines()]
    assert hint in logged, (os.environ.get(hints.LOG_ENV), str(hint_log), proc.stderr)
