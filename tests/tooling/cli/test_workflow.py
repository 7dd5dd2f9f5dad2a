"""The test workflow (.github/workflows/test.yml): its matrix is `tkv-seam carried`, one job a base.

The workflow cannot run here; `make lint-workflows` checks it against GitHub's schema. This test
checks what the schema cannot: the matrix job reads the carried bases from the tool (so a carried
or retired base needs no workflow edit), its one line of Python turns the tool's JSON into the
list the base jobs take, each base job runs `make test-base BASE=<base>`, the lint job runs the
tooling lane, and every job runs fresh.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

from tkvseam.bases.carried import carried_bases
from tkvseam.bases.pins import load_bases

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / ".github/workflows/test.yml"


def _workflow() -> dict:
    return YAML(typ="safe").load(WORKFLOW.read_text())


def _runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_it_runs_on_pull_requests_and_on_main_fresh():
    wf = _workflow()
    triggers = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as True
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    assert wf["env"]["FRESH"] == "1"


def test_the_matrix_is_the_carried_bases_from_the_tool():
    jobs = _workflow()["jobs"]
    script = _runs(jobs["matrix"])
    assert "tkv-seam -q carried --json" in script
    (line,) = [ln for ln in script.splitlines() if "carried --json" in ln]
    snippet = re.search(r"python3 -c '([^']*)'", line).group(1)
    tool = subprocess.run(
        [sys.executable, "-m", "tkvseam", "--root", str(ROOT), "-q", "carried", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    out = subprocess.run([sys.executable, "-c", snippet], input=tool.stdout, capture_output=True, text=True)
    want = carried_bases(load_bases(ROOT / "bases.toml", ROOT), ROOT)
    assert json.loads(out.stdout) == list(want) and len(want) >= 1
    base = jobs["base"]
    assert base["needs"] == "matrix"
    assert base["strategy"]["matrix"]["base"] == "${{ fromJSON(needs.matrix.outputs.bases) }}"
    assert "make test-base BASE=${{ matrix.base }}" in _runs(base)
    assert "DOCKER_HOST" in _runs(base) and "TKV_SEAM_REQUIRE_DOCKER=1" in _runs(base)
    assert "test-tooling" in _runs(jobs["lint-tooling"]) and "lint-code" in _runs(jobs["lint-tooling"])


def test_sdists_and_the_uv_cache_are_cached_by_key():
    steps = _workflow()["jobs"]["base"]["steps"]
    cached = {
        s["with"]["path"]: s["with"]["key"] for s in steps if s.get("uses", "").startswith("actions/cache")
    }
    assert "hashFiles('bases.toml')" in cached[".tkv-seam-cache/sdist"]
    assert "ci/lock-cpu-{0}.txt" in cached[".uv-cache"]
