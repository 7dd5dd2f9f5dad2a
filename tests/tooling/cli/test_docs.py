"""The README and docs/: every command they show exists, and the cheap ones run as written.

Every line of a ```bash block in README.md and docs/*.md, and every backticked ``make …`` or
``.venv/bin/tkv-seam …`` in them and in patches/*/PORT.md, is checked with ``hintcheck``: a make
target ``make help`` lists, with variables it lists for that target; a tkv-seam command with its
options; a git subcommand; a command on PATH. A block line whose make targets need no vLLM venv,
Docker engine or PyPI (``RUN_TARGETS``) is "cheap": the scenarios below run each of them as
written, in bash from the project root with the real Makefile, on a synthetic project named like
the real one (v0.31.0 with the top-level queue and v0.32.0 carried, v0.33.0 pinned, 0.34.0 only on
the local index), doing by hand in between what the comments say (resolve a conflict, edit a
file). ``test_every_cheap_line_is_run_by_a_scenario`` fails when a cheap line is run by none.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tkvseam import git

from ..fixtures.carrying import (
    NEW_FILES,
    OLD_FILES,
    PLUGIN_HASH,
    git_project,
    make_wheels,
    status,
    wheel,
)
from ..fixtures.index import serve_index
from ..fixtures.project import Project
from ..fixtures.upstream import make_release
from ..fixtures.hintcheck import ROOT, TOOL, command_problems, make_help

pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="GNU make not installed")

DOCS = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
PORT_MDS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "patches").glob("*/PORT.md"))
# make targets cheap enough to run on the synthetic project (the rest need a vLLM venv, Docker,
# PyPI or the real queues: checked, not run)
RUN_TARGETS = {"apply", "refresh", "port", "drift", "watch", "carry", "retire", "pin", "help", "clean"}
SYSTEM = {"apt-get", "dockerd"}  # a block with these sets up the machine: checked, never run

_SUBST = re.compile(r"\$\(([^()]*)\)")
_PARTS = re.compile(r"&&|\|\||;|\||(?<![>&])&(?![&>])")
_ASSIGN_ONLY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


# --------------------------------------------------------------------------- reading the docs


@dataclass(frozen=True)
class Line:
    doc: str
    heading: str
    text: str  # the command, its comment stripped
    block: int  # which bash block of the doc

    def __str__(self) -> str:
        return f"{self.doc} ({self.heading}): {self.text}"


def bash_lines(doc: str) -> list[Line]:
    """The command lines of the doc's ```bash blocks (comment lines and comments dropped)."""
    out, heading, fence, block = [], "", None, 0
    for raw in (ROOT / doc).read_text().splitlines():
        if raw.startswith("```"):
            fence = None if fence is not None else raw[3:].strip()
            block += fence == "bash"
            continue
        if fence is None:
            if raw.startswith("#"):
                heading = raw.lstrip("#").strip()
            continue
        text = re.sub(r"\s+#(\s.*)?$", "", raw).strip()
        if fence == "bash" and text and not text.startswith("#"):
            out.append(Line(doc, heading, " ".join(text.split()), block))
    return out


def spans(doc: str) -> list[str]:
    """The backticked commands of the doc's prose (``make …``, ``.venv/bin/tkv-seam …``)."""
    text = re.sub(r"```.*?```", "", (ROOT / doc).read_text(), flags=re.S)
    found = (" ".join(s.split()) for s in re.findall(r"`([^`]+)`", text))
    return [s for s in found if s.startswith(("make ", f"{TOOL} ", "tkv-seam "))]


def parts(text: str) -> list[str]:
    """The simple commands of one line: split at && || ; | &, each $(…) a command of its own."""
    inner: list[str] = []

    def lift(m: re.Match) -> str:
        inner.append(m.group(1))
        return "X"

    flat = _SUBST.sub(lift, text)
    return [
        p.strip() for p in [*_PARTS.split(flat), *inner] if p.strip() and not _ASSIGN_ONLY.match(p.strip())
    ]


def _targets(part: str) -> list[str]:
    words = part.split()
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    if words[:1] != ["make"]:
        return []
    return [w for w in words[1:] if not re.match(r"^[A-Z_][A-Z0-9_]*=", w) and not w.startswith("-")]


def is_cheap(line: Line, all_lines: list[Line]) -> bool:
    block = [x for x in all_lines if x.doc == line.doc and x.block == line.block]
    if any(p.split()[0] in SYSTEM for x in block for p in parts(x.text)):
        return False
    return all(t in RUN_TARGETS for p in parts(line.text) for t in _targets(p))


ALL_LINES = [line for doc in DOCS for line in bash_lines(doc)]
CHEAP = {line.text for line in ALL_LINES if is_cheap(line, ALL_LINES)}
DOC_COMMANDS = {line.text for line in ALL_LINES} | {s for doc in DOCS for s in spans(doc)}


# --------------------------------------------------------------------------- every command exists


@pytest.mark.parametrize("line", ALL_LINES, ids=str)
def test_every_block_line_is_a_command_that_exists(line):
    assert [f"{p!r}: {why}" for p in parts(line.text) for why in command_problems(p)] == []


def _span_problems(span: str) -> list[str]:
    """A prose span may show options as [--x] and alternatives as a|b: each must exist (prose may
    name the tool as ``tkv-seam``; a <placeholder> command ends the check)."""
    words = span.replace("[", " ").replace("]", " ").replace("…", " ").split()
    if words[0] == "make":
        return command_problems(" ".join(w for w in words if "|" not in w))
    from click import Group

    from tkvseam.cli.main import main

    command, problems = main, []
    for word in words[1:]:
        if word.startswith("-"):
            names = {n for p in command.params for n in (*p.opts, *getattr(p, "secondary_opts", []))}
            problems += [
                f"no option {o}" for o in word.split("=")[0].split("|") if o not in names | {"--help"}
            ]
        elif word.startswith("<"):
            break
        elif isinstance(command, Group):
            alternatives = word.split("|")
            problems += [f"no command {w!r}" for w in alternatives if w not in command.commands]
            command = command.commands.get(alternatives[0], command)
    return problems


@pytest.mark.parametrize(
    "doc, span", [(doc, s) for doc in DOCS + PORT_MDS for s in spans(doc)], ids=lambda x: str(x)[:60]
)
def test_every_command_the_prose_names_exists(doc, span):
    assert _span_problems(span) == [], span


def test_make_help_and_the_docs_agree():
    """Every target make help lists is named in the README or docs/, and every one they name is listed."""
    targets, _ = make_help()
    commands = [line.text for line in ALL_LINES] + [s for doc in DOCS for s in spans(doc)]
    named = {t for c in commands for p in parts(c.replace("[", " ").replace("]", " ")) for t in _targets(p)}
    named = {t for t in named if not t.startswith("<")}
    assert sorted(set(targets) - named) == []
    assert sorted(named - set(targets)) == []


def test_every_doc_the_code_and_the_docs_point_to_is_there():
    """`(README.md, 'Heading')`-style pointers in the code, and the docs' links, name what exists."""
    sources = [
        ROOT / "Makefile",
        *sorted((ROOT / "scripts").rglob("*.py")),
        *sorted((ROOT / "tests").rglob("*.py")),
    ]
    sources.remove(Path(__file__))
    pointers = []
    for path in sources:
        text = path.read_text()
        pointers += re.findall(r"((?:README|docs/[a-z]+)\.md)(?:, ['\"]([^'\"]+)['\"])?", text)
    for doc in DOCS:
        for link in re.findall(r"\]\(([^)#]+\.md)\)", (ROOT / doc).read_text()):
            pointers.append(((Path(doc).parent / link).as_posix(), ""))
    missing = []
    for doc, heading in set(pointers):
        path = ROOT / doc
        if not path.is_file():
            missing.append(doc)
        elif heading and not re.search(rf"^#+ {re.escape(heading)}\s*$", path.read_text(), re.M):
            missing.append(f"{doc}: '{heading}'")
    assert sorted(missing) == []


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_no_doc_points_outside_the_repository():
    texts = {doc: (ROOT / doc).read_text() for doc in DOCS + PORT_MDS}
    outside = re.compile(r"SEAM\.md|SEAM D[0-9]|\bD1[0-3]?\b|\bthe seed\b|seed's|shared/|/work/|\.\./shared")
    assert [f"{doc}: {m.group(0)}" for doc, text in texts.items() for m in outside.finditer(text)] == []


# --------------------------------------------------------------------------- the synthetic project

V31, V32, V33, V34 = "0.31.0", "0.32.0", "0.33.0", "0.34.0"
SUB_DOC = "def sub(a, b):\n    return a - b\n"
# 0.33.0 and 0.34.0: upstream rewrote sub() (add-mul and sub-doc stop a port), moved a test file
NEW = {**NEW_FILES}
NEWER = {**NEW_FILES, "vllm/new_in_034.py": "VALUE = 34\n"}
RESOLVED = (
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return -(b - a)\n\n\n"
    "def mul(a, b):\n    return a * b\n"
)
IDENTITY = {
    "GIT_AUTHOR_NAME": "Seam Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.invalid",
    "GIT_COMMITTER_NAME": "Seam Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.invalid",
}


def _entry(name: str, version: str, up, top: bool = False) -> str:
    series, patches = ("series", "patches") if top else (f"patches/{name}/series", f"patches/{name}")
    return f"""
["{name}"]
version = "{version}"
tag = "{name}"
queue = {{ series = "{series}", patches = "{patches}" }}
commit_prefixes = ["{up.commit[:9]}", "{up.commit[:12]}"]
sdist = {{ filename = "{up.tarball.name}", size = {up.size}, sha256 = "{up.sha256}" }}
image = {{ name = "example/vllm-openai:{name}", revision_prefix = "{up.commit[:12]}" }}

["{name}".seam]
ruff = "0.14.0"  # the ruff beside this Python: no install
plugin = {{ requirement = "turbo-attn==1.0.0", hashes = ["{PLUGIN_HASH}"] }}
upstream_tests = ["tests/test_math.py", "tests/test_moved.py"]

["{name}".seam.cpu]
torch = "local"
exclude = [{{ name = "torchvision", why = "PyPI's build needs CUDA libraries" }}]
"""


@pytest.fixture(scope="module")
def readme_releases(tmp_path_factory):
    top = tmp_path_factory.mktemp("readme-upstream")
    return {
        f"v{V31}": make_release(top, V31, OLD_FILES),
        f"v{V32}": make_release(top, V32, {**OLD_FILES, "vllm/v032.py": "V = 32\n"}),
        f"v{V33}": make_release(top, V33, NEW),
        f"v{V34}": make_release(top, V34, NEWER),
    }


@pytest.fixture(scope="module")
def readme_wheels(tmp_path_factory, readme_releases):
    index, cpu = make_wheels(
        tmp_path_factory.mktemp("readme-index"), tmp_path_factory.mktemp("readme-cpu"), V34
    )
    # v0.31.0's vllm as a wheel (the sdist's vllm/ files), for `venv-vllm v0.31.0 --path`
    with tarfile.open(readme_releases[f"v{V31}"].tarball) as tar:
        files = {
            m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()
            for m in tar.getmembers()
            if m.isfile() and m.name.split("/", 1)[1].startswith("vllm/")
        }
    wheel(index, "vllm", V31, files=files)
    return index, cpu


def _message(slug: str, summary: str, depends: str = "none") -> str:
    return (
        f"{slug}: {summary}\n\n{summary.capitalize()}.\n\nVerdict: still needed\nReason: upstream lacks it\n"
        f"Upstream: upstreamable\nDepends-on: {depends}\nTests: tests/test_math.py::test_add\n"
    )


@dataclass
class World:
    root: Path
    env: dict[str, str]
    tmp: Path
    outputs: list[str] = field(default_factory=list)

    def port_tree(self, to: str) -> Path:
        return self.root / "build" / f"port-{to}"


@pytest.fixture
def world(tmp_path, readme_releases, readme_wheels, monkeypatch) -> World:
    """The project: Makefile and pyproject.toml as the real ones, a .venv whose tkv-seam is this
    one, v0.31.0's queue (cache-tweak, add-mul, sub-doc) and the same queue carried on v0.32.0."""
    root = tmp_path / "proj"
    (root / "patches").mkdir(parents=True)
    (root / "series").write_text("")
    (root / "ci").mkdir()
    for base in ("v0.31.0", "v0.32.0"):
        (root / "ci" / f"lock-cpu-{base}.txt").write_text(f"vllm=={base[1:]}\n")
    shutil.copy(ROOT / "Makefile", root / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    tool = root / ".venv" / "bin" / "tkv-seam"
    tool.parent.mkdir(parents=True)
    tool.write_text(f'#!/bin/sh\nexec {sys.executable} -m tkvseam "$@"\n')
    tool.chmod(0o755)
    (root / ".venv" / ".done").touch()
    stamp = (root / ".venv" / ".done").stat().st_mtime - 10
    os.utime(root / "pyproject.toml", (stamp, stamp))  # older than the venv's stamp: make builds no venv
    (root / "bases.toml").write_text(
        "# Known bases (synthetic, named like the real ones).\n"
        + _entry("v0.31.0", V31, readme_releases["v0.31.0"], top=True)
        + _entry("v0.32.0", V32, readme_releases["v0.32.0"])
        + _entry("v0.33.0", V33, readme_releases["v0.33.0"])
    )
    cache = tmp_path / "cache"
    with serve_index(readme_releases, monkeypatch):
        project = Project(root, cache)
        project.cli("apply", "--base", "v0.31.0")
        tree = root / "build" / "vllm-v0.31.0"
        cache_py = (tree / "vllm/config/cache.py").read_text().replace("line 10\n", "line 10 (seam)\n")
        arg_utils = (tree / "vllm/engine/arg_utils.py").read_text()
        for rel, text, msg in [
            ("vllm/config/cache.py", cache_py, _message("cache-tweak", "mark line 10")),
            (
                "vllm/engine/arg_utils.py",
                arg_utils + "\n\ndef mul(a, b):\n    return a * b\n",
                _message("add-mul", "add mul()"),
            ),
            (
                "vllm/engine/arg_utils.py",
                (arg_utils + "\n\ndef mul(a, b):\n    return a * b\n").replace(
                    SUB_DOC, 'def sub(a, b):\n    """a minus b"""\n    return a - b\n'
                ),
                _message("sub-doc", "document sub()"),
            ),
        ]:
            (tree / rel).write_text(text)
            git.index.commit(tree, msg, "Seam Dev <dev@example.invalid>", paths=[rel])
        project.cli("refresh", "--base", "v0.31.0")
        (root / "patches" / "v0.32.0").mkdir()
        shutil.copy(root / "series", root / "patches" / "v0.32.0" / "series")
        for p in (root / "patches").glob("*.patch"):
            shutil.copy(p, root / "patches" / "v0.32.0" / p.name)
        shutil.rmtree(root / "build")
        git_project(root)
        index, cpu = readme_wheels
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("MAKEFLAGS", "MFLAGS", "BASE", "EDITOR", "VISUAL")
        }
        env = {k: v for k, v in env.items() if not k.startswith("GIT_")} | IDENTITY
        env |= {
            "TKV_SEAM_CACHE": str(cache),
            "TMPDIR": str(tmp_path),
            "GIT_EDITOR": "false",  # an editor that opened would fail the run
            "PIP_FIND_LINKS": f"{index} {cpu}",  # make carry's CPU lock: the fake wheels only
            "UV_OFFLINE": "1",
            "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        }
        yield World(root, env, tmp_path)


# --------------------------------------------------------------------------- the scenarios


@dataclass(frozen=True)
class Run:
    """Doc lines, run as one bash script (``set -e``) from the project root."""

    lines: tuple[str, ...]
    rc: int = 0
    subs: tuple[tuple[str, str], ...] = ()
    says: str = ""
    real: bool = False  # on the real project (read-only commands naming its real patches)


def run(*lines: str, rc: int = 0, says: str = "", real: bool = False, **subs: str) -> Run:
    return Run(lines, rc, tuple((f"<{k.replace('_', ' ')}>", v) for k, v in subs.items()), says, real)


def edit_add_mul(w: World) -> None:
    path = w.root / "build/vllm-v0.31.0/vllm/engine/arg_utils.py"
    path.write_text(path.read_text().replace("return a * b", "return b * a"))


def edit_done(w: World) -> None:
    text = (w.root / "patches/0002-add-mul.patch").read_text()
    assert "+    return b * a" in text and "+    return a * b" not in text
    assert "    return b * a" not in (w.root / "patches/0003-sub-doc.patch").read_text().split("\n--- ")[0]


def resolver(to: str) -> Callable[[World], None]:
    def resolve(w: World) -> None:
        tree = w.port_tree(to)
        (tree / "vllm/engine/arg_utils.py").write_text(RESOLVED)
        git.core.run(tree, "add", "vllm/engine/arg_utils.py")

    return resolve


def carried(to: str) -> Callable[[World], None]:
    def check(w: World) -> None:
        queue = w.root / "patches" / to
        assert (queue / "series").read_text().split() == ["0001-cache-tweak.patch", "0002-add-mul.patch"]
        assert "0003-sub-doc.patch" in (queue / "PORT.md").read_text()  # skipped, with its reason

    return check


def commit_queue(to: str) -> Callable[[World], None]:
    def commit(w: World) -> None:
        git.core.run(w.root, "add", f"patches/{to}")
        git.core.run(w.root, "commit", "-q", "-m", f"carry {to}", env=IDENTITY)

    return commit


def committed_only_the_new_base(w: World) -> None:
    assert status(w.root) == []
    changed = git.core.run(w.root, "show", "--name-only", "--format=", "HEAD").stdout.decode().split()
    assert sorted(changed) == [
        "bases.toml", "ci/lock-cpu-v0.34.0.txt", "patches/v0.34.0/0001-cache-tweak.patch",
        "patches/v0.34.0/0002-add-mul.patch", "patches/v0.34.0/PORT.md", "patches/v0.34.0/series",
    ]  # fmt: skip


def retired(w: World) -> None:
    assert not (w.root / "patches/v0.32.0").exists() and not (w.root / "ci/lock-cpu-v0.32.0.txt").exists()
    assert '["v0.32.0"]' not in (w.root / "bases.toml").read_text()


def made_venv(w: World) -> None:
    [site] = (w.tmp / "myvenv").glob("lib/python*/site-packages")
    assert (site / "vllm/engine/arg_utils.py").is_file() and (w.tmp / "myvenv/tkv-seam-venv.json").is_file()
    w.outputs.append(str(site))


def overlaid(patched: bool) -> Callable[[World], None]:
    def check(w: World) -> None:
        text = (Path(w.outputs[-1]) / "vllm/engine/arg_utils.py").read_text()
        assert ("def mul" in text) == patched

    return check


Step = Run | Callable[[World], None]
SCENARIOS: dict[str, list[Step]] = {
    "set up": [run("make apply", says="upstream vLLM commit")],
    "edit a patch": [
        run("make apply"),
        edit_add_mul,
        run(
            "cd build/vllm-v0.31.0",
            "git commit -a --fixup=':/^<slug>:'",
            "GIT_SEQUENCE_EDITOR=: git rebase -i --autosquash tkv-seam-base",
            "cd ../..",
            "make refresh",
            slug="add-mul",
            says="updated   patches/0002-add-mul.patch",
        ),
        edit_done,
        # check-refresh checks the committed queue: the recipe's uncommitted refresh is said so, then committed
        run("make check-refresh", rc=2, says="next: git add series patches && git commit"),
        run(
            "git add series patches && git commit -m '<slug>: <what changed>'",
            slug="add-mul",
            what_changed="b times a",
        ),
        run("make check-refresh", says="3 unchanged, 0 changed"),
        run("make apply BASE=v0.32.0"),
        run("make refresh BASE=v0.32.0", says="3 unchanged, 0 changed"),
    ],
    "quilt": [
        run("make apply BASE=v0.32.0"),
        run(
            "P=$PWD; Q=$(mktemp -d); git -C build/vllm-v0.32.0 archive tkv-seam-base | tar -x -C $Q",
            "cd $Q && QUILT_PATCHES=$P/patches/v0.32.0 QUILT_SERIES=$P/patches/v0.32.0/series quilt push -a --fuzz=0",
            says="Now at patch",
        ),
    ],
    "when vLLM ships": [
        run("make watch", says="2 release(s) newer than v0.32.0"),
        run("make watch REPORT=1", says="build/drift/0.34.0.md"),
        run("make carry VERSION=0.34.0", rc=2, says="stopped at 0002-add-mul.patch"),
        resolver("v0.34.0"),
        run("make carry VERSION=0.34.0", rc=2, says="stopped at 0003-sub-doc.patch"),
        run("make port VERB=skip TO=v0.34.0 REASON='<why>'", why="upstream rewrote sub()"),
        run("make carry VERSION=0.34.0", says="v0.34.0: carried; next: make test BASE=v0.34.0"),
        carried("v0.34.0"),
        run(
            "git add bases.toml ci/lock-cpu-v0.34.0.txt patches/v0.34.0 && git commit -m 'carry vLLM v0.34.0'"
        ),
        committed_only_the_new_base,
        run("make retire BASE=v0.32.0"),
        retired,
    ],
    "port by hand": [
        run("make port VERB=report TO=v0.33.0", rc=0, says="build/port-report-v0.33.0/report.md"),
        run("make port VERB=report TO=v0.33.0 JSON=1", rc=0, says='"files"'),
        run("make port VERB=start TO=v0.33.0", rc=2, says="0002-add-mul.patch"),
        run("make port VERB=status TO=v0.33.0", says="next:"),
        run("make port VERB=abort TO=v0.33.0", says="build/dropped/port-v0.33.0-"),
        run("make port VERB=start TO=v0.33.0", rc=2),
        resolver("v0.33.0"),
        run(
            "make port VERB=continue TO=v0.33.0 VERDICT=re-expressed REASON='<why>'",
            rc=2,
            why="upstream rewrote sub()",
        ),
        run("make port VERB=skip TO=v0.33.0 REASON='<why>' VERDICT=obsolete", why="upstream rewrote sub()"),
        carried("v0.33.0"),
        # the queue it just wrote is its own, committed or not: finishing again changes nothing
        run("make port VERB=finish TO=v0.33.0", says="unchanged patches/v0.33.0/0002-add-mul.patch"),
        commit_queue("v0.33.0"),
        run("make port VERB=finish TO=v0.33.0", says="unchanged patches/v0.33.0/0002-add-mul.patch"),
        run("make drift"),
        run(
            "make drift DIFF=<slug> BASE=v0.33.0",
            slug="add-mul",
            says="v0.32.0 0002-add-mul.patch -> v0.33.0",
        ),
        run("make port VERB=start BASE=v0.31.0 TO=v0.33.0 PORT_TREE=build/port-mine", rc=2),
        run(f"{TOOL} port status --to v0.33.0 --tree build/port-mine --json", says='"current"'),
    ],
    "the real queues": [
        run(
            "make drift DIFF=turbo-attn-cuda-candidate BASE=v0.32.0",
            real=True,
            says="turbo-attn-cuda-candidate",
        ),
    ],
    "overlay": [
        run("make apply"),
        run(f"{TOOL} venv-vllm v0.31.0 --path <your venv>", your_venv="__VENV__", says="built from"),
        made_venv,
        run(f"{TOOL} overlay install --python <your venv>/bin/python", your_venv="__VENV__"),
        overlaid(True),
        run(f"{TOOL} overlay restore --python <your venv>/bin/python", your_venv="__VENV__"),
        overlaid(False),
    ],
}


def test_every_cheap_line_is_run_by_a_scenario():
    ran = {line for steps in SCENARIOS.values() for s in steps if isinstance(s, Run) for line in s.lines}
    assert sorted(CHEAP - ran) == []


def test_every_scenario_step_is_a_command_of_the_docs():
    steps = [line for steps in SCENARIOS.values() for s in steps if isinstance(s, Run) for line in s.lines]
    assert [line for line in steps if line not in DOC_COMMANDS] == []


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_docs_commands_run_as_written(name, world):
    if name == "quilt" and not shutil.which("quilt"):
        pytest.skip("quilt is not installed (apt-get install quilt)")
    for step in SCENARIOS[name]:
        if not isinstance(step, Run):
            step(world)
            continue
        script = "set -e\n" + "\n".join(step.lines)
        for placeholder, value in step.subs:
            if value == "__VENV__":
                value = str(world.tmp / "myvenv")
            script = script.replace(placeholder, value)
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=ROOT if step.real else world.root,
            env=world.env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )
        out = proc.stdout + proc.stderr
        print(f"$ {script}\n{out}")  # shown when the test fails (or under -s)
        assert proc.returncode == step.rc, (step.lines, proc.returncode, out[-4000:])
        assert step.says in out, (step.lines, step.says, out[-4000:])
