"""port: the series onto a newer base, with a per-patch and per-hunk report."""

from __future__ import annotations

import json

from tkvseam import git

from .conftest import NAME, NEXT_VERSION, bases_toml, message
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
        "Depends-on: cache-tweak\nTests: tests/test_math.py::test_add\n",
    )
    project.cli("refresh", "--base", NEXT, "--tree", str(tree), "--force")
    (project.root / "bases.toml").write_text(bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION))
    out = json.loads(project.cli("apply", "--base", NEXT, "--json").output)
    assert (
        len(out["patches"]) == 2
        and "return a * b" in (project.root / f"build/vllm-{NEXT}/vllm/engine/arg_utils.py").read_text()
    )


# --------------------------------------------------------------------------- issue 8, item 1:
# port may only remove a tree it made, holding nothing the user added


def _two_bases(project, releases):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )


def test_port_refuses_to_wipe_an_unrelated_directory(project, releases):
    _two_bases(project, releases)
    mine = project.root / "mine"
    (mine / "src").mkdir(parents=True)
    (mine / "notes.txt").write_text("precious\n")
    err = project.cli("port", "--base", NAME, "--to", NEXT, "--tree", str(mine), expect=5).stderr
    assert f"{mine} exists and is not a tree tkv-seam made" in err and "notes.txt" in err and "src" in err
    assert "next: mv" in err
    assert (mine / "notes.txt").read_text() == "precious\n"


def test_port_refuses_a_build_tree_holding_an_unrefreshed_commit(project, releases):
    _two_bases(project, releases)
    project.apply()
    project.commit_in_tree("vllm/new.py", "x = 1\n", message("new-file", "add new.py"))
    head = git.head(project.tree)
    err = project.cli("port", "--base", NAME, "--to", NEXT, "--tree", str(project.tree), expect=5).stderr
    assert "new-file: add new.py" in err and head[:12] in err
    assert git.head(project.tree) == head and (project.tree / "vllm/new.py").exists()


def test_port_refuses_to_restart_over_a_stopped_port_or_a_committed_resolution(project, releases):
    _two_bases(project, releases)
    make_two_patches(project)
    project.cli("port", "--base", NAME, "--to", NEXT, "--stop")
    tree = project.root / "build" / f"port-{NEXT}"
    err = project.cli("port", "--base", NAME, "--to", NEXT, expect=5).stderr
    assert "port in progress" in err and "0002-add-mul.patch" in err
    (tree / "vllm/engine/arg_utils.py").write_text("def add(a, b):\n    return a + b\n")  # resolved
    git.commit(tree, "add-mul: add mul()\n", "Seam Dev <dev@example.invalid>")
    resolution = git.head(tree)
    project.cli("port", "--base", NAME, "--to", NEXT, expect=5)
    assert git.head(tree) == resolution


def test_port_refuses_a_finished_port_tree_with_a_user_commit_and_replaces_an_untouched_one(
    project, releases
):
    _two_bases(project, releases)
    make_two_patches(project)
    project.cli("port", "--base", NAME, "--to", NEXT)
    tree = project.root / "build" / f"port-{NEXT}"
    project.cli("port", "--base", NAME, "--to", NEXT)  # its own, untouched: replaced
    (tree / "vllm/extra.py").write_text("y = 2\n")
    git.commit(tree, "extra: my resolution\n", "Seam Dev <dev@example.invalid>", paths=["vllm/extra.py"])
    err = project.cli("port", "--base", NAME, "--to", NEXT, expect=5).stderr
    assert "extra: my resolution" in err
    assert (tree / "vllm/extra.py").read_text() == "y = 2\n"
