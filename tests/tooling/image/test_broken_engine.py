"""``tkv-seam image`` against an engine that breaks: a fake Docker API in its own process.

The fake answers what the build asks before building (version, ping, the base image's
inspect data, image lists) and then cuts the build's stream mid-step, as a dockerd that
dies does. The tool must end with exit 7 and one JSON object, not a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ..fixtures.upstream import NAME

FAKE_ENGINE = textwrap.dedent(
    """
    import http.server, json, socketserver, sys

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _json(self, code, data):
            body = json.dumps(data).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path.endswith("/version"):
                return self._json(200, {"ApiVersion": "1.41", "Version": "20.10.24"})
            if path.endswith("/_ping"):
                return self._json(200, "OK")
            if path.endswith("/images/json"):
                return self._json(200, [])
            if "/images/stand-in" in path:
                labels = {"io.tkv-seam.stand-in": "true"}
                return self._json(200, {"Id": "sha256:" + "1" * 64, "Config": {"Labels": labels}})
            return self._json(404, {"message": "No such image"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            else:  # chunked upload of the context
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    self.rfile.read(size + 2)
                    if size == 0:
                        break
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = json.dumps({"stream": "Step 1/5 : ARG BASE_IMAGE\\n"}).encode()
            self.wfile.write(b"%x\\r\\n%s\\r\\n" % (len(chunk), chunk))
            self.wfile.flush()
            self.wfile.write(b"400\\r\\n{")  # a chunk cut short: the engine died mid-step
            self.wfile.flush()
            self.connection.shutdown(2)

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

        def get_request(self):
            request, _ = super().get_request()
            return request, ("fake", 0)

    Server(sys.argv[1], Handler).serve_forever()
    """
)


def test_an_engine_lost_mid_build_is_exit_7_with_one_json_object(project, tmp_path, monkeypatch):
    project.apply()
    (project.root / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    sock = Path("/tmp") / f"tkv-fake-engine-{tmp_path.name[-20:]}.sock"  # unix socket paths are short
    sock.unlink(missing_ok=True)
    engine = subprocess.Popen([sys.executable, "-c", FAKE_ENGINE, str(sock)])
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
        res = project.cli(
            "image", "--base", NAME, "--base-image", "stand-in:x", "--stand-in", "--turbo-attn", "", "--json",
            expect=7,
        )  # fmt: skip
    finally:
        engine.kill()
        engine.wait()
        sock.unlink(missing_ok=True)
    out = json.loads(res.stdout)
    assert out["exit_code"] == 7 and out["error"].startswith("the Docker engine failed during the build of ")
    log = project.root / "build" / "image-logs" / f"{NAME}.log"  # the full log, in a file it names
    assert log.read_text() == "Step 1/5 : ARG BASE_IMAGE\n" and str(log) in out["error"]
    assert "Traceback" not in res.stderr


def test_no_engine_at_all_is_exit_7_naming_where_it_looked(project, tmp_path, monkeypatch):
    project.apply()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    res = project.cli("image", "--base", NAME, "--stand-in", "--turbo-attn", "", "--json", expect=7)
    out = json.loads(res.stdout)
    assert out["error"].startswith(f"no Docker engine reachable at unix://{tmp_path}/nothing.sock")
    assert out["hint"].startswith("export DOCKER_HOST=")


def test_the_build_log_goes_to_its_file_and_the_terminal_gets_one_line_a_step(tmp_path):
    """Issue 37: make image printed every line of the legacy builder's log."""
    from tkvseam.image.build import build_progress
    from tkvseam.progress import Progress

    class Said(Progress):
        def __init__(self):
            self.lines = []

        def step(self, message: str) -> None:
            self.lines.append(message)

    said = Said()
    with open(tmp_path / "build.log", "w") as kept:
        log = build_progress(kept, said)
        for line in [
            "Step 1/3 : ARG BASE_IMAGE",
            " ---> Running in 1a2b",
            "Step 2/3 : COPY overlay/ /tmp/o/",
            'Step 3/3 : LABEL io.tkv-seam.base="v0.31.0"',
        ]:
            log(line)
        log(" ---> 3c4d")
    # one line a step that does work; the LABEL steps (13 of 18 in a real build) say nothing
    assert said.lines == ["image step 1/3: ARG BASE_IMAGE", "image step 2/3: COPY overlay/ /tmp/o/"]
    assert (tmp_path / "build.log").read_text().splitlines()[1] == " ---> Running in 1a2b"
