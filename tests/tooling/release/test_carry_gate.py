"""carry proves what goes in (issue 25): a gate at every patch on the new base, and an honest end.

The gate case (``fixtures/gatecase.py``): 0003 applies cleanly on v9.10.0 but calls ``mul()``,
which 0002's resolution on v9.10.0 no longer defines. The port stops at 0003 (``breaks``, exit 12)
with ruff's F821 before any queue is written, stops there again until it is fixed, and goes on
when it is; the end lists the patches that went in by themselves. A carry that finishes in one
run runs the style gate (the Base it ports onto is the one with the .seam table it just wrote);
a re-run after a problem is not "carried"; a breaking patch committed by hand under its own
subject is staged again and gated; ``--plugin`` against a table pinning another is refused.
"""

from __future__ import annotations

import json

import pytest

from tkvseam import git

from ..fixtures.carry import carry, wheels  # noqa: F401  (fixtures)
from ..fixtures.carrying import NEW, NEW_NAME, carrying_project, git_project
from ..fixtures.gatecase import ARG_UTILS, fix_square, gate_project, make_gate_queue, resolve_as_product  # noqa: F401  (gate_project: a fixture)
from ..fixtures.queue import make_one_patch, make_two_patches, message


def _project(tmp_path, carrying_releases, monkeypatch, make_queue):
    with carrying_project(tmp_path, carrying_releases, monkeypatch) as (project, _):
        make_queue(project)
        git_project(project.root)
        yield project


@pytest.fixture
def one_patch(tmp_path, carrying_releases, monkeypatch):
    yield from _project(tmp_path, carrying_releases, monkeypatch, make_one_patch)


@pytest.fixture
def two_patches(tmp_path, carrying_releases, monkeypatch):
    yield from _project(tmp_path, carrying_releases, monkeypatch, make_two_patches)


def _one_patch_and_a_doc(project) -> None:
    make_one_patch(project)
    project.commit_in_tree("README.md", "synthetic upstream, documented\n", message("doc-only", "a doc"))
    project.refresh()


@pytest.fixture
def doc_last(tmp_path, carrying_releases, monkeypatch):
    yield from _project(tmp_path, carrying_releases, monkeypatch, _one_patch_and_a_doc)


def _tree(project):
    return project.root / "build" / f"port-{NEW_NAME}"


def test_a_patch_using_a_name_the_new_base_lost_stops_the_port_there_until_fixed(gate_project, wheels):  # noqa: F811
    root, tree = gate_project.root, _tree(gate_project)
    first = carry(gate_project, wheels, expect=12)
    assert "stopped at 0002-add-mul.patch" in first.stderr
    resolve_as_product(tree)

    stop = carry(gate_project, wheels, expect=12).stderr
    assert "port to v9.10.0 stopped at 0003-use-mul.patch: breaks" in stop
    assert f"{ARG_UTILS}:2 F821 Undefined name `mul`" in stop
    assert f"then `make carry VERSION={NEW}` (it runs the gate again)" in stop
    assert not (root / "patches" / NEW_NAME).exists()  # before any queue is written
    status = json.loads(gate_project.cli("port", "status", "--to", NEW_NAME, "--json").output)
    assert status["current"] == "0003-use-mul.patch" and status["stopped"]["status"] == "breaks"
    assert [d["name"] for d in status["done"]] == ["0001-cache-tweak.patch", "0002-add-mul.patch"]

    # run again without a fix: the same stop, nothing committed
    head = git.repo.head(tree)
    again = carry(gate_project, wheels, expect=12).stderr
    assert "stopped at 0003-use-mul.patch: breaks" in again and "F821 Undefined name `mul`" in again
    assert git.repo.head(tree) == head
    first_how = stop.split("(it went in ", 1)[1].split(",", 1)[0]  # the port placed it, no human
    assert f"(it went in {first_how}; with what you staged since, it fails the gate" in again
    assert "staged resolution" not in again
    assert (
        f"(it went in {first_how}; with what you staged since"
        in carry(gate_project, wheels, expect=12).stderr
    )

    fix_square(tree)
    out = json.loads(carry(gate_project, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == []
    assert out["by_themselves"] == [
        {"name": "0001-cache-tweak.patch", "how": "3-way", "gate": "ok", "proven": False},
        {"name": "0004-docs-line.patch", "how": "3-way", "gate": "ok", "proven": False},
    ]
    patch = (root / "patches" / NEW_NAME / "0003-use-mul.patch").read_text()
    assert "+    return product(a, a)" in patch
    text = carry(gate_project, wheels).output  # a re-run says the same end, and lists them again
    assert "2 patch(es) went in by themselves; re-read them:" in text
    assert "0001-cache-tweak.patch  (3-way; gate ok; not proven)" in text
    assert f"{NEW_NAME}: carried; next: make test BASE={NEW_NAME}" in text


def test_skip_still_leaves_a_breaking_patch_out(gate_project, wheels):  # noqa: F811
    carry(gate_project, wheels, expect=12)
    resolve_as_product(_tree(gate_project))
    carry(gate_project, wheels, expect=12)
    gate_project.cli("port", "skip", "--to", NEW_NAME, "--reason", "square() is not needed", expect=0)
    out = json.loads(carry(gate_project, wheels, "--json").stdout)
    assert out["carried"]
    assert not (gate_project.root / "patches" / NEW_NAME / "0003-use-mul.patch").exists()


def _commit_by_hand(tree, message: str) -> str:
    ident = ["-c", "user.name=A User", "-c", "user.email=user@example.com"]
    git.core.run(tree, *ident, "commit", "-q", "-m", message)
    return git.repo.head(tree)


def test_a_breaking_patch_committed_by_hand_under_its_subject_still_goes_through_the_gate(
    gate_project,  # noqa: F811
    wheels,  # noqa: F811
):
    root, tree = gate_project.root, _tree(gate_project)
    carry(gate_project, wheels, expect=12)
    resolve_as_product(tree)
    carry(gate_project, wheels, expect=12)  # 0003: breaks
    head = git.repo.head(tree)
    message = (tree / ".git" / "tkv-seam-port-msg").read_text()
    _commit_by_hand(tree, message)  # its own subject: what an interrupted run would have made
    again = carry(gate_project, wheels, expect=12).stderr
    assert "stopped at 0003-use-mul.patch: breaks" in again and "F821 Undefined name `mul`" in again
    assert git.repo.head(tree) == head  # the commit is staged again, not taken past the gate
    assert not (root / "patches" / NEW_NAME).exists()
    fix_square(tree)
    _commit_by_hand(tree, message.replace("Adds square().", "Adds square(), fixed by hand."))
    out = json.loads(carry(gate_project, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == []
    patch = (root / "patches" / NEW_NAME / "0003-use-mul.patch").read_text()
    assert "+    return product(a, a)" in patch and "fixed by hand" in patch  # the user's message kept


def test_a_conflict_resolution_committed_by_hand_is_gated_and_goes_on(gate_project, wheels):  # noqa: F811
    tree = _tree(gate_project)
    carry(gate_project, wheels, expect=12)  # 0002: conflict
    resolve_as_product(tree)
    message = (tree / ".git" / "tkv-seam-port-msg").read_text()
    _commit_by_hand(tree, message.replace("Adds mul().", "Adds product(), by hand."))
    stop = carry(gate_project, wheels, expect=12).stderr  # 0002 through the gate, then 0003's breaks
    assert "stopped at 0003-use-mul.patch: breaks" in stop
    status = json.loads(gate_project.cli("port", "status", "--to", NEW_NAME, "--json").output)
    assert [(d["name"], d["status"]) for d in status["done"]][-1] == ("0002-add-mul.patch", "resolved")
    assert "by hand" in git.repo.commit_info(tree, "HEAD").message


@pytest.mark.parametrize("body", ["[1]\n", '{"0001-cache-tweak.patch": "ok"}\n', "{cut"])
def test_a_gate_record_edited_into_something_else_is_no_crash(gate_project, wheels, body):  # noqa: F811
    tree = _tree(gate_project)
    carry(gate_project, wheels, expect=12)  # 0001 went in by itself (recorded), 0002 stops
    (tree / ".git" / "tkv-seam-port-gate.json").write_text(body)
    resolve_as_product(tree)
    assert "stopped at 0003-use-mul.patch: breaks" in carry(gate_project, wheels, expect=12).stderr
    fix_square(tree)
    out = json.loads(carry(gate_project, wheels, "--json").stdout)
    assert out["carried"]
    rows = {row["name"]: row for row in out["by_themselves"]}
    assert rows["0001-cache-tweak.patch"]["gate"] == "not run"  # its entry was lost: said, not made up
    assert rows["0004-docs-line.patch"]["gate"] == "ok"


def test_a_one_run_carry_runs_the_style_gate(one_patch, wheels):  # noqa: F811
    """No stop: the port is onto the Base with the .seam table carry just wrote (its ruff pin)."""
    out = json.loads(carry(one_patch, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == [], out["problems"]
    assert out["by_themselves"] == [
        {"name": "0001-cache-tweak.patch", "how": "3-way", "gate": "ok", "proven": False}
    ]


def test_a_rerun_after_a_problem_is_not_carried(two_patches, wheels):  # noqa: F811
    root, tree = two_patches.root, _tree(two_patches)
    carry(two_patches, wheels, expect=12)
    (tree / ARG_UTILS).write_text(
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return -(b - a)\n\n\n"
        "def mul(a, b):\n    return a * b\n"
    )
    git.core.run(tree, "add", ARG_UTILS)
    msg = tree / ".git" / "tkv-seam-port-msg"
    msg.write_text(msg.read_text().replace("Depends-on: cache-tweak", "Depends-on: gone-patch"))
    for _ in range(2):  # the finish, then a re-run: both say the problem, neither says "carried"
        res = carry(two_patches, wheels, expect=6)
        assert "Depends-on 'gone-patch' is not an earlier patch of the series" in res.stderr
        assert f"{NEW_NAME}: NOT carried: its queue is written but has 1 lint/style problem(s)" in res.output
        assert f"{NEW_NAME}: carried" not in res.output
    out = json.loads(carry(two_patches, wheels, "--json", expect=6).stdout)
    assert not out["carried"] and len(out["problems"]) == 1
    assert (root / "patches" / NEW_NAME / "series").is_file()


def test_a_plugin_other_than_the_tables_is_refused_naming_both(two_patches, wheels):  # noqa: F811
    carry(two_patches, wheels, expect=12)  # the table is written: plugin turbo-attn==1.0.0
    err = carry(two_patches, wheels, "--plugin", "turbo-attn==2.0.0", expect=2).stderr
    assert "--plugin turbo-attn==2.0.0" in err and "already pins plugin turbo-attn==1.0.0" in err
    assert "make seam-table BASE=v9.10.0 PLUGIN='turbo-attn==2.0.0' FORCE=1" in err
    res = carry(
        two_patches, wheels, "--plugin", "turbo-attn==1.0.0", expect=5
    )  # the same pin: on to the port
    assert "0002-add-mul.patch: still unmerged" in res.stderr


def test_a_carried_queue_after_make_clean_is_still_carried(one_patch, wheels):  # noqa: F811
    """After make clean an unedited committed queue was "NOT carried (edited since it was written)"
    (issue 34): the end checks the queue as written, whatever trees there are."""
    assert json.loads(carry(one_patch, wheels, "--json").stdout)["carried"]
    one_patch.cli("clean")  # the port tree and the build tree go; the queue is as it was written
    assert not _tree(one_patch).exists()
    res = carry(one_patch, wheels)
    assert "edited since" not in res.stdout + res.stderr and "NOT carried" not in res.stdout
    assert f"{NEW_NAME}: carried" in res.stdout


def test_a_last_patch_without_a_python_file_is_carried(doc_last, wheels):  # noqa: F811
    """A patch that touches no .py file (vLLM's 0010, PROTOCOL.md) leaves the gate nothing to
    keep; gating the port's commits again at the end took "no path" for the whole top level of
    the tree and read a directory as a file (on 0.34.0: `git cat-file blob <tree>` failed, exit 1)."""
    out = json.loads(carry(doc_last, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == []
    assert [row["name"] for row in out["by_themselves"]] == ["0001-cache-tweak.patch", "0002-doc-only.patch"]
