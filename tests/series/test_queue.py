"""The real seam series on a real base: footprint, forbidden names, quilt and git am.

Runs after `make apply BASE=<base>` (uses build/vllm-<base> and its pristine base commit);
the base is $BASE (default v0.31.0), its queue the one bases.toml names for it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tkvseam import git
from tkvseam.tree.state import TreeState
from tkvseam.queue.footprint import overlay_paths
from tkvseam.bases.pins import load_bases
from tkvseam.bases.carried import footprint, skipped
from tkvseam.queue.series import read_series

from ..conftest import BASE, ROOT, TREE

PINS = load_bases(ROOT / "bases.toml")[BASE]
QUEUE = PINS.queue

# The seam's concerns, one patch each, in this order (README "The series"). Every carried base
# carries them all, except those its port left out (skipped in its PORT.md).
CONCERNS = [
    "kv-cache-dtype-registry",
    "turbo-attn-backend-slot",
    "turbo-attn-cuda-candidate",
    "plugin-dtype-implies-turbo-attn",
    "backend-lifecycle-hooks",
    "mla-backend-wrapping",
    "mla-chunked-context-gather-op",
    "tkv-layer-index",
    "fused-kv-pages",
    "protocol-doc",
]
# What the base's own queue touches (its footprint; tkvseam.bases.carried).
FOOTPRINT = footprint(ROOT, PINS)
SLUGS = [c for c in CONCERNS if c not in skipped(ROOT, PINS)]

# Obsolete or dropped names (mechanisms an earlier version of the seam had, since replaced by upstream's
# or dropped): no line the series adds, code or test, may carry them.
FORBIDDEN = [
    "get_kv_cache_spec_class",
    "get_manager_class",
    "uses_per_group_kv_pool",
    "on_kv_manager_created",
    "get_supported_kv_cache_dtypes",
    "_MultiGroupPoolView",
    "per_group_num_blocks",
    "kv_cache_dtype_skip_layers_dtype",
    "kv-cache-dtype-skip-layers-dtype",
    "VLLM_KV_CACHE_SKIP_LAYERS_DTYPE",
    "VLLM_SAMPLER_RESERVE_MIB",
    "kv_cache_dtype_is_backend_managed",
    "spec_decode_warmup",
    "turbo_attn_warmup",
    "cutedsl_cache",
    "get_required_kv_cache_layout",
    "set_kv_cache_layout",
]


@pytest.fixture(scope="module")
def patches():
    return read_series(ROOT, QUEUE, BASE).load()


@pytest.fixture(scope="module")
def state():
    s = TreeState.load(TREE)
    assert s is not None, f"{TREE} missing: run `make apply`"
    return s


def test_series_is_the_concerns_in_order(patches):
    assert [p.header.slug for p in patches] == SLUGS
    assert [p.name for p in patches] == [f"{i:04d}-{s}.patch" for i, s in enumerate(SLUGS, 1)]


def test_footprint_is_what_the_applied_tree_changes(patches, state):
    """The queue's files (read from its patches) are the files git sees changed between the
    base commit and the applied tree's HEAD; the overlay is their vllm/ part, each file one the
    pristine base has (an overlay replaces, never adds); besides it only tests and PROTOCOL.md."""
    changed = git.core.out(TREE, "diff", "--name-only", state.base_commit, state.head).split()
    assert sorted(changed) == list(FOOTPRINT.files)
    assert overlay_paths(patches) == list(FOOTPRINT.vllm_files)
    assert sorted(p for p in changed if p.startswith("vllm/")) == list(FOOTPRINT.vllm_files)
    pristine = set(git.core.out(TREE, "ls-tree", "-r", "--name-only", state.base_commit, "vllm/").split())
    assert set(FOOTPRINT.vllm_files) <= pristine
    assert all(p.startswith("tests/") or p == "PROTOCOL.md" for p in FOOTPRINT.other_files), FOOTPRINT
    assert not [p for p in FOOTPRINT.files if p.endswith("__init__.py")]


def test_no_obsolete_or_dropped_name_is_added(patches):
    hits = [
        (p.name, f, n, name)
        for p in patches
        for f, n, text in p.added_lines()
        if f != "PROTOCOL.md"  # the contract must say which names no longer exist
        for name in FORBIDDEN
        if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
    ]
    assert hits == []
    # backend-level get_gather_op is obsolete; only MLACommonBaseImpl._get_gather_op exists
    assert not [t for p in patches for f, _, t in p.added_lines() if re.search(r"(?<!_)\bget_gather_op\b", t)]


def test_every_patch_says_why_and_how_it_is_tested(patches):
    for p in patches:
        h = p.header
        assert h.description and h.get("Verdict") and h.get("Reason"), p.name
        assert h.tests or h.get("Checks"), p.name
        for node in h.tests + h.guards:
            assert node.split("::")[0] in {fc.path for fc in p.files}, (p.name, node)


def test_every_code_patch_has_a_guard_and_says_where_it_belongs(patches):
    """Patches 0001-0008 name guards ("without the plugin": stock behaviour is
    unchanged with no plugin registered); every header says whether the patch
    is upstreamable and cites no fork-internal pull request numbers."""
    for p in patches[:8]:
        assert p.header.guards, p.name
    for p in patches:
        assert p.header.get("Upstream"), p.name
        assert not re.search(r"(?<![\w&])#\d+\b", p.header.body), p.name


def _pristine_copy(state, dest: Path) -> None:
    data = git.core.run(TREE, "archive", "--format=tar", state.base_commit).stdout
    dest.mkdir()
    subprocess.run(["tar", "-x", "-C", str(dest)], input=data, check=True)


def test_quilt_push_all_applies_without_fuzz(tmp_path, state):
    assert shutil.which("quilt"), "quilt is required for this check: apt-get install quilt"
    work = tmp_path / "q"
    _pristine_copy(state, work)
    env = dict(
        os.environ,
        QUILT_PATCHES=str(ROOT / QUEUE.patches),
        QUILT_SERIES=str(ROOT / QUEUE.series),
        QUILT_PC=str(tmp_path / "pc"),
    )
    proc = subprocess.run(
        ["quilt", "push", "-a", "--fuzz=0"], cwd=work, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "offset" not in proc.stdout and "fuzz" not in proc.stdout
    for path in FOOTPRINT.files:
        assert (work / path).read_bytes() == git.core.run(TREE, "show", f"{state.head}:{path}").stdout, path


def test_git_am_in_series_order_gives_the_same_tree(tmp_path, state):
    work = tmp_path / "am"
    git.core.run(None, "clone", "-q", "--no-checkout", "--local", str(TREE), str(work))
    git.core.run(work, "checkout", "-q", "-b", "am", state.base_commit)
    names = read_series(ROOT, QUEUE, BASE).names
    git.core.run(work, "am", "-q", "--no-3way", *[str(ROOT / QUEUE.patches / n) for n in names])
    assert git.core.out(work, "rev-parse", "HEAD^{tree}") == git.core.out(
        TREE, "rev-parse", f"{state.head}^{{tree}}"
    )
    subjects = git.core.out(work, "log", "--format=%s", f"{state.base_commit}..HEAD").splitlines()
    assert [s.split(":")[0] for s in reversed(subjects)] == SLUGS
