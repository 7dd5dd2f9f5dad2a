"""seamtest: how per-test outcomes are folded and what counts as bisectable."""

from __future__ import annotations

from tkvseam.seamtest.bisect import BisectRow
from tkvseam.seamtest.hfcache import SNAPSHOT, build
from tkvseam.seamtest.outcomes import fold

F = "tests/v1/core/test_x.py"


def rows(*items):
    return {nid: {"nodeid": nid, "outcome": out} for nid, out in items}


def test_parametrized_instances_fold_to_the_worst_outcome():
    r = rows((f"{F}::test_a[1]", "passed"), (f"{F}::test_a[2]", "failed"), (f"{F}::test_b", "passed"))
    assert fold(r, f"{F}::test_a") == "failed"
    assert fold(r, f"{F}::test_b") == "passed"
    assert fold(r, f"{F}::test_c") == "missing"


def test_collection_error_fails_every_test_of_the_file_and_a_skip_is_not_a_pass():
    assert fold(rows((F, "error")), f"{F}::test_a") == "failed"
    assert fold(rows((f"{F}::test_a", "skipped")), f"{F}::test_a") == "skipped"
    assert fold(rows((f"{F}::test_ab", "passed")), f"{F}::test_a") == "missing"


def test_bisectable_means_pass_at_k_and_fail_before_guards_only_need_to_pass():
    assert BisectRow(1, "p", "t", "test", "passed", "failed").ok
    assert not BisectRow(1, "p", "t", "test", "passed", "passed").ok  # cannot fail: not proof
    assert not BisectRow(1, "p", "t", "test", "skipped", "failed").ok
    assert BisectRow(1, "p", "t", "guard", "passed", "passed").ok
    assert not BisectRow(1, "p", "t", "guard", "failed", "passed").ok


def test_offline_hf_cache_has_config_only_snapshots(tmp_path):
    configs = tmp_path / "cfg" / "Qwen--Qwen3-0.6B"
    configs.mkdir(parents=True)
    (configs / "config.json").write_text("{}")
    hub = build(tmp_path / "hf", tmp_path / "cfg")
    repo = hub / "models--Qwen--Qwen3-0.6B"
    assert (repo / "refs/main").read_text() == SNAPSHOT
    assert sorted(p.name for p in (repo / "snapshots" / SNAPSHOT).iterdir()) == ["config.json"]
    assert (repo / ".no_exist" / SNAPSHOT / "tokenizer.json").exists()
    assert (hub / "models--dummy/refs/main").exists()
