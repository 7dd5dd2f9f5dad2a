"""A mistyped base, slug, patch or verb: the error names the close match and the hint runs it
(issue 37: ``BASE=v0.33`` suggested ``BASE=v0.31.0``, ``BASE=0.33.0`` suggested dropping BASE,
an unknown ``DIFF`` the alphabetically first slug, ``PATCH=lifecycle`` exited 1 and suggested
bisecting every patch, ``VERB=reprot`` ended without ``next:``)."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest

from tkvseam import hints
from tkvseam.errors import UsageError

from ..fixtures.hintcheck import problems
from ..fixtures.queue import make_two_patches
from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml

NEXT = f"v{NEXT_VERSION}"
SLUGS = ["kv-cache-dtype-registry", "backend-lifecycle-hooks", "mla-backend-wrapping", "fused-kv-pages"]


@pytest.mark.parametrize(
    "typed, known, meant",
    [
        ("v0.33", ["v0.31.0", "v0.32.0", "v0.33.0"], ["v0.33.0"]),
        ("0.33.0", ["v0.31.0", "v0.32.0", "v0.33.0"], ["v0.33.0"]),
        ("V0.32.0", ["v0.31.0", "v0.32.0", "v0.33.0"], ["v0.32.0"]),
        ("lifecycle", SLUGS, ["backend-lifecycle-hooks"]),
        ("fused-kv-page", SLUGS, ["fused-kv-pages"]),
        ("reprot", ["report", "start", "continue", "skip", "abort", "status", "finish"], ["report"]),
        ("zzz", SLUGS, []),
    ],
)
def test_close_names_what_a_typo_meant(typed, known, meant):
    assert hints.close(typed, known)[:1] == meant


def test_a_mistyped_base_names_the_close_one(project):
    err = project.cli("apply", "--base", "v9.9", expect=2).stderr
    assert f"did you mean '{NAME}'?" in err
    # the tool's own command line again, with the base meant (under make: the make command, below)
    assert err.split("next: ", 1)[1].startswith(".venv/bin/tkv-seam ") and f"apply --base {NAME}\n" in err


def test_under_make_a_mistyped_base_hints_the_same_make_command(project, monkeypatch):
    monkeypatch.setenv("TKV_SEAM_MAKE_GOAL", "bisect")
    monkeypatch.setenv("MAKEFLAGS", r" -- PATCH=add\ mul BASE=v9.9")
    err = project.cli("lint", "--base", "v9.9", expect=2).stderr
    assert f"next: make bisect BASE={NAME} PATCH='add mul'\n" in err


def test_drift_names_the_close_slug_and_base(project, releases, monkeypatch):
    make_two_patches(project)
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    (project.root / "patches" / NEXT).mkdir()
    shutil.copy(project.root / "series", project.root / "patches" / NEXT)
    for patch in (project.root / "patches").glob("*.patch"):
        shutil.copy(patch, project.root / "patches" / NEXT)
    err = project.cli("drift", "--diff", "mul", expect=2).stderr
    assert "did you mean 'add-mul'?" in err and "next: make drift DIFF=add-mul\n" in err
    err = project.cli("drift", "--diff", "cache-tweak", "--base", NEXT_VERSION, expect=2).stderr
    assert f"did you mean '{NEXT}'?" in err and f"next: make drift DIFF=cache-tweak BASE={NEXT}\n" in err
    err = project.cli("drift", "--diff", "mul", "--base", NEXT_VERSION, expect=2).stderr  # both: one hint
    assert f"did you mean '{NEXT}'?" in err and f"next: make drift DIFF=add-mul BASE={NEXT}\n" in err
    err = project.cli("drift", "--diff", "mul", "--base", NEXT, expect=2).stderr  # the base kept
    assert f"next: make drift DIFF=add-mul BASE={NEXT}\n" in err
    err = project.cli("drift", "--diff", "zzz", expect=2).stderr
    assert "did you mean" not in err and "next: make drift " in err  # nothing close: the matrix, not a guess
    # BASE alone (make drift BASE=..., from the environment): a typo is named, a carried base noted
    monkeypatch.setenv("BASE", NEXT_VERSION)
    res = project.cli("drift")  # a stale exported BASE never stops the matrix, which ignores it
    assert (
        f"did you mean '{NEXT}'?" in res.stderr
        and f"(next: make drift DIFF=<slug> BASE={NEXT})" in res.stderr
    )
    assert "| patch |" in res.stdout
    monkeypatch.setenv("BASE", NAME)  # the first base: nothing before it to diff against
    assert f"({NAME} is the first base, with none before it)" in project.cli("drift").stderr
    monkeypatch.setenv("BASE", NEXT)
    res = project.cli("drift")
    assert "without DIFF: the matrix covers every base" in res.stderr and "| patch |" in res.stdout


def test_bisect_of_an_unknown_patch_is_a_usage_error_naming_the_one_meant():
    from tkvseam.seamtest.run import patch_numbers

    patches = [SimpleNamespace(name=f"{k:04d}-{slug}.patch") for k, slug in enumerate(SLUGS, 1)]
    assert patch_numbers(patches, "v0.31.0", ("backend-lifecycle-hooks",)) == {2}
    with pytest.raises(UsageError) as e:
        patch_numbers(patches, "v0.31.0", ("lifecycle",))
    assert e.value.exit_code == 2 and "did you mean 'backend-lifecycle-hooks'?" in e.value.message
    assert e.value.hint == "make bisect BASE=v0.31.0 PATCH=backend-lifecycle-hooks"  # one patch, as asked
    with pytest.raises(UsageError) as e:
        patch_numbers(patches, "v0.31.0", ("zzz",))
    assert "PATCH=" in e.value.hint  # never every patch (slower than what was asked)
    assert problems(e.value.hint) == []


def test_a_mistyped_port_verb_names_the_verb(project):
    res = project.cli("port", "reprot", "--to", NEXT, expect=2)
    assert "did you mean 'report'?" in res.stderr
    assert res.stderr.rstrip().endswith(f"next: make port VERB=report TO={NEXT}")
    out = json.loads(project.cli("port", "reprot", "--to", NEXT, "--json", expect=2).stdout)
    assert out["hint"] == f"make port VERB=report TO={NEXT}" and out["ok"] is False


@pytest.mark.skipif(not shutil.which("make"), reason="GNU make not installed")
def test_make_port_hands_a_mistyped_verb_to_the_tool(make):
    proc, argv = make("port", "VERB=reprot", "TO=v0.33.0")
    assert argv == ["port", "reprot", "--to", "v0.33.0"]
    proc, argv = make("port", "VERB=reprot", "JSON=1")
    assert argv == ["port", "reprot", "--json"]


@pytest.mark.parametrize(
    "args, hint",
    [
        (("status", "--to", NEXT_VERSION), f"make port VERB=status TO={NEXT}"),
        (("status", "--to", NEXT.upper()), f"make port VERB=status TO={NEXT}"),
        (("continue", "--to", NEXT_VERSION), f"make port VERB=continue TO={NEXT}"),
        (("skip", "--to", NEXT_VERSION, "--reason", "x"), f"make port VERB=skip TO={NEXT} REASON='<why>'"),
        (("report", "--base", NAME, "--to", NEXT_VERSION), f"make port VERB=report TO={NEXT} BASE={NAME}"),
    ],
)
def test_a_mistyped_port_target_names_the_same_verb_on_the_base_meant(project, releases, args, hint):
    """``port status --to 9.10.0`` for the pinned v9.10.0: the hint is that status, never a carry
    (which, a port being in progress, would go on with it and commit what is staged)."""
    (project.root / "bases.toml").write_text(
        bases_toml(releases[NAME]) + bases_toml(releases[NEXT], name=NEXT, version=NEXT_VERSION)
    )
    out = json.loads(project.cli("port", *args, "--json", expect=2).stdout)
    assert f"did you mean '{NEXT}'?" in out["error"] and out["hint"] == hint


def test_under_make_a_value_with_a_dollar_is_hinted_as_the_user_gave_it(project, monkeypatch):
    """make writes "$" as "$$" in MAKEFLAGS; the hint gives the value back as typed (a hostile pass
    saw it double on every round)."""
    monkeypatch.setenv("TKV_SEAM_MAKE_GOAL", "bisect")
    monkeypatch.setenv("MAKEFLAGS", r" -- PATCH=$$(touch\ x) BASE=v9.9")
    err = project.cli("lint", "--base", "v9.9", expect=2).stderr
    assert f"next: make bisect BASE={NAME} PATCH='$(touch x)'\n" in err


def test_bisect_checks_its_patch_before_a_tree_or_venv_is_made(project):
    """`make bisect` checks PATCH first (`--check-only`): a typo stops in a second with the patch
    meant, before the tree is applied and the test venv built; a patch that is there passes."""
    make_two_patches(project)
    shutil.rmtree(project.tree)  # no tree, no test venv: neither is needed to check the name
    args = ("seamtest", "bisect", "--base", NAME, "--check-only", "--patch")
    err = project.cli(*args, "mul", expect=2).stderr
    assert "did you mean 'add-mul'?" in err and f"next: make bisect BASE={NAME} PATCH=add-mul\n" in err
    assert "0002-add-mul.patch" in project.cli(*args, "add-mul").output
    out = json.loads(project.cli(*args[:-1], "--json", "--patch", "2").stdout)
    assert out["ok"] is True and out["patches"] == ["0002-add-mul.patch"]
    project.cli(*args, "3", expect=2)  # two patches in the series
    assert not project.tree.exists()
