"""bases.toml, checked when it is read (issue 20, item 3 and its tracebacks): a queue stays
inside the project, reached through no symlink, and is its base's own; every field has its
type, so every command refuses a bad file with one message (and, under --json, one object).
"""

from __future__ import annotations

import json
import os

import pytest

from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml
from ..fixtures.queue import make_two_patches

NEXT = f"v{NEXT_VERSION}"


def two_bases(releases, next_queue: str | None = None) -> str:
    text = bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    if next_queue is not None:
        text = text.replace(
            f'queue = {{ series = "patches/{NEXT}/series", patches = "patches/{NEXT}" }}', next_queue
        )
    return text


def test_a_symlinked_queue_directory_is_refused_before_port_writes_through_it(project, releases, tmp_path):
    make_two_patches(project)
    (project.root / "bases.toml").write_text(two_bases(releases))
    outside = tmp_path / "outside"
    outside.mkdir()
    (project.root / "patches" / NEXT).symlink_to(outside)
    res = project.cli("port", "start", "--to", NEXT, "--json", expect=1)
    assert f"queue of {NEXT}: 'patches/{NEXT}" in res.stderr and "goes through the symlink" in res.stderr
    assert "next: replace patches/" in res.stderr
    assert json.loads(res.stdout)["exit_code"] == 1
    for command in (("bases",), ("lint", "--base", NEXT), ("drift",), ("port", "report", "--to", NEXT)):
        assert "goes through the symlink" in project.cli(*command, expect=1).stderr, command
    assert list(outside.iterdir()) == []
    assert not (project.root / "build" / f"port-{NEXT}").exists()


def test_a_symlinked_series_file_is_to_be_replaced_by_the_file_not_a_directory(project, tmp_path):
    """The hint said "replace series with a directory" for a linked series file."""
    make_two_patches(project)
    shared = tmp_path / "shared-series"
    os.replace(project.root / "series", shared)
    (project.root / "series").symlink_to(shared)
    res = project.cli("bases", expect=1)
    assert (
        "goes through the symlink" in res.stderr and "next: replace series with the file itself" in res.stderr
    )


@pytest.mark.parametrize(
    "queue",
    [
        '{ series = "./series", patches = "patches/" }',
        '{ series = "series", patches = "patches/./" }',
        f'{{ series = "patches/series-{NEXT}", patches = "patches/{NEXT}" }}',
    ],
)
def test_a_second_base_cannot_take_over_the_first_queue_by_spelling(project, releases, queue):
    make_two_patches(project)
    (project.root / "bases.toml").write_text(two_bases(releases, f"queue = {queue}"))
    before = {p.name: p.read_bytes() for p in (project.root / "patches").glob("*.patch")}
    err = project.cli("port", "start", "--to", NEXT, expect=1).stderr
    assert f"{NEXT} and {NAME} share the queue path" in err or f"the series of {NEXT}" in err
    assert "next: give v9.10.0 a queue of its own" in err
    assert {p.name: p.read_bytes() for p in (project.root / "patches").glob("*.patch")} == before
    assert not (project.root / "build" / f"port-{NEXT}").exists()


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            ('queue = { series = "series"', "queue = { series = 5"),
            "queue.series must be a path inside the project; not 5",
        ),
        (("commit_prefixes = [", "commit_prefixes = [] # ["), "commit_prefixes must be a non-empty list"),
        (('version = "9.9.9"', 'version = "nine"'), "version must be a PEP 440 version"),
        (
            ('filename = "vllm-9.9.9.tar.gz"', 'filename = "../../vllm-9.9.9.tar.gz"'),
            "sdist.filename must be",
        ),
        (("size = {size},", "size = true,"), "sdist.size must be a number of bytes; not True"),
        (('sha256 = "', 'sha256 = "X'), "sdist.sha256 must be 64 lowercase hex digits"),
        (("image = {", 'image = "x" # {'), "image must be a table"),
        (
            ('seam = { ruff = "0.14.0" }', 'seam = { plugin = { hashes = "sha256:0" } }'),
            "seam.plugin.hashes must be",
        ),
        ((f'["{NAME}"]', '["../escape"]'), "base name '../escape' must be letters"),
        (
            ('queue = { series = "series"', 'queue = { extra = 1, series = "series"'),
            "queue.extra must be absent",
        ),
    ],
)
def test_a_malformed_bases_file_is_one_message_on_every_command(project, upstream, edit, message):
    text = bases_toml(upstream)
    old = edit[0].replace("{size}", str(upstream.size))
    assert old in text
    (project.root / "bases.toml").write_text(text.replace(old, edit[1], 1))
    for command in (("bases",), ("apply", "--base", NAME), ("watch",), ("pin", "9.10.0")):
        res = project.cli(*command, "--json", expect=None)
        assert res.exit_code in (1, 2) and message in res.stderr, (command, res.stderr)
        assert "Traceback" not in res.stderr and "next: " in res.stderr
        assert json.loads(res.stdout)["ok"] is False, command


def test_the_project_bases_file_passes_the_checks():
    from pathlib import Path

    from tkvseam.bases.pins import load_bases

    root = Path(__file__).resolve().parents[3]
    bases = load_bases(root / "bases.toml", root)
    assert {b.queue.patches for b in bases.values()} >= {"patches", "patches/v0.32.0", "patches/v0.33.0"}
