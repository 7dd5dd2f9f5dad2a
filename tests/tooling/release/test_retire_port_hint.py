"""retire refusing a tree of the base that holds work names the way that keeps that tree: a port
in progress is aborted (its bundle holds all of it), never "refreshed" (issue 26)."""

from __future__ import annotations

from ..fixtures.portcase import NEXT, port, port_releases, port_tree, pproject  # noqa: F401  (fixtures)


def test_retire_over_a_stopped_port_onto_the_base_hints_abort_not_refresh(pproject):  # noqa: F811
    port(pproject, "start", expect=12)  # stopped at 0001 with its conflict in the tree
    err = pproject.cli("retire", NEXT, expect=5).stderr
    assert f"build/port-{NEXT}" in err
    assert f"`make port VERB=abort TO={NEXT}` keeps all of it in a bundle" in err
    assert "make refresh" not in err  # refresh writes a build tree's commits, never a port tree's
    assert port_tree(pproject).is_dir()
    port(pproject, "abort")
    assert "retired" in pproject.cli("retire", NEXT).output


def test_after_a_retire_raced_a_carry_no_hint_leads_to_a_refused_port(pproject):  # noqa: F811
    """The port onto NEXT is left (a retire took its pin while the carry was between steps):
    every verb on it says to pin it again (carry), never a port of the oldest base (its status's
    hint was a start onto it, which is refused: nothing is older)."""
    from tkvseam.bases import file as basesfile

    port(pproject, "start", expect=12)
    basesfile.remove_base(pproject.root / "bases.toml", NEXT)
    for verb in ("status", "continue", "abort", "finish"):
        err = pproject.cli("port", verb, "--to", NEXT, expect=2).stderr
        assert f"next: make carry VERSION={NEXT.removeprefix('v')}" in err, (verb, err)
        assert "VERB=status" not in err and "VERB=start" not in err
    err = pproject.cli("port", "status", "--to", "v9.9.0", expect=2).stderr  # older than every base
    assert "next: .venv/bin/tkv-seam carried" in err and "make carry" not in err


def test_an_unknown_base_to_port_from_is_answered_with_the_one_a_port_starts_from(pproject):  # noqa: F811
    """A newer base pinned too (v9.11.0, sorted before v9.9.9): the hint named it, a backport."""
    bases = pproject.root / "bases.toml"
    table = bases.read_text().split(f'["{NEXT}"]', 1)[1].split("\n[", 1)[0]
    newer = table.replace('version = "9.10.0"', 'version = "9.11.0"').replace(f'"{NEXT}"', '"v9.11.0"')
    bases.write_text(
        bases.read_text() + '\n["v9.11.0"]' + newer.replace(f"patches/{NEXT}", "patches/v9.11.0")
    )
    err = pproject.cli("port", "start", "--base", "v9.9.8", "--to", NEXT, expect=2).stderr
    assert f"next: make port VERB=start BASE=v9.9.9 TO={NEXT}" in err, err
