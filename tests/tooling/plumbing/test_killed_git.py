"""A git the system kills (a file size limit: SIGXFSZ) is said as such, with a step that helps.

Python ignores SIGXFSZ, but ``subprocess`` gives its children the default action back: under
``ulimit -f`` (or a disk quota set that way) git is killed, prints nothing, and the tool said
``git init -q -b failed in None: `` with the hint ``git -C . status``.
"""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys

from ..fixtures.upstream import NAME


def test_git_killed_by_the_file_size_limit_is_named_with_a_step(project, index):
    project.cli("fetch", "--base", NAME)  # the sdist is in the cache: only git writes now
    limit = 3000  # below git init's hook samples

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    cmd = [sys.executable, "-m", "tkvseam", "--root", str(project.root), "--cache", str(project.cache), "-q"]
    proc = subprocess.run(
        [*cmd, "apply", "--base", NAME, "--json"], capture_output=True, text=True, preexec_fn=small_files
    )
    assert proc.returncode == 1, proc.stderr
    assert "was killed by SIGXFSZ" in proc.stderr and "file size limit" in proc.stderr, proc.stderr
    assert "None" not in proc.stderr and "git -C . status" not in proc.stderr
    assert "next: df -h" in proc.stderr and "ulimit -f" in proc.stderr
    assert json.loads(proc.stdout)["exit_code"] == 1
