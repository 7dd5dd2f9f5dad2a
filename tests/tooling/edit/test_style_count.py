"""The style gate counts problems, not the lines ruff prints (issue 25: 3 errors were "31 problem(s)")."""

from __future__ import annotations

import json
import subprocess

from ..fixtures.hintcheck import problems
from ..fixtures.queue import message
from ..fixtures.upstream import NAME

BAD = "def f():\n    return alpha\n\n\ndef g():\n    return beta\n\n\ndef h():\n    return gamma\n"


def test_three_ruff_errors_are_three_problems(project):
    project.apply()
    project.commit_in_tree("vllm/bad.py", BAD, message("bad-names", "add f, g, h"))
    project.refresh()
    res = project.cli("stylecheck", "--base", "v9.9.9", expect=6)
    assert res.stdout.strip().splitlines()[-1] == "stylecheck: 3 problem(s)"
    problems = json.loads(project.cli("stylecheck", "--base", "v9.9.9", "--json", expect=6).output)[
        "problems"
    ]
    assert [p.split(": ", 1)[1].split(" ", 1)[0] for p in problems] == [
        "vllm/bad.py:2:12:",
        "vllm/bad.py:6:12:",
        "vllm/bad.py:10:12:",
    ]
    assert all("F821 Undefined name" in p for p in problems)


def test_a_style_problem_ends_with_the_bases_ruff_command_that_fixes_it(project):
    """Issue 37: the style gate's problems ended without next:. The hint's ruff command runs as
    written from the project root, with the base's pinned ruff, and fixes what ruff can fix."""
    project.apply()
    project.commit_in_tree("vllm/messy.py", "import os\nx   =  1\n", message("messy", "add messy.py"))
    project.refresh()
    res = project.cli("stylecheck", "--base", NAME, expect=6)
    hint = res.stderr.strip().splitlines()[-1]
    assert hint.startswith("next: `") and "vllm/messy.py" in hint
    assert problems(hint.removeprefix("next: ")) == []
    data = json.loads(project.cli("stylecheck", "--base", NAME, "--json", expect=6).stdout)
    assert data["hint"] == hint.removeprefix("next: ")
    assert "'--fixup=:/^messy:'" in hint  # the one patch that changes the file, named (not <slug>)
    fix = hint.split("`")[1]
    # the tree's own configuration only: it has no ruff table, so ruff's defaults (issue 34)
    assert f"build/vllm-{NAME}/vllm/messy.py" in fix and " check --isolated --fix " in fix
    subprocess.run(["bash", "-c", fix], cwd=project.root, check=True, capture_output=True)
    assert (project.tree / "vllm/messy.py").read_text() == "x = 1\n"
    assert project.cli("stylecheck", "--base", NAME).stdout.strip() == "stylecheck: ok"


def test_a_file_a_later_patch_deletes_is_no_problem(project):
    """0001 adds vllm/tmp_x.py, 0002 deletes it: the queue leaves no such file, so there is nothing
    to check (it was `E902 No such file or directory`, a problem, and a fix hint on a missing file;
    the carry's check of the queue as written said NOT carried for it)."""
    from tkvseam import git

    project.apply()
    project.commit_in_tree("vllm/tmp_x.py", "X = 1\n", message("add-x", "add x"))
    git.core.run(project.tree, "rm", "-q", "vllm/tmp_x.py")
    git.index.commit(project.tree, message("drop-x", "drop x"), "Seam Dev <dev@example.invalid>")
    project.refresh()
    assert project.cli("stylecheck", "--base", NAME).stdout.strip() == "stylecheck: ok"


def test_a_style_problem_in_a_file_two_patches_change_lists_both_for_the_fixup(project):
    project.apply()
    project.commit_in_tree("vllm/shared.py", "x = 1\n", message("first", "add shared.py"))
    project.commit_in_tree("vllm/shared.py", "x = 1\ny   =  2\n", message("second", "more in shared.py"))
    project.refresh()
    hint = project.cli("stylecheck", "--base", NAME, expect=6).stderr.strip().splitlines()[-1]
    assert "'--fixup=:/^<slug>:'" in hint  # a format problem names the file, not a line
    assert "(<slug>: the patch whose lines you change; vllm/shared.py: one of first, second)" in hint


def test_a_lint_problem_on_a_line_of_one_of_two_patches_names_that_patch_for_the_fixup(project):
    """The walkthrough's gate hint said `--fixup=:/^<slug>:`, which does not run as written, for a
    problem on a line one patch wrote: git blame in the tree names that patch."""
    project.apply()
    project.commit_in_tree("vllm/shared.py", "x = 1\n", message("first", "add shared.py"))
    project.commit_in_tree("vllm/shared.py", "import os\n\nx = 1\n", message("second", "import os"))
    project.refresh()
    err = project.cli("stylecheck", "--base", NAME, expect=6).stderr
    assert "F401" in err and "shared.py:1:" in err
    hint = err.strip().splitlines()[-1]
    assert "'--fixup=:/^second:'" in hint and "<slug>" not in hint


def test_problems_on_lines_of_two_patches_in_two_files_fold_each_into_its_own_patch(project):
    """A hostile pass followed `commit -a --fixup` for problems of two patches in two files: both
    fixes went into one patch. Each file's fix now goes into the patch whose line it is."""
    project.apply()
    project.commit_in_tree("vllm/a.py", "x = 1\n", message("first", "add a.py"))
    project.commit_in_tree("vllm/b.py", "y = 1\n", message("second", "add b.py"))
    project.commit_in_tree("vllm/a.py", "import os\n\nx = 1\n", message("third", "a.py imports os"))
    project.commit_in_tree("vllm/b.py", "import re\n\ny = 1\n", message("fourth", "b.py imports re"))
    project.refresh()
    hint = project.cli("stylecheck", "--base", NAME, expect=6).stderr.strip().splitlines()[-1]
    assert "git -C build/vllm-v9.9.9 commit '--fixup=:/^third:' -- vllm/a.py" in hint
    assert "git -C build/vllm-v9.9.9 commit '--fixup=:/^fourth:' -- vllm/b.py" in hint
    assert "commit -a" not in hint and "<slug>" not in hint


def test_a_problem_on_a_line_no_patch_wrote_is_not_pinned_on_a_commit_that_is_no_patch(project):
    """A line a `wip` commit in the tree wrote (not refreshed): `--fixup=:/^wip:` does not run as
    written; the patches that change the file are listed instead."""
    project.apply()
    project.commit_in_tree("vllm/shared.py", "x = 1\n", message("first", "add shared.py"))
    project.commit_in_tree("vllm/shared.py", "x = 1\ny = 2\n", message("second", "more"))
    project.refresh()
    git_commit = project.tree / "vllm/shared.py"
    git_commit.write_text("import os\n\nx = 1\ny = 2\n")
    from tkvseam import git

    git.index.commit(project.tree, "wip\n", "Seam Dev <dev@example.invalid>", paths=["vllm/shared.py"])
    hint = project.cli("stylecheck", "--base", NAME, expect=6).stderr.strip().splitlines()[-1]
    assert "wip" not in hint and "one of first, second" in hint


# A stand-in for ruff 0.17 (v0.34.0's pin) answering `--version` with the synthetic base's pin: what
# 0.17 prints for a file `format --check` would change, a diagnostic with a code frame, or one line
# with `--output-format concise` (0.14 prints "Would reformat: <path>" either way).
RUFF_0_17 = """#!/bin/sh
case "$*" in
  --version) echo "ruff 0.14.0" ;;
  check*) exit 0 ;;
  *"--output-format concise"*) echo "vllm/messy.py:2:4: unformatted: File would be reformatted"; exit 1 ;;
  format*) printf 'unformatted: File would be reformatted\\n --> vllm/messy.py:2:4\\n  |\\n1 | x = 1\\n  - y   =  2\\n2 + y = 2\\n  |\\n\\n'; exit 1 ;;
esac
"""


def test_a_file_ruff_0_17_would_reformat_is_one_problem_naming_that_file(project, tmp_path):
    """With ruff 0.17's code frames the gate counted each frame line as a problem (9 for one file)
    and its next: command handed ruff "unformatted" and the frame's line numbers as files to fix."""
    project.apply()
    project.commit_in_tree("vllm/messy.py", "x = 1\ny   =  2\n", message("messy", "add messy.py"))
    project.refresh()
    ruff = tmp_path / "ruff"
    ruff.write_text(RUFF_0_17)
    ruff.chmod(0o755)
    data = json.loads(
        project.cli("stylecheck", "--base", NAME, "--ruff", str(ruff), "--json", expect=6).stdout
    )
    assert data["problems"] == ["ruff format: vllm/messy.py:2:4: unformatted: File would be reformatted"]
    fix = data["hint"].split("`")[1]
    assert fix.split("; ")[1].split()[-1] == f"build/vllm-{NAME}/vllm/messy.py"
    assert fix.split("; ")[0].split()[-1] == f"build/vllm-{NAME}/vllm/messy.py"
