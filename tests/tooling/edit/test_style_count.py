"""The style gate counts problems, not the lines ruff prints (issue 25: 3 errors were "31 problem(s)")."""

from __future__ import annotations

import json

from ..fixtures.queue import message

BAD = "def f():\n    return alpha\n\n\ndef g():\n    return beta\n\n\ndef h():\n    return gamma\n"


def test_three_ruff_errors_are_three_problems(project):
    project.apply()
    project.commit_in_tree("vllm/bad.py", BAD, message("bad-names", "add f, g, h"))
    project.refresh()
    res = project.cli("stylecheck", "--base", "v9.9.9", expect=6)
    assert res.stdout.strip().splitlines()[-1] == "stylecheck: 3 problem(s)"
    problems = json.loads(project.cli("stylecheck", "--base", "v9.9.9", "--json", expect=6).output)[
        "problems"
    ]
    assert [p.split(": ", 1)[1].split(" ", 1)[0] for p in problems] == [
        "vllm/bad.py:2:12:",
        "vllm/bad.py:6:12:",
        "vllm/bad.py:10:12:",
    ]
    assert all("F821 Undefined name" in p for p in problems)
