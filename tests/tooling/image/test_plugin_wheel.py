"""The plugin wheel for the image: chosen by its pinned hash from a local PEP 691 index, cached, re-checked."""

from __future__ import annotations

import hashlib

import pytest

from tkvseam.errors import NetworkError, VerifyError
from tkvseam.image.wheel import PluginSpec, fetch_wheel

from ..fixtures.index import index_of, serve

WHEEL = "turbo_attn-0.70.1-py3-none-any.whl"
DATA = b"a stand-in for the wheel's bytes\n"
SHA = hashlib.sha256(DATA).hexdigest()
SPEC = PluginSpec("turbo-attn", "0.70.1", (f"sha256:{SHA}",))


@pytest.fixture
def plugin_index(monkeypatch):
    """A PEP 691 index on 127.0.0.1 for turbo-attn; the dict it yields: its listing and files (a test
    changes them), the paths asked."""
    listing = {
        "name": "turbo-attn",
        "files": [{"filename": WHEEL, "url": f"/f/{WHEEL}", "size": len(DATA), "hashes": {"sha256": SHA}}],
    }
    handler = index_of("turbo-attn", listing, {f"/f/{WHEEL}": DATA})
    with serve(handler, monkeypatch):
        yield {"files": handler.files, "listing": handler.listing, "requests": handler.requests}


def test_the_pinned_wheel_is_fetched_once_and_checked_on_every_use(plugin_index, tmp_path):
    wheel = fetch_wheel(SPEC, tmp_path)
    assert wheel == tmp_path / "wheels" / WHEEL and wheel.read_bytes() == DATA
    assert fetch_wheel(SPEC, tmp_path) == wheel
    assert plugin_index["requests"].count(f"/f/{WHEEL}") == 1  # the second use came from the cache
    wheel.write_bytes(b"damaged in the cache\n")
    assert fetch_wheel(SPEC, tmp_path).read_bytes() == DATA  # not trusted: fetched again
    assert plugin_index["requests"].count(f"/f/{WHEEL}") == 2


def test_a_download_that_is_not_the_pinned_bytes_is_refused_and_not_kept(plugin_index, tmp_path):
    other = b"something else!!!\n"[: len(DATA)].ljust(len(DATA), b"!")  # as long as the pinned file
    plugin_index["files"][f"/f/{WHEEL}"] = other  # the listing still claims the pinned hash
    with pytest.raises(VerifyError, match=f"sha256 {hashlib.sha256(other).hexdigest()}") as e:
        fetch_wheel(SPEC, tmp_path)
    assert e.value.exit_code == 4 and "the download was deleted" in e.value.message
    assert list((tmp_path / "wheels").iterdir()) == []


def test_a_release_without_a_wheel_of_the_pinned_hash_is_refused(plugin_index, tmp_path):
    plugin_index["listing"]["files"] = [
        {"filename": "turbo_attn-0.70.1.tar.gz", "url": "/f/x", "hashes": {"sha256": SHA}}
    ]
    with pytest.raises(NetworkError, match="lists no wheel of turbo-attn==0.70.1"):
        fetch_wheel(SPEC, tmp_path)
    plugin_index["listing"]["files"] = [
        {"filename": WHEEL, "url": f"/f/{WHEEL}", "hashes": {"sha256": "0" * 64}},
        {
            "filename": "../../turbo_attn-0.70.1-py3-none-any.whl",
            "url": f"/f/{WHEEL}",
            "hashes": {"sha256": SHA},
        },
        {"filename": 7, "url": f"/f/{WHEEL}"},
    ]
    with pytest.raises(VerifyError, match="no wheel of turbo-attn==0.70.1 has a pinned hash"):
        fetch_wheel(SPEC, tmp_path)
    assert not (tmp_path / "wheels").exists() or list((tmp_path / "wheels").iterdir()) == []


def test_an_entry_without_a_size_is_refused_before_downloading(plugin_index, tmp_path):
    del plugin_index["listing"]["files"][0]["size"]
    with pytest.raises(VerifyError, match="has no size"):
        fetch_wheel(SPEC, tmp_path)
    assert f"/f/{WHEEL}" not in plugin_index["requests"]
