"""The README's edit recipe, run as written on a synthetic applied tree; and what ``apply`` names."""

from __future__ import annotations

import json
import os
import re
import subprocess

from tkvseam import git

from ..fixtures.queue import message
from ..fixtures.hintcheck import ROOT

IDENTITY = {
    "GIT_AUTHOR_NAME": "Seam Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.invalid",
    "GIT_COMMITTER_NAME": "Seam Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.invalid",
}


def recipe() -> list[str]:
    """The commands the README's edit section runs inside the build tree (between `cd build/…` and `cd ../..`)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Edit a patch") :]
    block = section[section.index("```bash\n") + 8 : section.index("```\n", section.index("```bash\n") + 8)]
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("cd build/"))
    end = next(i for i, line in enumerate(lines) if line.startswith("cd ../.."))
    return [line for line in lines[start + 1 : end] if line.strip() and not line.lstrip().startswith("#")]


def two_patches(project):
    project.apply()
    text = (project.tree / "vllm/engine/arg_utils.py").read_text()
    project.commit_in_tree(
        "vllm/engine/arg_utils.py",
        text + "\n\ndef mul(a, b):\n    return a * b\n",
        message("add-mul", "add mul()"),
    )
    project.commit_in_tree(
        "vllm/config/cache.py",
        (project.tree / "vllm/config/cache.py").read_text().replace("# line 20\n", "# line 20 uses mul\n"),
        message("use-mul", "use mul()").replace("Depends-on: none", "Depends-on: add-mul"),
    )
    project.refresh()


def test_the_edit_recipe_runs_as_written_and_refresh_changes_that_patch(project):
    two_patches(project)
    patches = project.root / "patches"
    before = {p.name: p.read_text() for p in patches.glob("*.patch")}
    assert sorted(before) == ["0001-add-mul.patch", "0002-use-mul.patch"]
    commands = recipe()
    assert commands == [
        "git commit -a --fixup=':/^<slug>:'",
        "GIT_SEQUENCE_EDITOR=: git rebase -i --autosquash tkv-seam-base",
    ]
    # a bare ':/<slug>' would have picked the later patch, whose Depends-on names the slug
    assert git.core.out(project.tree, "log", "-1", "--format=%s", ":/add-mul").strip() == "use-mul: use mul()"
    arg_utils = project.tree / "vllm/engine/arg_utils.py"
    arg_utils.write_text(arg_utils.read_text().replace("return a * b", "return b * a"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | IDENTITY
    env.pop("EDITOR", None)
    env.pop("VISUAL", None)
    for command in commands:
        proc = subprocess.run(
            ["bash", "-c", command.replace("<slug>", "add-mul")],
            cwd=project.tree,
            capture_output=True,
            text=True,
            env=env | {"GIT_EDITOR": "false"},  # an editor that opened would fail the run
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
    assert git.core.out(project.tree, "log", "--format=%s", "tkv-seam-base..").split("\n")[:2] == [
        "use-mul: use mul()",
        "add-mul: add mul()",
    ]
    out = project.refresh().output
    assert "updated   patches/0001-add-mul.patch" in out and "1 unchanged, 1 changed" in out
    after = {p.name: p.read_text() for p in patches.glob("*.patch")}
    assert after["0002-use-mul.patch"] == before["0002-use-mul.patch"]
    assert "+    return b * a" in after["0001-add-mul.patch"]
    assert "+    return a * b" not in after["0001-add-mul.patch"]


def test_apply_names_upstreams_commit_beside_the_local_base_commit(project, upstream):
    prefix = upstream.commit[:12]  # bases_toml pins the 9- and 12-digit prefixes: the longest is named
    out = project.apply().output
    local = json.loads(project.apply("--json").output)
    assert re.search(rf"upstream vLLM commit {prefix}; local base commit {local['base_commit'][:12]}", out)
    assert local["upstream_commit_prefix"] == prefix and local["base_commit"] != upstream.commit
