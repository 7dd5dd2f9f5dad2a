"""overlay: the file set comes from the patches; the installer checks before it replaces."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tkvseam import git
from tkvseam.errors import SeamError
from tkvseam.queue.footprint import overlay_paths
from tkvseam.overlay.stage import stage
from tkvseam.overlay.install import STATE, OverlayError, install
from tkvseam.queue.series import read_series

from ..fixtures.queue import message, make_two_patches


@pytest.fixture
def staged(project, tmp_path):
    """Two patches applied; a fake site-packages holding the pristine vllm files."""
    make_two_patches(project)
    patches = read_series(project.root).load()
    paths = overlay_paths(patches)
    site = tmp_path / "site"
    state = json.loads((project.tree / ".git" / "tkv-seam.json").read_text())
    for p in paths:
        (site / p).parent.mkdir(parents=True, exist_ok=True)
        (site / p).write_bytes(git.core.run(project.tree, "show", f"{state['base_commit']}:{p}").stdout)
    return project, paths, site, state


def test_overlay_files_are_derived_from_the_patches(staged):
    _, paths, _, _ = staged
    assert paths == ["vllm/config/cache.py", "vllm/engine/arg_utils.py"]


def test_manifest_lists_pristine_and_patched_sha256(staged, tmp_path):
    project, paths, _, state = staged
    manifest = stage(project.tree, paths, tmp_path / "stage")
    assert manifest.base == "v9.9.9" and manifest.commit == state["head"]
    for entry in manifest.files:
        assert entry.pristine_sha256 != entry.patched_sha256
        assert (tmp_path / "stage/overlay" / entry.path).exists()
    assert (tmp_path / "stage/overlay_install.py").exists()


def test_install_replaces_then_restore_puts_pristine_back(staged, tmp_path):
    project, paths, site, state = staged
    pristine = {p: (site / p).read_bytes() for p in paths}
    stage(project.tree, paths, tmp_path / "patched")
    stage(project.tree, paths, tmp_path / "base", state["base_commit"])
    (site / "vllm/config/__pycache__").mkdir()
    stale = site / "vllm/config/__pycache__/cache.cpython-311.pyc"
    stale.write_bytes(b"stale")
    assert install(tmp_path / "patched", site / "vllm", "v9.9.9", keep_state=True) == paths
    assert "line 10 (seam)" in (site / "vllm/config/cache.py").read_text()
    assert stale.read_bytes() != b"stale"  # dropped and compiled afresh
    assert set(json.loads((site / "vllm" / STATE).read_text())["files"]) == set(paths)
    # a second overlay over our own files is allowed; restore puts the pristine bytes back
    install(tmp_path / "base", site / "vllm", "v9.9.9", keep_state=True)
    assert {p: (site / p).read_bytes() for p in paths} == pristine
    assert not (site / "vllm" / STATE).exists()


def test_install_refuses_a_file_that_is_not_pristine_before_touching_any(staged, tmp_path):
    project, paths, site, _ = staged
    stage(project.tree, paths, tmp_path / "patched")
    (site / paths[1]).write_text("someone else's edit\n")
    with pytest.raises(OverlayError, match=f"base is not vLLM v9.9.9: {paths[1]} has sha256"):
        install(tmp_path / "patched", site / "vllm", "v9.9.9", keep_state=True)
    assert "line 10 (seam)" not in (site / paths[0]).read_text()


def test_installer_runs_standalone_and_names_the_first_bad_file(staged, tmp_path):
    project, paths, site, _ = staged
    stage(project.tree, paths, tmp_path / "patched")
    (site / paths[0]).write_text("not pristine\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(tmp_path / "patched/overlay_install.py"),
            str(tmp_path / "patched"),
            "--vllm-dir",
            str(site / "vllm"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert f"base is not vLLM v9.9.9: {paths[0]}" in proc.stderr


def test_a_patch_creating_a_vllm_file_cannot_be_overlaid(project):
    project.apply()
    project.commit_in_tree("vllm/brand_new.py", "x = 1\n", message("new-module"))
    project.refresh()
    with pytest.raises(SeamError, match="vllm/brand_new.py: the overlay replaces existing files only"):
        overlay_paths(read_series(project.root).load())


def test_install_without_a_record_replaces_the_files_and_keeps_no_state(staged, tmp_path):
    # the image build installs once, without --keep-state: no record, no copies beside it
    project, paths, site, _ = staged
    stage(project.tree, paths, tmp_path / "patched")
    assert install(tmp_path / "patched", site / "vllm", "v9.9.9", keep_state=False) == paths
    assert "line 10 (seam)" in (site / "vllm/config/cache.py").read_text()
    assert not (site / "vllm" / STATE).exists()
