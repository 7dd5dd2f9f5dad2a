"""overlay install/restore attacked by hand: wrong bases, wrong commits (issue 20's overlay items)."""

from __future__ import annotations

import json

from .conftest import NAME
from .test_overlay_venv import base_commit, overlay, two, venv  # noqa: F401  (fixtures)


def test_an_unknown_base_is_a_usage_error_naming_the_known_ones(two, venv):  # noqa: F811
    """It said 'build/vllm-v0.0.1 is not a tree made by tkv-seam apply' (exit 1), next:
    make apply BASE=v0.0.1, which fails the same way: there is no such base."""
    for verb in ("install", "restore"):
        res = two.cli("overlay", verb, "--base", "v0.0.1", "--python", str(venv.python), "--json", expect=2)
        out = json.loads(res.stdout)
        assert out["error"] == f"unknown base 'v0.0.1'; known bases: {NAME}"
        assert out["hint"] == f".venv/bin/tkv-seam overlay {verb} --base {NAME} --python {venv.python}"
    res = two.cli("overlay", "restore", "--base", "v0.0.1", "--json", expect=2)
    assert json.loads(res.stdout)["hint"] == f"make overlay-restore BASE={NAME}"
