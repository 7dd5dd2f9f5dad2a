"""A damaged patch file's hint is a step that runs (issue 26): ``git checkout`` of the file's own path
only when git tracks it, else exporting it again; never ``patches/<name>`` for a file elsewhere."""

from __future__ import annotations

import pytest

from tkvseam import git

from ..fixtures.carrying import git_project
from ..fixtures.queue import make_two_patches


def _damage(path) -> None:
    text = path.read_text()
    path.write_text(text[: text.index("@@")] + "@@ -1,3 +1,4 @@\n garbage\n")


def _hint(project) -> str:
    res = project.apply(expect=None)
    assert res.exit_code != 0 and "corrupt or truncated diff" in res.stderr, res.stderr
    return res.stderr.split("next:", 1)[1]


@pytest.mark.parametrize("tracked", [False, True])
def test_a_damaged_patch_is_restored_from_git_only_when_git_tracks_it(project, tracked):
    names = make_two_patches(project)
    if tracked:
        git_project(project.root)
    patch = project.root / "patches" / names[1]
    good = patch.read_bytes()
    _damage(patch)
    hint = _hint(project)
    assert "make refresh BASE=<base>" in hint
    if not tracked:  # no git here: a checkout would fail
        assert "git checkout" not in hint
        return
    restore = f"git checkout -- {patch}"
    assert f"`{restore}`" in hint
    git.core.run(project.root, *restore.split()[1:])  # as written
    assert patch.read_bytes() == good


def test_a_damaged_patch_git_does_not_track_is_never_hinted_a_checkout(project):
    names = make_two_patches(project)
    git_project(project.root)
    new = project.root / "patches" / "0003-new.patch"
    new.write_bytes((project.root / "patches" / names[1]).read_bytes())
    project.write_series(*names, new.name)
    _damage(new)
    hint = _hint(project)
    assert "git checkout" not in hint and "make refresh BASE=<base>" in hint
