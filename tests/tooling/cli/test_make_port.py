"""``make port``: one verb per run, and the text a user gives never runs as shell or make code.

Real ``make`` on the project's Makefile, with the tool replaced by a stand-in that records
the arguments it was given (``TOOL=``) and a venv stamp that is up to date (``VENV=``).
"""

from __future__ import annotations

import shutil

import pytest

pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="GNU make not installed")


def test_a_reason_reaches_the_tool_as_written_and_runs_nothing(make, tmp_path):
    marks = [tmp_path / f"ran-{i}" for i in range(3)]
    reason = f"upstream has `touch {marks[0]}` $(touch {marks[1]}) $(shell touch {marks[2]}) $HOME 'q' \"dq\""
    proc, argv = make("port", "VERB=skip", "TO=v0.33.0", f"REASON={reason}", "VERDICT=dropped")
    assert proc.returncode == 0, proc.stderr
    assert argv == ["port", "skip", "--to", "v0.33.0", "--reason", reason, "--verdict", "dropped"]
    assert not [m for m in marks if m.exists()]


def test_report_and_start_take_the_old_base_and_other_verbs_do_not(make):
    assert make("port", "VERB=report", "TO=v0.33.0", "BASE=v0.32.0", "JSON=1")[1] == [
        "port", "report", "--to", "v0.33.0", "--base", "v0.32.0", "--json",
    ]  # fmt: skip
    # no BASE=: the tool takes the newest carried base older than TO (never the Makefile's default)
    assert make("port", "VERB=start", "TO=v0.33.0")[1] == ["port", "start", "--to", "v0.33.0"]
    assert make("port", "VERB=finish", "TO=v0.33.0", "FORCE=1")[1] == [
        "port",
        "finish",
        "--to",
        "v0.33.0",
        "--force",
    ]


@pytest.mark.parametrize(
    "args",
    [
        ("TO=v0.33.0", "REPORT=1", "ABORT=1"),  # the old flags: the last one won, and abort removed the tree
        ("TO=v0.33.0", "CONTINUE=1", "SKIP=why"),
        ("TO=v0.33.0",),  # no verb
        ("TO=v0.33.0", "VERB=report abort"),
        ("VERB=abort",),  # no target
    ],
    ids=["report+abort", "continue+skip", "no-verb", "two-verbs", "no-to"],
)
def test_modes_never_combine_and_the_tool_is_not_run(make, args):
    proc, argv = make("port", *args)
    assert proc.returncode == 2 and argv is None
    assert "make port VERB=" in proc.stderr
