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
