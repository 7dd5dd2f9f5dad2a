"""What the port tells its user: the report kept in a file, a status that names the unmerged files
and the next command, a stop that is not an error."""

from __future__ import annotations

import json

from ..fixtures.upstream import NAME
from ..fixtures.portcase import NEXT, port, port_tree, resolve_0001


def test_report_keeps_its_report_beside_the_port_tree_and_says_where(pproject):
    out = pproject.root / "build" / f"port-report-{NEXT}"
    res = port(pproject, "report")
    assert res.output.rstrip().endswith(
        f"report kept in build/port-report-{NEXT}/report.md (with the per-hunk verdict table) and "
        f"build/port-report-{NEXT}/report.json"
    )
    md = (out / "report.md").read_text()
    assert "| file / hunk | what it does | verdict | reason | evidence |" in md  # the draft verdict table
    assert "0001-add-mul.patch" in md and "hunk 1" in md and "patches apply:" in md
    printed = json.loads(port(pproject, "report", "--json").output)
    assert printed["files"] == {"markdown": str(out / "report.md"), "json": str(out / "report.json")}
    kept = json.loads((out / "report.json").read_text())
    assert kept == {k: v for k, v in printed.items() if k not in ("files", "ok")} and printed["ok"] is True
    assert sorted(p.name for p in out.iterdir()) == [".tkv-seam-made.json", "report.json", "report.md"]


def test_report_never_writes_over_a_directory_someone_added_to(pproject):
    out = pproject.root / "build" / f"port-report-{NEXT}"
    port(pproject, "report")
    (out / "notes.md").write_text("my review notes\n")
    err = port(pproject, "report", expect=5).stderr
    assert "notes.md" in err and "nothing was deleted" in err
    assert (out / "notes.md").read_text() == "my review notes\n"


def test_status_lists_the_unmerged_files_and_the_next_command(pproject):
    start = port(pproject, "start", expect=12)
    assert "Error" not in start.stderr  # a stop for the maintainer, exit 12, not a crash
    out = port(pproject, "status").output
    assert "STOPPED   0001-add-mul.patch: conflict" in out
    assert "    unmerged: vllm/engine/arg_utils.py" in out and "    unmerged: tests/test_seam.py" in out
    assert (
        f"next: resolve tests/test_seam.py, vllm/engine/arg_utils.py, `git -C {port_tree(pproject)} add"
        in out
    )
    assert f"`make port VERB=continue TO={NEXT}`" in out
    status = json.loads(port(pproject, "status", "--json").output)
    assert status["unmerged"] == ["tests/test_seam.py", "vllm/engine/arg_utils.py"]
    resolve_0001(port_tree(pproject))
    status = json.loads(port(pproject, "status", "--json").output)
    assert status["unmerged"] == [] and status["next_step"].startswith(f"make port VERB=continue TO={NEXT}")


def test_status_of_a_finished_port_names_the_queue_to_review(pproject):
    port(pproject, "start", expect=12)
    resolve_0001(port_tree(pproject))
    port(pproject, "continue", expect=12)  # stops at 0006 (likely obsolete)
    port(pproject, "skip", "--reason", "upstream has register()")
    out = port(pproject, "status").output
    assert "finished: the queue is written" in out and f"next: git status -- patches/{NEXT}" in out


def test_an_unknown_old_base_suggests_another_base_than_the_target(pproject):
    for verb in ("start", "report"):
        err = pproject.cli("port", verb, "--base", "v0.31.0", "--to", NEXT, expect=2).stderr
        assert f"next: make port VERB={verb} BASE={NAME} TO={NEXT}" in err  # not BASE={NEXT}: a self-port


def test_status_at_a_likely_obsolete_stop_suggests_skip(pproject):
    port(pproject, "start", expect=12)
    resolve_0001(port_tree(pproject))
    port(pproject, "continue", expect=12)  # stops at 0006 (likely obsolete)
    out = port(pproject, "status").output
    assert f"next: make port VERB=skip TO={NEXT} REASON='<why>'   (it looks obsolete" in out
