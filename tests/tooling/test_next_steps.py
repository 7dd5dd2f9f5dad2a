"""Every ``next:`` runs as written and is the right step; no traceback, no wrong "nothing new"
(issue 26: the hints and tracebacks of the CLI, the queue commands, the overlay and the index).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from tkvseam import git
from tkvseam.cli.main import main

from .conftest import NAME, NEXT_VERSION, bases_toml, message
from .hintcheck import commands, problems

NEXT = f"v{NEXT_VERSION}"
TOOL = Path(sys.executable).with_name("tkv-seam")


def one_patch(project) -> None:
    project.apply()
    cache = project.tree / "vllm/config/cache.py"
    project.commit_in_tree(
        "vllm/config/cache.py",
        cache.read_text().replace("line 10\n", "line 10 (seam)\n"),
        message("cache-tweak"),
    )
    project.refresh()


def hint_of(res) -> str:
    return res.stderr.split("next: ", 1)[1].strip()


# --------------------------------------------------------------------------- the error boundary


def test_a_closed_stdout_is_not_answered_with_free_space(project):
    """`tkv-seam bases | head -0`: the reader is gone; no "check free space", no traceback."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [str(TOOL), *project.argv("bases")], stdout=write, stderr=subprocess.PIPE, text=True
        )
    finally:
        os.close(write)
    assert proc.returncode == 1
    assert "free space" not in proc.stderr and "Traceback" not in proc.stderr and "next:" not in proc.stderr


@pytest.mark.parametrize("args", [("--frobnicate", "bases", "--json"), ("--root", ".", "--json")])
def test_a_usage_error_of_the_group_still_prints_one_json_object(args):
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 2
    out = json.loads(res.stdout)
    assert out["ok"] is False and out["exit_code"] == 2 and "No such option" in out["error"]


def test_a_wrong_root_is_named_and_never_answered_with_git_checkout(tmp_path):
    empty = tmp_path / "not-the-project"
    for root in (empty, tmp_path / "nonexistent"):
        if root == empty:
            root.mkdir()
        res = CliRunner().invoke(main, ["--root", str(root), "carried", "--json"])
        assert res.exit_code == 1
        hint = json.loads(res.stdout)["hint"]
        assert "git checkout" not in hint and "--root" in hint and str(root) in hint
        assert problems(hint) == []
    res = CliRunner().invoke(main, ["--root", str(empty), "--bases", str(tmp_path / "b.toml"), "carried"])
    assert "--bases" in hint_of(res) and "git checkout" not in hint_of(res)


def test_a_deleted_bases_file_of_a_checkout_is_got_back_by_the_hint(project):
    git.init(project.root)
    git.commit(project.root, "project\n", "A <a@example.invalid>", paths=["bases.toml", "series"])
    before = (project.root / "bases.toml").read_text()
    (project.root / "bases.toml").unlink()
    res = CliRunner().invoke(main, ["--root", str(project.root), "carried"])
    hint = hint_of(res)
    assert hint == f"git -C {project.root} checkout -- bases.toml"
    subprocess.run(hint, shell=True, check=True, cwd=project.root)
    assert (project.root / "bases.toml").read_text() == before


# --------------------------------------------------------------------------- queue commands


def test_stylecheck_without_its_tree_says_to_make_the_tree(project):
    res = project.cli("stylecheck", "--base", NAME, "--json", expect=2)
    out = json.loads(res.stdout)
    assert "is not a tree tkv-seam made" in out["error"] and out["hint"].startswith(
        f"make lint-patches BASE={NAME}"
    )
    assert "ls -ld" not in out["hint"] and problems(out["hint"]) == []
    other = project.root.parent / "elsewhere"
    res = project.cli(
        "stylecheck", "--base", NAME, "--tree", str(other), expect=2
    )  # no tree there yet: make it there
    assert hint_of(res) == (
        f"`.venv/bin/tkv-seam apply --base {NAME} --tree {other}`, then "
        f"`.venv/bin/tkv-seam stylecheck --base {NAME} --tree {other}`"
    )
    other.mkdir()  # a directory of the user's: never the place to apply into
    hint = hint_of(project.cli("stylecheck", "--base", NAME, "--tree", str(other), expect=2))
    assert "apply" not in hint and f"make lint-patches BASE={NAME}" in hint and problems(hint) == []


def test_stylecheck_of_a_tree_of_another_base_names_that_base(project, releases):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    project.apply()
    res = project.cli("stylecheck", "--base", NEXT, "--tree", str(project.tree), expect=2)
    assert f"holds {NAME}, not {NEXT}" in res.stderr
    assert hint_of(res) == f".venv/bin/tkv-seam stylecheck --base {NAME} --tree {project.tree}"


@pytest.mark.parametrize("untracked", [False, True], ids=["edited", "new-file"])
def test_refresh_over_uncommitted_edits_hints_the_fixup_recipe_and_it_runs(project, untracked):
    one_patch(project)
    cache = project.tree / "vllm/config/cache.py"
    cache.write_text(cache.read_text().replace("line 20\n", "line 20 (seam)\n"))
    if untracked:
        (project.tree / "vllm/config/extra.py").write_text("EXTRA = 1\n")
    res = project.refresh(expect=5)
    hint = hint_of(res)
    assert "--fixup=:/^" in hint and "--autosquash" in hint and problems(hint) == []
    if not untracked:  # every edited file is one patch's: the hint names it
        assert "'--fixup=:/^cache-tweak:'" in hint and "commit -a" in hint
    else:  # a new file no patch has: commit -a would leave it out, and the patch is for you to name
        assert "add -A" in hint and "<slug>" in hint
        return
    fold, squash = commands(hint)[:2]
    for cmd in (fold, squash):
        subprocess.run(cmd, shell=True, check=True, cwd=project.root, capture_output=True)
    assert "1 changed" in project.refresh().stdout
    assert "+# line 20 (seam)" in (project.root / "patches/0001-cache-tweak.patch").read_text()


def _two_queues(project, releases) -> None:
    """NAME's queue (one patch) and NEXT's, a copy of it: the patch is on two consecutive bases."""
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    one_patch(project)
    shutil.copytree(
        project.root / "patches", project.root / "patches" / NEXT, ignore=shutil.ignore_patterns(NEXT)
    )
    shutil.copy(project.root / "series", project.root / "patches" / NEXT / "series")


@pytest.mark.parametrize("number", ["1", "01", "0001"])
def test_drift_diff_takes_the_patch_number_as_its_help_says(project, releases, number):
    _two_queues(project, releases)
    out = json.loads(project.cli("drift", "--diff", number, "--json").stdout)
    assert out["slug"] == "cache-tweak" and [d["status"] for d in out["diffs"]] == ["same hunks"]


def test_drift_diff_of_a_number_no_queue_has_is_refused(project, releases):
    _two_queues(project, releases)
    res = project.cli("drift", "--diff", "8", expect=2)
    assert "no patch '8' in any queue" in res.stderr and problems(hint_of(res)) == []


# --------------------------------------------------------------------------- the index


@pytest.mark.parametrize("var", ["TKV_SEAM_INDEX_URL", "PIP_INDEX_URL"])
def test_an_index_url_that_is_no_url_is_a_usage_error_not_a_traceback(project, monkeypatch, var):
    monkeypatch.delenv("TKV_SEAM_INDEX_URL", raising=False)
    monkeypatch.setenv(var, "notaurl")
    res = project.cli("pin", NEXT_VERSION, "--json", expect=2)
    out = json.loads(res.stdout)
    assert "Traceback" not in res.stderr and "'notaurl' is not a package index URL" in out["error"]
    assert var in out["error"] and problems(out["hint"]) == []


def test_an_index_page_whose_files_are_not_entries_is_not_no_newer_release(project, index):
    index.listing = {"name": "vllm", "files": [1, 2]}
    for args in (("watch",), ("pin", NEXT_VERSION)):
        res = project.cli(*args, "--json", expect=8)
        assert "is not a PEP 691 project page (files[0] is a int" in json.loads(res.stdout)["error"]


def test_an_entry_naming_no_file_never_lets_watch_say_nothing_is_new(project, index):
    """One odd entry does not hide the others (a release the page lists is still found); but
    when nothing newer was found, the entry it could not read may be that release."""
    newer = index.listing["files"][1]
    index.listing["files"] = [index.listing["files"][0], {"url": newer["url"]}]
    res = project.cli("watch", "--json", expect=8)
    error = json.loads(res.stdout)["error"]
    assert "no release newer than v9.9.9 that tkv-seam can read, and 1 entry it cannot" in error
    index.listing["files"].append(newer)
    assert (
        json.loads(project.cli("watch", "--json", expect=11).stdout)["releases"][0]["version"] == NEXT_VERSION
    )


# --------------------------------------------------------------------------- the overlay's wrong version


def make_venv(where: Path, tree: Path, base_commit: str, version: str | None = None) -> Path:
    """A venv (no pip) whose site-packages hold the base's vllm/; ``version``: it says it is that release."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = where / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    with tarfile.open(
        fileobj=io.BytesIO(git.run(tree, "archive", "--format=tar", base_commit, "vllm").stdout)
    ) as tar:
        tar.extractall(site, filter="data")
    if version:
        version_file = site / "vllm" / "_version.py"
        version_file.write_text(version_file.read_text().replace("9.9.9", version))
        (site / "vllm/config/cache.py").write_text(f"# vLLM {version}'s cache.py\n")
    return where / "bin" / "python"


@pytest.fixture
def user_venv(project, tmp_path):
    one_patch(project)
    base_commit = json.loads((project.tree / ".git" / "tkv-seam.json").read_text())["base_commit"]
    return lambda version=None: make_venv(tmp_path / "myvenv", project.tree, base_commit, version)


def test_a_venv_without_pip_is_not_told_to_run_pip(project, user_venv):
    python = user_venv()
    site = next((python.parent.parent / "lib").glob("python*/site-packages"))
    (site / "vllm/config/cache.py").write_text("edited by hand\n")
    hint = json.loads(
        project.cli("overlay", "install", "--base", NAME, "--python", str(python), "--json", expect=4).stdout
    )["hint"]
    assert f".venv/bin/uv pip install --python {python} --reinstall --no-deps vllm=={NAME[1:]}" in hint
    assert "-m pip" not in hint
    (python.parent / "pip").write_text("#!/bin/sh\n")  # a venv with its own pip: pip's own words
    hint = json.loads(
        project.cli("overlay", "install", "--base", NAME, "--python", str(python), "--json", expect=4).stdout
    )["hint"]
    assert f"{python} -m pip install --force-reinstall --no-deps vllm=={NAME[1:]}" in hint


def test_a_venv_holding_another_carried_release_is_answered_with_that_base(project, releases, user_venv):
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    (project.root / "patches" / NEXT).mkdir()
    (project.root / "patches" / NEXT / "series").write_text("")  # NEXT is carried (its queue exists)
    python = user_venv(NEXT_VERSION)
    for verb in ("install", "restore"):
        res = project.cli("overlay", verb, "--base", NAME, "--python", str(python), "--json", expect=4)
        hint = json.loads(res.stdout)["hint"]
        assert f"the venv holds vLLM {NEXT_VERSION}" in hint
        assert (
            f"make apply BASE={NEXT} && .venv/bin/tkv-seam overlay {verb} --base {NEXT} --python {python}"
            in hint
        )
        assert "pip" not in hint and problems(hint) == []


def test_a_venv_without_vllm_is_told_how_to_look_with_uv(project, user_venv):
    python = user_venv()
    site = next((python.parent.parent / "lib").glob("python*/site-packages"))
    shutil.rmtree(site / "vllm")
    res = project.cli("overlay", "install", "--base", NAME, "--python", str(python), expect=1)
    assert f".venv/bin/uv pip show --python {python} vllm" in hint_of(res)
