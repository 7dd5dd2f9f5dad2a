"""What is kept never goes through a symlink, and a linked bases.toml is never replaced (issue 26, item 8).

A symlinked ``build/dropped`` put ``port abort``'s bundle, ``retire``'s copy and ``clean``'s
bundles outside the project; a symlinked ``.git/tkv-seam-dropped`` of a tree took what a switch set
aside; ``pin`` replaced a symlinked ``bases.toml`` by a plain file, silently (and refresh a
symlinked patch file, found this round). Each is refused
(exit 5) before anything changes; these failed before. ``build/`` itself may be a link (another
disk): the trees and what is kept of them go there together, as documented (the last test).
"""

from __future__ import annotations

import json
import os
import subprocess

from tkvseam import git

from ..fixtures.hintcheck import commands
from ..fixtures.portcase import NEXT, port, port_tree
from ..fixtures.queue import make_one_patch, message
from ..fixtures.upstream import bases_toml, NAME, NEXT_VERSION


def _dropped_elsewhere(project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project.root / "build").mkdir(exist_ok=True)
    (project.root / "build" / "dropped").symlink_to(elsewhere)
    return elsewhere


def test_port_abort_refuses_a_symlinked_build_dropped_and_keeps_the_port(pproject, tmp_path):
    port(pproject, "start", expect=12)
    elsewhere = _dropped_elsewhere(pproject, tmp_path)
    err = port(pproject, "abort", expect=5).stderr
    assert "build/dropped is a symlink" in err and "next: make it a directory" in err
    assert port_tree(pproject).is_dir() and os.listdir(elsewhere) == []
    assert json.loads(port(pproject, "status", "--json").output)["current"] == "0001-add-mul.patch"


def test_clean_force_refuses_a_symlinked_build_dropped_before_removing_anything(pproject, tmp_path):
    pproject.commit_in_tree("vllm/new.py", "x = 1\n", message("new-file", "add new.py"))
    pproject.cli("overlay", "stage", "--base", NAME)
    elsewhere = _dropped_elsewhere(pproject, tmp_path)
    err = pproject.cli("clean", "--force", expect=5).stderr
    assert "build/dropped is a symlink" in err
    assert (pproject.tree / "vllm/new.py").exists() and (pproject.root / "build" / f"overlay-{NAME}").is_dir()
    assert os.listdir(elsewhere) == []


def test_retire_keeps_nothing_through_a_link(project, releases, tmp_path):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[f"v{NEXT_VERSION}"], name=NEXT, version=NEXT_VERSION)
    )
    queue = project.root / "patches" / NEXT
    queue.mkdir()
    (queue / "series").write_text("")
    elsewhere = _dropped_elsewhere(project, tmp_path)
    before = (project.root / "bases.toml").read_bytes()
    err = project.cli("retire", NEXT, "--force", expect=5).stderr
    assert "build/dropped is a symlink" in err
    assert (queue / "series").exists() and (project.root / "bases.toml").read_bytes() == before
    assert os.listdir(elsewhere) == []


def test_a_switch_never_sets_aside_through_a_symlinked_kept_directory(project, tmp_path):
    project.apply()
    project.commit_in_tree("vllm/added.py", "a = 1\n", message("add-file", "add a file"))
    project.refresh()
    git.core.run(project.tree, "reset", "-q", "--hard", "HEAD~1")
    project.apply("--force")  # back at the queue's head, in place
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project.tree / ".git" / "tkv-seam-dropped").symlink_to(elsewhere)
    (project.tree / ".git" / "info").mkdir(exist_ok=True)
    (project.tree / ".git" / "info" / "exclude").write_text("vllm/added2.py\n")
    p = project.root / "patches" / "0001-add-file.patch"
    p.write_text(p.read_text().replace("vllm/added.py", "vllm/added2.py"))
    (project.tree / "vllm" / "added2.py").write_text("mine\n")  # ignored, where the patch adds a file
    err = project.apply("--force", expect=5).stderr
    assert "tkv-seam-dropped is a symlink" in err and os.listdir(elsewhere) == []
    assert (project.tree / "vllm" / "added2.py").read_text() == "mine\n"


def test_pin_refuses_a_symlinked_bases_file_before_downloading(project, tmp_path):
    real = tmp_path / "shared-bases.toml"
    os.replace(project.root / "bases.toml", real)
    (project.root / "bases.toml").symlink_to(real)
    before = real.read_bytes()
    res = project.cli("pin", NEXT_VERSION, "--json", expect=5)
    out = json.loads(res.stdout)
    assert "is a symlink" in out["error"] and f"--bases {real}" in out["hint"]
    assert (project.root / "bases.toml").is_symlink() and real.read_bytes() == before
    assert not (project.cache / "sdist").exists()  # nothing was downloaded


def test_a_linked_patch_file_is_refused_before_refresh_replaces_the_link(project, tmp_path):
    """A patch file that is a link (a patch shared with another checkout): refresh replaced the
    link by a plain file, silently, and the file it named kept the old patch. Refused (exit 5) as a
    linked queue path is; the hint puts the file itself there and refresh goes on."""
    make_one_patch(project)
    patch = project.root / "patches" / "0001-cache-tweak.patch"
    shared = tmp_path / "shared.patch"
    os.replace(patch, shared)
    patch.symlink_to(shared)
    before = shared.read_bytes()
    cache = project.tree / "vllm/config/cache.py"
    cache.write_text(cache.read_text().replace("line 12\n", "line 12 (seam)\n"))
    git.core.run(
        project.tree,
        "-c",
        "user.name=Seam Dev",
        "-c",
        "user.email=dev@example.invalid",
        "commit",
        "-qa",
        "--amend",
        "--no-edit",
    )
    res = project.refresh(expect=5)
    assert "a symlink" in res.stderr and patch.is_symlink() and shared.read_bytes() == before
    fix = commands(res.stderr.split("next: ", 1)[1])[0]
    subprocess.run(fix, shell=True, check=True, cwd=project.root)
    assert (
        "1 changed" in project.refresh().stdout and "(seam)" in patch.read_text() and not patch.is_symlink()
    )


def test_a_linked_build_directory_takes_the_trees_and_what_is_kept_of_them(pproject, tmp_path):
    """Documented (docs/design.md): build/ may be a link; a port's bundle goes beside its tree."""
    disk = tmp_path / "disk"
    os.replace(pproject.root / "build", disk)
    (pproject.root / "build").symlink_to(disk)
    port(pproject, "start", expect=12)
    out = json.loads(port(pproject, "abort", "--json").output)
    assert os.path.realpath(out["bundle"]).startswith(str(disk / "dropped"))
