"""The index client under a hostile or failing index (issue 20's tracebacks and wrong answers):
every failure is one message with a next step, the right exit code, one JSON object.
"""

from __future__ import annotations

import http.server
import json
import resource
import signal
import socket
import subprocess
import sys
import threading

import pytest

from ..fixtures.upstream import NAME, NEXT_VERSION

NEXT = f"v{NEXT_VERSION}"


def entry(index, filename: str) -> dict:
    return next(f for f in index.listing["files"] if f["filename"] == filename)


def fails(project, *args: str, code: int) -> tuple[str, dict]:
    res = project.cli(*args, "--json", expect=code)
    assert "Traceback" not in res.stderr and "next: " in res.stderr, res.stderr
    return res.stderr, json.loads(res.stdout)


@pytest.mark.parametrize(
    "listing, message",
    [
        ([], "is not a PEP 691 project page (a list; expected an object with a 'files' list)"),
        ({"files": "vllm-9.10.0.tar.gz"}, "is not a PEP 691 project page ('files' is a str"),
        ({"files": [{"filename": 5}]}, "lists no sdist of vllm 9.10.0"),
    ],
)
def test_a_listing_of_the_wrong_shape_is_refused_by_pin_watch_and_apply(project, index, listing, message):
    index.listing = listing
    err, out = fails(project, "pin", NEXT_VERSION, code=8 if "PEP 691" in message else 1)
    assert message in err and out["ok"] is False
    if "PEP 691" in message:
        assert message in fails(project, "watch", code=8)[0]
        assert message in fails(project, "apply", "--base", NAME, code=8)[0]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("hashes", "sha256=00", "hashes is a str, not a table"),
        ("url", None, "no url"),
        ("url", "file:///etc/passwd", "its url file:///etc/passwd is file:, not the index's http:"),
        ("size", "big", "size 'big' is not a number of bytes"),
    ],
)
def test_an_entry_the_index_got_wrong_is_exit_4_and_nothing_is_downloaded(
    project, index, field, value, message
):
    e = entry(index, f"vllm-{NEXT_VERSION}.tar.gz")
    if value is None:
        del e[field]
    else:
        e[field] = value
    err, out = fails(project, "pin", NEXT_VERSION, code=4)
    assert f"the index's entry for vllm-{NEXT_VERSION}.tar.gz: {message}" in err
    assert not [r for r in index.requests if r.startswith("/files/")]
    assert not (project.cache / "sdist").exists()
    watched = json.loads(project.cli("watch", "--json", expect=11).stdout)  # listing still works
    assert NEXT_VERSION in [r["version"] for r in watched["releases"]]


def test_a_listing_past_the_cap_is_not_read(project, index, monkeypatch):
    monkeypatch.setattr("tkvseam.bases.index.MAX_LISTING_BYTES", 2000)
    index.listing["files"] += [{"filename": f"vllm-0.0.{i}.tar.gz", "url": "/x"} for i in range(100)]
    err, _ = fails(project, "watch", code=8)
    assert "bytes, more than the 2000 bytes a project page may have; not read" in err


def test_a_listing_without_a_length_is_read_up_to_the_cap_only(project, monkeypatch):
    """A server that streams without Content-Length: the client stops at the cap."""
    sent = {"bytes": 0}

    class Endless(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.end_headers()
            self.wfile.write(b'{"files": [')
            try:
                for _ in range(10_000):
                    self.wfile.write(b'{"filename": "vllm-0.0.0.tar.gz", "url": "/x"},' * 100)
                    sent["bytes"] += 4700
            except OSError:
                pass  # the client hung up

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TKV_SEAM_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")
    monkeypatch.setattr("tkvseam.bases.index.MAX_LISTING_BYTES", 1 << 20)
    try:
        err, _ = fails(project, "watch", code=8)
    finally:
        server.shutdown()
        server.server_close()
    assert "is larger than the 1 MiB a project page may have; not read further" in err
    assert sent["bytes"] < 47_000_000  # it stopped well before the server's 47 MB


def test_pin_of_a_short_version_pins_the_release_the_index_spells(project, index):
    out = json.loads(project.cli("pin", "9.10", "--json").stdout)
    assert out["name"] == NEXT and out["status"] == "added"
    assert len([r for r in index.requests if r.startswith("/files/")]) == 1


def test_watch_write_without_report_prints_one_json_object(project):
    res = project.cli("watch", "--write", "--json", expect=2)
    assert json.loads(res.stdout) == {
        "ok": False,
        "error": "--write only makes sense with --report",
        "hint": "make watch REPORT=1 WRITE=1",
        "exit_code": 2,
    }


def test_an_index_that_is_down_is_exit_8_and_pin_does_not_suggest_vllm_git(project, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    monkeypatch.setenv("TKV_SEAM_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    for command in (("pin", NEXT_VERSION), ("watch",)):
        err, out = fails(project, *command, code=8)
        assert "VLLM_GIT" not in err and "TKV_SEAM_INDEX_URL" in out["hint"], command
    assert "VLLM_GIT" in fails(project, "apply", "--base", NAME, code=8)[0]  # apply can take git instead


def test_a_download_larger_than_the_pin_stops_at_the_pinned_size(project, index, upstream):
    index.files[f"/files/{upstream.tarball.name}"] = upstream.tarball.read_bytes() + b"x" * 5_000_000
    err = project.apply(expect=4).stderr  # (the server's thread reports the reset it met)
    assert f"sends more than the {upstream.size} bytes expected" in err and "next: " in err
    assert not (project.cache / "sdist").exists() or not list((project.cache / "sdist").iterdir())


def test_a_full_disk_while_downloading_is_a_local_error_not_network(project, index, releases):
    """A real process whose file size limit (RLIMIT_FSIZE) is below the sdist: EFBIG on write."""
    limit = releases[NEXT].size // 2

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    cmd = [sys.executable, "-m", "tkvseam", "--root", str(project.root), "--cache", str(project.cache), "-q"]
    proc = subprocess.run(
        [*cmd, "pin", NEXT_VERSION, "--json"], capture_output=True, text=True, preexec_fn=small_files
    )
    assert proc.returncode == 1, proc.stderr
    assert (
        f"cannot write {project.cache / 'sdist' / f'vllm-{NEXT_VERSION}.tar.gz.part'}: File too large"
        in proc.stderr
    )
    assert "next: df -h" in proc.stderr and "network" not in proc.stderr
    assert json.loads(proc.stdout)["exit_code"] == 1
    assert not list((project.cache / "sdist").iterdir())


def test_an_entry_with_a_directory_in_its_filename_is_never_a_cache_path(project, index, releases):
    e = entry(index, f"vllm-{NEXT_VERSION}.tar.gz")
    e["filename"] = f"sub/../vllm-{NEXT_VERSION}.tar.gz"
    err, _ = fails(project, "pin", NEXT_VERSION, code=1)
    assert f"lists no sdist of vllm {NEXT_VERSION}" in err
    assert not (project.cache / "sdist").exists()


def test_a_redirect_to_another_scheme_is_not_followed(project, index, monkeypatch):
    class Redirect(index):
        def do_GET(self):  # noqa: N802
            if self.path.startswith("/files/"):
                self.send_response(302)
                self.send_header("Location", "ftp://127.0.0.1:9/vllm.tar.gz")
                self.end_headers()
                return
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TKV_SEAM_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")
    try:
        err, _ = fails(project, "apply", "--base", NAME, code=8)
    finally:
        server.shutdown()
        server.server_close()
    assert "redirect to another scheme refused: ftp://127.0.0.1:9/vllm.tar.gz" in err


def test_pin_refuses_an_sdist_the_index_says_is_huge_before_downloading(project, index):
    entry(index, f"vllm-{NEXT_VERSION}.tar.gz")["size"] = 50 << 30
    err, _ = fails(project, "pin", NEXT_VERSION, code=4)
    assert "is 53687091200 bytes, more than the 1024 MiB a vLLM sdist may have" in err
    assert not [r for r in index.requests if r.startswith("/files/")]


def test_an_index_url_with_credentials_is_refused_and_never_printed(project, monkeypatch):
    monkeypatch.delenv("TKV_SEAM_INDEX_URL")
    monkeypatch.setenv("PIP_INDEX_URL", "https://me:s3cret@pypi.example.invalid/simple")
    for command in (("pin", NEXT_VERSION), ("watch",), ("apply", "--base", NAME)):
        res = project.cli(*command, "--json", expect=2)
        assert "s3cret" not in res.stderr + res.stdout, command
        assert "https://***@pypi.example.invalid/simple carries credentials" in res.stderr


def test_a_listing_nested_too_deep_for_the_parser_is_not_pep_691(project, monkeypatch):
    """100 000 nested arrays (600 KB, far under the cap): json raised RecursionError, a traceback."""
    body = b"[" * 100_000 + b"]" * 100_000

    class Deep(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Deep)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TKV_SEAM_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")
    try:
        for args in (["watch"], ["pin", NEXT_VERSION]):
            err, out = fails(project, *args, code=8)
            assert "did not answer PEP 691 JSON: nested deeper than" in err and out["exit_code"] == 8
    finally:
        server.shutdown()
        server.server_close()


def test_a_yanked_mark_without_a_reason_is_still_yanked(project, index):
    """PEP 691: yanked is a boolean or a reason; pip and uv take any string, "" too, as yanked.
    An empty reason was read as 'not yanked' and pinned."""
    entry(index, f"vllm-{NEXT_VERSION}.tar.gz")["yanked"] = ""
    err, out = fails(project, "pin", NEXT_VERSION, code=1)
    assert "is yanked on the index (no reason given)" in out["error"]
    assert NEXT not in (project.root / "bases.toml").read_text()
    watched = json.loads(project.cli("watch", "--json", expect=0).stdout)
    assert NEXT_VERSION not in [r["version"] for r in watched["releases"]]


def test_an_upper_case_sha256_is_the_same_digest(project, index):
    """It was refused as 'not 64 hex digits' (exit 4)."""
    e = entry(index, f"vllm-{NEXT_VERSION}.tar.gz")
    e["hashes"] = {"sha256": e["hashes"]["sha256"].upper()}
    out = json.loads(project.cli("pin", NEXT_VERSION, "--json").stdout)
    assert out["sdist"]["sha256"] == e["hashes"]["sha256"].lower()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"meta": {"api-version": "2.0"}}, "speaks Simple API 2.0; tkv-seam reads 1.x"),
        ({"meta": {"api-version": 1}}, "speaks Simple API 1; tkv-seam reads 1.x"),
        ({"name": "not-vllm"}, "is the page of 'not-vllm', not of vllm"),
    ],
)
def test_a_page_of_another_api_version_or_project_is_refused(project, index, change, message):
    """PEP 629: a client refuses a major version it does not know; a page naming another
    project is not vllm's (both were read as vllm's releases and pinned)."""
    index.listing.update(change)
    err, out = fails(project, "pin", NEXT_VERSION, code=8)
    assert message in out["error"] and NEXT not in (project.root / "bases.toml").read_text()
    index.listing.update({"meta": {"api-version": "1.1"}, "name": "VLLM"})  # PyPI's, any spelling of the name
    assert json.loads(project.cli("pin", NEXT_VERSION, "--json").stdout)["status"] == "added"
