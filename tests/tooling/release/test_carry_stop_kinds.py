"""Every stop of a carry says its kind to scripts (``--json``'s ``kind``, and ``patch`` when a patch
is its cause), not only in its text: the lock step's unserved pin (a decision for the user: exit
12 as the port's stops, no ``Error:``), a patch's conflict. (The environment's stop: test_carry_prove.)
"""

from __future__ import annotations

import json

import pytest

from ..fixtures.carry import carry, carry_project, wheels  # noqa: F401  (fixtures)
from ..fixtures.carrying import NEW, NEW_NAME, OLD_NAME, make_wheels, wheel


@pytest.fixture(scope="module")
def unserved_wheels(tmp_path_factory):
    """The fake release's wheels, but its vllm pins kernels-fake==0.7.3, which the index lacks."""
    index, cpu = make_wheels(tmp_path_factory.mktemp("index"), tmp_path_factory.mktemp("cpu"))
    for f in index.glob("vllm-*.whl"):
        f.unlink()
    wheel(index, "vllm", NEW, ["torch==9.2.0", "torchvision==2.0.0", "helper>=1", "kernels-fake==0.7.3"])
    for version in ("0.7.2.post1", "0.7.4"):
        wheel(index, "kernels-fake", version)
    return index, cpu


def test_a_pin_the_index_does_not_serve_is_the_carrys_lock_stop(carry_project, unserved_wheels):  # noqa: F811
    res = carry(carry_project, unserved_wheels, "--json", expect=12)
    out = json.loads(res.stdout)
    assert out["kind"] == "lock" and "patch" not in out and out["exit_code"] == 12
    assert "needs kernels-fake==0.7.3, which the index does not serve" in out["error"]
    assert out["hint"].startswith("if the CPU tests need no kernels-fake")
    assert "Error:" not in res.stderr  # a stop for the user, said as the port's are
    assert not (carry_project.root / "build" / f"port-{NEW_NAME}").exists()  # no port started


def test_lock_cpu_alone_says_the_kind_too_and_keeps_its_own_exit_code(carry_project, unserved_wheels):  # noqa: F811
    index, cpu = unserved_wheels
    carry(carry_project, unserved_wheels, expect=12)  # pins the release
    args = ["lock-cpu", NEW_NAME, "--no-index", "--find-links", str(index), "--find-links", str(cpu)]
    out = json.loads(carry_project.cli(*args, "--json", expect=1).stdout)
    assert out["kind"] == "lock" and out["exit_code"] == 1


def test_a_conflict_stop_names_its_kind_and_patch(carry_project, wheels):  # noqa: F811
    out = json.loads(carry(carry_project, wheels, "--json", "--no-prove", expect=12).stdout)
    assert out["kind"] == "conflict" and out["patch"].endswith(".patch"), out
    assert f"stopped at {out['patch']}: conflict" in out["error"]


def test_an_error_that_is_no_stop_has_no_kind(carry_project):  # noqa: F811
    out = json.loads(carry_project.cli("carry", "not-a-version", "--json", expect=2).stdout)
    assert "kind" not in out and "patch" not in out


def test_port_status_without_to_lists_the_port_in_progress_with_its_next_step(carry_project, wheels):  # noqa: F811
    assert "no port in progress" in carry_project.cli("port", "status").output
    carry(carry_project, wheels, "--no-prove", expect=12)
    out = json.loads(carry_project.cli("port", "status", "--json").stdout)
    [port] = out["ports"]
    assert port["to_base"] == NEW_NAME and port["current"].endswith(".patch") and port["next_step"]
    text = carry_project.cli("port", "status").output
    assert f"port-{NEW_NAME}" in text and port["current"] in text and "next: " in text


def test_port_status_without_to_names_a_symlink_or_file_where_a_port_tree_goes(carry_project, tmp_path):  # noqa: F811
    where = carry_project.root / "build" / f"port-{OLD_NAME}"
    where.parent.mkdir(parents=True, exist_ok=True)
    where.symlink_to(tmp_path)
    out = json.loads(carry_project.cli("port", "status", "--json").stdout)
    assert out["ports"] == [] and out["unreadable"] == {
        f"build/port-{OLD_NAME}": "a symlink, not a port tree"
    }
    where.unlink()
    where.write_text("x")
    out = json.loads(carry_project.cli("port", "status", "--json").stdout)
    assert out["unreadable"] == {f"build/port-{OLD_NAME}": "not a directory, not a port tree"}
    assert tmp_path.exists() and where.read_text() == "x"  # nothing touched
