"""CLI surface: help on every command, refresh refusals, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import tkvseam
from tkvseam import git
from tkvseam.cli.main import main

from ..fixtures.queue import message, make_two_patches
from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml

NEXT = f"v{NEXT_VERSION}"


@pytest.mark.parametrize("command", sorted(main.commands))
def test_every_command_has_help(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output
    assert main.commands[command].help


def test_refresh_refuses_uncommitted_work(project):
    make_two_patches(project)
    project.apply("--force")
    (project.tree / "vllm/engine/arg_utils.py").write_text("wip\n")
    before = (project.root / "patches/0002-add-mul.patch").read_bytes()
    err = project.refresh(expect=5).stderr
    assert "uncommitted changes" in err and "commit" in err
    assert (project.root / "patches/0002-add-mul.patch").read_bytes() == before


def test_refresh_refuses_to_overwrite_edited_patch_files(project):
    make_two_patches(project)
    p = project.root / "patches/0001-cache-tweak.patch"
    p.write_text(p.read_text().replace("Changes things.", "Edited by hand."))
    err = project.refresh(expect=5).stderr
    assert "patches/ or series changed since the tree was applied" in err
    assert "Edited by hand." in p.read_text()


def test_refresh_over_edited_patches_and_new_tree_commits_hints_an_apply_that_runs(project):
    """A walkthrough edited a patch header while the tree held a new commit: refresh said `apply`,
    apply refused (the commit is work) and said `refresh`. The hint now says the apply that runs,
    and that apply keeps the commit in a named ref."""
    make_two_patches(project)
    project.commit_in_tree("vllm/extra.py", "y = 2\n", message("extra-file", "add extra.py"))
    new_commit = git.repo.head(project.tree)
    p = project.root / "patches/0001-cache-tweak.patch"
    p.write_text(p.read_text().replace("Changes things.", "Edited by hand."))
    hint = project.refresh(expect=5).stderr.split("keep the patch edits: `", 1)[1].split("`", 1)[0]
    assert hint == f"make apply BASE={NAME} FORCE=1"
    err = project.apply("--force").stderr
    ref = next(w for w in err.split() if w.startswith("refs/tkv-seam/dropped/"))
    assert git.core.run(project.tree, "rev-parse", ref).stdout.decode().strip() == new_commit
    assert "Edited by hand." in p.read_text()


def test_refresh_over_a_deleted_patch_file_hints_putting_it_back_and_that_runs(project):
    """A hostile pass deleted a patch file (still in series) beside a new tree commit: refresh said
    `make apply FORCE=1`, which fails on the missing file. It now says how to put it back."""
    from ..fixtures.carrying import git_project

    make_two_patches(project)
    git_project(project.root)
    project.commit_in_tree("vllm/extra.py", "y = 2\n", message("extra-file", "add extra.py"))
    gone = project.root / "patches/0002-add-mul.patch"
    kept = gone.read_bytes()
    gone.unlink()
    err = project.refresh(expect=5).stderr
    assert "patches/0002-add-mul.patch (deleted, still in series)" in err
    hint = err.split("put them back: `", 1)[1].split("`", 1)[0]
    assert hint == "git checkout -- patches/0002-add-mul.patch"
    subprocess.run(hint.split(), cwd=project.root, check=True)
    assert gone.read_bytes() == kept


def test_refresh_exports_a_new_commit_and_renames_nothing_else(project):
    make_two_patches(project)
    project.commit_in_tree("vllm/extra.py", "y = 2\n", message("extra-file", "add extra.py"))
    report = {r.split()[-1]: r.split()[0] for r in project.refresh().output.splitlines()[:-1]}
    assert report == {"patches/0003-extra-file.patch": "added"}
    assert (project.root / "series").read_text().split()[-1] == "0003-extra-file.patch"


def test_refresh_never_deletes_a_patch_without_force_and_lists_it(project):
    make_two_patches(project)
    git.core.run(project.tree, "reset", "--hard", "HEAD~1")
    err = project.refresh(expect=5).stderr
    assert "refresh would delete 1 patch(es)" in err and "patches/0002-add-mul.patch" in err
    assert "next:" in err and "FORCE=1" in err
    assert (project.root / "patches/0002-add-mul.patch").exists()
    out = project.refresh("--force").output
    assert "removed   patches/0002-add-mul.patch" in out
    assert not (project.root / "patches/0002-add-mul.patch").exists()
    assert (project.root / "series").read_text() == "0001-cache-tweak.patch\n"


def test_image_without_a_docker_engine_fails_with_one_clear_line(project, monkeypatch, tmp_path):
    project.apply()  # the build tree is checked first (exit 2 without one)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    res = project.cli("image", "--base", "v9.9.9", expect=7)
    assert res.stderr.strip().splitlines() == [
        f"Error: no Docker engine reachable at unix://{tmp_path}/no-such.sock: start dockerd or set "
        "DOCKER_HOST (README.md, 'The image')",
        "  next: export DOCKER_HOST=unix:///run/tkv-dockerd/sock  (README.md, 'The image', starts one)",
    ]


# --------------------------------------------------------------------------- issue 8


def test_refresh_keeps_series_comments_blank_lines_and_p1_markers(project):
    make_two_patches(project)
    (project.root / "series").write_text(
        "# the seam\n\n0001-cache-tweak.patch -p1  # cache knob\n\n# math\n0002-add-mul.patch -p1\n"
    )
    project.apply("--force")
    project.commit_in_tree("vllm/extra.py", "y = 2\n", message("extra-file", "add extra.py"))
    project.refresh()
    assert (project.root / "series").read_text() == (
        "# the seam\n\n0001-cache-tweak.patch -p1  # cache knob\n\n# math\n0002-add-mul.patch -p1\n"
        "0003-extra-file.patch\n"
    )


def test_refresh_refusal_names_the_edited_patch(project):
    make_two_patches(project)
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("Adds mul().", "Edited by hand."))
    err = project.refresh(expect=5).stderr
    assert "patches/0002-add-mul.patch" in err and "0001-cache-tweak" not in err.split("next:")[0]
    res = project.refresh("--force")  # FORCE says what it overwrites and backs it up
    assert "patches/0002-add-mul.patch" in res.stderr and "backed up in" in res.stderr
    (backup,) = (project.tree / ".git/tkv-seam-dropped").glob("*/patches/0002-add-mul.patch")
    assert "Edited by hand." in backup.read_text()


def test_refresh_of_a_commit_that_is_not_utf8_is_an_error_not_a_traceback(project):
    project.apply()
    (project.tree / "vllm/latin1.py").write_bytes(b"# caf\xe9\n")
    git.index.commit(
        project.tree, "latin1: add a file\n", "Seam Dev <dev@example.invalid>", paths=["vllm/latin1.py"]
    )
    err = project.refresh(expect=1).stderr
    assert "not UTF-8" in err and git.repo.head(project.tree)[:12] in err and "next:" in err


def test_duplicate_series_entry_is_named_as_such(project):
    make_two_patches(project)
    project.write_series("0001-cache-tweak.patch", "0001-cache-tweak.patch")
    err = project.apply("--force", expect=1).stderr
    assert "0001-cache-tweak.patch is listed twice" in err and "next:" in err


def test_missing_b_prefix_names_the_patch(project):
    make_two_patches(project)
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace(" b/vllm/engine/arg_utils.py", " x/vllm/engine/arg_utils.py"))
    err = project.apply("--force", expect=1).stderr
    assert "0002-add-mul.patch: path 'x/vllm/engine/arg_utils.py' lacks the 'b/' prefix" in err
    assert "next:" in err


def test_unknown_port_target_is_a_usage_error_with_a_port_hint(project, releases):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    err = project.cli("port", "start", "--base", NAME, "--to", "v9.9.10", expect=2).stderr
    assert (
        "unknown base 'v9.9.10'" in err
        and "next: make carry VERSION=9.9.10   (pins it and ports onto it" in err
    )


# item 11: one error boundary


def test_the_library_never_imports_the_cli_and_there_is_no_per_command_decorator():
    package = Path(tkvseam.__file__).parent
    names = sorted(
        "tkvseam." + ".".join(p.relative_to(package).with_suffix("").parts).removesuffix(".__init__")
        for p in package.rglob("*.py")
        if p.relative_to(package).parts[0] not in ("cli", "seamtest", "__main__.py")
    )
    code = (
        f"import importlib, sys\nfor name in {names!r}:\n    importlib.import_module(name)\n"
        "assert 'tkvseam.cli' not in sys.modules and 'click' not in sys.modules, 'the library imports the CLI'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    from tkvseam.cli import main as cli

    assert not hasattr(cli, "handle_errors")


@pytest.mark.parametrize(
    "toml",
    [
        "[v1\nbroken",
        '["v1"]\nversion = "1"\n',
        '["v1"]\nversion = "1"\ncommit_prefixes = 3\nsdist = 1\nimage = 2\n',
    ],
    ids=["malformed", "incomplete", "wrong-types"],
)
def test_bad_bases_file_is_an_error_not_a_traceback(project, toml):
    (project.root / "bases.toml").write_text(toml)
    res = project.cli("bases", expect=1)
    assert res.stderr.startswith("Error: ") and "bases.toml" in res.stderr and "next:" in res.stderr


def test_os_errors_are_errors_not_tracebacks(project, tmp_path, monkeypatch):
    make_two_patches(project)
    p = project.root / "patches/0002-add-mul.patch"
    p.unlink()
    p.mkdir()  # unreadable as a file
    err = project.apply("--force", expect=1).stderr
    assert err.startswith("Error: ") and "0002-add-mul.patch" in err and "next: ls -ld" in err
    p.rmdir()
    project.write_series()
    (tmp_path / "a-file").write_text("")
    res = project.cli("apply", "--base", "v9.9.9", "--tree", str(tmp_path / "a-file" / "tree"), expect=1)
    assert res.stderr.startswith("Error: ") and "a-file" in res.stderr and "next: ls -ld" in res.stderr
    monkeypatch.delenv("TKV_SEAM_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "a-file"))
    result = CliRunner().invoke(main, ["--root", str(project.root), "-q", "fetch", "--base", "v9.9.9"])
    assert result.exit_code == 1 and result.stderr.startswith("Error: "), result.stderr
    assert "a-file" in result.stderr and "next:" in result.stderr


# item 12: --json on failure


@pytest.mark.parametrize(
    "args, code",
    [
        (("apply", "--base", "v0.0.1", "--json"), 2),
        (("refresh", "--base", "v9.9.9", "--json"), 5),  # no tree: SeamTree.require's one code (it was 1)
        (("port", "--base", "v9.9.9", "--to", "v0.0.1", "--json"), 2),
        (("overlay", "files", "--base", "v9.9.9", "--json"), 1),
        (("seamtest", "full", "--python", "/nonexistent/python", "--json"), 1),
        (("bases", "--json"), 1),
    ],
    ids=lambda v: v[0] if isinstance(v, tuple) else str(v),
)
def test_json_commands_print_one_json_object_on_failure(project, args, code):
    if args[0] == "bases":
        (project.root / "bases.toml").write_text("[broken")
    if args[0] == "overlay":
        project.write_series("0001-missing.patch")
    res = project.cli(*args, expect=code)
    out = json.loads(res.stdout)
    assert out["ok"] is False and out["exit_code"] == code and out["error"] and "hint" in out


def test_refresh_keeps_header_fields_a_hand_made_commit_lost(project):
    make_two_patches(project)
    git.core.run(
        project.tree, "commit", "-q", "--amend", "-m", "add-mul: add mul()\n\nAdds mul(), reworded.\n"
    )
    out = project.refresh().output
    assert "updated (kept Depends-on, Reason, Tests, Upstream, Verdict) patches/0002-add-mul.patch" in out
    text = (project.root / "patches/0002-add-mul.patch").read_text()
    assert (
        "Adds mul(), reworded.\n\nVerdict: still needed\nReason: upstream lacks it\n"
        "Upstream: upstreamable\nDepends-on: cache-tweak\n" in text
    )
    assert "lint: ok" in project.cli("lint").output


# --------------------------------------------------------------------------- the error boundary


def _leaves(group, prefix=()):
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):
            yield from _leaves(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


LEAVES = dict(_leaves(main))


def _one_json_object(stdout: str) -> dict:
    """The one JSON object ``stdout`` holds (nothing before or after it)."""
    obj, end = json.JSONDecoder().raw_decode(stdout.strip())
    assert stdout.strip()[end:].strip() == "", f"more than one JSON object: {stdout!r}"
    return obj


def _failing_args(cmd) -> list[str]:
    args = []
    for p in cmd.params:
        if isinstance(p, click.Argument):
            args.append("not-a-version")
        elif "--to" in p.opts:
            args += ["--to", "v9.9.9"]
        elif p.required:
            args += [p.opts[0], "x"]
    return args


def test_every_command_takes_json():
    assert [
        " ".join(path) for path, cmd in LEAVES.items() if not any("--json" in p.opts for p in cmd.params)
    ] == []


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_every_command_prints_exactly_one_json_object_on_any_failure(project, path):
    cmd = LEAVES[path]
    (project.root / "bases.toml").write_text("[broken")  # every command reads the bases file
    res = project.cli(
        *path,
        *_failing_args(cmd),
        *(["--base", "v9.9.9"] if path == ("lint",) else []),
        "--json",
        expect=None,
    )
    assert res.exit_code not in (0, None), (path, res.output)
    out = _one_json_object(res.stdout)
    assert out["ok"] is False and out["exit_code"] == res.exit_code and out["error"], (path, out)
    # a usage error (an option that does not exist) answers in JSON too
    res = project.cli(*path, "--no-such-option", "--json", expect=2)
    assert _one_json_object(res.stdout)["exit_code"] == 2 and "no such option" in res.stderr.lower()


def test_a_path_too_long_for_the_system_is_an_error_with_a_next_step(project, tmp_path):
    long_tree = str(tmp_path / ("t" * 250) / ("u" * 250))
    res = project.cli("apply", "--base", NAME, "--tree", long_tree, "--json", expect=1)
    assert res.stderr.startswith("Error: ") and "File name too long" in res.stderr and "next:" in res.stderr
    assert "Traceback" not in res.stderr
    assert _one_json_object(res.stdout)["exit_code"] == 1
