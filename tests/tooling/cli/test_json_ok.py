"""Every JSON object a command prints has ``ok`` (issue 37: ``lint --json`` had it, ``drift --json``
did not); ``port status`` with no port in progress is an answer, "none", exit 0 (as ``git status`` or
``quilt applied`` would say), not a failure."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tkvseam.answer import Answer
from tkvseam.release.watch import WatchedRelease, WatchResult

from ..fixtures.queue import make_two_patches
from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml

NEXT = f"v{NEXT_VERSION}"


def _printed(project, *args: str, expect: int = 0) -> dict:
    return json.loads(project.cli(*args, "--json", expect=expect).stdout)


@pytest.fixture
def two_bases(project, releases):
    make_two_patches(project)
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    return project


@pytest.mark.parametrize(
    "args",
    [
        ("drift",),
        ("bases",),
        ("carried",),
        ("lint", "--base", NAME),
        ("apply", "--base", NAME),
        ("refresh", "--base", NAME),
        ("overlay", "files", "--base", NAME),
        ("seamtest", "times"),
        ("port", "status", "--to", NEXT),
        ("clean",),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_every_success_object_has_ok_true(two_bases, args):
    data = _printed(two_bases, *args)
    assert data["ok"] is True, data


def test_ok_follows_the_answer_where_it_does_not_say(monkeypatch, capsys):
    from tkvseam.cli import options

    @dataclass
    class Quiet(Answer):
        value: int
        code: int = 0

        def exit_code(self) -> int:
            return self.code

    class Ctx:
        as_json = True

    monkeypatch.setattr(options, "emit_json", lambda data: print(json.dumps(data)))
    monkeypatch.setattr(options.click, "get_current_context", lambda silent=True: _Fake(Ctx()))
    options.emit(Quiet(1))
    assert json.loads(capsys.readouterr().out) == {"ok": True, "value": 1, "code": 0}
    with pytest.raises(SystemExit) as e:
        options.emit(Quiet(2, 6))
    assert e.value.code == 6 and json.loads(capsys.readouterr().out)["ok"] is False
    # a newer release (exit 11) is not a failure; a report that could not be made is
    newer = WatchResult(NAME, "9.9.9", NAME, [WatchedRelease("9.10.0", None, False, False, False)])
    assert newer.exit_code() == 11 and newer.success() is True


class _Fake:
    def __init__(self, obj):
        self.obj = obj

    def find_object(self, _cls):
        return self.obj


def test_port_status_with_no_port_in_progress_says_none_and_exits_0(two_bases):
    out = two_bases.cli("port", "status", "--to", NEXT).output
    assert out.splitlines() == [
        f"port to {NEXT}: none in progress (no build/port-{NEXT})",
        f"  next: make port VERB=start TO={NEXT}",
    ]
    data = _printed(two_bases, "port", "status", "--to", NEXT)
    assert data["port"] == "none" and data["next_step"] == f"make port VERB=start TO={NEXT}"
    # a tree that is there but no port is still refused, naming what it is
    (two_bases.root / "build" / f"port-{NEXT}").mkdir(parents=True)
    err = two_bases.cli("port", "status", "--to", NEXT, expect=1).stderr
    assert "Error:" in err


def test_port_status_onto_a_carried_base_never_hints_a_port_that_would_write_over_its_queue(two_bases):
    """No port tree, but the base is carried (its queue there): the next step is its tests, not a
    `port start` whose finish replaces the reviewed queue."""
    queue = two_bases.root / "patches" / NEXT
    queue.mkdir(parents=True, exist_ok=True)
    (queue / "series").write_text("")
    out = two_bases.cli("port", "status", "--to", NEXT).output
    assert out.splitlines() == [
        f"port to {NEXT}: none in progress (no build/port-{NEXT}); {NEXT} is carried (patches/{NEXT}/series)",
        f"  next: make apply BASE={NEXT}",
    ]
    data = _printed(two_bases, "port", "status", "--to", NEXT)
    assert (data["port"], data["carried"], data["next_step"]) == ("none", True, f"make apply BASE={NEXT}")
