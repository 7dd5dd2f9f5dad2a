"""lint: every problem collected, each naming the patch (and file/line)."""

from __future__ import annotations

import json

from ..fixtures.queue import make_two_patches


def lint_json(project, expect):
    return json.loads(project.cli("lint", "--json", expect=expect).output)


def test_clean_series_passes(project):
    make_two_patches(project)
    assert lint_json(project, 0) == {"ok": True, "problems": []}


def test_empty_series_passes(project):
    assert lint_json(project, 0)["ok"] is True


def test_missing_orphan_and_duplicate_are_all_reported(project):
    names = make_two_patches(project)
    (project.root / "patches" / "0003-stray.patch").write_text("x")
    project.write_series(names[0], names[0], "0002-gone.patch")
    msgs = {(p["patch"], p["message"]) for p in lint_json(project, 6)["problems"]}
    assert ("series", f"{names[0]} is listed twice") in msgs
    assert ("0002-gone.patch", "listed in series but missing from patches/") in msgs
    assert ("0003-stray.patch", "orphan: in patches/ but not listed in series") in msgs
    assert (names[1], "orphan: in patches/ but not listed in series") in msgs


def test_header_fields_are_required(project):
    make_two_patches(project)
    p = project.root / "patches/0001-cache-tweak.patch"
    p.write_text(
        p.read_text()
        .replace("Reason: upstream lacks it\n", "")
        .replace("Tests: tests/test_math.py::test_add\n", "Tests: not a node id\n")
    )
    problems = [p["message"] for p in lint_json(project, 6)["problems"]]
    assert "header lacks the Reason: field" in problems
    assert "Tests/Guard value is not a pytest node id: 'not a node id'" in problems


def test_dependency_must_be_an_earlier_patch(project):
    names = make_two_patches(project)
    project.write_series(names[1], names[0])
    problems = [p["message"] for p in lint_json(project, 6)["problems"]]
    assert "Depends-on 'cache-tweak' is not an earlier patch of the series" in problems
    assert "file name does not match position and subject: expected 0001-add-mul.patch" in problems


def test_upstream_field_is_required(project):
    make_two_patches(project)
    p = project.root / "patches/0001-cache-tweak.patch"
    p.write_text(p.read_text().replace("Upstream: upstreamable\n", ""))
    problems = {(p["patch"], p["message"]) for p in lint_json(project, 6)["problems"]}
    assert problems == {("0001-cache-tweak.patch", "header lacks the Upstream: field")}


def _make_second_depend_on_the_first_for_tests_only(project, names) -> None:
    second = project.root / "patches" / names[1]
    second.write_text(
        second.read_text().replace(
            "Depends-on: cache-tweak\n", "Depends-on: none\nTest-depends-on: cache-tweak\n"
        )
    )


def test_test_dependency_must_be_an_earlier_patch(project):
    names = make_two_patches(project)
    _make_second_depend_on_the_first_for_tests_only(project, names)
    assert lint_json(project, 0)["ok"] is True

    first = project.root / "patches" / names[0]
    first.write_text(
        first.read_text().replace(
            "Depends-on: none\n", "Depends-on: none\nTest-depends-on: add-mul, cache-tweak\n"
        )
    )
    problems = [p["message"] for p in lint_json(project, 6)["problems"]]
    assert problems == [
        "Test-depends-on 'add-mul' is not an earlier patch of the series",
        "Test-depends-on 'cache-tweak' is not an earlier patch of the series",
    ]


def test_header_parses_test_dependencies_apart_from_code_dependencies(project):
    from tkvseam.queue.patch import parse_file

    names = make_two_patches(project)
    _make_second_depend_on_the_first_for_tests_only(project, names)
    second = project.root / "patches" / names[1]
    header = parse_file(second).header
    assert header.depends_on == []
    assert header.test_depends_on == ["cache-tweak"]
    assert header.get("Upstream") == ["upstreamable"]


def test_conflict_marker_is_reported_with_file_and_line(project):
    make_two_patches(project)
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("+def mul(a, b):\n", "+<<<<<<< HEAD\n"))
    rows = lint_json(project, 6)["problems"]
    assert {
        "patch": "0002-add-mul.patch",
        "file": "vllm/engine/arg_utils.py",
        "line": 9,
        "message": "conflict marker '<<<<<<<'",
    } in rows


def test_corrupt_and_escaping_patches_are_named(project):
    make_two_patches(project)
    p1 = project.root / "patches/0001-cache-tweak.patch"
    p1.write_text(p1.read_text()[:-40])
    p2 = project.root / "patches/0002-add-mul.patch"
    p2.write_text(
        p2.read_text()
        .replace("a/vllm/engine/arg_utils.py", "a/../arg_utils.py")
        .replace("b/vllm/engine/arg_utils.py", "b/../arg_utils.py")
    )
    rows = {p["patch"]: p["message"] for p in lint_json(project, 6)["problems"]}
    assert rows["0001-cache-tweak.patch"].startswith("corrupt or truncated diff")
    assert rows["0002-add-mul.patch"] == "../arg_utils.py: path leaves the tree ('..'): refused"


def test_text_output_ends_with_one_verdict_line(project):
    make_two_patches(project)
    (project.root / "patches" / "0003-stray.patch").write_text("x")
    res = project.cli("lint", expect=6)
    assert res.stdout.strip().splitlines()[-1] == "lint: 1 problem(s)"
    assert "0003-stray.patch: orphan" in res.stderr


def test_a_removal_condition_is_a_header_field_lint_accepts(project):
    """``Remove-when`` (continued over lines, as git trailers are) is read as one field, and a
    queue whose header has it lints clean."""
    from tkvseam.queue.patch import parse_file

    make_two_patches(project)
    p = project.root / "patches/0001-cache-tweak.patch"
    p.write_text(
        p.read_text().replace(
            "Depends-on: none\n",
            "Remove-when: the plugin emits a spec per layer\n width (not 0.70.1)\nDepends-on: none\n",
        )
    )
    assert lint_json(project, 0) == {"ok": True, "problems": []}
    header = parse_file(p).header
    assert header.remove_when == "the plugin emits a spec per layer width (not 0.70.1)"
    assert parse_file(project.root / "patches/0002-add-mul.patch").header.remove_when == ""


def test_a_header_field_twice_or_a_stray_field_line_is_refused(project):
    """0003's header carried a reflowed copy of its trailers in the description: two Reasons."""
    make_two_patches(project)
    p = project.root / "patches/0001-cache-tweak.patch"
    text = p.read_text()
    lines = text.split("\n")
    copy = "Verdict: still needed Reason: an older\nreason, reflowed into the description."
    p.write_text(
        text.replace("Changes things.\n", f"Changes things.\n\n{copy}\n", 1).replace(
            "Reason: upstream lacks it\n", "Reason: upstream lacks it\nReason: and again\n"
        )
    )
    at = lines.index("Changes things.") + 3  # the copy's first line, 1-based
    rows = {(p["patch"], p["message"]) for p in lint_json(project, 6)["problems"]}
    assert rows == {
        ("0001-cache-tweak.patch", "header gives the Reason: field 2 times (one is expected)"),
        (
            "0001-cache-tweak.patch",
            f"line {at}: the Verdict: field outside the trailer block (the message's last "
            "paragraph); give each field there only",
        ),
    }


def test_repeatable_fields_and_field_names_inside_a_sentence_pass(project):
    make_two_patches(project)
    p = project.root / "patches/0001-cache-tweak.patch"
    text = p.read_text()
    p.write_text(
        text.replace("Changes things.\n", "Changes things; its Reason: field says why.\n", 1).replace(
            "Tests: tests/test_math.py::test_add\n",
            "Tests: tests/test_math.py::test_add\nTests: tests/test_math.py::test_add_more\n",
        )
    )
    assert lint_json(project, 0) == {"ok": True, "problems": []}
