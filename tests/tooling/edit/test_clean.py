"""``make clean`` / ``tkv-seam clean`` (issue 26, item 2): only what the tool made, never your work.

``make clean`` was ``rm -rf build/*`` but ``build/dropped``: it deleted a stopped port with its
staged resolution and build trees holding commits not yet refreshed, keeping nothing, though every
tool command refuses or keeps exactly this work. Now it is the tool's: such trees are refused by
name with the command that keeps each (nothing is removed), ``FORCE=1`` keeps them in
``build/dropped/`` first, and what the tool did not make is left. The refusal tests failed before.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tkvseam import git

from ..fixtures.portcase import NEXT, port, port_tree, resolve_0001
from ..fixtures.queue import message
from ..fixtures.upstream import NAME


ROOT = Path(__file__).resolve().parents[3]


def _stopped_port_and_unrefreshed_commit(pproject) -> tuple[Path, Path]:
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    resolve_0001(tree)  # staged, not yet continued: the resolution lives only in the index
    pproject.commit_in_tree("vllm/new.py", "x = 1\n", message("new-file", "add new.py"))
    return tree, pproject.tree


def test_clean_refuses_a_stopped_port_and_unrefreshed_commits_naming_what_keeps_them(pproject):
    port_dir, build_tree = _stopped_port_and_unrefreshed_commit(pproject)
    staged = git.index.staged_paths(port_dir)
    head = git.repo.head(build_tree)
    res = pproject.cli("clean", "--json", expect=5)
    out = json.loads(res.stdout)
    assert f"build/port-{NEXT}: a port to {NEXT} is already in progress" in out["error"]
    assert f"build/vllm-{NAME}: " in out["error"] and "new-file: add new.py" in out["error"]
    assert f"`make port VERB=abort TO={NEXT}`" in out["hint"] and f"`make refresh BASE={NAME}`" in out["hint"]
    assert "`make clean FORCE=1`" in out["hint"] and "nothing was removed" in out["error"]
    assert git.index.staged_paths(port_dir) == staged and git.repo.head(build_tree) == head
    assert (build_tree / "vllm/new.py").exists()


def test_clean_force_keeps_each_tree_in_a_bundle_first(pproject, tmp_path):
    port_dir, build_tree = _stopped_port_and_unrefreshed_commit(pproject)
    resolved = (port_dir / "vllm/engine/arg_utils.py").read_text()
    out = json.loads(pproject.cli("clean", "--force", "--json").output)
    assert not port_dir.exists() and not build_tree.exists()
    kept = dict(line.split(" -> ") for line in out["kept"])
    assert set(kept) == {f"build/port-{NEXT}", f"build/vllm-{NAME}"}
    bundle = pproject.root / kept[f"build/port-{NEXT}"]
    assert bundle.parent == pproject.root / "build" / "dropped" and bundle.suffix == ".bundle"
    clone = tmp_path / "back"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(bundle), str(clone)], check=True)
    ref = "refs/tkv-seam/kept/index"
    subprocess.run(["git", "-C", str(clone), "fetch", "-q", str(bundle), f"{ref}:{ref}"], check=True)
    assert git.core.out(clone, "show", f"{ref}:vllm/engine/arg_utils.py") + "\n" == resolved
    again = json.loads(pproject.cli("clean", "--json").output)  # build/dropped/ stays, always
    assert again == {"ok": True, "removed": [], "kept": [], "left": [], "dropped": "build/dropped"}
    assert bundle.exists()


def test_clean_removes_what_the_tool_made_and_leaves_the_rest(project):
    project.apply()
    build = project.root / "build"
    project.cli("overlay", "stage", "--base", NAME)  # build/overlay-<base>, with its marker
    (build / "seamtest" / NAME / "logs").mkdir(parents=True)
    (build / "passes" / NAME).mkdir(parents=True)  # the pass records: the tool's, removed
    (build / "passes" / NAME / "full-series-0123.json").write_text("{}\n")
    (build / f".vllm-{NAME}.tmp-abcd1234").mkdir()  # a killed run's scratch tree
    (build / "notes.txt").write_text("mine\n")
    (build / "mine").mkdir()
    (build / "mine" / "data").write_text("mine too\n")
    (build / "dropped").mkdir()
    (build / "link").symlink_to(project.root)
    out = json.loads(project.cli("clean", "--json").output)
    removed = [f"build/vllm-{NAME}", f"build/overlay-{NAME}", "build/seamtest", "build/passes"]
    assert sorted(out["removed"]) == sorted(removed)
    assert sorted(out["left"]) == [
        "build/link: a symlink (left as it is)",
        "build/mine: not made by tkv-seam (left as it is)",
        "build/notes.txt: not made by tkv-seam (left as it is)",
    ]
    assert sorted(p.name for p in build.iterdir()) == ["dropped", "link", "mine", "notes.txt"]
    assert (build / "mine" / "data").read_text() == "mine too\n"


def test_clean_refuses_a_tree_holding_ignored_files_and_an_edited_stage(project):
    project.apply()
    (project.tree / ".git" / "info").mkdir(exist_ok=True)
    (project.tree / ".git" / "info" / "exclude").write_text(".env\n")
    (project.tree / ".env").write_text("HF_TOKEN=x\n")
    project.cli("overlay", "stage", "--base", NAME)
    stage = project.root / "build" / f"overlay-{NAME}"
    (stage / "manifest.json").write_text("{}\n")
    err = project.cli("clean", expect=5).stderr
    assert (
        "!! .env" in err and f"build/overlay-{NAME}: an overlay stage changed since its step wrote it" in err
    )
    assert (project.tree / ".env").exists() and (stage / "manifest.json").read_text() == "{}\n"


@pytest.mark.parametrize("held", ["ignored file", "branch of yours"])
def test_clean_names_no_refresh_for_what_refresh_cannot_keep(project, held):
    """Refresh keeps commits, not files git ignores nor refs of yours: `make refresh` was the hint,
    it ran (nothing to export) and clean refused again, a loop. FORCE=1 (a bundle) is the way."""
    project.apply()
    if held == "ignored file":
        (project.tree / ".git" / "info").mkdir(exist_ok=True)
        (project.tree / ".git" / "info" / "exclude").write_text(".env\n")
        (project.tree / ".env").write_text("HF_TOKEN=x\n")
    else:  # a branch holding a commit the seam branch does not
        project.commit_in_tree("vllm/mine.py", "y = 2\n", message("mine", "my branch"))
        git.core.run(project.tree, "branch", "mine")
        git.core.run(project.tree, "reset", "-q", "--hard", "HEAD~1")
    out = json.loads(project.cli("clean", "--json", expect=5).stdout)
    assert "refresh" not in out["hint"] and out["hint"].startswith("`make clean FORCE=1`"), out["hint"]
    assert project.refresh().exit_code == 0 and project.cli("clean", expect=5)  # refresh changes nothing
    out = json.loads(project.cli("clean", "--json", "--force").stdout)
    assert out["kept"] and not project.tree.exists()


def test_clean_removes_a_tree_holding_only_what_the_tool_recorded(project):
    """A branch of the base clone's own and an up-to-date tree hold nothing of yours: they go."""
    project.apply()
    out = json.loads(project.cli("clean", "--json").output)
    assert out["removed"] == [f"build/vllm-{NAME}"] and out["kept"] == []


def test_clean_refuses_refs_of_yours_and_what_an_earlier_force_kept(project):
    project.apply()
    project.commit_in_tree("vllm/mine.py", "y = 2\n", message("mine", "my branch"))
    git.core.run(project.tree, "branch", "mine")
    git.core.run(project.tree, "reset", "-q", "--hard", "HEAD~1")
    err = project.cli("clean", expect=5).stderr
    assert "refs/heads/mine" in err
    git.core.run(project.tree, "branch", "-D", "mine")
    (project.tree / "README.md").write_text("edited\n")
    project.apply("--force")  # the edit goes into refs/tkv-seam/dropped/<time>, in the tree
    err = project.cli("clean", expect=5).stderr
    assert "refs/tkv-seam/dropped/" in err


# --------------------------------------------------------------------------- the Makefile's target


@pytest.mark.skipif(not shutil.which("make"), reason="GNU make not installed")
def test_make_clean_is_the_tools_and_takes_force(pproject):
    root = pproject.root
    shutil.copy(ROOT / "Makefile", root / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    tool = root / ".venv" / "bin" / "tkv-seam"
    tool.parent.mkdir(parents=True)
    tool.write_text(f'#!/bin/sh\nexec {sys.executable} -m tkvseam --cache {pproject.cache} "$@"\n')
    tool.chmod(0o755)
    (root / ".venv" / ".done").touch()
    stamp = (root / ".venv" / ".done").stat().st_mtime - 10
    os.utime(root / "pyproject.toml", (stamp, stamp))  # older than the venv's stamp: make builds no venv
    port_dir, _ = _stopped_port_and_unrefreshed_commit(pproject)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "BASE")}
    refused = subprocess.run(["make", "clean"], cwd=root, capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and f"make port VERB=abort TO={NEXT}" in refused.stderr, refused.stderr
    assert port_dir.exists()
    done = subprocess.run(["make", "clean", "FORCE=1"], cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "kept     build/port-" in done.stdout and not port_dir.exists()


def test_clean_killed_after_keeping_a_tree_keeps_it_and_the_next_run_goes_on(pproject, crash_at):
    port_dir, build_tree = _stopped_port_and_unrefreshed_commit(pproject)
    crash_at("tkvseam.tree.kept.bundle", *pproject.argv("clean", "--force"), after=True)
    assert port_dir.is_dir() and build_tree.is_dir()  # kept in a bundle, not yet removed
    (first,) = (pproject.root / "build" / "dropped").glob("*.bundle")
    out = json.loads(pproject.cli("clean", "--force", "--json").output)
    assert len(out["kept"]) == 2 and not port_dir.exists() and not build_tree.exists()
    assert first.exists()


def test_clean_waits_for_a_running_seam_lane_and_removes_its_records(project, monkeypatch):
    from tkvseam.lock import locked

    build = project.root / "build"
    (build / "seamtest" / NAME / "venvs").mkdir(parents=True)
    (build / "passes" / NAME).mkdir(parents=True)
    monkeypatch.setenv("TKV_SEAM_LOCK_TIMEOUT", "0.3")
    with locked(build / "seamtest" / f".{NAME}.lock", "a seam lane's work"):  # as run_lanes holds it
        busy = project.cli("clean", expect=10)
    assert "still holds" in busy.stderr and (build / "seamtest" / NAME / "venvs").is_dir()
    project.cli("clean")
    assert not (build / "seamtest").exists() and not (build / "passes").exists()
