"""The pass records attacked: tampered or odd record files, odd ``--reads``, a timing record
cut short or edited, a command that cannot run. A record the tool cannot trust is no pass (the
step runs again); nothing odd in ``build/passes/`` turns a passing lane into a crash."""

from __future__ import annotations

import json
import sys

import pytest

from tkvseam.seamtest.passes import PassBook

OK = [sys.executable, "-c", "pass"]
KEY = "a" * 64


def lane(project, *command, reads=("tests",), json_out=False):
    argv = ["seamtest", "lane", "demo", *(a for r in reads for a in ("--reads", r))]
    return project.cli(*argv, "--", *command, expect=None)


def record_file(book: PassBook, name: str):
    (path,) = [p for p in book.dir.glob(f"{name}-*.json")]
    return path


def _no_when(data):
    del data["when"]


def _seconds_text(data):
    data["seconds"] = "lots"


def _data_list(data):
    data["data"] = [1]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda p: p.write_text("[1]\n"),
        lambda p: p.write_text('"pass"\n'),
        lambda p: p.write_text("{not json"),
        _no_when,
        _seconds_text,
        _data_list,
    ],
    ids=["list", "string", "not-json", "no-when", "seconds-text", "data-list"],
)
def test_a_tampered_record_is_no_pass(tmp_path, tamper):
    book = PassBook(tmp_path, "v9.9.9")
    book.record("full-series", KEY, 3.0)
    path = record_file(book, "full-series")
    if tamper.__name__.startswith("_"):
        data = json.loads(path.read_text())
        tamper(data)
        path.write_text(json.dumps(data))
    else:
        tamper(path)
    assert book.lookup("full-series", KEY) is None


def test_a_tampered_record_makes_the_lane_run_again(project):
    (project.root / "tests").mkdir()
    count = project.root.parent / "count"  # outside the project: what a lane reads is in its key
    cmd = [sys.executable, "-c", f"open({str(count)!r}, 'a').write('x')"]
    assert lane(project, *cmd).exit_code == 0
    path = record_file(PassBook(project.root), "demo")
    path.write_text("[1]\n")
    again = lane(project, *cmd)
    assert again.exit_code == 0, again.stderr
    assert count.read_text() == "xx" and "lane demo: passed" in again.stderr


def test_a_record_that_is_a_symlink_is_not_trusted(tmp_path):
    book = PassBook(tmp_path, "v9.9.9")
    book.record("full-series", KEY, 3.0)
    path = record_file(book, "full-series")
    forged = tmp_path / "forged.json"
    forged.write_text(path.read_text())
    path.unlink()
    path.symlink_to(forged)
    assert book.lookup("full-series", KEY) is None
    book.record("full-series", KEY, 1.0)  # a new pass replaces the link, not what it names
    assert not path.is_symlink() and book.lookup("full-series", KEY) is not None
    assert json.loads(forged.read_text())["seconds"] == 3.0


def test_a_record_path_that_is_a_directory_leaves_the_pass_standing(project):
    (project.root / "tests").mkdir()
    assert lane(project, *OK).exit_code == 0
    path = record_file(PassBook(project.root), "demo")
    path.unlink()
    path.mkdir()
    (path / "mine").write_text("a user's file\n")
    again = lane(project, *OK)
    assert again.exit_code == 0, again.stderr
    assert "passed" in again.stderr and "not recorded" in again.stderr
    assert (path / "mine").read_text() == "a user's file\n"  # deleted only what it made: nothing


def test_old_records_skip_links_directories_and_ones_already_gone(tmp_path):
    book = PassBook(tmp_path, "v9.9.9")
    book.dir.mkdir(parents=True)
    (book.dir / ("full-series-" + "b" * 24 + ".json")).symlink_to(tmp_path / "nothing")
    (book.dir / ("full-series-" + "c" * 24 + ".json")).mkdir()
    for i in range(6):
        assert book.record("full-series", f"{i:x}" * 64, 1.0) is not None
    assert [i for i in range(6) if book.lookup("full-series", f"{i:x}" * 64)] == [2, 3, 4, 5]
    assert (book.dir / ("full-series-" + "c" * 24 + ".json")).is_dir()


@pytest.mark.parametrize("outside", ["/etc/hostname", "../elsewhere", "tests/../../elsewhere"])
def test_reads_outside_the_project_are_refused(project, outside):
    (project.root / "tests").mkdir()
    result = lane(project, *OK, reads=(outside,))
    assert result.exit_code == 2, result.stderr
    assert f"--reads {outside} is not a path in the project" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("reads", [".", "", "build", "build/passes", "tests/.."])
def test_reads_of_the_tools_own_build_directory_are_refused(project, reads):
    (project.root / "tests").mkdir()
    result = lane(project, *OK, reads=(reads,))
    assert result.exit_code == 2, result.stderr
    assert "holds build/, the tool's own trees and pass records" in result.stderr


def test_a_change_under_a_symlinked_directory_runs_the_lane_again(project, tmp_path):
    (project.root / "tests").mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "conftest.py").write_text("x = 1\n")
    (project.root / "tests" / "shared").symlink_to(shared)
    (project.root / "tests" / "loop").symlink_to(project.root / "tests")  # a loop ends
    count = project.root.parent / "count"  # outside the project: what a lane reads is in its key
    cmd = [sys.executable, "-c", f"open({str(count)!r}, 'a').write('x')"]
    assert lane(project, *cmd).exit_code == 0
    assert lane(project, *cmd).exit_code == 0 and count.read_text() == "x"
    (shared / "conftest.py").write_text("x = 2\n")  # what the command reads through the link
    assert lane(project, *cmd).exit_code == 0 and count.read_text() == "xx"


def test_a_command_that_cannot_run_fails_the_lane(project):
    (project.root / "tests").mkdir()
    result = lane(project, str(project.root / "no-such-command"))
    assert result.exit_code == 9, result.stderr
    assert "cannot run" in result.stderr and "nothing recorded" in result.stderr
    assert "Traceback" not in result.stderr


def test_odd_timing_lines_are_skipped_and_a_cut_short_one_does_not_swallow_the_next(project):
    (project.root / "tests").mkdir()
    timings = project.root / "build/passes/project/timings.jsonl"
    timings.parent.mkdir(parents=True)
    timings.write_text(
        '[1]\n"x"\n{"name": "q"}\n{"name": "z", "seconds": "s", "when": "t"}\n{"name": "cut", "sec'
    )
    assert lane(project, *OK).exit_code == 0
    times = project.cli("seamtest", "times", "--json", expect=None)
    assert times.exit_code == 0, times.stderr
    rows = json.loads(times.stdout)["timings"]
    assert [r["name"] for r in rows] == ["demo"]
    text = project.cli("seamtest", "times", expect=None)
    assert text.exit_code == 0 and "demo" in text.stdout


def test_a_timing_record_that_is_a_symlink_is_not_written_through(project, tmp_path):
    (project.root / "tests").mkdir()
    target = tmp_path / "not-the-tools.txt"
    target.write_text("keep\n")
    timings = project.root / "build/passes/project/timings.jsonl"
    timings.parent.mkdir(parents=True)
    timings.symlink_to(target)
    assert lane(project, *OK).exit_code == 0
    assert target.read_text() == "keep\n"


def test_a_record_another_run_removed_meanwhile_is_skipped(tmp_path, monkeypatch):
    """Two runs of one step at once: each drops the oldest records; one already gone is no crash."""
    book = PassBook(tmp_path, "v9.9.9")
    for i in range(4):
        book.record("full-series", f"{i:x}" * 64, 1.0)
    gone = book.dir / ("full-series-" + "0" * 24 + ".json")
    cls = type(gone)
    real = {name: getattr(cls, name) for name in ("stat", "lstat")}

    def racing(name):
        def call(self, *args, **kw):
            if self == gone:
                self.unlink(missing_ok=True)  # the other run removed it between the listing and this
            return real[name](self, *args, **kw)

        return call

    for name in real:
        monkeypatch.setattr(cls, name, racing(name))
    assert book.record("full-series", "9" * 64, 1.0) is not None
    monkeypatch.undo()
    assert [i for i in (1, 2, 3, 9) if book.lookup("full-series", f"{i:x}" * 64)] == [1, 2, 3, 9]


@pytest.mark.parametrize("link", ["build/passes", "build/passes/project"])
def test_records_are_never_written_or_read_through_a_link_below_build(project, tmp_path, link):
    (project.root / "tests").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project.root / link).parent.mkdir(parents=True, exist_ok=True)
    (project.root / link).symlink_to(elsewhere)
    count = tmp_path / "count"
    cmd = [sys.executable, "-c", f"open({str(count)!r}, 'a').write('x')"]
    first = lane(project, *cmd)
    assert first.exit_code == 0 and "is a symlink (records are never kept through one)" in first.stderr
    assert list(elsewhere.rglob("*")) == []  # nothing written there, not even the timing record
    book = PassBook(project.root, None)
    real = PassBook(tmp_path / "real", None)  # a record planted where the link leads
    real.record("demo", KEY, 1.0)
    for path in real.dir.iterdir():
        target = elsewhere / path.name if link.endswith("project") else elsewhere / "project" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    assert book.lookup("demo", KEY) is None
    assert lane(project, *cmd).exit_code == 0 and count.read_text() == "xx"  # no pass read through it


@pytest.mark.parametrize("value", ["no colons", "1:2", 5, None])
def test_a_damaged_hash_cache_is_hashed_again_and_no_crash(tmp_path, value):
    from tkvseam.seamtest import keys

    venv = tmp_path / "venv"
    module = venv / "lib" / "python3.11" / "site-packages" / "m.py"
    module.parent.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("version = 3.11\n")
    module.write_text("x = 1\n")
    want = keys.venv_state(venv)
    st = module.stat()
    cache = tmp_path / "hashes.json"
    ident = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
    cache.write_text(json.dumps({ident: value}) if value is not None else "{not json")
    assert keys.venv_state(venv, cache=keys.HashCache(cache)) == want
