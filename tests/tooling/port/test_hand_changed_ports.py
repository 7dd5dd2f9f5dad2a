"""The port verbs against a port tree and a project a user changed by hand (each case failed before its fix)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tkvseam import git

from ..fixtures.portcase import NEXT, port, port_tree, resolve_0001

IDENTITY = {
    "GIT_AUTHOR_NAME": "Seam Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.invalid",
    "GIT_COMMITTER_NAME": "Seam Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.invalid",
}


def stopped_at_0006(project):
    """The port through 0001-0005, stopped at 0006 (likely obsolete)."""
    port(project, "start", expect=12)
    resolve_0001(port_tree(project))
    port(project, "continue", expect=12)
    return port_tree(project)


def test_a_port_tree_switched_to_another_branch_is_refused_before_the_queue_loses_patches(pproject):
    tree = stopped_at_0006(pproject)
    git.core.run(tree, "checkout", "-q", "-b", "other", "HEAD~2")  # fuzz-far and tail-append are not on it
    err = port(pproject, "skip", "--reason", "upstream has it", expect=5).stderr
    assert "HEAD is" in err and "(other)" in err and "fuzz-far, tail-append" in err
    assert f"git -C {tree} checkout seam" in err
    assert not (pproject.root / "patches" / NEXT).exists()  # nothing written
    git.core.run(tree, "checkout", "-q", "seam")
    port(pproject, "skip", "--reason", "upstream has it")
    assert len((pproject.root / "patches" / NEXT / "series").read_text().split()) == 7


def test_ported_commits_rewritten_by_hand_are_taken_as_edits(pproject):
    tree = stopped_at_0006(pproject)
    (tree / "vllm/tail.py").write_text((tree / "vllm/tail.py").read_text() + "t_22 = 22\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | IDENTITY
    for cmd in (
        "git commit -qa --fixup=':/^tail-append:'",
        "GIT_SEQUENCE_EDITOR=: git rebase -q -i --autosquash tkv-seam-base",
    ):
        subprocess.run(["bash", "-c", cmd], cwd=tree, env=env, check=True, stdin=subprocess.DEVNULL)
    res = port(pproject, "skip", "--reason", "upstream has it")
    assert "rewritten by hand" in res.stderr
    assert "+t_22 = 22" in (pproject.root / "patches" / NEXT / "0005-tail-append.patch").read_text()


@pytest.mark.parametrize("damage", ["state deleted", "state corrupt", ".git removed"])
def test_a_port_tree_whose_state_is_gone_is_named_as_such_and_left_alone(pproject, damage):
    tree = stopped_at_0006(pproject)
    state = tree / ".git" / "tkv-seam.json"
    if damage == "state deleted":
        state.unlink()
    elif damage == "state corrupt":
        state.write_text('{"schema": 2, "kind": ')
    else:
        shutil.rmtree(tree / ".git")
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    for verb, args in (("continue", ()), ("status", ()), ("skip", ("--reason", "x")), ("abort", ())):
        err = port(pproject, verb, *args, expect=1).stderr
        assert "is there, but holds no port" in err and damage.split()[0].lstrip(".") in err, err
        assert f"mv {tree} {tree}.mine" in err
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before


def test_the_old_queue_edited_or_deleted_during_a_port_changes_nothing_in_it(pproject):
    tree = stopped_at_0006(pproject)
    patches = pproject.root / "patches"
    old_mod = (patches / "0007-old-mod.patch").read_text()
    (patches / "0007-old-mod.patch").write_text(old_mod.replace("value_15 = 150", "value_15 = 999"))
    (patches / "0008-seam-tests.patch").unlink()
    port(pproject, "skip", "--reason", "upstream has register()")
    queue = pproject.root / "patches" / NEXT
    assert (queue / "series").read_text().split()[-2:] == ["0006-old-mod.patch", "0007-seam-tests.patch"]
    assert "+value_15 = 150" in (queue / "0006-old-mod.patch").read_text()
    assert "value_15 = 150" in (tree / "vllm/new_mod.py").read_text()


def test_a_state_naming_a_backup_outside_the_tree_never_removes_it(pproject, tmp_path):
    tree = stopped_at_0006(pproject)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("mine\n")
    (pproject.root / "precious.txt").write_text("mine\n")  # the same bytes at the same name: "not replaced"
    (tree / ".git" / "tkv-seam-dropped").mkdir(exist_ok=True)  # an earlier backup was kept there
    state_file = tree / ".git" / "tkv-seam.json"
    state = json.loads(state_file.read_text())
    state["port"]["finishing"] = os.path.relpath(
        victim, tree / ".git" / "tkv-seam-dropped"
    )  # ../../../victim
    state_file.write_text(json.dumps(state))
    err = port(pproject, "skip", "--reason", "upstream has it", expect=5).stderr
    assert "edited by hand" in err and "nothing was removed" in err
    assert (victim / "precious.txt").read_text() == "mine\n"


def test_a_resolution_committed_by_hand_under_another_subject_is_refused_with_a_way_back(pproject):
    port(pproject, "start", expect=12)
    tree = port_tree(pproject)
    resolve_0001(tree)
    base = git.repo.head(tree)
    git.index.commit(tree, "my resolution\n", "Seam Dev <dev@example.invalid>")
    err = port(pproject, "continue", expect=5).stderr
    assert f"git -C {tree} reset --soft {base[:12]}" in err
    git.core.run(tree, "reset", "-q", "--soft", base)
    assert "stopped at 0006-register.patch" in port(pproject, "continue", expect=12).stderr
