"""overlay install/restore attacked by hand: wrong bases, wrong commits (issue 20's overlay items)."""

from __future__ import annotations

import json

from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml


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


def test_a_tree_of_another_base_is_refused_before_anything_is_staged(two, venv, releases):
    """``--tree`` naming a tree of another base (or a port in progress) is refused by the one tree
    rule (exit 5), naming the tree's base. It was staged: ``overlay stage`` wrote the other base's
    files under this base's name (exit 0), and install told to reinstall the venv's vLLM as the
    other release, the venv being right and the tree wrong."""
    other_name = f"v{NEXT_VERSION}"
    root = two.root
    (root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[other_name], name=other_name, version=NEXT_VERSION)
    )
    (root / "patches" / other_name).mkdir()
    (root / "patches" / other_name / "series").write_text("")
    two.cli("apply", "--base", other_name)
    other = root / "build" / f"vllm-{other_name}"
    for verb, extra in (
        ("stage", []),
        ("install", ["--python", str(venv.python)]),
        ("restore", ["--python", str(venv.python)]),
    ):
        res = two.cli("overlay", verb, "--base", NAME, "--tree", str(other), *extra, "--json", expect=5)
        out = json.loads(res.stdout)
        assert f"is a tree of {other_name}, not {NAME}" in out["error"], out
        assert "pip install" not in out["hint"] and f"--base {other_name}, the tree's own" in out["hint"]
    assert venv.files() == venv.pristine and not (root / "build" / f"overlay-{NAME}").exists()
