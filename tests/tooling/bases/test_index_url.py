"""The index URL the tool asks (issue 24: read as pip and uv are told it, without pip's internals),
what it does with one that is no URL or a page it cannot read (issue 26, item 9), and a corrupt
download's message made from the mismatch (never cut out of another message)."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

from tkvseam.bases.index import PYPI_SIMPLE, default_index_url
from tkvseam.errors import UsageError

from ..fixtures.hintcheck import problems
from ..fixtures.upstream import NAME, NEXT_VERSION


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


@pytest.mark.parametrize("var", ["TKV_SEAM_INDEX_URL", "PIP_INDEX_URL"])
def test_an_index_url_that_is_no_url_is_a_usage_error_not_a_traceback(project, monkeypatch, var):
    monkeypatch.delenv("TKV_SEAM_INDEX_URL", raising=False)
    monkeypatch.setenv(var, "notaurl")
    res = project.cli("pin", NEXT_VERSION, "--json", expect=2)
    out = json.loads(res.stdout)
    assert "Traceback" not in res.stderr and "'notaurl' is not a package index URL" in out["error"]
    assert var in out["error"] and problems(out["hint"]) == []


def test_an_index_page_whose_files_are_not_entries_is_not_no_newer_release(project, index):
    index.listing = {"name": "vllm", "files": [1, 2]}
    for args in (("watch",), ("pin", NEXT_VERSION)):
        res = project.cli(*args, "--json", expect=8)
        assert "is not a PEP 691 project page (files[0] is a int" in json.loads(res.stdout)["error"]


def test_an_entry_naming_no_file_never_lets_watch_say_nothing_is_new(project, index):
    """One odd entry does not hide the others (a release the page lists is still found); but
    when nothing newer was found, the entry it could not read may be that release."""
    newer = index.listing["files"][1]
    index.listing["files"] = [index.listing["files"][0], {"url": newer["url"]}]
    res = project.cli("watch", "--json", expect=8)
    error = json.loads(res.stdout)["error"]
    assert "no release newer than v9.9.9 that tkv-seam can read, and 1 entry it cannot" in error
    index.listing["files"].append(newer)
    assert (
        json.loads(project.cli("watch", "--json", expect=11).stdout)["releases"][0]["version"] == NEXT_VERSION
    )


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
