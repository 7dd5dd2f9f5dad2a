"""overlay install/restore attacked by hand: wrong bases, wrong commits (issue 20's overlay items)."""

from __future__ import annotations

import json

from ..fixtures.upstream import NAME


def test_an_unknown_base_is_a_usage_error_naming_the_known_ones(two, venv):
    """It said 'build/vllm-v0.0.1 is not a tree made by tkv-seam apply' (exit 1), next:
    make apply BASE=v0.0.1, which fails the same way: there is no such base."""
    for verb in ("install", "restore"):
        res = two.cli("overlay", verb, "--base", "v0.0.1", "--python", str(venv.python), "--json", expect=2)
        out = json.loads(res.stdout)
        assert out["error"] == f"unknown base 'v0.0.1'; known bases: {NAME}"
        assert out["hint"] == f".venv/bin/tkv-seam overlay {verb} --base {NAME} --python {venv.python}"
    res = two.cli("overlay", "restore", "--base", "v0.0.1", "--json", expect=2)
    assert json.loads(res.stdout)["hint"] == f"make overlay-restore BASE={NAME}"


def test_a_commit_the_tree_lacks_is_named_with_a_way_to_list_them(two, venv):
    """It was git's own 'ambiguous argument … Use '--' to separate paths from revisions' (exit 1);
    a revision that looks like an option is never handed to git as one."""
    for verb, extra in (("stage", []), ("install", ["--python", str(venv.python)])):
        for rev in ("nonesuch", "HEAD~100", "--all", "HEAD:vllm"):
            res = two.cli("overlay", verb, "--base", NAME, *extra, "--commit", rev, "--json", expect=2)
            out = json.loads(res.stdout)
            assert out["error"] == f"--commit {rev}: no such commit in {two.tree}", out
            assert out["hint"] == f"git -C {two.tree} log --oneline -5  (the commits of the tree)"
    assert venv.files() == venv.pristine
