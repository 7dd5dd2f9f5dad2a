"""The style gate and the seam jobs take the tree's own configuration only (issue 34).

A build tree lives in the project's ``build/``; the project's ``pyproject.toml`` has a ruff table
(``extend-exclude = ["build"]``) and a pytest one. For a tree with no ruff table of its own, ruff
found the project's: every file of the tree was excluded, the gate checked nothing and said ok.
pytest, run in a test root of the tree (``build/seamtest/…``) holding no configuration of its own,
took the project's as its rootdir: node ids became ``build/…`` paths and passing tests "missing".
"""

from __future__ import annotations

from tkvseam.bases.pins import load_bases
from tkvseam.edit.stylecheck import config_args, file_problems, gate_ruff
from tkvseam.seamtest.inputs import SCRIPTS
from tkvseam.seamtest.runner import Job, Root

from ..fixtures.queue import message
from ..fixtures.seamrunner import open_runner

BAD = "def f():\n    return alpha\n"
PROJECT_CONFIG = (
    '[tool.ruff]\nextend-exclude = ["build"]\n\n'
    '[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-p no:cacheprovider"\n'
)
FAKE_TIMEOUT = "def pytest_addoption(parser):\n    parser.addoption('--timeout')\n"


def test_a_tree_without_a_ruff_table_is_checked_with_ruffs_defaults(project):
    (project.root / "pyproject.toml").write_text(PROJECT_CONFIG)
    project.apply()
    project.commit_in_tree("vllm/bad.py", BAD, message("bad-name", "add f"))
    project.refresh()
    res = project.cli("stylecheck", "--base", "v9.9.9", expect=6)
    assert "stylecheck: 1 problem(s)" in res.stdout and "F821 Undefined name `alpha`" in res.stderr
    assert config_args(project.tree) == ["--isolated"]
    ruff = gate_ruff(load_bases(project.root / "bases.toml")["v9.9.9"], project.cache)
    assert any("F821" in p for p in file_problems(ruff, project.tree, "vllm/bad.py", BAD.encode()))


def test_a_trees_own_ruff_table_is_the_one_taken(project):
    (project.root / "pyproject.toml").write_text(PROJECT_CONFIG)
    project.apply()
    (project.tree / "pyproject.toml").write_text('[tool.ruff.lint]\nignore = ["F821"]\n')
    assert config_args(project.tree) == ["--config", str(project.tree / "pyproject.toml")]
    project.commit_in_tree("pyproject.toml", (project.tree / "pyproject.toml").read_text(), message("cfg"))
    project.commit_in_tree("vllm/bad.py", BAD, message("bad-name", "add f"))
    project.refresh()
    assert "stylecheck: ok" in project.cli("stylecheck", "--base", "v9.9.9").stdout


def test_a_job_in_a_test_root_of_the_tree_keeps_the_trees_node_ids(project, tmp_path, monkeypatch):
    (project.root / "pyproject.toml").write_text(PROJECT_CONFIG)
    project.apply()
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "fake_timeout.py").write_text(FAKE_TIMEOUT)  # the runner passes --timeout
    r = open_runner(project)
    monkeypatch.setattr(r, "install", lambda slot, commit: None)  # the tool's own venv: no overlay
    node = "tests/test_math.py::test_add"
    env = (("PYTHONPATH", f"{SCRIPTS}:{tmp_path / 'plugins'}:{project.tree}"),)  # vllm: the tree's
    job = Job("full-series", r.head, Root(r.head), (node,), env, plugins=("fake_timeout",))
    result = r.run_job(job, 0)
    assert {n: row["outcome"] for n, row in result.rows.items()} == {node: "passed"}, result.log.read_text()
