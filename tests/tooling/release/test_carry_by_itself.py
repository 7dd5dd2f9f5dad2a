"""A carry stops only where a human is needed (issue 33): what the port takes by itself, and says.

On the by-itself releases (``fixtures/autocase.py``): an import-only conflict is merged and
sorted by the base's ruff, one with a code line in it stops; a hunk whose whole context is
found at an offset goes in where the 3-way merge conflicts; the base's fixers take what ruff
fixes before the gate fails a patch. Each goes through gated, is listed to re-read with what
the port did, and each can be turned off.
"""

from __future__ import annotations

import json

import pytest

from tkvseam import git

from ..fixtures.autocase import (
    LABELS,
    MLA,
    SELECTOR,
    make_auto_releases,
    make_fixable_queue,
    make_import_and_code_queue,
    make_import_queue,
    make_offset_queue,
    make_partly_fixable_queue,
)
from ..fixtures.carry import carry as carry_with_proving
from ..fixtures.carry import wheels  # noqa: F401  (fixtures)
from ..fixtures.carrying import NEW_NAME, carrying_project, git_project
from ..fixtures.queue import message


@pytest.fixture(scope="module")
def auto_releases(tmp_path_factory):
    return make_auto_releases(tmp_path_factory.mktemp("auto-upstream"))


def _project(tmp_path, served, monkeypatch, make_queue):
    with carrying_project(tmp_path, served, monkeypatch) as (project, _):
        make_queue(project)
        git_project(project.root)
        yield project


@pytest.fixture
def imports_case(tmp_path, auto_releases, monkeypatch):
    yield from _project(tmp_path, auto_releases, monkeypatch, make_import_queue)


@pytest.fixture
def code_case(tmp_path, auto_releases, monkeypatch):
    yield from _project(tmp_path, auto_releases, monkeypatch, make_import_and_code_queue)


@pytest.fixture
def offset_case(tmp_path, auto_releases, monkeypatch):
    yield from _project(tmp_path, auto_releases, monkeypatch, make_offset_queue)


@pytest.fixture
def fix_case(tmp_path, auto_releases, monkeypatch):
    yield from _project(tmp_path, auto_releases, monkeypatch, make_fixable_queue)


@pytest.fixture
def partly_fixable_case(tmp_path, auto_releases, monkeypatch):
    yield from _project(tmp_path, auto_releases, monkeypatch, make_partly_fixable_queue)


def carry(project, wheels, *extra: str, expect: int = 0):  # noqa: F811
    """``carry`` with the gate alone: what is taken here is taken before any patch is proven."""
    return carry_with_proving(project, wheels, "--no-prove", *extra, expect=expect)


def _written(project, name: str) -> str:
    return (project.root / "patches" / NEW_NAME / name).read_text()


def test_an_import_block_conflict_goes_through_by_itself(imports_case, wheels):  # noqa: F811
    """Upstream moved LogitsProcessor's import beside the patch's: both sides' imports, sorted."""
    out = json.loads(carry(imports_case, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == []
    [row] = out["by_themselves"]
    assert (row["name"], row["how"], row["gate"]) == ("0001-backend-import.patch", "imports merged", "ok")
    assert row["did"] == [
        f"imports: {SELECTOR}: only imports conflicted (1 region(s)); upstream's kept, the patch's added: "
        "from vllm.platforms import registered_backend; sorted by ruff 0.14.0 (isort rules I)"
    ]
    patch = _written(imports_case, "0001-backend-import.patch")
    assert "+from vllm.platforms import current_platform, registered_backend\n" in patch
    assert " from vllm.worker.sample.logits import LogitsProcessor\n" in patch  # upstream's move kept
    assert "vllm.sample.logits" not in patch
    text = carry(imports_case, wheels).output  # the end lists it to re-read, with what the port did
    assert "0001-backend-import.patch  (imports merged; gate ok; not proven)" in text
    assert f"imports: {SELECTOR}: only imports conflicted" in text


def test_an_import_conflict_with_a_code_line_in_it_stops(code_case, wheels):  # noqa: F811
    stop = carry(code_case, wheels, expect=12).stderr
    assert "port to v9.10.0 stopped at 0001-backend-import.patch: conflict" in stop
    assert f"{SELECTOR}: conflict" in stop and "imports" not in stop
    tree = code_case.root / "build" / f"port-{NEW_NAME}"
    assert git.index.unmerged_paths(tree) == [SELECTOR]
    assert "<<<<<<< ours" in (tree / SELECTOR).read_text()  # as git left it


def test_import_merging_turned_off_stops_at_the_conflict(imports_case, wheels):  # noqa: F811
    stop = carry(imports_case, wheels, "--no-imports", expect=12).stderr
    assert "stopped at 0001-backend-import.patch: conflict" in stop


def test_a_hunk_with_its_whole_context_at_an_offset_goes_in_where_3_way_conflicts(offset_case, wheels):  # noqa: F811
    out = json.loads(carry(offset_case, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == []
    [row] = out["by_themselves"]
    assert (row["name"], row["how"], row["gate"]) == ("0001-own-gather.patch", "offset", "ok")
    [did] = row["did"]
    assert did.startswith(
        f"offset: {MLA}: the 3-way merge conflicted (upstream changed lines next to its hunks)"
    )
    assert did.endswith("placed with every hunk's full context: hunk 1 end of file (now line 47)")
    patch = _written(offset_case, "0001-own-gather.patch")
    assert '+    elif kind == "cpu" and not own_op(x):' in patch
    # after upstream's 32 lines of helpers and its new branch, whose last lines are the hunk's context
    assert "@@ -47,6 +47,10 @@ def gather(kind, x):" in patch


def test_offset_placement_turned_off_stops_at_the_conflict(offset_case, wheels):  # noqa: F811
    stop = carry(offset_case, wheels, "--no-autoresolve", expect=12).stderr
    assert "stopped at 0001-own-gather.patch: conflict" in stop
    assert "hunk 1 @@ -11,6 +11,10 @@ def gather(kind, x):: offset/fuzz: end of file (now line 47)" in stop


def test_what_ruff_fixes_by_itself_is_fixed_and_listed_with_each_change(fix_case, wheels):  # noqa: F811
    out = json.loads(carry(fix_case, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == []
    [row] = out["by_themselves"]
    assert (row["name"], row["how"], row["gate"]) == ("0001-labels.patch", "exact", "ok")
    assert row["did"] == [
        f"fix: {LABELS}: line 2 F541 fixed by `ruff check --fix`: f-string without any placeholders",
        f"fix: {LABELS}: line 8 RUF028 fixed by `ruff check --fix --unsafe-fixes --select RUF028` (unsafe by "
        "ruff's rule; the code's syntax tree is unchanged): This suppression comment is invalid because it "
        "cannot be in an expression, pattern, argument list, or other non-statement",
        f"fix: {LABELS}: line 5 rewritten by `ruff format`",
    ]
    patch = _written(fix_case, "0001-labels.patch")
    assert '+    return "cpu"\n' in patch and '+TABLE = {"a": 1}\n' in patch and "fmt: off" not in patch


def test_a_fix_changing_the_program_stays_out_and_the_stop_lists_the_fixes(partly_fixable_case, wheels):  # noqa: F811
    stop = carry(partly_fixable_case, wheels, expect=12).stderr
    assert (
        "stopped at 0001-labels.patch: breaks (it went in exact, but fails the gate on v9.10.0: 1 problem(s))"
        in stop
    )
    assert f"{LABELS}:1 PLC0414 Import alias does not rename original package" in stop
    assert "done by itself (re-read it):" in stop
    assert f"fix: {LABELS}: line 7 F541 fixed by `ruff check --fix`" in stop
    assert f"fix: {LABELS}: line 13 RUF028 fixed by" in stop
    tree = partly_fixable_case.root / "build" / f"port-{NEW_NAME}"
    assert git.repo.show(tree, "", LABELS).decode().startswith("import os as os\n")  # staged, fixes in
    # the user fixes what is left: the fixers' changes are listed with the resolution
    (tree / LABELS).write_text((tree / LABELS).read_text().replace("import os as os", "import os"))
    git.core.run(tree, "add", LABELS)
    out = json.loads(carry(partly_fixable_case, wheels, "--json").stdout)
    assert out["carried"]
    [row] = out["by_themselves"]
    assert row["how"] == "resolved" and len(row["did"]) == 3
    # the steps were on the file the resolution then changed: said so, not claimed as they were
    assert all(d.endswith("(then changed by the resolution)") for d in row["did"]), row["did"]


def test_the_steps_on_a_file_a_resolution_left_alone_are_listed_as_they_were(partly_fixable_case, wheels):  # noqa: F811
    carry(partly_fixable_case, wheels, expect=12)
    tree = partly_fixable_case.root / "build" / f"port-{NEW_NAME}"
    # the resolution fixes what is left in a way that keeps the staged file as the port left it
    (tree / "pyproject.toml").write_text('[tool.ruff.lint]\nextend-ignore = ["PLC0414"]\n')
    git.core.run(tree, "add", "pyproject.toml")
    out = carry(partly_fixable_case, wheels, "--json", expect=None)
    rows = json.loads(out.stdout).get("by_themselves") or []
    assert rows, out.stderr
    assert not any("then changed" in d for row in rows for d in row["did"])


def test_without_the_fixers_the_stop_says_what_ruff_format_would_change(fix_case, wheels):  # noqa: F811
    stop = carry(fix_case, wheels, "--no-fix", expect=12).stderr
    assert "stopped at 0001-labels.patch: breaks" in stop
    assert f"{LABELS}:2 F541 [*] f-string without any placeholders" in stop
    assert f"{LABELS}:5 format: ruff format would rewrite line 5 as 'TABLE = {{\"a\": 1}}'" in stop
    assert "remove '" not in stop


@pytest.fixture
def fix_case_in_a_configured_project(tmp_path, carrying_releases, monkeypatch):
    """The fixable patch on releases with no ruff configuration of their own, in a project whose own
    configuration (as tkv-seam's pyproject.toml) excludes build/, where the port tree is."""
    project_config = '[tool.ruff]\nline-length = 110\nextend-exclude = ["build"]\n'

    def make_queue(project):
        make_fixable_queue(project)
        (project.root / "pyproject.toml").write_text(project_config)

    yield from _project(tmp_path, carrying_releases, monkeypatch, make_queue)


def test_the_fixers_use_the_configuration_the_gate_checks_with(fix_case_in_a_configured_project, wheels):  # noqa: F811
    """The gate runs the base's ruff with the tree's configuration alone (none here: ruff's
    defaults), never the project's; the fixers run with the same, so what the gate finds they fix."""
    out = json.loads(carry(fix_case_in_a_configured_project, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == []
    [row] = out["by_themselves"]
    assert (
        f"fix: {LABELS}: line 2 F541 fixed by `ruff check --fix`: f-string without any placeholders"
        in row["did"]
    )


SIDE_EFFECT = 'import vllm.attention.mla  # registers its backends\n\n\ndef label():\n    return f"cpu"\n'


@pytest.fixture
def side_effect_case(tmp_path, auto_releases, monkeypatch):
    """0001 adds a module importing another for what importing it does (vLLM's registries work so):
    ruff's F401 says unused and its fix, "safe" by ruff's rule, removes the import."""

    def make_queue(project):
        project.apply()
        project.commit_in_tree(LABELS, SIDE_EFFECT, message("labels", "add labels"))
        project.refresh()

    yield from _project(tmp_path, auto_releases, monkeypatch, make_queue)


def test_an_import_is_never_removed_by_itself(side_effect_case, wheels):  # noqa: F811
    """Removing an import changes what importing the module does (a registration): that stays a
    problem of the gate for a human (a `# noqa: F401`, or the import goes), what else ruff fixes
    is fixed."""
    stop = carry(side_effect_case, wheels, expect=12).stderr
    assert "stopped at 0001-labels.patch: breaks" in stop and f"{LABELS}:1 F401" in stop
    assert f"fix: {LABELS}: line 5 F541 fixed by `ruff check --fix`" in stop
    tree = side_effect_case.root / "build" / f"port-{NEW_NAME}"
    staged = git.repo.show(tree, "", LABELS).decode()
    assert staged.startswith("import vllm.attention.mla") and 'return "cpu"' in staged
