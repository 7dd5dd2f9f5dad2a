"""port: the report (placement, blocked-by, test-only overlaps, obsolescence, moves) and the resumable port.

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
import os
import shutil
import subprocess

import pytest

from tkvseam import git

from .conftest import (
    FILES,
    NAME,
    VERSION,
    Project,
    bases_toml,
    make_release,
    message,
    serve_index,
)

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


@pytest.fixture(scope="module")
def port_releases(tmp_path_factory):
    top = tmp_path_factory.mktemp("port-upstream")
    return {NAME: make_release(top, VERSION, BASE_FILES), NEXT: make_release(top, NEXT_VERSION, NEXT_FILES)}


@pytest.fixture
def pproject(tmp_path, port_releases, monkeypatch):
    root = tmp_path / "proj"
    (root / "patches").mkdir(parents=True)
    (root / "series").write_text("")
    (root / "bases.toml").write_text(
        bases_toml(port_releases[NAME])
        + bases_toml(port_releases[NEXT], name=NEXT, version=NEXT_VERSION, queue=f"patches/{NEXT}")
    )
    with serve_index(port_releases, monkeypatch):
        project = Project(root, tmp_path / "cache")
        _make_queue(project)
        yield project


def _edit(project: Project, rel: str, old: str, new: str, msg: str) -> None:
    text = (project.tree / rel).read_text()
    assert old in text, (rel, old)
    project.commit_in_tree(rel, text.replace(old, new, 1), msg)


def _commit(project: Project, files: dict[str, str], msg: str) -> None:
    for rel, text in files.items():
        (project.tree / rel).write_text(text)
    git.commit(project.tree, msg, AUTHOR, paths=list(files))


def _msg(slug, summary, deps="none", extra=""):
    return message(slug, summary).replace("Depends-on: none", f"Depends-on: {deps}") + extra


def _make_queue(project: Project) -> None:
    project.apply()
    t = project.tree
    _commit(
        project,
        {
            "vllm/engine/arg_utils.py": (t / "vllm/engine/arg_utils.py")
            .read_text()
            .replace(
                "    return a - b\n", "    return a - b  # checked\n\n\ndef mul(a, b):\n    return a * b\n"
            ),
            "tests/test_seam.py": SEAM_TESTS + "\n\ndef test_mul():\n    assert 2 * 3 == 6\n",
        },
        _msg("add-mul", "add mul()"),
    )
    _edit(
        project,
        "vllm/config/cache.py",
        "# line 20\n",
        "# line 20 uses mul\n",
        _msg("use-mul", "use mul", "add-mul"),
    )
    _commit(
        project,
        {
            "vllm/config/cache.py": (t / "vllm/config/cache.py")
            .read_text()
            .replace("# line 60\n", "# line 60 more\n"),
            "tests/test_seam.py": (t / "tests/test_seam.py").read_text()
            + "\n\ndef test_more():\n    assert 3\n",
        },
        _msg("test-more", "more tests"),
    )
    _edit(
        project, "vllm/config/cache.py", "# line 153\n", "# line 153 (seam)\n", _msg("fuzz-far", "line 153")
    )
    _edit(project, "vllm/tail.py", "t_20 = 20\n", "t_20 = 20\nt_21 = 21\n", _msg("tail-append", "t_21"))
    _edit(
        project,
        "vllm/registry.py",
        "REG[name]\n",
        "REG[name]\n" + REGISTER,
        _msg("register", "add register()"),
    )
    _edit(project, "vllm/old_mod.py", "value_15 = 15\n", "value_15 = 150\n", _msg("old-mod", "value_15"))
    _commit(
        project,
        {
            "tests/test_seam.py": (t / "tests/test_seam.py").read_text()
            + "\n\ndef test_seam():\n    assert 4\n"
        },
        _msg("seam-tests", "seam tests", extra="Test-depends-on: add-mul\n"),
    )
    project.refresh()


def _report(project: Project) -> dict:
    res = project.cli("port", "--base", NAME, "--to", NEXT, "--report", "--json", expect=12)
    out = json.loads(res.output)
    return {p["name"][:4]: p for p in out["patches"]} | {
        "summary": out["summary"],
        "table": out["verdict_table"],
    }


def _hunks(p: dict, file: str) -> list[dict]:
    return [h for h in p["hunks"] if h["file"] == file]


# --------------------------------------------------------------------------- the report


@pytest.fixture
def report(pproject):
    return _report(pproject)


def test_report_dependency_aware_blocked_by(report):
    assert report["0001"]["status"] == "conflict" and report["0001"]["own"] == "conflict"
    assert set(report["0001"]["conflicts"]) == {"vllm/engine/arg_utils.py", "tests/test_seam.py"}
    use = report["0002"]
    assert use["status"] == "blocked" and use["blocked_by"] == ["0001"]
    assert use["own"] == "3-way" and "on its own: 3-way" in use["note"]


def test_report_test_file_only_overlap_is_not_a_code_conflict(report):
    more = report["0003"]
    assert more["own"] == "test-only conflict" and more["status"] == "blocked"
    assert more["blocked_by"] == ["0001"] and more["note"] == "test file only: tests/test_seam.py"
    assert [f["status"] for f in more["files"] if f["path"] == "vllm/config/cache.py"] == ["3-way"]
    seam = report["0008"]  # names its test prerequisite in Test-depends-on
    assert seam["status"] == "blocked" and seam["blocked_by"] == ["0001"]


def test_report_offset_and_fuzz_searched_over_the_whole_file(report):
    [use] = _hunks(report["0002"], "vllm/config/cache.py")
    assert (use["kind"], use["delta"], use["status"]) == ("offset", 120, "offset +120")
    [far] = _hunks(report["0004"], "vllm/config/cache.py")
    assert (far["kind"], far["fuzz"], far["delta"]) == ("fuzz", 1, 120)
    assert far["status"] == "fuzz 1, offset +120" and report["0004"]["status"] == "3-way"


@pytest.mark.skipif(not shutil.which("patch"), reason="GNU patch not installed")
def test_placement_agrees_with_gnu_patch(pproject, tmp_path):
    """The same hunks through GNU patch --dry-run: same offset and fuzz."""
    target = tmp_path / "cache.py"
    target.write_text(NEXT_FILES["vllm/config/cache.py"])
    for name, expected in (
        ("0002-use-mul.patch", "(offset 120 lines)"),
        ("0004-fuzz-far.patch", "with fuzz 1 (offset 120 lines)"),
    ):
        text = (pproject.root / "patches" / name).read_text()
        diff = text[text.index("diff --git") :]
        out = subprocess.run(
            ["patch", "--dry-run", str(target)], input=diff, capture_output=True, text=True
        ).stdout
        assert expected in out, out


def test_report_end_of_file_append_is_not_an_offset(report):
    [tail] = _hunks(report["0005"], "vllm/tail.py")
    assert tail["kind"] == "eof" and tail["status"] == "end of file (now line 58)"
    assert report["0005"]["status"] == "3-way"


def test_report_likely_obsolete_with_evidence(report):
    reg = report["0006"]
    assert reg["status"] == "likely obsolete"
    assert any(e.startswith("reverse-applies") for e in reg["obsolete"])
    assert any("register (defined in vllm/registry.py)" in e for e in reg["obsolete"])
    assert "obsolete?" in report["table"]


def test_report_move_retries_the_hunk_where_the_file_went(report):
    mod = report["0007"]
    [f] = mod["files"]
    assert (
        f["status"] == "moved" and f["moved_to"] == "vllm/new_mod.py" and "retried there: 3-way" in f["note"]
    )
    assert mod["status"] == "3-way"
    [h] = mod["hunks"]
    assert h["file"] == "vllm/new_mod.py" and h["kind"] == "exact" and h["note"].startswith("moved")


def test_report_failing_hunk_shows_the_upstream_change_and_new_lines(report):
    [h] = _hunks(report["0001"], "vllm/engine/arg_utils.py")
    assert h["kind"] == "fails" and h["upstream"]["changed"]
    assert "+    return -(b - a)" in h["upstream"]["diff"] and h["upstream"]["new_lines"] == "3-6"


def test_report_statuses_never_contradict_and_keep_nothing(pproject, report):
    for name, p in report.items():
        if name in ("summary", "table"):
            continue
        if p["own"] == "exact":
            assert all(h["kind"] == "exact" for h in p["hunks"]), name
        if any(h["kind"] != "exact" for h in p["hunks"]):
            assert p["own"] != "exact", name
    assert report["summary"]["patches"] == 8 and report["summary"]["applied"] == 3
    assert not (pproject.root / "build" / f"port-{NEXT}").exists()
    assert [x.name for x in (pproject.root / "build").iterdir()] == [f"vllm-{NAME}"]
    assert "| file / hunk | what it does | verdict | reason | evidence |" in report["table"]


# --------------------------------------------------------------------------- the resumable port


def _port(project: Project, *args: str, expect: int | None = 0):
    return project.cli("port", "--base", NAME, "--to", NEXT, *args, expect=expect)


def _resolve_0001(tree):
    (tree / "vllm/engine/arg_utils.py").write_text(
        NEXT_FILES["vllm/engine/arg_utils.py"].replace(
            "    return -(b - a)\n", "    return -(b - a)  # checked\n\n\ndef mul(a, b):\n    return a * b\n"
        )
    )
    (tree / "tests/test_seam.py").write_text(
        NEXT_FILES["tests/test_seam.py"] + "\n\ndef test_mul():\n    assert 2 * 3 == 6\n"
    )
    git.run(tree, "add", "vllm/engine/arg_utils.py", "tests/test_seam.py")


def test_start_stops_at_the_conflict_and_a_second_start_is_refused(pproject):
    err = _port(pproject, expect=12).stderr
    assert "stopped at 0001-add-mul.patch: conflict" in err and "vllm/engine/arg_utils.py: conflict" in err
    assert "next:" in err and "--continue" in err and "--skip" in err
    tree = pproject.root / "build" / f"port-{NEXT}"
    assert "<<<<<<<" in (tree / "vllm/engine/arg_utils.py").read_text()
    status = json.loads(_port(pproject, "--status", "--json").output)
    assert status["current"] == "0001-add-mul.patch" and status["done"] == []
    err = _port(pproject, expect=5).stderr
    assert "already in progress" in err and "stopped at 0001-add-mul.patch" in err


def test_continue_commits_with_the_patch_header_and_skip_records_the_reason(pproject):
    top = {p.name: p.read_bytes() for p in (pproject.root / "patches").glob("*")}
    series = (pproject.root / "series").read_bytes()
    _port(pproject, expect=12)
    tree = pproject.root / "build" / f"port-{NEXT}"
    err = _port(pproject, "--continue", expect=5).stderr
    assert "still unmerged" in err  # nothing resolved yet
    _resolve_0001(tree)
    err = _port(
        pproject, "--continue", "--verdict", "re-expressed", "--reason", "upstream rewrote sub()", expect=12
    ).stderr
    assert "stopped at 0006-register.patch: likely obsolete" in err
    msg = git.out(tree, "log", "-1", "--format=%an <%ae>%n%B", "HEAD~4")
    assert msg.startswith(AUTHOR + "\nadd-mul: add mul()")
    assert (
        "Verdict: re-expressed\nReason: upstream rewrote sub()\nUpstream: upstreamable\nDepends-on: none\n"
        "Tests: tests/" in msg
    )
    res = _port(pproject, "--skip", "--reason", "upstream added register() itself")
    assert "1 skipped" in res.output and "lint + style gate: ok" in res.output
    queue = pproject.root / "patches" / NEXT
    names = (queue / "series").read_text().split()
    assert names == [
        "0001-add-mul.patch",
        "0002-use-mul.patch",
        "0003-test-more.patch",
        "0004-fuzz-far.patch",
        "0005-tail-append.patch",
        "0006-old-mod.patch",
        "0007-seam-tests.patch",
    ]
    assert "Verdict: re-expressed" in (queue / names[0]).read_text()
    assert "Test-depends-on: add-mul" in (queue / names[-1]).read_text()
    assert (
        "| 0006-register.patch | skipped | obsolete | upstream added register() itself |"
        in (queue / "PORT.md").read_text()
    )
    # finish wrote only the new base's queue
    assert {p.name: p.read_bytes() for p in (pproject.root / "patches").glob("*") if p.is_file()} == top
    assert (pproject.root / "series").read_bytes() == series
    if shutil.which("quilt"):  # the new queue is a quilt queue too (absolute QUILT_SERIES: README)
        pristine = pproject.root / "build" / "quilt"
        pristine.mkdir()
        archive = git.run(pproject.root / "build" / f"port-{NEXT}", "archive", "tkv-seam-base").stdout
        subprocess.run(["tar", "-x", "-C", str(pristine)], input=archive, check=True)
        env = {**os.environ, "QUILT_PATCHES": str(queue), "QUILT_SERIES": str(queue / "series")}
        proc = subprocess.run(
            ["quilt", "push", "-a", "--fuzz=0"], cwd=pristine, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0 and "Now at patch" in proc.stdout, proc.stdout + proc.stderr
    assert sorted(p.name for p in (pproject.root / "patches").iterdir() if p.is_dir()) == [NEXT]
    # the new queue applies on its base
    out = json.loads(pproject.cli("apply", "--base", NEXT, "--json").output)
    assert len(out["patches"]) == 7
    # refresh --base NEXT round-trips NEXT's queue and writes nothing else
    assert {r["status"] for r in json.loads(pproject.cli("refresh", "--base", NEXT, "--json").output)} == {
        "unchanged"
    }
    assert (pproject.root / "series").read_bytes() == series
    # drift: each patch's version on NEXT against NAME's
    drift = json.loads(pproject.cli("drift", "--json").output)
    cells = {r["slug"]: r["cells"][NEXT] for r in drift["rows"]}
    assert cells == {
        "add-mul": "re-expressed",
        "use-mul": "same hunks",
        "test-more": "same hunks",  # line numbers moved, lines the same
        "fuzz-far": "context only",  # upstream's line 150 is in its context now
        "tail-append": "same hunks",
        "register": "absent",
        "old-mod": "re-expressed",  # another file
        "seam-tests": "same hunks",
    }
    assert "| register | carried | absent |" in drift["matrix"]


class Killed(BaseException):
    """The process dying at an injected point (no handler of the tool's catches it)."""


def _stopped_at_0006(pproject, tree) -> None:
    """The port goes on from where it was killed: one commit per patch, none twice."""
    err = _port(pproject, "--continue", expect=12).stderr
    assert "stopped at 0006-register.patch: likely obsolete" in err
    subjects = git.out(tree, "log", "--format=%s", "tkv-seam-base..HEAD").splitlines()
    assert [s.split(":")[0] for s in reversed(subjects)] == [
        "add-mul",
        "use-mul",
        "test-more",
        "fuzz-far",
        "tail-append",
    ]
    status = json.loads(_port(pproject, "--status", "--json").output)
    assert [d["name"][:4] for d in status["done"]] == ["0001", "0002", "0003", "0004", "0005"]


def test_a_port_killed_after_a_commit_records_it_and_goes_on(pproject, monkeypatch):
    _port(pproject, expect=12)
    tree = pproject.root / "build" / f"port-{NEXT}"
    _resolve_0001(tree)
    real = git.commit

    def commit_then_die(*args, **kw):
        real(*args, **kw)
        raise Killed  # 0002 is committed, the port's state not yet saved

    monkeypatch.setattr(git, "commit", commit_then_die)
    with pytest.raises(Killed):
        _port(pproject, "--continue", "--verdict", "re-expressed", "--reason", "upstream rewrote sub()")
    monkeypatch.setattr(git, "commit", real)
    status = json.loads(_port(pproject, "--status", "--json").output)
    assert [(d["name"], d["status"]) for d in status["done"]] == [
        ("0001-add-mul.patch", "resolved"),
        ("0002-use-mul.patch", "exact"),
    ]
    assert status["done"][1]["note"] == "recorded after an interrupted run"
    _stopped_at_0006(pproject, tree)


def test_a_port_killed_after_committing_a_resolution_keeps_its_verdict(pproject, monkeypatch):
    _port(pproject, expect=12)
    tree = pproject.root / "build" / f"port-{NEXT}"
    _resolve_0001(tree)
    real = git.run

    def run_then_die(repo, *args, **kw):
        out = real(repo, *args, **kw)
        if args[:1] == ("commit",):
            raise Killed  # the resolution is committed, the port's state still says "stopped at 0001"
        return out

    monkeypatch.setattr(git, "run", run_then_die)
    with pytest.raises(Killed):
        _port(pproject, "--continue", "--verdict", "re-expressed", "--reason", "upstream rewrote sub()")
    monkeypatch.setattr(git, "run", real)
    _stopped_at_0006(pproject, tree)
    first = json.loads(_port(pproject, "--status", "--json").output)["done"][0]
    assert (first["status"], first["verdict"], first["reason"]) == (
        "resolved",
        "re-expressed",
        "upstream rewrote sub()",
    )


def test_a_port_killed_while_applying_keeps_the_leftovers_and_applies_again(pproject, monkeypatch):
    from tkvseam import port as port_mod

    _port(pproject, expect=12)
    tree = pproject.root / "build" / f"port-{NEXT}"
    _resolve_0001(tree)
    real = port_mod.apply_files

    def apply_then_die(tree_, patch, moves):
        out = real(tree_, patch, moves)
        if patch.name == "0003-test-more.patch":
            raise Killed  # 0003's files are in the tree, nothing recorded
        return out

    monkeypatch.setattr(port_mod, "apply_files", apply_then_die)
    with pytest.raises(Killed):
        _port(pproject, "--continue", "--verdict", "re-expressed", "--reason", "upstream rewrote sub()")
    monkeypatch.setattr(port_mod, "apply_files", real)
    assert git.status_porcelain(tree)  # half applied
    before = set(git.out(tree, "for-each-ref", "--format=%(refname)", "refs/tkv-seam/dropped").split())
    _stopped_at_0006(pproject, tree)
    kept = set(git.out(tree, "for-each-ref", "--format=%(refname)", "refs/tkv-seam/dropped").split()) - before
    assert len(kept) == 1  # the leftovers are kept, not thrown away
    ref = kept.pop()
    assert git.out(tree, "diff", "--name-only", f"{ref}^", ref).split() == [
        "tests/test_seam.py",
        "vllm/config/cache.py",
    ]


def test_skip_needs_a_reason(pproject):
    _port(pproject, expect=12)
    assert "--reason" in _port(pproject, "--skip", expect=2).stderr


def test_abort_removes_only_the_port_tree(pproject):
    before = sorted(
        str(p.relative_to(pproject.root)) for p in pproject.root.rglob("*") if "build" not in p.parts
    )
    _port(pproject, expect=12)
    assert "no queue was written" in _port(pproject, "--abort").output
    assert not (pproject.root / "build" / f"port-{NEXT}").exists()
    assert (pproject.root / "build" / f"vllm-{NAME}").exists()
    after = sorted(
        str(p.relative_to(pproject.root)) for p in pproject.root.rglob("*") if "build" not in p.parts
    )
    assert after == before
    assert "no port to" in _port(pproject, "--status", expect=1).stderr


def test_finish_refuses_before_every_patch_is_through(pproject):
    _port(pproject, expect=12)
    err = _port(pproject, "--finish", expect=5).stderr
    assert "8 patch(es) not yet ported (stopped at 0001-add-mul.patch)" in err
    assert not (pproject.root / "patches" / NEXT).exists()


def test_refresh_refuses_a_tree_of_another_base(pproject):
    err = pproject.cli("refresh", "--base", NEXT, "--tree", str(pproject.tree), expect=5).stderr
    assert f"was applied on {NAME}, not {NEXT}" in err


def test_blocked_by_names_the_root_cause_not_the_chain():
    from tkvseam.port import PatchReport, _root_causes

    by_slug = {
        "slot": PatchReport("0002-slot.patch", "slot", status="conflict", own="conflict"),
        "cuda": PatchReport("0003-cuda.patch", "cuda", status="blocked", own="exact", blocked_by=["0002"]),
        "gone": PatchReport("0005-gone.patch", "gone", status="blocked", own="conflict", blocked_by=["0002"]),
    }
    assert _root_causes(["cuda"], by_slug) == ["0002"]  # applies itself: its cause is the cause
    assert _root_causes(["cuda", "gone"], by_slug) == ["0002", "0005"]  # fails itself: a cause too


# --------------------------------------------------------------------------- nothing lost:
# port may only remove a tree it made, holding nothing the user added


def _two_bases(project, releases):
    from .conftest import NEXT_VERSION as NV

    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[f"v{NV}"], name=f"v{NV}", version=NV)
    )
    return f"v{NV}"


def test_port_refuses_to_wipe_an_unrelated_directory(project, releases):
    nxt = _two_bases(project, releases)
    mine = project.root / "mine"
    (mine / "src").mkdir(parents=True)
    (mine / "notes.txt").write_text("precious\n")
    err = project.cli("port", "--base", NAME, "--to", nxt, "--tree", str(mine), expect=5).stderr
    assert f"{mine} exists but was not made by tkv-seam port" in err and "notes.txt" in err and "src" in err
    assert "next: mv" in err
    assert (mine / "notes.txt").read_text() == "precious\n"


def test_port_refuses_a_build_tree_holding_an_unrefreshed_commit(project, releases):
    nxt = _two_bases(project, releases)
    project.apply()
    project.commit_in_tree("vllm/new.py", "x = 1\n", message("new-file", "add new.py"))
    head = git.head(project.tree)
    err = project.cli("port", "--base", NAME, "--to", nxt, "--tree", str(project.tree), expect=5).stderr
    assert "not made by tkv-seam port" in err
    assert git.head(project.tree) == head and (project.tree / "vllm/new.py").exists()


def test_port_refuses_to_restart_over_a_committed_resolution(project, releases):
    from .test_apply import make_two_patches

    nxt = _two_bases(project, releases)
    make_two_patches(project)
    project.cli("port", "--base", NAME, "--to", nxt, expect=12)  # stops at add-mul
    tree = project.root / "build" / f"port-{nxt}"
    (tree / "vllm/engine/arg_utils.py").write_text("def add(a, b):\n    return a + b\n")  # resolved
    git.commit(tree, "add-mul: add mul()\n", "Seam Dev <dev@example.invalid>")
    resolution = git.head(tree)
    err = project.cli("port", "--base", NAME, "--to", nxt, expect=5).stderr
    assert "already in progress" in err and "0002-add-mul.patch" in err
    assert git.head(tree) == resolution


def test_port_refuses_a_finished_port_tree_with_a_user_commit_and_replaces_an_untouched_one(
    project, releases
):
    nxt = _two_bases(project, releases)
    project.apply()
    project.commit_in_tree(
        "vllm/config/cache.py",
        (project.tree / "vllm/config/cache.py").read_text().replace("line 10\n", "line 10 (seam)\n"),
        message("cache-tweak", "mark line 10"),
    )
    project.refresh()
    project.cli("port", "--base", NAME, "--to", nxt)  # applies (3-way): finishes, writes the queue
    tree = project.root / "build" / f"port-{nxt}"
    project.cli("port", "--base", NAME, "--to", nxt)  # its own, untouched: replaced
    (tree / "vllm/extra.py").write_text("y = 2\n")
    git.commit(tree, "extra: my resolution\n", "Seam Dev <dev@example.invalid>", paths=["vllm/extra.py"])
    err = project.cli("port", "--base", NAME, "--to", nxt, expect=5).stderr
    assert "extra: my resolution" in err
    assert (tree / "vllm/extra.py").read_text() == "y = 2\n"
