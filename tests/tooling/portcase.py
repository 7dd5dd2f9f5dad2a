"""The port case: a synthetic pair of releases and an eight-patch queue that holds every port case.

One synthetic pair of releases holds every case:

====  ==============  ==========================================================================
0001  add-mul         code conflict (upstream rewrote sub()) + appends to tests/test_seam.py,
                      whose end upstream also changed (the test hunk conflicts too)
0002  use-mul         Depends-on add-mul; applies on its own (offset +120): blocked by 0001
0003  test-more       edits cache.py (offset) and appends after 0001's test: test file only
0004  fuzz-far        outer context line changed upstream, 120 lines above: fuzz 1, offset +120
0005  tail-append     appends to tail.py, upstream inserted lines in the middle: end of file
0006  register        adds register(), which upstream added the same way: likely obsolete
0007  old-mod         edits vllm/old_mod.py, which upstream renamed to vllm/new_mod.py
0008  seam-tests      Test-depends-on add-mul; only its test file conflicts
====  ==============  ==========================================================================
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tkvseam import git

from .conftest import FILES, NAME, VERSION, Project, bases_toml, make_release, message, serve_index

NEXT_VERSION = "9.10.0"
NEXT = f"v{NEXT_VERSION}"
AUTHOR = "Seam Dev <dev@example.invalid>"

CACHE = "".join(f"# line {i}\n" for i in range(1, 201))
SEAM_TESTS = "def test_base():\n    assert True\n"
OLD_MOD = "".join(f"value_{i} = {i}\n" for i in range(1, 31))
TAIL = "".join(f"t_{i} = {i}\n" for i in range(1, 21))
REGISTRY = "REG = {}\n\n\ndef get(name):\n    return REG[name]\n"
REGISTER = "\n\ndef register(name, value):\n    REG[name] = value\n"

BASE_FILES = {
    **FILES,
    "vllm/config/cache.py": CACHE,
    "vllm/old_mod.py": OLD_MOD,
    "vllm/tail.py": TAIL,
    "vllm/registry.py": REGISTRY,
    "tests/test_seam.py": SEAM_TESTS,
}
NEXT_FILES = {
    **{k: v for k, v in BASE_FILES.items() if k != "vllm/old_mod.py"},
    "vllm/config/cache.py": "".join(f"# new {i}\n" for i in range(1, 121))
    + CACHE.replace("# line 150\n", "# line 150 (upstream)\n"),
    "vllm/engine/arg_utils.py": FILES["vllm/engine/arg_utils.py"].replace("return a - b", "return -(b - a)"),
    "vllm/new_mod.py": OLD_MOD,
    "vllm/tail.py": TAIL.replace("t_10 = 10\n", "t_10 = 10\n" + "".join(f"u_{i} = {i}\n" for i in range(40))),
    "vllm/registry.py": REGISTRY + REGISTER,
    "tests/test_seam.py": SEAM_TESTS + "\n\ndef test_upstream():\n    assert 1\n",
}


@pytest.fixture(scope="session")
def port_releases(tmp_path_factory):
    top = tmp_path_factory.mktemp("port-upstream")
    return {NAME: make_release(top, VERSION, BASE_FILES), NEXT: make_release(top, NEXT_VERSION, NEXT_FILES)}


def _port_project(top: Path, releases, monkeypatch):
    root = top / "proj"
    (root / "patches").mkdir(parents=True)
    (root / "series").write_text("")
    (root / "bases.toml").write_text(
        bases_toml(releases[NAME])
        + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION, queue=f"patches/{NEXT}")
    )
    with serve_index(releases, monkeypatch):
        project = Project(root, top / "cache")
        make_queue(project)
        yield project


@pytest.fixture
def pproject(tmp_path, port_releases, monkeypatch):
    """The case's project: the queue made and refreshed on the old release, both served by an index."""
    yield from _port_project(tmp_path, port_releases, monkeypatch)


@pytest.fixture(scope="module")
def pproject_once(tmp_path_factory, port_releases):
    """The case's project, shared by a module's tests that only read it (the report)."""
    with pytest.MonkeyPatch.context() as mp:
        yield from _port_project(tmp_path_factory.mktemp("port-once"), port_releases, mp)


def edit(project: Project, rel: str, old: str, new: str, msg: str) -> None:
    text = (project.tree / rel).read_text()
    assert old in text, (rel, old)
    project.commit_in_tree(rel, text.replace(old, new, 1), msg)


def commit_files(project: Project, files: dict[str, str], msg: str) -> None:
    for rel, text in files.items():
        (project.tree / rel).write_text(text)
    git.commit(project.tree, msg, AUTHOR, paths=list(files))


def case_message(slug, summary, deps="none", extra=""):
    return message(slug, summary).replace("Depends-on: none", f"Depends-on: {deps}") + extra


def make_queue(project: Project) -> None:
    """Apply the empty series on the old release, commit the eight patches of the table above, refresh."""
    project.apply()
    t = project.tree
    commit_files(
        project,
        {
            "vllm/engine/arg_utils.py": (t / "vllm/engine/arg_utils.py")
            .read_text()
            .replace(
                "    return a - b\n", "    return a - b  # checked\n\n\ndef mul(a, b):\n    return a * b\n"
            ),
            "tests/test_seam.py": SEAM_TESTS + "\n\ndef test_mul():\n    assert 2 * 3 == 6\n",
        },
        case_message("add-mul", "add mul()"),
    )
    edit(
        project,
        "vllm/config/cache.py",
        "# line 20\n",
        "# line 20 uses mul\n",
        case_message("use-mul", "use mul", "add-mul"),
    )
    commit_files(
        project,
        {
            "vllm/config/cache.py": (t / "vllm/config/cache.py")
            .read_text()
            .replace("# line 60\n", "# line 60 more\n"),
            "tests/test_seam.py": (t / "tests/test_seam.py").read_text()
            + "\n\ndef test_more():\n    assert 3\n",
        },
        case_message("test-more", "more tests"),
    )
    edit(
        project,
        "vllm/config/cache.py",
        "# line 153\n",
        "# line 153 (seam)\n",
        case_message("fuzz-far", "line 153"),
    )
    edit(
        project, "vllm/tail.py", "t_20 = 20\n", "t_20 = 20\nt_21 = 21\n", case_message("tail-append", "t_21")
    )
    edit(
        project,
        "vllm/registry.py",
        "REG[name]\n",
        "REG[name]\n" + REGISTER,
        case_message("register", "add register()"),
    )
    edit(
        project, "vllm/old_mod.py", "value_15 = 15\n", "value_15 = 150\n", case_message("old-mod", "value_15")
    )
    commit_files(
        project,
        {
            "tests/test_seam.py": (t / "tests/test_seam.py").read_text()
            + "\n\ndef test_seam():\n    assert 4\n"
        },
        case_message("seam-tests", "seam tests", extra="Test-depends-on: add-mul\n"),
    )
    project.refresh()


def report_json(project: Project) -> dict:
    """``port report --json`` of the case, by patch number (+ "summary", "table")."""
    res = project.cli("port", "report", "--base", NAME, "--to", NEXT, "--json", expect=12)
    out = json.loads(res.output)
    return {p["name"][:4]: p for p in out["patches"]} | {
        "summary": out["summary"],
        "table": out["verdict_table"],
    }


def hunks(p: dict, file: str) -> list[dict]:
    return [h for h in p["hunks"] if h["file"] == file]


def port(project: Project, verb: str, *args: str, expect: int | None = 0):
    """``tkv-seam port <verb>`` of the case (report and start take the old base too)."""
    base = ("--base", NAME) if verb in ("report", "start") else ()
    return project.cli("port", verb, *base, "--to", NEXT, *args, expect=expect)


def port_tree(project: Project) -> Path:
    return project.root / "build" / f"port-{NEXT}"


def resolve_0001(tree):
    """Resolve the conflict 0001 stops at, as a maintainer would, and stage it."""
    (tree / "vllm/engine/arg_utils.py").write_text(
        NEXT_FILES["vllm/engine/arg_utils.py"].replace(
            "    return -(b - a)\n", "    return -(b - a)  # checked\n\n\ndef mul(a, b):\n    return a * b\n"
        )
    )
    (tree / "tests/test_seam.py").write_text(
        NEXT_FILES["tests/test_seam.py"] + "\n\ndef test_mul():\n    assert 2 * 3 == 6\n"
    )
    git.run(tree, "add", "vllm/engine/arg_utils.py", "tests/test_seam.py")
