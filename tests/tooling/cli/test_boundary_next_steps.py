"""The error boundary's answers that were not the next step (issue 26): a closed stdout is no
disk problem, a usage error of the group's own options is one JSON object too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tkvseam.cli.main import main

TOOL = Path(sys.executable).with_name("tkv-seam")


def test_a_closed_stdout_is_not_answered_with_free_space(project):
    """`tkv-seam bases | head -0`: the reader is gone; no "check free space", no traceback."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [str(TOOL), *project.argv("bases")], stdout=write, stderr=subprocess.PIPE, text=True
        )
    finally:
        os.close(write)
    assert proc.returncode == 1
    assert "free space" not in proc.stderr and "Traceback" not in proc.stderr and "next:" not in proc.stderr


@pytest.mark.parametrize("args", [("--frobnicate", "bases", "--json"), ("--root", ".", "--json")])
def test_a_usage_error_of_the_group_still_prints_one_json_object(args):
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 2
    out = json.loads(res.stdout)
    assert out["ok"] is False and out["exit_code"] == 2 and "No such option" in out["error"]
