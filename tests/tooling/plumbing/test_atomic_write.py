"""The one atomic write: a crash leaves the old file or the new, and the file keeps its mode."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from tkvseam.fsutil import atomic_write

from ..fixtures.upstream import NEXT_VERSION
from ..fixtures.queue import make_two_patches


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_write_keeps_the_mode_of_the_file_it_replaces_or_takes_the_umask(tmp_path):
    kept = tmp_path / "kept.txt"
    kept.write_text("old\n")
    kept.chmod(0o755)
    atomic_write(kept, "new\n")
    assert kept.read_text() == "new\n" and _mode(kept) == 0o755
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new.txt", b"x")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "new.txt") == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt", "new.txt"]  # no temporary left


def test_a_write_killed_before_the_rename_leaves_the_old_file_whole(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("old\n")
    code = (
        "import os, signal, sys\nfrom tkvseam import fsutil\n"
        "os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        f"fsutil.atomic_write(__import__('pathlib').Path({str(target)!r}), 'new\\n')\n"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == -9
    assert target.read_text() == "old\n"


def test_refresh_keeps_the_mode_of_the_patches_it_rewrites(project):
    make_two_patches(project)
    patch = project.root / "patches/0002-add-mul.patch"
    patch.chmod(0o644)
    git_msg = "add-mul: add mul()\n\nAdds mul(), reworded.\n"
    from tkvseam import git

    git.core.run(project.tree, "commit", "-q", "--amend", "-m", git_msg)
    project.refresh()
    assert "reworded" in patch.read_text() and _mode(patch) == 0o644  # mkstemp + replace made it 0600


def test_pin_keeps_the_mode_of_bases_toml(project):
    bases = project.root / "bases.toml"
    bases.chmod(0o644)
    project.cli("pin", NEXT_VERSION)
    assert f"v{NEXT_VERSION}" in bases.read_text() and _mode(bases) == 0o644
