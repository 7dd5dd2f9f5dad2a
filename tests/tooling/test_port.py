"""port: the series onto a newer base, with a per-patch and per-hunk report."""

from __future__ import annotations

import json

from tkvseam import git

from .conftest import NAME, NEXT_VERSION, bases_toml
from .test_apply import make_two_patches

NEXT = f"v{NEXT_VERSION}"


def test_port_reports_moved_hunks_and_conflicts_per_patch(project, releases):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    make_two_patches(project)
    out = json.loads(project.cli("port", "--base", NAME, "--to", NEXT, "--json").output)
    first, second = out["patches"]
    assert first["name"] == "0001-cache-tweak.patch" and first["status"] == "3-way"
    assert [h["status"] for h in first["hunks"]] == ["offset +2"]
    assert second["status"] == "conflict" and second["conflicts"] == ["vllm/engine/arg_utils.py"]
    assert second["hunks"][0]["status"] == "fuzz 1"  # the changed line is its last context line
    tree = project.root / "build" / f"port-{NEXT}"
    # the port tree holds the new base plus the patches that went in, and no conflict markers
    assert git.out(tree, "log", "--format=%s", "-1") == "cache-tweak: mark line 10"
    assert "line 10 (seam)" in (tree / "vllm/config/cache.py").read_text()
    assert "<<<<<<<" not in (tree / "vllm/engine/arg_utils.py").read_text()


def test_port_stop_leaves_the_conflict_to_resolve_then_refresh_rebases(project, releases):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    make_two_patches(project)
    project.cli("port", "--base", NAME, "--to", NEXT, "--stop")
    tree = project.root / "build" / f"port-{NEXT}"
    text = (tree / "vllm/engine/arg_utils.py").read_text()
    assert "<<<<<<<" in text
    resolved = (
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return -(b - a)\n\n\n"
        "def mul(a, b):\n    return a * b\n"
    )
    (tree / "vllm/engine/arg_utils.py").write_text(resolved)
    msg = (project.root / "patches/0002-add-mul.patch").read_text()
    assert "add-mul: add mul()" in msg
    git.run(tree, "add", "vllm/engine/arg_utils.py")
    git.run(
        tree,
        "-c",
        "user.name=Seam Dev",
        "-c",
        "user.email=dev@example.invalid",
        "commit",
        "-q",
        "-m",
        "add-mul: add mul()\n\nAdds mul().\n\nVerdict: still needed\nReason: upstream lacks it\n"
        "Upstream: upstreamable\n"
        "Depends-on: cache-tweak\nTests: tests/test_math.py::test_add\n",
    )
    project.cli("refresh", "--base", NEXT, "--tree", str(tree), "--force")
    (project.root / "bases.toml").write_text(bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION))
    out = json.loads(project.cli("apply", "--base", NEXT, "--json").output)
    assert (
        len(out["patches"]) == 2
        and "return a * b" in (project.root / f"build/vllm-{NEXT}/vllm/engine/arg_utils.py").read_text()
    )
