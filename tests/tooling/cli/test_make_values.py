"""Every value a user gives a make target reaches the tool as one argument, as written.

``make carry`` and ``make port`` pass what they are given through the environment; ``pin``
(VERSION), ``seam-table`` (PLUGIN), ``lock-cpu`` (EXCLUDE_NEWER), ``watch`` (SINCE) and
``bisect`` (PATCH) did not: the value was pasted into the recipe's shell line, so a requirement
with a marker (``python_version >= '3.11'``) lost its quotes, a time with a space became two
arguments, and backticks in it ran. Real make, the tool replaced by a recorder (``fixtures/make.py``).
"""

from __future__ import annotations

import os

import pytest

from ..fixtures.make import make as make_fixture

make = make_fixture


@pytest.mark.parametrize(
    ("target", "assign", "argv"),
    [
        ("pin", "VERSION={v}", ["pin", "{v}"]),
        ("seam-table", "PLUGIN={v}", ["seam-table", "v0.34.0", "--plugin", "{v}"]),
        ("lock-cpu", "EXCLUDE_NEWER={v}", ["lock-cpu", "v0.34.0", "--exclude-newer", "{v}"]),
        ("watch", "SINCE={v}", ["watch", "--since", "{v}"]),
        ("bisect", "PATCH={v}", ["seamtest", "bisect", "--base", "v0.34.0", "--patch", "{v}"]),
    ],
)
def test_a_value_reaches_the_tool_as_one_argument_and_runs_nothing(make, tmp_path, target, assign, argv):  # noqa: F811
    mark = tmp_path / "ran"
    value = f"turbo-attn==1.0; python_version >= '3.11' `touch {mark}` $(touch {mark}) \"dq\" 10:00"
    args = [target, assign.format(v=value)]
    if target in ("seam-table", "lock-cpu", "bisect"):
        args.append("BASE=v0.34.0")
    if target == "bisect":  # its venv-vllm prerequisite: a venv stamp newer than its lock
        lock, venv = tmp_path / "lock.txt", tmp_path / "vllm-venv"
        lock.write_text("vllm==0.34.0\n")
        venv.mkdir()
        (venv / ".done").touch()
        os.utime(lock, (1, 1))
        args += [f"LOCK={lock}", f"VLLM_VENV={venv}"]
    proc, got = make(*args)
    assert proc.returncode == 0, proc.stderr
    assert got == [a.format(v=value) for a in argv]
    assert not mark.exists()


def test_the_targets_still_say_what_they_need(make):  # noqa: F811
    proc, got = make("pin")
    assert proc.returncode == 2 and "usage: make pin VERSION=0.34.0" in proc.stderr and got is None
    proc, got = make("seam-table", "BASE=v0.34.0", "FORCE=1")
    assert got == ["seam-table", "v0.34.0", "--force"]
    proc, got = make("watch", "REPORT=1", "PRE=1")
    assert got == ["watch", "--pre", "--report"]
