"""An index URL that is no http(s) URL is a usage error, never a traceback (issue 26, item 9).

``TKV_SEAM_INDEX_URL=notaurl tkv-seam pin 9.10.0`` ended in urllib's "unknown url type" with
a traceback (the request was built outside the handler), and ``http://[::1`` in urlsplit's
"Invalid IPv6 URL". Both are exit 2 now, naming the URL and the variable, as is a scheme the
index client does not speak (``ftp://``, ``file://``).
"""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize(
    "url", ["notaurl", "http://[::1", "ftp://example.invalid/simple", "file:///etc", "http://"]
)
@pytest.mark.parametrize("command", [("pin", "9.10.0"), ("watch",)])
def test_an_index_url_that_is_no_http_url_is_a_usage_error(project, monkeypatch, url, command):
    monkeypatch.setenv("TKV_SEAM_INDEX_URL", url)
    res = project.cli(*command, "--json", expect=2)
    out = json.loads(res.stdout)
    assert out["error"].startswith(f"the index URL {url.rstrip('/')!r} is not"), out
    assert out["hint"].startswith("export TKV_SEAM_INDEX_URL=https://pypi.org/simple")
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert not (project.cache / "sdist").exists()  # nothing fetched
