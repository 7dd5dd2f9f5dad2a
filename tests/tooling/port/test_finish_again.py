"""A finished port, asked to finish (or continue) again before its queue is committed.

``carry`` finishes the port and writes the new queue; the README's next steps are to re-read
and commit it. ``port finish`` (or ``continue``) run again meanwhile refused with exit 5: "would
write over v9.10.0's queue, but it has uncommitted edits" (the files the port itself had just
written) and suggested ``FORCE=1``. The queue as the port wrote it is the port's own: finishing
again changes nothing and says so; an edit made to it since is still refused.
"""

from __future__ import annotations

from ..fixtures.carrying import NEW_NAME, status
from ..fixtures.carry import carry, carry_project, resolve_sub, wheels  # noqa: F401


def test_finish_again_on_the_queue_the_port_wrote_changes_nothing(carry_project, wheels):  # noqa: F811
    root = carry_project.root
    carry(carry_project, wheels, expect=12)
    resolve_sub(root / "build" / f"port-{NEW_NAME}")
    carry(carry_project, wheels, "--reason", "upstream rewrote sub()")
    queue = root / "patches" / NEW_NAME
    written = {p.name: p.read_bytes() for p in sorted(queue.iterdir())}
    before = status(root)
    for verb in ("finish", "continue"):
        out = carry_project.cli("port", verb, "--to", NEW_NAME).output
        assert "unchanged patches/v9.10.0/0001-cache-tweak.patch" in out, out
        assert {p.name: p.read_bytes() for p in sorted(queue.iterdir())} == written
        assert status(root) == before
    # an edit of the written queue is the maintainer's: still refused
    (queue / "0002-add-mul.patch").write_text("edited by hand\n")
    err = carry_project.cli("port", "finish", "--to", NEW_NAME, expect=5).stderr
    assert "changed since the port started" in err or "uncommitted edits" in err
    assert (queue / "0002-add-mul.patch").read_text() == "edited by hand\n"
