"""The gate record and the patches to re-read are typed (``Entry``, ``WentIn``; ``How``, ``Gate``,
``Proof``), and what they write is what the record and ``--json`` held as dicts, byte for byte."""

from __future__ import annotations

import json

from tkvseam.findings.auto import Did
from tkvseam.port.gate import (
    GATE_FILE,
    Entry,
    Gate,
    How,
    Proof,
    WentIn,
    _write,
    by_themselves_lines,
    patches_by_themselves,
    read_record,
)
from tkvseam.tree.state import DonePatch, DoneStatus, Kind, PortProgress, TreeState

RECORD = {
    "0001-a.patch": {
        "did": [],
        "files": {"vllm/a.py": "1" * 40},
        "gate": "ok",
        "how": "exact",
        "proven": True,
    },
    "0002-b.patch": {
        "did": [{"file": "vllm/b.py", "kind": "imports", "text": "imports merged"}],
        "files": {},
        "gate": "ok",
        "how": "imports merged",
        "proven": "no tests",
    },
    "0003-c.patch": {"did": [], "gate": "breaks", "how": "3-way", "proven": False},
    "0004-d.patch": {
        "did": [],
        "files": {},
        "gate": "ok",
        "how": "resolved",
        "proven": "not proven (environment)",
    },
}


def _tree(tmp_path, record: dict):
    (tmp_path / ".git").mkdir()
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    (tmp_path / ".git" / GATE_FILE).write_text(text)
    return tmp_path, text


def _state(*done: DonePatch) -> TreeState:
    port = PortProgress("v9.9.0", "0" * 40, [], next=len(done), done=list(done))
    return TreeState(Kind.PORT, "v9.10.0", "", "0" * 40, "0" * 40, "0" * 40, port=port)


def test_the_record_reads_as_typed_entries_and_writes_back_byte_for_byte(tmp_path):
    tree, text = _tree(tmp_path, RECORD)
    record = read_record(tree)
    assert record["0001-a.patch"] == Entry(How.EXACT, Gate.OK, Proof.PROVEN, [], {"vllm/a.py": "1" * 40})
    assert record["0002-b.patch"].did == [Did("imports", "vllm/b.py", "imports merged")]
    assert record["0002-b.patch"].proven == Proof.NO_TESTS
    assert record["0003-c.patch"] == Entry(How.THREE_WAY, Gate.BREAKS, Proof.NOT_PROVEN)  # no files: breaks
    assert record["0004-d.patch"].proven == Proof.ENVIRONMENT
    (tree / ".git" / GATE_FILE).unlink()
    _write(tree, record)
    assert (tree / ".git" / GATE_FILE).read_text() == text


def test_an_entry_of_the_wrong_kinds_reads_as_not_said(tmp_path):
    tree, _ = _tree(tmp_path, {"0001-a.patch": {"how": 3, "gate": "maybe", "proven": "yes", "did": "x"}})
    assert read_record(tree)["0001-a.patch"] == Entry(None, Gate.NOT_RUN, Proof.NOT_PROVEN)


def test_the_patches_to_re_read_are_typed_and_keep_their_json(tmp_path):
    tree, _ = _tree(tmp_path, RECORD)
    state = _state(
        DonePatch("0001-a.patch", "a", DoneStatus.EXACT, "c1"),
        DonePatch("0002-b.patch", "b", DoneStatus.RESOLVED, "c2"),  # a human, but the port changed it
        DonePatch("0004-d.patch", "d", DoneStatus.RESOLVED, "c4"),  # a human alone: not listed
        DonePatch("0005-e.patch", "e", DoneStatus.THREE_WAY, "c5"),  # no entry: the gate not run
        DonePatch("0006-f.patch", "f", DoneStatus.SKIPPED, None),
    )
    rows = patches_by_themselves(tree, state)
    assert rows == [
        WentIn("0001-a.patch", How.EXACT, Gate.OK, Proof.PROVEN),
        WentIn("0002-b.patch", How.IMPORTS, Gate.OK, Proof.NO_TESTS, ["imports: vllm/b.py: imports merged"]),
        WentIn("0005-e.patch", How.THREE_WAY, Gate.NOT_RUN, Proof.NOT_PROVEN),
    ]
    assert [row.to_json() for row in rows] == [
        {"name": "0001-a.patch", "how": "exact", "gate": "ok", "proven": True},
        {
            "name": "0002-b.patch",
            "how": "imports merged",
            "gate": "ok",
            "proven": "no tests",
            "did": ["imports: vllm/b.py: imports merged"],
        },
        {"name": "0005-e.patch", "how": "3-way", "gate": "not run", "proven": False},
    ]
    assert by_themselves_lines(rows) == [
        "3 patch(es) went in by themselves or were changed by the port; re-read them:",
        "  0001-a.patch  (exact; gate ok; proven)",
        "  0002-b.patch  (imports merged; gate ok; no tests)",
        "      imports: vllm/b.py: imports merged",
        "  0005-e.patch  (3-way; gate not run; not proven)",
    ]
