"""Plugin: the real client (turbo-attn) breaks stock vLLM and works on the patched one.

The release is the base's pin (``bases.toml``: ``<base>.seam.plugin``), installed
``--no-deps`` with its hash into ``build/plugin/`` and never into a venv; the
tests find it through ``TKV_SEAM_PLUGIN_PATH``. ``tests/plugin/test_stock.py``
runs with the base's files in the venv, ``test_patched.py`` with the full
series', each in its own pytest process (two slots: side by side). The tests
start one vLLM subprocess per group of checks that may share a process.

A third job (``plugin-guards``) runs every ``Guard:`` node of the series on the full
series with the same turbo-attn importable and ``VLLM_PLUGINS`` unset, as in the
overlay image; ``load_plugins`` loads it before the first test. A "without the
plugin" guard must set its own plugin state, so each has to pass there too.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ..bases.carried import PLANNER_ENV, planner_module
from .. import layout
from ..errors import SeamError
from .outcomes import PASSED, fold
from .runner import VLLM_TESTS_PLUGINS, Job, JobResult, LaneReport, Root, Runner

PLUGIN_STOCK = "tests/plugin/test_stock.py"
PLUGIN_PATCHED = "tests/plugin/test_patched.py"
GUARDS_JOB = "plugin-guards"
LOAD_PLUGINS = "tkvseam.seamtest.load_plugins"


def plugin_dir(r: Runner) -> Path:
    """The base's plugin pin installed with --no-deps into its own --target dir (hash-checked by uv)."""
    pin = r.base.seam.plugin
    if not pin.requirement:
        raise SeamError(
            f"bases.toml pins no plugin release for {r.base.name}",
            hint=f'add ["{r.base.name}".seam] plugin = {{ requirement = ..., hashes = [...] }}',
        )
    target = layout.plugin_dir(r.root) / pin.requirement.replace("==", "-")
    requirements = pin.requirements_txt()
    stamp = target / ".requirements"
    if stamp.exists() and stamp.read_text() == requirements:
        return target
    req = r.work / "plugin-requirements.txt"
    req.parent.mkdir(parents=True, exist_ok=True)
    req.write_text(requirements)
    uv = Path(os.environ.get("UV") or Path(__file__).resolve().parents[3] / ".venv/bin/uv")
    cmd = [
        str(uv if uv.exists() else "uv"),
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--require-hashes",
        "--target",
        str(target),
        "-p",
        str(r.python),
        "-r",
        str(req),
    ]
    r.progress.step(f"install {pin.requirement} into {target}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SeamError(
            f"cannot install the plugin: {proc.stderr.strip()}", hint="check network access to PyPI"
        )
    stamp.write_text(requirements)
    return target


def planner(r: Runner) -> str:
    """The base's planner module, read off its queue (tests/plugin plans with it)."""
    return planner_module(r.root, r.base)


class PluginLane:
    name = "plugin"
    sides = (("stock", PLUGIN_STOCK), ("patched", PLUGIN_PATCHED))

    def guards(self, r: Runner) -> list[str]:
        return sorted({n for p in r.patches for n in p.header.guards})

    def jobs(self, r: Runner) -> list[Job]:
        plugin = plugin_dir(r)
        env = (("TKV_SEAM_PLUGIN_PATH", str(plugin)), (PLANNER_ENV, planner(r)))
        commits = {"stock": r.base_commit, "patched": r.head}
        jobs = [
            Job(f"plugin-{side}", commits[side], Root(None), (test_file,), env, estimate=120.0)
            for side, test_file in self.sides
        ]
        guards = self.guards(r)
        if guards:
            scripts = str(Path(__file__).resolve().parents[2])
            guard_env = (
                ("PYTHONPATH", os.pathsep.join((scripts, str(plugin)))),
                ("VLLM_PLUGINS", None),  # unset: load every installed plugin, as the image does
                ("TKV_CACHE_DIR", str(r.work / "tkv-cache")),
                ("TKV_CALIBRATION", "none"),
            )
            plugins = (*VLLM_TESTS_PLUGINS, LOAD_PLUGINS)
            jobs.append(Job(GUARDS_JOB, r.head, Root(r.head), tuple(guards), guard_env, 60.0, plugins))
        return jobs

    def report(self, r: Runner, done: Mapping[str, JobResult]) -> LaneReport:
        results = {
            side: {nid: row["outcome"] for nid, row in done[f"plugin-{side}"].rows.items()}
            for side, _ in self.sides
            if f"plugin-{side}" in done
        }
        guards = self.guards(r)
        if guards:
            rows = done[GUARDS_JOB].rows if GUARDS_JOB in done else {}
            results["guards"] = {n: fold(rows, n) for n in guards}
        bad = {(side, n): o for side, rows in results.items() for n, o in rows.items() if o != PASSED}
        sides = [side for side, _ in self.sides] + (["guards"] if guards else [])
        empty = [side for side in sides if not results.get(side)]
        lines = [f"{side:8} {o:8} {n}" for side, rows in results.items() for n, o in rows.items()]
        total = sum(len(rows) for rows in results.values())
        lines.append(f"plugin: {total - len(bad)} passed, {len(bad)} failed")
        lines += [f"plugin: nothing ran on {side}" for side in empty]
        ok = not bad and not empty
        return LaneReport(self.name, ok, lines, {"ok": ok, "results": results})
