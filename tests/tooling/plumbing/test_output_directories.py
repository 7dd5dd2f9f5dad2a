"""Output directories (issue 20, item 1): created by the tool, or refused unless they are a
previous output of the same step that nobody changed since; nothing else is ever deleted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tkvseam.image import build as image
from tkvseam.errors import RefusedError
from tkvseam.overlay.stage import stage

from ..fixtures.upstream import NAME

MARKER = ".tkv-seam-made.json"  # outputs.MARKER


def stage_cli(project, out, *extra, expect=0):
    return project.cli("overlay", "stage", "--base", NAME, "--out", str(out), *extra, expect=expect)


def test_stage_creates_its_directory_and_replaces_only_its_own_output(two, tmp_path):
    out = tmp_path / "deep" / "stage"
    stage_cli(two, out)
    assert (out / "manifest.json").exists() and (out / MARKER).exists()
    first = json.loads((out / "manifest.json").read_text())
    stage_cli(two, out, "--commit", "HEAD~1")  # a previous stage, unchanged: replaced
    second = json.loads((out / "manifest.json").read_text())
    assert first["commit"] != second["commit"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MARKER, "manifest.json", "overlay", "overlay_install.py"]
    )


@pytest.mark.parametrize("where", ["home", "project", "build"])
def test_stage_refuses_a_directory_it_did_not_make_and_deletes_nothing(two, tmp_path, where):
    two.apply()  # a build tree under build/ to lose
    out = {"home": tmp_path / "mywork", "project": two.root, "build": two.root / "build"}[where]
    out.mkdir(exist_ok=True)
    (out / "notes.txt").write_text("mine\n")
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    err = stage_cli(two, out, expect=5).stderr
    assert f"{out} exists and is not an overlay stage tkv-seam made" in err and "nothing was deleted" in err
    if where == "project":  # never "move the project aside"
        assert "is the project" in err and "next: mv " not in err
    else:  # a directory that is not the tool's is never to be moved (issue 26, item 6; it said `mv`)
        assert "notes.txt" in err and "next: mv " not in err and "choose another" in err
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    assert json.loads(stage_cli(two, out, "--json", expect=5).stdout) | {"error": "", "hint": ""} == {
        "ok": False,
        "error": "",
        "hint": "",
        "exit_code": 5,
    }
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    assert (out / "notes.txt").read_text() == "mine\n"


def test_stage_refuses_its_own_output_once_someone_added_or_edited_a_file(two, tmp_path):
    out = tmp_path / "stage"
    stage_cli(two, out)
    (out / "overlay" / "mine.txt").write_text("mine\n")
    err = stage_cli(two, out, expect=5).stderr
    assert "added since the tool wrote it: overlay/mine.txt" in err
    (out / "overlay" / "mine.txt").unlink()
    (out / "manifest.json").write_text("{}\n")
    assert "edited since the tool wrote it: manifest.json" in stage_cli(two, out, expect=5).stderr
    assert (out / "manifest.json").read_text() == "{}\n"


def test_stage_refuses_a_symlink_and_a_symlink_inside(two, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("keep\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert "(a symlink); nothing was written" in stage_cli(two, link, expect=5).stderr
    assert sorted(os.listdir(target)) == ["keep.txt"]
    out = tmp_path / "stage"
    stage_cli(two, out)
    (out / "overlay" / "vllm" / "out").symlink_to(target)
    assert "overlay/vllm/out (a symlink)" in stage_cli(two, out, expect=5).stderr
    assert (target / "keep.txt").read_text() == "keep\n"


def test_a_stage_killed_half_way_is_recognised_and_replaced(two, tmp_path):
    """A real process killed (SIGKILL) right after it wrote the first overlay file."""
    out = tmp_path / "stage"
    code = (
        "import os, signal, sys, pathlib\n"
        "from tkvseam import overlay\n"
        "real = pathlib.Path.write_bytes\n"
        "def write(self, data):\n"
        "    real(self, data)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "pathlib.Path.write_bytes = write\n"
        "from tkvseam.cli.main import main\n"
        "main(sys.argv[1:])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--root", str(two.root), "--cache", str(two.cache), "-q"]
        + ["overlay", "stage", "--base", NAME, "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == -9, proc.stderr
    assert json.loads((out / MARKER).read_text())["files"] is None  # not sealed
    assert not (out / "manifest.json").exists()
    stage_cli(two, out)
    assert json.loads((out / MARKER).read_text())["files"]


def test_a_stage_without_its_marker_is_refused_and_an_empty_directory_taken(two, tmp_path):
    """No tkv-seam was released before output markers: a stage without one is not the tool's."""
    out = tmp_path / "stage"
    stage(two.tree, ["vllm/config/cache.py"], out)
    (out / MARKER).unlink()
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert "no .tkv-seam-made.json" in stage_cli(two, out, expect=5).stderr
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    empty = tmp_path / "empty"
    empty.mkdir()  # nothing to lose
    stage_cli(two, empty)
    assert (empty / "manifest.json").exists() and (empty / MARKER).exists()


def test_the_image_context_is_refused_when_it_is_not_ours(two):
    context = two.root / "build" / f"image-{NAME}"
    context.mkdir(parents=True)
    (context / "notes.txt").write_text("mine\n")
    from tkvseam.bases.pins import load_bases

    b = load_bases(two.root / "bases.toml")[NAME]
    (two.root / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(RefusedError, match="is not an image build context tkv-seam made"):
        image.stage_context(two.root, two.tree, context, b)
    assert (context / "notes.txt").read_text() == "mine\n"
    (context / "notes.txt").unlink()
    image.stage_context(two.root, two.tree, context, b)  # an empty directory: nothing to lose
    image.stage_context(two.root, two.tree, context, b)  # its own context: replaced
    assert (context / "tkv-seam" / "manifest.json").exists()


def test_watch_report_refuses_a_drift_directory_it_did_not_make(project, index, tmp_path):
    drift = project.root / "build" / "drift"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep\n")
    drift.parent.mkdir(parents=True)
    drift.symlink_to(elsewhere)
    res = project.cli("watch", "--report", "--json", expect=5)
    assert "(a symlink)" in res.stderr and json.loads(res.stdout)["exit_code"] == 5
    assert sorted(os.listdir(elsewhere)) == ["keep.txt"]
    drift.unlink()
    project.cli("watch", "--report", expect=11)
    project.cli("watch", "--report", expect=11)  # its own reports: replaced
    (drift / "mine.md").write_text("mine\n")
    assert "added since the tool wrote it: mine.md" in project.cli("watch", "--report", expect=5).stderr
