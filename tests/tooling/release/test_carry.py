"""carry: a new release carried end to end on the synthetic upstream, with nothing else edited.

v9.9.9 is carried (its two-patch queue, its lock, its .seam table); v9.10.0 ships. `carry
9.10.0` pins it, writes its .seam table and CPU lock, starts the port from v9.9.9's queue and
stops at the patch the test planted a conflict for (upstream rewrote sub()); the test
resolves it, runs `carry 9.10.0` again, and the base is carried: lint, series and lane data
present, and git sees changes only in its queue directory, bases.toml and its lock.
"""

from __future__ import annotations

import json


from tkvseam import git
from tkvseam.bases.pins import load_bases
from tkvseam.bases.carried import carried_bases, footprint

from ..fixtures.carrying import NEW, NEW_NAME, OLD_FILES, OLD_NAME, carrying_project, status
from ..fixtures.carry import carry, carry_project, resolve_sub, wheels  # noqa: F401  (fixtures)
from ..fixtures.upstream import make_release
from ..fixtures.make import make as make_fixture

make = make_fixture  # fixtures/make.py: real make, the tool replaced by a recorder


def test_carry_pins_writes_the_seam_table_and_lock_and_ports_from_the_older_queue(carry_project, wheels):  # noqa: F811
    root = carry_project.root
    first = carry(carry_project, wheels, expect=12)
    assert "port to v9.10.0 stopped at 0002-add-mul.patch" in first.stderr
    assert f"make carry VERSION={NEW}` again (it continues the port)" in first.stderr
    base = load_bases(root / "bases.toml")[NEW_NAME]
    assert base.seam.ruff == "0.14.0" and base.seam.plugin.requirement == "turbo-attn==1.0.0"
    assert base.seam.upstream_tests == ("tests/test_math.py", "tests/unit/test_moved.py")
    assert "torch==9.1.0+cpu" in (root / base.cpu_lock).read_text()
    lock_before = (root / base.cpu_lock).read_bytes()

    tree = root / "build" / f"port-{NEW_NAME}"
    resolve_sub(tree)
    out = json.loads(carry(carry_project, wheels, "--reason", "upstream rewrote sub()", "--json").stdout)
    assert out["carried"] and out["source"] == OLD_NAME and out["problems"] == []
    steps = {s["step"]: s["status"] for s in out["steps"]}
    assert steps == {
        "pin": "pinned",
        "seam-table": "kept",
        "lock": "kept",
        "prove": "on",  # the venv built by carry, its canary passed
        "port": "finished",
    }
    assert (root / base.cpu_lock).read_bytes() == lock_before  # the second run kept the first's lock

    # the new base is carried: its queue lints, make test takes it from bases.toml
    assert carried_bases(load_bases(root / "bases.toml"), root) == [OLD_NAME, NEW_NAME]
    carry_project.cli("lint", "--base", NEW_NAME)
    fp = footprint(root, load_bases(root / "bases.toml")[NEW_NAME])
    assert fp.slugs == ("cache-tweak", "add-mul")
    assert fp.vllm_files == ("vllm/config/cache.py", "vllm/engine/arg_utils.py")
    patch = (root / "patches" / NEW_NAME / "0002-add-mul.patch").read_text()
    assert "Reason: upstream rewrote sub()" in patch
    assert "0002-add-mul.patch" in (root / "patches" / NEW_NAME / "PORT.md").read_text()
    # nothing outside its queue directory, its bases.toml entry and its lock
    assert sorted(status(root)) == sorted(
        [
            " M bases.toml",
            f"?? ci/lock-cpu-{NEW_NAME}.txt",
            f"?? patches/{NEW_NAME}/0001-cache-tweak.patch",
            f"?? patches/{NEW_NAME}/0002-add-mul.patch",
            f"?? patches/{NEW_NAME}/PORT.md",
            f"?? patches/{NEW_NAME}/series",
        ]
    )
    diff = git.core.run(root, "diff", "--", "bases.toml").stdout.decode().splitlines()
    assert not [line for line in diff if line.startswith("-") and not line.startswith("---")]  # only added
    assert f'+["{NEW_NAME}".seam]' in diff

    # and a third run has nothing left to do
    before = status(root)
    again = carry(carry_project, wheels).output
    print("THIRD", again)
    assert f"port       carried: patches/{NEW_NAME}/series exists" in again
    assert f"{NEW_NAME}: carried; next: make test BASE={NEW_NAME}" in again
    assert status(root) == before


def test_carry_refuses_a_release_no_carried_queue_is_older_than(tmp_path, carrying_releases, monkeypatch):
    """9.9.8 is on the index but older than every carried base: refused before it is pinned."""
    older = make_release(tmp_path / "older", "9.9.8", OLD_FILES)
    with carrying_project(tmp_path, {**carrying_releases, "v9.9.8": older}, monkeypatch) as (project, _):
        before = (project.root / "bases.toml").read_bytes()
        err = project.cli("carry", "9.9.8", expect=1).stderr
        assert "no carried base is older than 9.9.8: nothing to carry it from" in err
        assert (project.root / "bases.toml").read_bytes() == before
        assert not (project.cache / "sdist" / "vllm-9.9.8.tar.gz").exists()  # nothing downloaded
    out = project.cli("carry", "9.9.9").output  # the top-level queue's own release: carried already
    assert "carried: series exists" in out
    err = project.cli("carry", "latest", expect=2).stderr
    assert "'latest' is not a PEP 440 version" in err


def test_a_verdict_for_a_port_not_yet_stopped_is_a_usage_error(carry_project, wheels):  # noqa: F811
    err = carry(carry_project, wheels, "--reason", "why", expect=2).stderr
    assert "--verdict/--reason are for a port stopped at a patch" in err
    assert not (carry_project.root / "build" / f"port-{NEW_NAME}").exists()


def test_make_carry_passes_what_you_give_as_written_and_runs_nothing(make, tmp_path):
    mark = tmp_path / "ran"
    reason = f"upstream rewrote `touch {mark}` $(touch {mark}) 'q' \"dq\""
    proc, argv = make(
        "carry", "VERSION=0.34.0", f"REASON={reason}", "VERDICT=re-expressed", "PLUGIN=turbo-attn==9"
    )
    assert proc.returncode == 0, proc.stderr
    assert argv == [
        "carry", "0.34.0", "--plugin", "turbo-attn==9", "--verdict", "re-expressed", "--reason", reason,
    ]  # fmt: skip
    assert not mark.exists()
    proc, argv = make("carry")
    assert proc.returncode == 2 and "usage: make carry VERSION=0.34.0" in proc.stderr and argv is None


def test_a_carry_killed_before_its_lock_goes_on_from_there(carry_project, wheels, crash_at):  # noqa: F811
    """A real process, SIGKILLed when it is about to resolve the lock (pin and .seam table done)."""
    index, cpu = wheels
    argv = ["--root", str(carry_project.root), "--cache", str(carry_project.cache), "-q", "carry", NEW]
    crash_at(
        "tkvseam.release.carry.lock_cpu",
        *argv,
        "--no-index",
        "--find-links",
        str(index),
        "--find-links",
        str(cpu),
    )
    base = load_bases(carry_project.root / "bases.toml")[NEW_NAME]
    assert base.seam.ruff == "0.14.0" and not (carry_project.root / base.cpu_lock).exists()
    assert not (carry_project.root / "build" / f"port-{NEW_NAME}").exists()
    res = carry(carry_project, wheels, expect=12)
    assert "port to v9.10.0 stopped at 0002-add-mul.patch" in res.stderr
    assert (carry_project.root / base.cpu_lock).is_file()


def test_two_carries_at_once_make_one_port_and_a_valid_bases_file(carry_project, wheels):  # noqa: F811
    import os
    import subprocess
    import sys

    index, cpu = wheels
    cmd = [
        sys.executable,
        "-m",
        "tkvseam",
        "--root",
        str(carry_project.root),
        "--cache",
        str(carry_project.cache),
    ]
    cmd += ["-q", "carry", NEW, "--no-index", "--find-links", str(index), "--find-links", str(cpu)]
    env = dict(os.environ, TKV_SEAM_LOCK_TIMEOUT="300")
    runs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = sorted((r.wait(), r.stderr.read()) for r in runs)
    codes = [rc for rc, _ in results]
    assert codes == [5, 12], results  # one port stops at the planted patch; the other is refused
    bases = load_bases(carry_project.root / "bases.toml")
    assert list(bases) == [OLD_NAME, NEW_NAME] and bases[NEW_NAME].seam.ruff == "0.14.0"
    text = (carry_project.root / "bases.toml").read_text()
    assert text.count(f'["{NEW_NAME}"]') == 1 and text.count(f'["{NEW_NAME}".seam]') == 1
    status = json.loads(carry_project.cli("port", "status", "--to", NEW_NAME, "--json").output)
    assert status["current"] == "0002-add-mul.patch"
