"""Typed results and one renderer (issue 24): every ``--json`` is one object, statuses are the
values of enums and records rather than sentences, nothing parses its own messages back, and the
pins that look like checks are checks (the official image's index digest; the index URL read
the way pip and uv are told it, without pip's internals).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from tkvseam import git
from tkvseam.answer import Answer, plain
from tkvseam.bases.index import PYPI_SIMPLE, default_index_url
from tkvseam.bases.pins import Base, Image, Sdist, load_bases
from tkvseam.edit.refresh import Exported, ExportStatus
from tkvseam.errors import DockerError, UsageError
from tkvseam.image.build import REVISION_LABEL, STAND_IN_LABEL, check_base_image

from .conftest import NAME, message
from .hintcheck import ROOT, problems


def one_patch(project) -> None:
    """The empty series applied, one commit in the tree, refreshed: patches/0001-cache-tweak.patch."""
    project.apply()
    cache = project.tree / "vllm/config/cache.py"
    project.commit_in_tree(
        "vllm/config/cache.py",
        cache.read_text().replace("line 10\n", "line 10 (seam)\n"),
        message("cache-tweak"),
    )
    project.refresh()


# --------------------------------------------------------------------------- one object, typed


def test_refresh_json_is_one_object_and_kept_fields_are_a_list_not_part_of_the_status(project):
    one_patch(project)
    git.run(project.tree, "commit", "-q", "--amend", "-m", "cache-tweak: change things\n\nReworded.\n")
    res = project.refresh("--json")
    out = json.loads(res.stdout)  # an object, not a bare list
    assert out["base"] == NAME and out["series"] == "series" and out["patches"] == "patches"
    assert out["exported"] == [
        {
            "name": "0001-cache-tweak.patch",
            "status": "updated",
            "kept": ["Depends-on", "Reason", "Tests", "Upstream", "Verdict"],
        }
    ]
    assert out["changed"] == 1
    assert project.refresh().stdout == "1 unchanged, 0 changed\n"


def test_the_text_of_an_export_reads_as_before():
    e = Exported("0002-add-mul.patch", ExportStatus.UPDATED, ["Reason", "Verdict"])
    assert e.line("patches") == "updated (kept Reason, Verdict) patches/0002-add-mul.patch"
    assert (
        Exported("0001-x.patch", ExportStatus.ADDED).line("patches/v1") == "added     patches/v1/0001-x.patch"
    )
    assert plain(e) == {"name": "0002-add-mul.patch", "status": "updated", "kept": ["Reason", "Verdict"]}


def test_overlay_files_json_is_one_object(project):
    one_patch(project)
    out = json.loads(project.cli("overlay", "files", "--base", NAME, "--json").stdout)
    assert out == {"base": NAME, "files": ["vllm/config/cache.py"]}
    assert project.cli("overlay", "files", "--base", NAME).stdout == "vllm/config/cache.py\n"


def test_an_answer_is_plain_json():
    from dataclasses import dataclass
    from enum import StrEnum

    class Colour(StrEnum):
        RED = "red"

    @dataclass
    class Thing(Answer):
        colour: Colour
        where: Path
        names: tuple[str, ...]

    thing = Thing(Colour.RED, Path("/x"), ("a", "b"))
    assert thing.to_json() == {"colour": "red", "where": "/x", "names": ["a", "b"]}
    assert type(thing.to_json()["colour"]) is str
    assert thing.exit_code() == 0 and thing.notes() == []


def test_lint_answers_its_problems_as_found_and_ends_with_6(project):
    one_patch(project)
    (project.root / "patches/0001-cache-tweak.patch").write_text("not a patch\n")
    res = project.cli("lint", "--json", expect=6)
    out = json.loads(res.stdout)
    assert out["ok"] is False and out["problems"][0]["patch"] == "0001-cache-tweak.patch"
    assert (
        out["problems"][0]["message"] == "no 'diff --git' section (empty or not a patch)"
    )  # not cut from a sentence
    text = project.cli("lint", expect=6)
    assert (
        "0001-cache-tweak.patch: no 'diff --git' section" in text.stderr
        and "lint: 1 problem(s)" in text.stdout
    )


# --------------------------------------------------------------------------- nothing parses its own sentences


def test_a_corrupt_download_is_named_by_its_url_whatever_the_cache_path(project, index, upstream, tmp_path):
    """The message is made from the mismatch, not cut out of another message (a path with ': ' in it)."""
    bad = b"x" * upstream.size
    index.files[f"/files/{upstream.tarball.name}"] = bad
    cache = tmp_path / "c: d"
    res = project.cli("--cache", str(cache), "fetch", "--base", NAME, "--json", expect=4)
    url = f"/files/{upstream.tarball.name}"
    error = json.loads(res.stdout)["error"]
    assert error.endswith(
        f"{url}: size {upstream.size}, sha256 {hashlib.sha256(bad).hexdigest()}; expected size "
        f"{upstream.size}, sha256 {upstream.sha256}; the download was deleted"
    ), error
    assert "d/sdist" not in error
    assert not list((cache / "sdist").glob("*"))


# --------------------------------------------------------------------------- the official image's digest pin


class Engine:
    """An engine's ``inspect_image`` for one image (the real one cannot be pulled here)."""

    def __init__(self, labels: dict, repo_digests: list[str] | None = None, present: bool = True):
        self.info = {
            "Id": "sha256:" + "1" * 64,
            "Config": {"Labels": labels},
            "RepoDigests": repo_digests or [],
        }
        self.present = present

    def inspect_image(self, image):
        from docker.errors import ImageNotFound

        if not self.present:
            raise ImageNotFound(f"no such image: {image}")
        return self.info


def pinned(prefix: str = "sha256:c1c9f6fd5c10") -> Base:
    return Base(
        "v0.31.0",
        "0.31.0",
        "v0.31.0",
        ("db9527a46873",),
        Sdist("vllm-0.31.0.tar.gz", 1, "0" * 64),
        Image("vllm/vllm-openai:v0.31.0", "db9527a46873", prefix),
    )


OFFICIAL = {REVISION_LABEL: "db9527a46873" + "0" * 28}


def test_the_index_digest_pin_is_read_from_bases_toml():
    assert load_bases(ROOT / "bases.toml")["v0.31.0"].image.index_digest_prefix == "sha256:c1c9f6fd5c10"


def test_the_official_image_pulled_by_its_pinned_digest_passes():
    engine = Engine(OFFICIAL, ["vllm/vllm-openai@sha256:c1c9f6fd5c10" + "2" * 52])
    revision, _, stand_in = check_base_image(engine, "vllm/vllm-openai:v0.31.0", pinned(), False)
    assert revision.startswith("db9527a46873") and stand_in is False
    # a mirror serves the same bytes: the digest is the image's, whatever repository holds it
    mirror = Engine(OFFICIAL, ["mirror.example/vllm-openai@sha256:c1c9f6fd5c10" + "2" * 52])
    assert check_base_image(mirror, "mirror.example/vllm-openai:v0.31.0", pinned(), False)[2] is False


@pytest.mark.parametrize(
    "digests, found",
    [
        ([], "none (an image built or loaded here, not pulled)"),
        (["vllm/vllm-openai@sha256:" + "9" * 64], "sha256:" + "9" * 64),
    ],
)
def test_a_lookalike_with_the_revision_label_but_not_the_pinned_digest_is_refused(digests, found):
    engine = Engine(OFFICIAL, digests)
    with pytest.raises(DockerError) as e:
        check_base_image(engine, "local/lookalike:1", pinned(), False)
    assert e.value.exit_code == 7
    assert "pins its index digest sha256:c1c9f6fd5c10" in e.value.message and found in e.value.message
    assert "docker pull vllm/vllm-openai:v0.31.0" in e.value.hint and "STAND_IN=1" in e.value.hint
    assert problems(e.value.hint) == []
    # with --stand-in it is built on, as a stand-in (its tag says so)
    assert check_base_image(engine, "local/lookalike:1", pinned(), True)[2] is True


def test_without_a_digest_pin_the_revision_label_decides_as_before():
    engine = Engine(OFFICIAL)
    assert check_base_image(engine, "local/x:1", pinned(prefix=""), False)[2] is False
    stand_in = Engine(
        {**OFFICIAL, STAND_IN_LABEL: "true"}, ["vllm/vllm-openai@sha256:c1c9f6fd5c10" + "2" * 52]
    )
    with pytest.raises(DockerError, match="is a tkv-seam stand-in"):
        check_base_image(stand_in, "x:1", pinned(), False)


# --------------------------------------------------------------------------- the index URL


@pytest.fixture
def no_index_env(monkeypatch):
    for var in ("TKV_SEAM_INDEX_URL", "PIP_INDEX_URL", "UV_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setitem(sys.modules, "pip", None)  # pip's internals are not how the tool knows PyPI
    return monkeypatch


def test_the_index_url_is_the_tools_then_pips_then_uvs_then_pypi(no_index_env):
    assert default_index_url() == PYPI_SIMPLE == "https://pypi.org/simple"
    no_index_env.setenv("UV_INDEX_URL", "https://uv.example/simple/")
    assert default_index_url() == "https://uv.example/simple"
    no_index_env.setenv("PIP_INDEX_URL", "https://pip.example/simple")
    assert default_index_url() == "https://pip.example/simple"
    no_index_env.setenv("TKV_SEAM_INDEX_URL", "http://127.0.0.1:9/simple")
    assert default_index_url() == "http://127.0.0.1:9/simple"


@pytest.mark.parametrize("value", ["notaurl", "ftp://example.invalid/simple", "http://", "http://[bad"])
def test_an_index_url_that_is_no_url_is_a_usage_error_naming_its_variable(no_index_env, value):
    no_index_env.setenv("PIP_INDEX_URL", value)
    with pytest.raises(UsageError) as e:
        default_index_url()
    assert "$PIP_INDEX_URL" in e.value.message and repr(value) in e.value.message
    assert problems(e.value.hint) == []


def test_no_official_image_in_the_engine_names_the_stand_in_route():
    """Issue 26: `make image` where the official image cannot be pulled says how to try the build."""
    with pytest.raises(DockerError) as e:
        check_base_image(Engine({}, present=False), "vllm/vllm-openai:v0.31.0", pinned(), False)
    assert "docker pull vllm/vllm-openai:v0.31.0" in e.value.hint
    assert "`make standin BASE=v0.31.0`, then `make image BASE=v0.31.0 STAND_IN=1`" in e.value.hint
    assert problems(e.value.hint) == []
