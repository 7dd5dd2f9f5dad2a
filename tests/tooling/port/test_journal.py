"""The port's crash journal on its own (``port.journal.PortJournal``): a small git tree and a state
written by hand, no release, no index, no port run.

What a killed run leaves (a commit made, not recorded; a commit of someone else's; a place in the
queue edited by hand) is made directly, and the journal's next ``load`` is asked what it makes of it.
"""

from __future__ import annotations

import json

import pytest

from tkvseam import git
from tkvseam.layout import BRANCH
from tkvseam.errors import RefusedError, SeamError
from tkvseam.port.journal import PORT_MSG, PortJournal
from tkvseam.findings.model import (
    Evidence,
    EvidenceKind,
    FileReport,
    FileStatus,
    HunkNote,
    HunkReport,
    PatchReport,
    PatchStatus,
    UpstreamRegion,
)
from tkvseam.queue.patch import PlacementKind
from tkvseam.tree.state import DoneStatus, Kind, PortProgress, TreeState

from ..fixtures.queue import message

TO = "v9.10.0"
AUTHOR = "Seam Dev <dev@example.invalid>"


def _patch_text(slug: str, rel: str) -> str:
    return (
        f"From: {AUTHOR}\nSubject: [PATCH] {message(slug, f'add {rel}')}---\n"
        f"diff --git a/{rel} b/{rel}\nnew file mode 100644\n--- /dev/null\n+++ b/{rel}\n@@ -0,0 +1 @@\n+x = 1\n"
    )


@pytest.fixture
def journal(tmp_path):
    """A port tree of two patches (0001-add-a, 0002-add-b) with nothing ported yet."""
    root = tmp_path / "proj"
    tree = root / "build" / f"port-{TO}"
    tree.mkdir(parents=True)
    git.repo.init(tree, BRANCH)  # the port's branch
    (tree / "base.py").write_text("base = 1\n")
    base = git.index.commit(tree, "base", AUTHOR)
    series = ["patches/0001-add-a.patch", "patches/0002-add-b.patch"]
    PortJournal.copy_queue(
        tree,
        {series[0]: _patch_text("add-a", "a.py").encode(), series[1]: _patch_text("add-b", "b.py").encode()},
    )
    state = TreeState(Kind.PORT, TO, "sdist", base, base, base, port=PortProgress("v9.9.9", base, series))
    state.save(tree)
    return PortJournal(root, TO)


def _commit(j: PortJournal, rel: str, msg: str) -> str:
    (j.path / rel).write_text("x = 1\n")
    return git.index.commit(j.path, msg, AUTHOR, paths=[rel])


def test_a_patch_begun_and_recorded_is_through_with_its_verdict_and_reason(journal):
    state = journal.load()
    patch = journal.patch(state.port, 0)
    journal.begin(state, patch, DoneStatus.THREE_WAY, "a note")
    assert journal.seam.load().port.committing.status == DoneStatus.THREE_WAY  # on disk before the commit
    commit = _commit(journal, "a.py", patch.header.message)
    journal.record(state, patch, DoneStatus.THREE_WAY, commit, note="a note")
    again = journal.load()
    assert again.port.next == 1 and again.port.committing is None and again.head == commit
    done = again.port.done[0]
    assert (done.name, done.slug, done.status, done.commit) == ("0001-add-a.patch", "add-a", "3-way", commit)
    assert (done.verdict, done.reason, done.note) == ("still needed", "upstream lacks it", "a note")


def test_a_commit_a_killed_run_made_is_recorded_as_what_it_began(journal):
    state = journal.load()
    patch = journal.patch(state.port, 0)
    journal.begin(state, patch, DoneStatus.THREE_WAY)
    commit = _commit(journal, "a.py", patch.header.message)  # killed here: committed, not recorded
    state = PortJournal(journal.root, TO).load()
    done = state.port.done
    assert [(d.name, d.status, d.commit) for d in done] == [
        ("0001-add-a.patch", DoneStatus.THREE_WAY, commit)
    ]
    assert "recorded after an interrupted run" in done[0].note and state.port.next == 1


def test_a_run_killed_before_its_commit_records_nothing(journal):
    state = journal.load()
    journal.begin(state, journal.patch(state.port, 0), DoneStatus.EXACT)
    state = PortJournal(journal.root, TO).load()
    assert state.port.done == [] and state.port.committing is None and state.port.next == 0


def test_a_commit_of_someone_else_is_not_recorded_and_head_is_refused(journal):
    _commit(journal, "mine.py", "mine: my own change\n")
    with pytest.raises(RefusedError) as e:
        journal.load()
    assert (
        "not the port's" in e.value.message and "carries 1 commit(s) after the base (mine)" in e.value.message
    )
    assert "reset --soft" in e.value.hint
    assert journal.load(recover=False).port.done == []  # what abort reads: still there


def test_a_stop_keeps_the_typed_report_and_the_message_to_edit(journal):
    state = journal.load()
    patch = journal.patch(state.port, 0)
    report = PatchReport(
        patch.name,
        "add-a",
        status=PatchStatus.OBSOLETE,
        own=PatchStatus.THREE_WAY,
        files=[
            FileReport("a.py", FileStatus.EXACT),
            FileReport("b.py", FileStatus.MOVED, "moved", moved_to="c.py"),
        ],
        hunks=[
            HunkReport(
                "a.py",
                1,
                "@@ -1 +1 @@",
                "def f():",
                PlacementKind.FUZZ,
                line=3,
                fuzz=1,
                note_kind=HunkNote.MOVED_TO,
                upstream=UpstreamRegion("1-2", "3-4", "c.py", "-x\n+y\n", True),
            )
        ],
        conflicts=["b.py"],
        blocked_by=["add-z"],
        evidence=[Evidence(EvidenceKind.NO_CHANGE, "applying it changes nothing")],
    )
    journal.stop(state, patch, report)
    stopped = journal.load().port.stopped
    assert isinstance(stopped, PatchReport) and stopped == report
    assert stopped.hunks[0].kind is PlacementKind.FUZZ and stopped.hunks[0].upstream.changed
    assert stopped.status is PatchStatus.OBSOLETE and stopped.files[0].status is FileStatus.EXACT
    on_disk = json.loads(TreeState.path(journal.path).read_text())["port"]["stopped"]
    assert on_disk["obsolete"] == ["applying it changes nothing"] and on_disk["status"] == "likely obsolete"
    assert (journal.path / ".git" / PORT_MSG).read_text() == patch.header.message
    journal.skip(state, patch, "obsolete", "upstream has it")
    p = journal.load().port
    assert (p.next, p.current, p.stopped, p.done[0].status) == (1, None, None, DoneStatus.SKIPPED)
    assert not (journal.path / ".git" / PORT_MSG).exists()


@pytest.mark.parametrize("place", [999, -5, 2, "1"])
def test_a_place_in_the_queue_edited_by_hand_is_a_clean_refusal(journal, place):
    state = journal.load()
    journal.stop(state, journal.patch(state.port, 0), PatchReport("0001-add-a.patch"))
    data = json.loads(TreeState.path(journal.path).read_text())
    data["port"]["next"] = place
    TreeState.path(journal.path).write_text(json.dumps(data))
    with pytest.raises(SeamError) as e:
        journal.load()
    assert (
        f"next = {place!r}" in e.value.message and "is not one of the queue's 2 patch(es)" in e.value.message
    )
    assert "make port VERB=abort TO=v9.10.0" in e.value.hint
    assert journal.load(recover=False).port.next == place  # abort still reads it (and keeps it all)


def test_a_tree_of_another_kind_is_named_and_left_alone(journal):
    state = journal.seam.load()
    state.kind, state.port = Kind.APPLY, None
    state.save(journal.path)
    with pytest.raises(SeamError) as e:
        journal.load()
    assert f"is a tkv-seam apply tree of {TO}, not a port; nothing was changed" in e.value.message
