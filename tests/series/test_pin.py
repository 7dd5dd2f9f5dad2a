"""The base's pin in bases.toml is what `tkv-seam pin` derives from its real, cached sdist.

Runs after `make apply BASE=<base>` ($BASE, default v0.31.0), which fetched and verified that
sdist into the tkv-seam cache. A local PEP 691 index lists the file with the pinned size and
sha256 but serves nothing: `pin` must re-derive the commit from the cached sdist, offline, and
leave bases.toml byte for byte as it is.
"""

from __future__ import annotations


from tests.tooling.conftest import serve_index
from tkvseam.bases.pins import default_cache_dir, load_bases
from tkvseam.release.pin import pin

from ..conftest import BASE, ROOT


def test_the_bases_pin_is_a_noop_from_its_cached_sdist(tmp_path, monkeypatch):
    base = load_bases(ROOT / "bases.toml")[BASE]
    cache = default_cache_dir()
    assert (cache / "sdist" / base.sdist.filename).exists(), f"run `make apply BASE={BASE}` first"
    with serve_index({}, monkeypatch) as index:
        index.listing["files"] = [
            {
                "filename": base.sdist.filename,
                "url": "/missing",
                "size": base.sdist.size,
                "hashes": {"sha256": base.sdist.sha256},
            }
        ]
        copy = tmp_path / "bases.toml"
        copy.write_bytes((ROOT / "bases.toml").read_bytes())
        result = pin(copy, base.version, cache)
        assert (result.status, result.commit_prefix) == ("unchanged", base.commit_prefixes[0])
        assert copy.read_bytes() == (ROOT / "bases.toml").read_bytes()
        assert not [r for r in index.requests if r.startswith("/missing")]
