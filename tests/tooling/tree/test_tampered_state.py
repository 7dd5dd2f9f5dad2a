"""A tree's state edited by hand (issue 26, item 9): a port whose ``next`` is 999, -5 or no number.

``port skip`` answered ``next`` = 999 with a traceback (IndexError), ``"x"`` and ``null`` with a
TypeError, and took -5 as a position counted from the end (it stopped at another patch, exit 12).
A state whose port fields are not what a port writes is no state of the tool's: each verb says
the tree holds no port it can go on with, changes nothing and names the way on.
"""

from __future__ import annotations

import json

import pytest

from ..fixtures.portcase import NEXT, port, port_tree


@pytest.mark.parametrize(
    "field, value",
    [
        ("next", 999),
        ("next", -5),
        ("next", "x"),
        ("next", None),
        ("next", 1.5),
        ("next", True),
        ("current", "nope"),
    ],
)
def test_a_port_state_edited_by_hand_is_refused_without_a_traceback(pproject, field, value):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    path = tree / ".git" / "tkv-seam.json"
    state = json.loads(path.read_text())
    state["port"][field] = value
    path.write_text(json.dumps(state))
    before = path.read_bytes()
    for verb, args in (("skip", ("--reason", "upstream has it")), ("status", ()), ("continue", ())):
        res = port(pproject, verb, *args, expect=1)
        assert "Traceback" not in res.stderr and "holds no port tkv-seam can go on with" in res.stderr, (
            res.stderr
        )
        assert f"make port VERB=start TO={NEXT}" in res.stderr
    assert path.read_bytes() == before
