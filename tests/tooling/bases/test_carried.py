"""Bases are data: the carried bases in release order, and what each one's queue says about it."""

from __future__ import annotations

import json
import tomllib

import pytest

from tkvseam.bases.pins import load_bases
from tkvseam.bases.carried import carried_before, footprint, planner_module, skipped
from tkvseam.errors import SeamError

from ..fixtures.queue import message, make_two_patches
from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml

NEXT = f"v{NEXT_VERSION}"


def fake_base(name: str, version: str) -> str:
    """A pinned base that is never fetched (its pins are placeholders)."""
    return f"""
["{name}"]
version = "{version}"
commit_prefixes = ["0123456"]
sdist = {{ filename = "vllm-{version}.tar.gz", size = 1, sha256 = "{"0" * 64}" }}
image = {{ name = "x", revision_prefix = "0123456" }}
"""


def give_queue(root, name: str) -> None:
    (root / "patches" / name).mkdir(parents=True, exist_ok=True)
    (root / "patches" / name / "series").write_text("")


def test_pin_inserts_a_release_in_release_order_whatever_order_pins_arrive_in(project, releases):
    later = fake_base("v9.11.0", "9.11.0")
    before = bases_toml(releases[NAME]) + later
    (project.root / "bases.toml").write_text(before)
    project.cli("pin", NEXT_VERSION)
    after = (project.root / "bases.toml").read_text()
    assert list(tomllib.loads(after)) == [NAME, NEXT, "v9.11.0"]
    # every other byte stays: the new table sits between the two, the later one is untouched
    head, new, tail = after.partition(f'["{NEXT}"]\n# pinned by `tkv-seam pin {NEXT_VERSION}`')
    assert new and head == bases_toml(releases[NAME]) + "\n"
    assert tail.endswith(f'patches = "patches/{NEXT}" }}\n' + later)


def test_carried_lists_the_bases_with_a_queue_in_release_order(project, releases):
    text = bases_toml(releases[NAME]) + fake_base("v9.10.0", "9.10.0") + fake_base("v9.9.10", "9.9.10")
    text += fake_base("v9.12.0", "9.12.0")  # pinned, no queue yet: not carried
    (project.root / "bases.toml").write_text(text)
    give_queue(project.root, "v9.10.0")
    give_queue(project.root, "v9.9.10")
    out = project.cli("carried").output.split()
    assert out == [NAME, "v9.9.10", "v9.10.0"]  # PEP 440: 9.9.10 before 9.10.0, whatever the file says
    assert json.loads(project.cli("carried", "--json").output) == {"ok": True, "carried": out}
    bases = load_bases(project.root / "bases.toml")
    assert carried_before(bases, project.root, "9.12.0").name == "v9.10.0"
    assert carried_before(bases, project.root, "9.10.0").name == "v9.9.10"
    assert carried_before(bases, project.root, "9.9.9") is None


def _patch_text(slug: str, path: str, added: list[str]) -> str:
    body = "".join(f"+{line}\n" for line in added)
    msg = message(slug).rstrip("\n")
    subject, rest = msg.split("\n", 1)
    return (
        f"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        f"From: Seam Dev <dev@example.invalid>\nSubject: [PATCH] {subject}\n{rest}\n---\n"
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -1,0 +2,{len(added)} @@\n{body}"
    )


def test_footprint_planner_module_and_skipped_concerns_come_from_the_queue(project):
    root = project.root
    (root / "patches" / "0001-fused-kv-pages.patch").write_text(
        _patch_text(
            "fused-kv-pages",
            "vllm/v1/core/kv_cache_planning.py",
            ["    return merged.page_size_bytes == first.page_size_bytes"],
        )
    )
    (root / "patches" / "0002-tkv-layer-index.patch").write_text(
        _patch_text("tkv-layer-index", "tests/test_layers.py", ["def test_layers():", "    pass"])
    )
    project.write_series("0001-fused-kv-pages.patch", "0002-tkv-layer-index.patch")
    base = load_bases(root / "bases.toml")[NAME]
    fp = footprint(root, base)
    assert fp.slugs == ("fused-kv-pages", "tkv-layer-index")
    assert fp.vllm_files == ("vllm/v1/core/kv_cache_planning.py",)
    assert fp.other_files == ("tests/test_layers.py",)
    assert planner_module(root, base) == "vllm.v1.core.kv_cache_planning"
    assert skipped(root, base) == set()
    # PORT.md as the port writes it, and as a reviewer rewrites it: skipped rows name the concern
    (root / "patches" / "PORT.md").write_text(
        "# Port v9.9.8 -> v9.9.9\n\n| patch | status | verdict | reason |\n|---|---|---|---|\n"
        "| 0001-fused-kv-pages.patch | exact | still needed | x |\n"
        "| 0003-kv-cache-dtype-registry.patch | skipped | obsolete | upstream has it |\n"
        "| 0004 mla-backend-wrapping | Skipped (dropped) | dropped | y |\n"
    )
    assert skipped(root, base) == {"kv-cache-dtype-registry", "mla-backend-wrapping"}


def test_a_queue_without_the_planner_patch_says_where_to_look(project):
    """The planner module is the vllm/v1/core/ module fused-kv-pages changes, whatever it adds
    (v0.33.0's patch defines no helper there); another patch's core module does not count."""
    (project.root / "patches" / "0001-tkv-layer-index.patch").write_text(
        _patch_text("tkv-layer-index", "vllm/v1/core/x.py", ["y = 1"])
    )
    project.write_series("0001-tkv-layer-index.patch")
    with pytest.raises(SeamError, match="fused-kv-pages patch changes no vllm/v1/core/ file") as e:
        planner_module(project.root, load_bases(project.root / "bases.toml")[NAME])
    assert "grep -n '^diff --git a/vllm/v1/core/' patches/*-fused-kv-pages.patch" in e.value.hint


def test_watch_report_ports_each_release_from_the_newest_carried_queue_older_than_it(
    project, index, releases
):
    """Two carried bases: 9.10.0 is ported from 9.9.9's queue, never onto itself; 9.9.9 has no
    older queue to come from, so asking for it is refused (a port goes forward only)."""
    make_two_patches(project)
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    give_queue(project.root, NEXT)  # carried, with an empty queue of its own
    out = json.loads(project.cli("watch", "--since", NAME, "--report", "--json", expect=11).output)
    (row,) = out["releases"]
    counts = row["summary"]["by_status"]
    assert row["from_base"] == NAME and counts["3-way"] == 1 and counts["conflict"] == 1
    data = json.loads((project.root / "build/drift" / f"{NEXT_VERSION}.json").read_text())
    assert (
        data["from"]["name"] == NAME and data["source"] == f"tkv-seam port report --base {NAME} --to {NEXT}"
    )
    res = project.cli("watch", "--since", "0", "--report", expect=2)
    assert f"9.9.9: no report: no carried base is older than {NAME}: a port goes forward only" in res.output
    assert f"{NEXT_VERSION}: 1 of 2 patches apply" in res.output


def test_port_takes_the_newest_carried_queue_older_than_its_target_by_default(project, releases, monkeypatch):
    monkeypatch.delenv("BASE", raising=False)
    make_two_patches(project)
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME])
        + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
        + fake_base("v9.8.0", "9.8.0")  # carried too (an empty queue), older than both
    )
    give_queue(project.root, "v9.8.0")
    out = json.loads(project.cli("port", "report", "--to", NEXT, "--json").output)
    assert out["from"] == NAME  # not v9.8.0 (older), not the Makefile's old default
    err = project.cli("port", "start", "--to", "v9.8.0", expect=2).stderr
    assert "no carried base is older than v9.8.0: nothing to port onto it" in err
