"""``drift --diff``: one patch's range-diff between consecutive bases, on queues written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tkvseam.cli.main import main

OLD, NEW, LAST = "v1.0.0", "v1.1.0", "v1.2.0"

BASES = "".join(
    f"""
["{name}"]
version = "{name[1:]}"
commit_prefixes = ["abcdef123"]
sdist = {{ filename = "vllm-{name[1:]}.tar.gz", size = 1, sha256 = "{"0" * 64}" }}
image = {{ name = "example/vllm:{name}", revision_prefix = "abcdef123" }}
"""
    + (
        f'queue = {{ series = "patches/{name}/series", patches = "patches/{name}" }}\n'
        if name != OLD
        else 'queue = { series = "series", patches = "patches" }\n'
    )
    for name in (OLD, NEW, LAST)
)


def patch(
    slug: str, reason: str, start: int, body: list[str], test_line: str = "assert mul(2, 3) == 6"
) -> str:
    """A format-patch file: one code hunk at line ``start`` of arg_utils.py, one test file."""
    code = "".join(f"{line}\n" for line in body)
    n = sum(1 for line in body if not line.startswith("+"))
    return f"""From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A U Thor <a@example.invalid>
Subject: [PATCH] {slug}: add mul()

Adds mul() beside add().

Verdict: still needed
Reason: {reason}
Upstream: downstream-only: a test
Depends-on: none
Tests: tests/test_mul.py::test_mul
---
diff --git a/vllm/engine/arg_utils.py b/vllm/engine/arg_utils.py
index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644
--- a/vllm/engine/arg_utils.py
+++ b/vllm/engine/arg_utils.py
@@ -{start},{n} +{start},{len(body)} @@ def add(a, b):
{code}diff --git a/tests/test_mul.py b/tests/test_mul.py
new file mode 100644
index 0000000000000000000000000000000000000000..3333333333333333333333333333333333333333
--- /dev/null
+++ b/tests/test_mul.py
@@ -0,0 +1,5 @@
+from vllm.engine.arg_utils import mul
+
+
+def test_mul():
+    {test_line}
"""


CODE = [" def add(a, b):", "     return a + b", "+", "+", "+def mul(a, b):", "+    return a * b"]


def write_queue(root: Path, where: str, patches: dict[str, str]) -> None:
    folder = root / where
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in patches.items():
        (folder / name).write_text(text)
    series = root / "series" if where == "patches" else folder / "series"
    series.write_text("".join(f"{name}\n" for name in patches))


@pytest.fixture
def drift_project(tmp_path) -> Path:
    (tmp_path / "bases.toml").write_text(BASES)
    write_queue(tmp_path, "patches", {"0001-add-mul.patch": patch("add-mul", "upstream lacks mul", 1, CODE)})
    # v1.1.0: the hunk moved down 4 lines (same hunks), the Reason says the base, a test line changed
    new = patch("add-mul", "upstream v1.1.0 still lacks mul", 5, CODE, "assert mul(2, 3) == 6 == 3 * 2")
    write_queue(tmp_path, f"patches/{NEW}", {"0001-add-mul.patch": new})
    # v1.2.0: the code itself re-expressed
    last = patch("add-mul", "upstream v1.1.0 still lacks mul", 5, [*CODE[:-1], "+    return b * a"])
    write_queue(tmp_path, f"patches/{LAST}", {"0001-add-mul.patch": last})
    return tmp_path


def run(root: Path, *args: str):
    return CliRunner().invoke(main, ["--root", str(root), "drift", *args])


def test_diff_shows_what_changed_and_nothing_that_only_moved(drift_project):
    res = run(drift_project, "--diff", "add-mul", "--base", NEW)
    assert res.exit_code == 0, res.output
    summary = res.stdout.split("\n\n", 1)[0].splitlines()
    assert summary == [
        f"add-mul: {OLD} 0001-add-mul.patch -> {NEW} 0001-add-mul.patch: re-expressed",
        "  header                    changed (Reason)",
        "  vllm/engine/arg_utils.py  same hunks",
        "  tests/test_mul.py         re-expressed: +1 -1 lines of the patch",
    ]
    assert "-Reason: upstream lacks mul\n+Reason: upstream v1.1.0 still lacks mul\n" in res.stdout
    assert "-+    assert mul(2, 3) == 6\n++    assert mul(2, 3) == 6 == 3 * 2\n" in res.stdout
    assert "## vllm/engine/arg_utils.py" not in res.stdout  # moved by 4 lines: nothing to read
    assert (
        "@@ -1,2" not in res.stdout and "index 1111111" not in res.stdout
    )  # line numbers, index lines dropped


def test_diff_without_base_covers_every_pair_and_json_is_one_object(drift_project):
    res = run(drift_project, "--diff", "0001", "--json")  # a number (or file name) finds the slug
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["slug"] == "add-mul"
    assert [(d["old_base"], d["new_base"], d["status"]) for d in out["diffs"]] == [
        (OLD, NEW, "re-expressed"),
        (NEW, LAST, "re-expressed"),
    ]
    code = {s["name"]: s for s in out["diffs"][1]["sections"]}["vllm/engine/arg_utils.py"]
    assert code["status"] == "re-expressed"
    assert "-+    return a * b" in code["diff"] and "++    return b * a" in code["diff"]


def test_make_drift_passes_diff_and_base_through_the_environment(drift_project, monkeypatch):
    monkeypatch.setenv("DIFF", "add-mul")
    monkeypatch.setenv("BASE", LAST)
    res = run(drift_project)
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(
        f"add-mul: {NEW} 0001-add-mul.patch -> {LAST} 0001-add-mul.patch: re-expressed"
    )
    monkeypatch.delenv("DIFF")
    res = run(drift_project)  # BASE from the environment alone: the matrix, as before
    assert res.exit_code == 0 and "| add-mul | carried | re-expressed | re-expressed |" in res.stdout


@pytest.mark.parametrize(
    "args, words, hint",
    [
        (
            ["--diff", "add-mul", "--base", OLD],
            f"{OLD} is the first base",
            f"make drift DIFF=add-mul BASE={NEW}",
        ),
        (
            ["--diff", "add-mull"],
            "no patch 'add-mull' in any queue; known: add-mul",
            "make drift DIFF=add-mul",
        ),
        (["--diff", "add-mul", "--base", "v9"], "unknown base 'v9'", "make drift DIFF=add-mul"),
        (["--base", NEW], "--base goes with --diff", f"make drift DIFF=<slug> BASE={NEW}"),
    ],
)
def test_diff_refusals_name_the_next_command(drift_project, args, words, hint):
    res = run(drift_project, *args, "--json")
    assert res.exit_code == 2, res.output
    out = json.loads(res.stdout)
    assert words in out["error"] and out["hint"] == hint, out


def test_a_patch_missing_from_a_base_is_named(drift_project):
    write_queue(drift_project, f"patches/{LAST}", {})
    res = run(drift_project, "--diff", "add-mul", "--base", LAST)
    assert res.exit_code == 2
    assert f"add-mul is not in {LAST}'s queue: nothing to compare between {NEW} and {LAST}" in res.stderr
    res = run(drift_project, "--diff", "add-mul")  # every pair: only the pair that has it
    assert res.exit_code == 0 and res.stdout.count("add-mul: ") == 1


def renumbered(drift_project: Path) -> None:
    """v1.2.0's queue gains a patch first: its 0001 is other-fix, add-mul is its 0002."""
    other = patch("other-fix", "upstream lacks it", 1, CODE).replace("add mul()", "fix other")
    last = (drift_project / f"patches/{LAST}/0001-add-mul.patch").read_text()
    (drift_project / f"patches/{LAST}/0001-add-mul.patch").unlink()
    write_queue(drift_project, f"patches/{LAST}", {"0001-other-fix.patch": other, "0002-add-mul.patch": last})


def test_a_number_is_the_patch_of_that_number_in_the_base_asked_for(drift_project):
    """--diff 0001 --base v1.2.0 showed add-mul (0001 of the first queue), not v1.2.0's 0001."""
    renumbered(drift_project)
    res = run(drift_project, "--diff", "0002", "--base", LAST, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["slug"] == "add-mul"
    res = run(drift_project, "--diff", "0001", "--base", LAST, "--json")
    assert res.exit_code == 2, res.output
    out = json.loads(res.stdout)
    assert out["error"] == f"other-fix is not in {NEW}'s queue: nothing to compare between {NEW} and {LAST}"


def test_a_number_naming_other_patches_in_other_queues_is_refused_naming_them(drift_project):
    renumbered(drift_project)
    res = run(drift_project, "--diff", "0001", "--json")
    assert res.exit_code == 2, res.output
    out = json.loads(res.stdout)
    assert out["error"] == (
        f"'0001' names add-mul in {OLD} and {NEW}, other-fix in {LAST}: give the slug (or --base)"
    )
    assert out["hint"] == "make drift DIFF=add-mul"
    assert json.loads(run(drift_project, "--diff", "other-fix", "--json").stdout)["diffs"] == []


def test_the_only_queue_is_not_sent_back_to_itself(drift_project):
    """With one queue, the hint of 'the first base with a queue' was that same command."""
    for name in (NEW, LAST):
        for f in (drift_project / f"patches/{name}").iterdir():
            f.unlink()
        (drift_project / f"patches/{name}").rmdir()
    res = run(drift_project, "--diff", "add-mul", "--base", OLD, "--json")
    assert res.exit_code == 2
    assert json.loads(res.stdout)["hint"] == f"make port VERB=report TO={NEW}"
