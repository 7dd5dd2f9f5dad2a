"""Fixtures for the tooling tests: a small synthetic upstream, served as an sdist and as git.

Everything is made inside the tests: a tiny vllm-like source tree, its tarball
(the "sdist"), a PEP 691 Simple API on 127.0.0.1 serving it, a git repository
with the release tag, and a bases.toml pinning both.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from tkvseam import git, hints
from tkvseam.cli.main import main


@pytest.fixture(autouse=True)
def _no_base_from_the_caller(monkeypatch):
    """The tool defaults ``--base`` to ``$BASE`` (make passes it); ``make test BASE=…`` exports
    it to this process too. The tooling tests' bases are synthetic: a test that wants ``$BASE``
    sets it itself."""
    monkeypatch.delenv("BASE", raising=False)


VERSION = "9.9.9"
NAME = f"v{VERSION}"

FILES = {
    "vllm/__init__.py": '"""synthetic vllm"""\n',
    "vllm/_version.py": (
        "__version__: str\n"
        f"__version__ = version = '{VERSION}'\n"
        "__commit_id__: str | None\n"
        "__commit_id__ = commit_id = 'g{commit}'\n"
    ),
    "vllm/config/cache.py": "".join(f"# line {i}\n" for i in range(1, 41)),
    "vllm/engine/arg_utils.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "tests/test_math.py": "from vllm.engine.arg_utils import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "README.md": "synthetic upstream for tkv-seam tests\n",
}


@dataclass
class Upstream:
    root: Path  # git repo with tag
    commit: str
    tarball: Path
    sha256: str
    size: int


VERSION_FILE = "vllm/_version.py"


def _write_tree(
    root: Path, commit: str | None, files: dict[str, str] = FILES, version: str = VERSION
) -> None:
    """Write the tree; ``_version.py`` only for the sdist (upstream generates it, git ignores it)."""
    for rel, text in files.items():
        if rel == VERSION_FILE and commit is None:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text.replace("{commit}", (commit or "")[:9]).replace(f"'{VERSION}'", f"'{version}'"))


def make_tarball(src: Path, dest: Path, top: str) -> None:
    with tarfile.open(dest, "w:gz") as tar:
        for p in sorted(src.rglob("*")):
            rel = p.relative_to(src)
            if rel.parts[0] == ".git":
                continue
            tar.add(p, arcname=f"{top}/{rel}", recursive=False)


def make_release(top: Path, version: str, files: dict[str, str]) -> Upstream:
    """Commit ``files`` in the git repo under ``top``, tag v<version>, and make the matching sdist."""
    root = top / "vllm"
    if not root.exists():
        git.init(root)
    _write_tree(root, None, files, version)
    commit = git.commit(root, f"release {version}\n", "Up Stream <up@example.invalid>")
    git.run(root, "tag", f"v{version}", commit)
    stage = top / f"stage-{version}"
    _write_tree(stage, commit, files, version)
    tarball = top / f"vllm-{version}.tar.gz"
    make_tarball(stage, tarball, f"vllm-{version}")
    data = tarball.read_bytes()
    return Upstream(root, commit, tarball, hashlib.sha256(data).hexdigest(), len(data))


# The next synthetic release: two lines inserted at the top of cache.py (hunks move: offset),
# and sub() rewritten (a patch touching it conflicts).
NEXT_VERSION = "9.10.0"
NEXT_FILES = {
    **FILES,
    "vllm/config/cache.py": "# new header\n# more\n" + FILES["vllm/config/cache.py"],
    "vllm/engine/arg_utils.py": FILES["vllm/engine/arg_utils.py"].replace("return a - b", "return -(b - a)"),
}


@pytest.fixture(scope="session")
def releases(tmp_path_factory) -> dict[str, Upstream]:
    """Two synthetic releases in one git repo: v9.9.9 and v9.10.0, each with its sdist."""
    top = tmp_path_factory.mktemp("upstream")
    return {
        NAME: make_release(top, VERSION, FILES),
        f"v{NEXT_VERSION}": make_release(top, NEXT_VERSION, NEXT_FILES),
    }


@pytest.fixture(scope="session")
def upstream(releases) -> Upstream:
    return releases[NAME]


def bases_toml(
    up: Upstream,
    sha256: str | None = None,
    commit: str | None = None,
    name: str = NAME,
    version: str = VERSION,
    queue: str | None = None,
) -> str:
    """A bases.toml entry; ``queue``: the base's queue directory (default: the top-level queue
    for NAME, ``patches/<name>`` for any other base)."""
    if queue is None and name != NAME:
        queue = f"patches/{name}"
    where = (
        f'{{ series = "{queue}/series", patches = "{queue}" }}'
        if queue
        else '{ series = "series", patches = "patches" }'
    )
    return f"""
["{name}"]
version = "{version}"
tag = "{name}"
queue = {where}
commit_prefixes = ["{(commit or up.commit)[:9]}", "{(commit or up.commit)[:12]}"]
sdist = {{ filename = "{up.tarball.name}", size = {up.size}, sha256 = "{sha256 or up.sha256}" }}
image = {{ name = "example/vllm:{NAME}", revision_prefix = "{up.commit[:12]}" }}
seam = {{ ruff = "0.14.0" }}
"""


class _Index(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    listing: dict = {}
    requests: list[str] = []

    def do_GET(self):  # noqa: N802
        self.requests.append(self.path)
        if self.path.rstrip("/") == "/simple/vllm":
            body = json.dumps(self.listing).encode()
            ctype = "application/vnd.pypi.simple.v1+json"
        elif self.path in self.files:
            body, ctype = self.files[self.path], "application/octet-stream"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve_index(releases, monkeypatch):
    """A PEP 691 Simple API on 127.0.0.1 serving the sdists of ``releases``; yields the handler class."""
    handler = type("Index", (_Index,), {"files": {}, "listing": {}, "requests": []})
    handler.listing = {"name": "vllm", "files": []}
    for up in releases.values():
        data = up.tarball.read_bytes()
        handler.files[f"/files/{up.tarball.name}"] = data
        handler.listing["files"].append(
            {
                "filename": up.tarball.name,
                "url": f"/files/{up.tarball.name}",
                "size": len(data),
                "hashes": {"sha256": up.sha256},
            }
        )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("TKV_SEAM_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def index(releases, monkeypatch):
    """The synthetic sdists served by a local PEP 691 index."""
    with serve_index(releases, monkeypatch) as handler:
        yield handler


@dataclass
class Project:
    root: Path
    cache: Path

    @property
    def tree(self) -> Path:
        return self.root / "build" / f"vllm-{NAME}"

    def argv(self, *args: str) -> list[str]:
        """The command line of ``tkv-seam *args`` on this project (for a run in another process)."""
        return ["--root", str(self.root), "--cache", str(self.cache), "-q", *args]

    def cli(self, *args: str, expect: int | None = 0):
        runner = CliRunner()
        result = runner.invoke(
            main,
            ["--root", str(self.root), "--cache", str(self.cache), "-q", *args],
            catch_exceptions=False,
        )
        if expect is not None:
            assert result.exit_code == expect, (result.exit_code, result.output, result.stderr)
        return result

    def apply(self, *extra: str, expect: int | None = 0):
        return self.cli("apply", "--base", NAME, *extra, expect=expect)

    def refresh(self, *extra: str, expect: int | None = 0):
        return self.cli("refresh", "--base", NAME, *extra, expect=expect)

    def write_series(self, *names: str) -> None:
        (self.root / "series").write_text("".join(f"{n}\n" for n in names))

    def commit_in_tree(self, rel: str, text: str, message: str) -> None:
        (self.tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.tree / rel).write_text(text)
        git.commit(self.tree, message, "Seam Dev <dev@example.invalid>", paths=[rel])


@pytest.fixture
def project(tmp_path, upstream, index) -> Project:
    root = tmp_path / "proj"
    (root / "patches").mkdir(parents=True)
    (root / "series").write_text("")
    (root / "bases.toml").write_text(bases_toml(upstream))
    return Project(root, tmp_path / "cache")


HEADER_TRAILERS = (
    "Verdict: still needed\n"
    "Reason: upstream lacks it\n"
    "Upstream: upstreamable\n"
    "Depends-on: none\n"
    "Tests: tests/test_math.py::test_add\n"
)


def message(slug: str, summary: str = "change things", description: str = "Changes things.") -> str:
    return f"{slug}: {summary}\n\n{description}\n\n{HEADER_TRAILERS}"


# --------------------------------------------------------------------------- hints printed

LAST = "test_every_hint_printed_is_a_command_that_runs"  # test_hints.py: runs after every other test


@pytest.fixture(scope="session", autouse=True)
def hint_log(tmp_path_factory) -> Path:
    """Every ``next:`` hint the tool prints during the session (its CLI runs, in this process or
    another), one JSON line each (``tkvseam.hints.record``)."""
    path = tmp_path_factory.mktemp("hints") / "hints.jsonl"
    path.touch()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(hints.LOG_ENV, str(path))
        yield path


def pytest_collection_modifyitems(items):
    """The check of every hint printed goes last, when the other tests have printed theirs."""
    items.sort(key=lambda item: item.name == LAST)


# The port case (portcase.py): its releases and project, for every test_port*.py.
from .portcase import port_releases, pproject, pproject_once  # noqa: E402, F401
