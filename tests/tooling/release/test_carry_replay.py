"""A resolution given once comes back where the same conflict does (issue 33; git's rerere).

The gate case (``fixtures/gatecase.py``): 0002 conflicts on v9.10.0 and is resolved by hand
(``product()``, its Verdict changed). A carry aborted and started again replays that resolution
and its message, says so, and goes on to the next stop; turned off, it stops at 0002 again. The
same conflict met porting the same queue onto another release (v9.11.0, whose arg_utils.py is
v9.10.0's) gets the resolution too.
"""

from __future__ import annotations

import contextlib
import json


from tkvseam import git

from ..fixtures.carry import carry, wheels  # noqa: F401  (fixtures)
from ..fixtures.carrying import NEW_FILES, NEW_NAME, OLD_NAME, carrying_project, git_project, make_releases
from ..fixtures.upstream import make_release
from ..fixtures.gatecase import ARG_UTILS, gate_project, make_gate_queue, resolve_as_product  # noqa: F401  (gate_project: a fixture)


def _resolved_once_then_aborted(project, wheels) -> None:  # noqa: F811
    tree = project.root / "build" / f"port-{NEW_NAME}"
    assert "stopped at 0002-add-mul.patch: conflict" in carry(project, wheels, expect=12).stderr
    resolve_as_product(tree)
    stop = carry(project, wheels, "--verdict", "re-expressed", expect=12).stderr
    assert "stopped at 0003-use-mul.patch: breaks" in stop
    project.cli("port", "abort", "--to", NEW_NAME)
    assert not tree.exists()


def test_an_aborted_carry_started_again_replays_the_resolution_it_was_given(gate_project, wheels):  # noqa: F811
    _resolved_once_then_aborted(gate_project, wheels)
    stop = carry(gate_project, wheels, expect=12).stderr  # a new port: 0002 conflicts again, and is replayed
    assert "stopped at 0003-use-mul.patch: breaks" in stop
    assert "before it, this run took in by itself (re-read them):" in stop
    assert (
        f"0002-add-mul.patch: replay: {ARG_UTILS}: the resolution recorded for this conflict, replayed"
        in stop
    )
    tree = gate_project.root / "build" / f"port-{NEW_NAME}"
    commit = git.repo.commit_info(tree, "HEAD")
    assert commit.subject.startswith("add-mul:") and "Verdict: re-expressed" in commit.message
    assert "def product(a, b):" in git.repo.show(tree, "HEAD", ARG_UTILS).decode()


def test_replay_turned_off_stops_at_the_conflict_again(gate_project, wheels):  # noqa: F811
    _resolved_once_then_aborted(gate_project, wheels)
    stop = carry(gate_project, wheels, "--no-replay", expect=12).stderr
    assert "stopped at 0002-add-mul.patch: conflict" in stop and "replay: " not in stop


@contextlib.contextmanager
def _resolved_then_ported_onto_v9_11_0(tmp_path, monkeypatch, wheels, files, resolve):  # noqa: F811
    """0002 stopped and resolved (``resolve``) carrying v9.10.0; then the port of the same queue onto
    v9.11.0 (``files``) started: the project and what that start said."""
    three = {**make_releases(tmp_path / "up"), "v9.11.0": make_release(tmp_path / "up", "9.11.0", files)}
    with carrying_project(tmp_path, three, monkeypatch) as (project, _):
        make_gate_queue(project)
        git_project(project.root)
        assert "stopped at 0002-add-mul.patch: conflict" in carry(project, wheels, expect=12).stderr
        resolve(project.root / "build" / f"port-{NEW_NAME}")
        carry(project, wheels, expect=12)  # 0002's resolution recorded as it is continued
        project.cli("pin", "9.11.0")
        yield project, project.cli("port", "start", "--base", OLD_NAME, "--to", "v9.11.0", expect=None)


def test_the_same_conflict_onto_another_release_replays_the_resolution(tmp_path, monkeypatch, wheels):  # noqa: F811
    with _resolved_then_ported_onto_v9_11_0(tmp_path, monkeypatch, wheels, NEW_FILES, resolve_as_product) as (
        project,
        res,
    ):
        assert "stopped at 0002" not in res.stderr
        status = project.cli("port", "status", "--to", "v9.11.0", "--json").stdout
        done = {d["name"]: d["status"] for d in json.loads(status)["done"]}
        assert done["0002-add-mul.patch"] == "resolved"
        record = json.loads(
            (project.root / "build" / "port-v9.11.0" / ".git" / "tkv-seam-port-gate.json").read_text()
        )
        assert record["0002-add-mul.patch"]["how"] == "replayed"


def test_a_header_edited_in_the_queue_since_is_kept_with_the_replayed_resolution(gate_project, wheels):  # noqa: F811
    """The resolution is the same conflict's, but the message recorded with it was written for the
    patch's header as it was then: an edit made to the queue since (here its description) is not
    undone; the Verdict and Reason given at the stop come with the resolution."""
    _resolved_once_then_aborted(gate_project, wheels)
    patch = gate_project.root / "patches" / "0002-add-mul.patch"
    patch.write_text(patch.read_text().replace("Adds mul().", "Adds mul(), reviewed again."))
    stop = carry(gate_project, wheels, expect=12).stderr
    assert "stopped at 0003-use-mul.patch: breaks" in stop
    assert "the message recorded with it was for an earlier header of the patch" in stop
    message = git.repo.commit_info(gate_project.root / "build" / f"port-{NEW_NAME}", "HEAD").message
    assert "Adds mul(), reviewed again." in message and "Verdict: re-expressed" in message


CACHE = "vllm/config/cache.py"


def _resolve_beyond_the_conflict(tree) -> None:
    """0002's resolution as before, plus a file the conflict did not touch (one 0002 does not even
    change): git's rerere records only the conflicted file."""
    resolve_as_product(tree)
    text = (tree / CACHE).read_text()
    assert "# line 20\n" in text
    (tree / CACHE).write_text(text.replace("# line 20\n", "# line 20 (product() is in arg_utils)\n"))
    git.core.run(tree, "add", CACHE)


def test_a_replayed_resolution_comes_back_whole_not_only_its_conflicted_file(gate_project, wheels):  # noqa: F811
    tree = gate_project.root / "build" / f"port-{NEW_NAME}"
    assert "stopped at 0002-add-mul.patch: conflict" in carry(gate_project, wheels, expect=12).stderr
    _resolve_beyond_the_conflict(tree)
    assert "stopped at 0003-use-mul.patch: breaks" in carry(gate_project, wheels, expect=12).stderr
    gate_project.cli("port", "abort", "--to", NEW_NAME)
    stop = carry(gate_project, wheels, expect=12).stderr
    assert "stopped at 0003-use-mul.patch: breaks" in stop
    assert (
        f"0002-add-mul.patch: replay: {CACHE}: changed by the resolution recorded with it, put back" in stop
    )
    resolved = git.repo.commit_info(tree, "HEAD")
    assert resolved.subject.startswith("add-mul:")
    assert "# line 20 (product() is in arg_utils)" in git.repo.show(tree, "HEAD", CACHE).decode()
    assert "def product(a, b):" in git.repo.show(tree, "HEAD", ARG_UTILS).decode()


def test_a_recorded_resolution_whose_other_file_moved_on_stops_instead_of_going_on_by_half(
    tmp_path,
    monkeypatch,
    wheels,  # noqa: F811
):
    """The same conflict onto a release whose cache.py differs: the conflict is replayed, but the
    resolution's change to cache.py was made on other text, so the patch stops there."""
    other = {**NEW_FILES, CACHE: "# another header\n" + NEW_FILES[CACHE]}
    with _resolved_then_ported_onto_v9_11_0(
        tmp_path, monkeypatch, wheels, other, _resolve_beyond_the_conflict
    ) as (
        project,
        res,
    ):
        assert "stopped at 0002-add-mul.patch: conflict" in res.stderr
        assert (
            f"{CACHE}: conflict (the resolution recorded with this patch's conflicts changed this file too"
            in (res.stderr)
        )
        tree = project.root / "build" / "port-v9.11.0"
        assert "def product(a, b):" in (tree / ARG_UTILS).read_text()  # the conflict itself is replayed
        assert "(product() is in arg_utils)" not in (tree / CACHE).read_text()


def test_a_conflict_resolved_to_the_base_comes_back_with_the_rest_of_its_resolution(gate_project, wheels):  # noqa: F811
    """The conflicted file resolved to HEAD (the patch's change to it dropped, as vLLM 0.34.0's
    reviewed 0004 drops v0.33.0's mla_attention.py change) is not staged, but is part of the
    resolution: the replay puts back the resolution's other file too, not rerere's file alone."""
    tree = gate_project.root / "build" / f"port-{NEW_NAME}"
    assert "stopped at 0002-add-mul.patch: conflict" in carry(gate_project, wheels, expect=12).stderr
    git.core.run(tree, "checkout", "HEAD", "--", ARG_UTILS)
    text = (tree / CACHE).read_text()
    (tree / CACHE).write_text(text.replace("# line 20\n", "# line 20 (no mul() on this base)\n"))
    git.core.run(tree, "add", CACHE)
    carry(gate_project, wheels, "--verdict", "re-expressed", expect=None)
    gate_project.cli("port", "abort", "--to", NEW_NAME)
    stop = carry(gate_project, wheels, expect=None).stderr
    assert (
        f"0002-add-mul.patch: replay: {CACHE}: changed by the resolution recorded with it, put back" in stop
    )
    assert (
        f"0002-add-mul.patch: replay: {ARG_UTILS}: the resolution recorded for this conflict, replayed"
        in stop
    )
    resolved = next(
        c
        for c in git.core.run(tree, "log", "--format=%H %s").stdout.decode().splitlines()
        if " add-mul:" in c
    ).split()[0]
    assert "# line 20 (no mul() on this base)" in git.repo.show(tree, resolved, CACHE).decode()
    assert "def mul(" not in git.repo.show(tree, resolved, ARG_UTILS).decode()


def test_a_replay_with_no_record_of_the_whole_resolution_stops_for_a_human(gate_project, wheels):  # noqa: F811
    """rerere still holds 0002's conflict resolution, but the tool's record of what else that
    resolution changed is gone (as for one recorded before whole records): the conflict is put
    back and staged, and the port stops there instead of going on with what may be half of it."""
    import shutil

    _resolved_once_then_aborted(gate_project, wheels)
    shutil.rmtree(gate_project.root / "build" / "port-resolutions" / "files")
    stop = carry(gate_project, wheels, expect=12).stderr
    assert "stopped at 0002-add-mul.patch: conflict" in stop
    assert "no record of this patch's whole resolution goes with it" in stop
    tree = gate_project.root / "build" / f"port-{NEW_NAME}"
    assert "def product(a, b):" in (tree / ARG_UTILS).read_text()  # rerere's part, put back


def test_a_file_the_resolution_deleted_is_deleted_again_where_it_still_is_as_it_was(gate_project, wheels):  # noqa: F811
    """The recorded resolution also deleted a file (README.md): replayed, that file goes again, since
    HEAD holds it as it was then; nothing else of the tree is removed."""
    tree = gate_project.root / "build" / f"port-{NEW_NAME}"
    assert "stopped at 0002-add-mul.patch: conflict" in carry(gate_project, wheels, expect=12).stderr
    resolve_as_product(tree)
    git.core.run(tree, "rm", "-q", "README.md")
    assert "stopped at 0003-use-mul.patch: breaks" in carry(gate_project, wheels, expect=12).stderr
    gate_project.cli("port", "abort", "--to", NEW_NAME)
    stop = carry(gate_project, wheels, expect=12).stderr
    assert "stopped at 0003-use-mul.patch: breaks" in stop
    assert (
        "0002-add-mul.patch: replay: README.md: changed by the resolution recorded with it, put back" in stop
    )
    assert not (tree / "README.md").exists() and not git.repo.exists_at(tree, "HEAD", "README.md")
    changed = git.core.out(tree, "diff", "--name-status", "HEAD~1", "HEAD").splitlines()
    assert sorted(changed) == sorted([f"M\t{ARG_UTILS}", "D\tREADME.md"]), changed
