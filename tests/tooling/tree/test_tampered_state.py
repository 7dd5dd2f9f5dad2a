"""A port state edited by hand (issue 26, item 9): ``next`` no position in the queue.

``port skip`` answered ``next`` = 999 with a traceback (IndexError), ``"x"`` and ``null`` with a
TypeError, and took -5 as a position counted from the end. The port's journal refuses such a place
(``port/test_what_is_recorded.py`` covers 999 and -5 on skip); here every kind of value a hand
may leave, on each verb that reads the place: no traceback, nothing changed, the way on named.
"""

from __future__ import annotations

import json

import pytest

from ..fixtures.portcase import NEXT, port, port_tree


@pytest.mark.parametrize("value", [999, -5, "x", None, 1.5, True])
def test_a_port_place_edited_by_hand_is_refused_by_every_verb_without_a_traceback(pproject, value):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    path = tree / ".git" / "tkv-seam.json"
    state = json.loads(path.read_text())
    state["port"]["next"] = value
    path.write_text(json.dumps(state))
    before = path.read_bytes()
    for verb, args in (("skip", ("--reason", "upstream has it")), ("status", ()), ("continue", ())):
        res = port(pproject, verb, *args, expect=1)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr
        assert f"next = {value!r}" in res.stderr
        assert "edited by hand?" in res.stderr and f"make port VERB=abort TO={NEXT}" in res.stderr, res.stderr
    assert path.read_bytes() == before
