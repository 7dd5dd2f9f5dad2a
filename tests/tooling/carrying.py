"""Synthetic releases for carrying a base in and out (seam-table, lock-cpu, retire, carry).

Two releases of the synthetic upstream, made in the test: v9.9.9, carried with the top-level
queue and a full ``.seam`` table, and v9.10.0, where upstream moved one of its test files
(``tests/test_moved.py`` -> ``tests/unit/test_moved.py``), deleted another, bumped the ruff of
its ``.pre-commit-config.yaml`` and rewrote ``sub()`` (a patch on it stops a port). Both sdists
carry ``requirements/`` files as vLLM's do. ``wheels`` makes a local index of tiny fake wheels
for the CPU lock: vllm 9.10.0 asks for torch==9.2.0 and torchvision; only 9.0.0+cpu and
9.1.0+cpu are in the CPU directory (standing for $PIP_FIND_LINKS).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
import zipfile
from contextlib import contextmanager
from pathlib import Path

from tkvseam import git

from .conftest import FILES, NEXT_FILES, Project, make_release, serve_index

OLD, NEW = "9.9.9", "9.10.0"
OLD_NAME, NEW_NAME = f"v{OLD}", f"v{NEW}"
PLUGIN_HASH = "sha256:" + "ab" * 32

PRE_COMMIT = """\
default_stages:
  - pre-commit
repos:
- repo: https://github.com/crate-ci/typos
  rev: v1.43.5
  hooks:
  - id: typos
- repo: https://github.com/astral-sh/ruff-pre-commit
  rev: {rev}
  hooks:
  - id: ruff-check
  - id: ruff-format
"""
MOVED_TEST = "def test_moved():\n" + "".join(f"    assert {i} == {i}\n" for i in range(20))

OLD_FILES = {
    **FILES,
    ".pre-commit-config.yaml": PRE_COMMIT.format(rev="v0.13.0"),
    "requirements/cpu.txt": 'torch==9.0.0+cpu; platform_machine == "x86_64"\n',
    "requirements/test/cpu.txt": "pytest==9.1.0\n    # via -r requirements/test/cpu.in\ntblib==3.1.0\n",
    "tests/test_gone.py": "def test_gone():\n    pass\n",
    "tests/test_moved.py": MOVED_TEST,
}
NEW_FILES = {
    **{k: v for k, v in OLD_FILES.items() if k not in ("tests/test_gone.py", "tests/test_moved.py")},
    ".pre-commit-config.yaml": PRE_COMMIT.format(rev="'" + "c" * 40 + "'  # v0.14.0"),
    # as conftest's next release: cache.py's hunks move (offset), sub() rewritten (a patch on it stops)
    "vllm/config/cache.py": NEXT_FILES["vllm/config/cache.py"],
    "vllm/engine/arg_utils.py": NEXT_FILES["vllm/engine/arg_utils.py"],
    "requirements/cpu.txt": 'torch==9.2.0+cpu; platform_machine == "x86_64"\ntorch==9.2.0; platform_system == "Darwin"\n',
    "tests/unit/test_moved.py": MOVED_TEST,
}

OLD_TABLE = f"""\
# Known bases (synthetic).

["{OLD_NAME}"]
version = "{OLD}"
tag = "{OLD_NAME}"
queue = {{ series = "series", patches = "patches" }}
commit_prefixes = ["{{commit}}"]
sdist = {{ filename = "vllm-{OLD}.tar.gz", size = {{size}}, sha256 = "{{sha256}}" }}
image = {{ name = "example/vllm:{OLD_NAME}", revision_prefix = "{{commit}}" }}

["{OLD_NAME}".seam]
ruff = "0.13.0"
plugin = {{ requirement = "turbo-attn==1.0.0", hashes = ["{PLUGIN_HASH}"] }}
upstream_tests = [
    "tests/test_math.py",
    "tests/test_gone.py",
    "tests/test_moved.py",
]
"""


def make_releases(top: Path) -> dict:
    return {OLD_NAME: make_release(top, OLD, OLD_FILES), NEW_NAME: make_release(top, NEW, NEW_FILES)}


def old_bases(releases: dict) -> str:
    up = releases[OLD_NAME]
    return (
        OLD_TABLE.replace("{commit}", up.commit[:9])
        .replace("{size}", str(up.size))
        .replace("{sha256}", up.sha256)
    )


@contextmanager
def carrying_project(tmp_path: Path, releases: dict, monkeypatch):
    """A project carrying v9.9.9 (an empty top-level queue, its lock), the two sdists served."""
    root = tmp_path / "proj"
    (root / "patches").mkdir(parents=True)
    (root / "series").write_text("")
    (root / "ci").mkdir()
    (root / "ci" / f"lock-cpu-{OLD_NAME}.txt").write_text("vllm==9.9.9\n")
    (root / "bases.toml").write_text(old_bases(releases))
    with serve_index(releases, monkeypatch) as index:
        yield Project(root, tmp_path / "cache"), index


def git_project(root: Path) -> None:
    """Make the project a git repository with everything committed (to read `git status`)."""
    git.init(root)
    (root / ".gitignore").write_text("/build/\n/.venv*/\n/.bases.toml.lock\n")
    git.run(root, "add", "-A", ".")  # not git.commit: that adds ignored files too
    git.run(
        root,
        "commit",
        "-q",
        "-m",
        "project",
        env={"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "d@x.invalid"},
    )


def status(root: Path) -> list[str]:
    # not git.out: it strips the first line's leading status column
    return git.run(root, "status", "--porcelain", "--untracked-files=all").stdout.decode().splitlines()


class _Projects(http.server.BaseHTTPRequestHandler):
    """A PEP 691 Simple API serving listings of several projects (no files)."""

    listings: dict[str, dict] = {}

    def do_GET(self):  # noqa: N802
        name = self.path.strip("/").removeprefix("simple/")
        if name not in self.listings:
            self.send_error(404)
            return
        body = json.dumps(self.listings[name]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def listing_index(listings: dict[str, dict]):
    """The URL of a local index answering ``/simple/<project>/`` with ``listings[project]``."""
    handler = type("Projects", (_Projects,), {"listings": listings})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/simple"
    finally:
        server.shutdown()
        server.server_close()


def wheel(
    directory: Path, name: str, version: str, requires: list[str] = (), tag: str = "py3-none-any"
) -> Path:
    """A minimal valid wheel: one module, METADATA with Requires-Dist, WHEEL and RECORD."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    files = {
        f"{name.replace('-', '_')}_fake.py": "VALUE = 1\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    out = directory / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return out


def make_wheels(index: Path, cpu: Path, vllm: str = NEW) -> tuple[Path, Path]:
    """(the index: a find-links directory of everything but the CPU torch; the CPU torch directory)."""
    wheel(index, "vllm", vllm, ["torch==9.2.0", "torchvision==2.0.0", "helper>=1"])
    wheel(index, "torch", "9.2.0", ["nvidia-stuff"])  # "PyPI's" CUDA build: never picked
    wheel(index, "torchvision", "2.0.0", ["torch==9.2.0", "pillow-fake"])
    wheel(index, "helper", "1.0")
    wheel(index, "helper", "2.0")
    wheel(index, "pytest", "9.1.0", ["pluggy-fake"])
    wheel(index, "pluggy-fake", "1.0")
    wheel(index, "tblib", "3.1.0")
    wheel(index, "pytest-mock", "3.14.0")  # not pinned by the release: resolved unpinned
    wheel(index, "pytest-asyncio", "1.4.0")
    wheel(index, "pytest-timeout", "2.3.1")
    for version in ("9.0.0+cpu", "9.1.0+cpu"):
        wheel(cpu, "torch", version, ["filelock-fake"], tag="cp311-cp311-manylinux_2_28_x86_64")
    wheel(index, "filelock-fake", "1.0")
    return index, cpu
