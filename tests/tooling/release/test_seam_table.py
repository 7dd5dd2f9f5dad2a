"""seam-table: a new base's ["<base>".seam] table derived from its sdist and the base it is carried from."""

from __future__ import annotations

import json
import tomllib

import pytest

from tkvseam.bases.pins import load_bases
from tkvseam.errors import SeamError
from tkvseam.release.seamtable import plugin_pin, ruff_from_pre_commit

from ..fixtures.carrying import (
    NEW_NAME,
    OLD_NAME,
    PLUGIN_HASH,
    PRE_COMMIT,
)
from ..fixtures.index import listing_index


@pytest.mark.parametrize(
    "rev, version",
    [
        ("v0.14.0", "0.14.0"),
        ("'v0.14.0'", "0.14.0"),
        ('"0.15.1"  # pinned', "0.15.1"),
        ("0123456789abcdef0123456789abcdef01234567  # v0.16.0", "0.16.0"),
        # pre-commit autoupdate --freeze (vLLM 0.34.0's own config)
        ("f368fb366ff7f2f808dd324b83a6d32267799e19  # frozen: v0.17.2", "0.17.2"),
    ],
)
def test_ruff_is_the_rev_of_ruff_pre_commit(rev, version):
    assert ruff_from_pre_commit(PRE_COMMIT.format(rev=rev), "x") == version


def test_ruff_of_a_config_without_ruff_pre_commit_or_its_rev_is_an_error_naming_the_option():
    typos_only = PRE_COMMIT.split("- repo: https://github.com/astral-sh")[0]
    with pytest.raises(SeamError, match="no astral-sh/ruff-pre-commit repo") as e:
        ruff_from_pre_commit(typos_only, "vllm-9.10.0.tar.gz:.pre-commit-config.yaml", "v9.10.0")
    assert "seam-table v9.10.0 --ruff <version>" in e.value.hint
    no_rev = PRE_COMMIT.replace("  rev: {rev}\n  hooks:\n  - id: ruff-check", "  hooks:\n  - id: ruff-check")
    with pytest.raises(SeamError, match="entry has no rev"):
        ruff_from_pre_commit(no_rev, "x")
    with pytest.raises(SeamError, match="not a version"):
        ruff_from_pre_commit(PRE_COMMIT.format(rev="main"), "x")
    # a frozen commit id whose comment names no version, and one of digits only, are no version
    for rev in ("f368fb366ff7f2f808dd324b83a6d32267799e19  # frozen", "1234567  # frozen: 2024"):
        with pytest.raises(SeamError, match="no comment on its line names one") as e:
            ruff_from_pre_commit(PRE_COMMIT.format(rev=rev), "x", "v9.10.0")
        assert e.value.hint.endswith(".venv/bin/tkv-seam seam-table v9.10.0 --ruff <version>")


def test_seam_table_carries_the_older_base_over_and_lists_every_test_file(pinned_project):
    before = (pinned_project.root / "bases.toml").read_text()
    out = pinned_project.cli("seam-table", NEW_NAME).output
    assert "ruff     0.14.0 (vllm-9.10.0.tar.gz:.pre-commit-config.yaml)" in out  # v9.9.9 has 0.13.0
    assert f"plugin   turbo-attn==1.0.0 (1 hash(es)) ({OLD_NAME}'s pin)" in out
    assert "kept     tests/test_math.py" in out
    assert "moved    tests/test_moved.py -> tests/unit/test_moved.py" in out
    assert "dropped  tests/test_gone.py (not in the new sdist, no rename found)" in out
    assert f"{NEW_NAME}: .seam table written in bases.toml, from {OLD_NAME}'s" in out
    seam = load_bases(pinned_project.root / "bases.toml")[NEW_NAME].seam
    assert seam.ruff == "0.14.0"
    assert (seam.plugin.requirement, seam.plugin.hashes) == ("turbo-attn==1.0.0", (PLUGIN_HASH,))
    assert seam.upstream_tests == ("tests/test_math.py", "tests/unit/test_moved.py")
    # the CPU test venv's rules are carried over as data, each exclusion with its reason
    old = load_bases(pinned_project.root / "bases.toml")[OLD_NAME].seam.cpu
    assert seam.cpu == old and seam.cpu.excluded == ("torchvision", "torchaudio", "torchcodec")
    assert f"cpu      torch local; left out: torchvision, torchaudio, torchcodec ({OLD_NAME}'s)" in out
    after = (pinned_project.root / "bases.toml").read_text()
    assert f"[\"{NEW_NAME}\".seam.cpu]\n# the CPU test venv's rules, {OLD_NAME}'s" in after
    assert after.startswith(before)  # the rest of the file byte for byte; the table goes last here
    assert f'["{NEW_NAME}".seam]\n# written by `tkv-seam seam-table {NEW_NAME}`' in after
    assert "# moved tests/test_moved.py -> tests/unit/test_moved.py" in after
    # written once: the same values again change nothing
    again = json.loads(pinned_project.cli("seam-table", NEW_NAME, "--json").output)
    assert again["status"] == "unchanged" and (pinned_project.root / "bases.toml").read_text() == after


def test_a_table_someone_extended_is_refused_then_replaced_with_force_keeping_the_old_file(pinned_project):
    pinned_project.cli("seam-table", NEW_NAME)
    path = pinned_project.root / "bases.toml"
    extended = path.read_text().replace(
        '    "tests/unit/test_moved.py",\n', '    "tests/unit/test_moved.py",\n    "tests/mine.py",\n'
    )
    path.write_text(extended)
    err = pinned_project.cli("seam-table", NEW_NAME, expect=5).stderr
    assert "already has a .seam table with other values" in err
    assert "upstream_tests: only in the bases file: tests/mine.py" in err and "FORCE=1" in err
    assert path.read_text() == extended
    out = json.loads(pinned_project.cli("seam-table", NEW_NAME, "--force", "--json").output)
    assert out["status"] == "written"
    kept = pinned_project.root / out["kept"] / "bases.toml"
    assert kept.read_text() == extended
    assert "tests/mine.py" not in path.read_text()


def test_a_given_plugin_is_hash_pinned_from_the_index(pinned_project, monkeypatch):
    files = [
        {"filename": "turbo_attn-2.0.0-py3-none-any.whl", "hashes": {"sha256": "11" * 32}},
        {"filename": "turbo_attn-2.0.0.tar.gz", "hashes": {"sha256": "22" * 32}},
        {"filename": "turbo_attn-1.9.0-py3-none-any.whl", "hashes": {"sha256": "33" * 32}},
    ]
    with listing_index("turbo-attn", {"files": files}) as url:
        assert plugin_pin("turbo-attn==2.0.0", url).hashes == ("sha256:" + "11" * 32,)
        monkeypatch.setenv("TKV_SEAM_INDEX_URL", url)
        with pytest.raises(SeamError, match="lists no file of turbo-attn 3.0.0"):
            plugin_pin("turbo-attn==3.0.0")
    for bad in ("turbo-attn>=2", "turbo-attn", "turbo attn==1"):
        with pytest.raises(SeamError) as e:
            plugin_pin(bad, "http://127.0.0.1:9")
        assert e.value.exit_code == 2, bad


def test_a_table_is_carried_forward_only(pinned_project):
    err = pinned_project.cli("seam-table", OLD_NAME, expect=1).stderr
    assert f"no carried base is older than {OLD_NAME}: nothing to carry it from" in err
    err = pinned_project.cli("seam-table", OLD_NAME, "--from", NEW_NAME, expect=2).stderr
    assert f"{NEW_NAME} is not older than {OLD_NAME}" in err
    err = pinned_project.cli("seam-table", "v1.2.3", expect=2).stderr
    assert "unknown base 'v1.2.3'" in err and "make pin VERSION=" in err
    assert tomllib.loads((pinned_project.root / "bases.toml").read_text())[NEW_NAME].get("seam") is None


def test_two_seam_tables_at_once_never_overwrite_each_other(pinned_project):
    """Both runs derived their table seeing none; both wrote: the second replaced the first's
    without FORCE=1 and kept nothing. Real processes, held at the bases file's lock."""
    from tkvseam.layout import lock_of
    from tkvseam.lock import locked

    from ..fixtures.processes import said, start

    bases = pinned_project.root / "bases.toml"
    with locked(lock_of(bases), "test"):
        runs = [
            start(pinned_project, "seam-table", NEW_NAME, "--ruff", v, "--json") for v in ("0.20.0", "0.21.0")
        ]
        for run in runs:  # (they may take turns on the cached sdist first)
            assert "waiting for another tkv-seam run on the bases file" in said(run, "on the bases file")
    outs = sorted((run.wait(), run.stdout.read()) for run in runs)
    assert [rc for rc, _ in outs] == [0, 5], outs
    first, second = json.loads(outs[0][1]), json.loads(outs[1][1])
    assert first["status"] == "written" and "already has a .seam table with other values" in second["error"]
    assert load_bases(bases)[NEW_NAME].seam.ruff == first["ruff"]


@pytest.mark.parametrize(
    "args, code, error, hint",
    [
        (  # it was exit 1, said as the sdist's ruff-pre-commit rev, after cloning both bases
            ["--ruff", "x y"],
            2,
            "--ruff 'x y' is not a version (e.g. 0.14.0)",
            f".venv/bin/tkv-seam seam-table {NEW_NAME} --ruff <version>",
        ),
        (  # the hint was '--plugin turbo-attn==0.70.1', no command
            ["--plugin", "turbo-attn>=1"],
            2,
            "--plugin 'turbo-attn>=1': a plugin pin is one exact version (name==version)",
            f"make seam-table BASE={NEW_NAME} PLUGIN='turbo-attn==<version>'",
        ),
        (
            ["--plugin", "turbo attn"],
            2,
            "--plugin 'turbo attn': ",
            f"make seam-table BASE={NEW_NAME} PLUGIN=",
        ),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_a_command_before_any_clone(
    pinned_project, args, code, error, hint
):
    out = json.loads(pinned_project.cli("seam-table", NEW_NAME, *args, "--json", expect=code).stdout)
    assert out["error"].startswith(error) and out["hint"].startswith(hint), out
    assert not (pinned_project.cache / "bases").exists()


def test_from_a_base_not_older_names_a_command_that_works(pinned_project):
    """seam-table <oldest> --from <itself>: the hint was `make seam-table BASE=<oldest>`, which has
    no older base to carry from either."""
    out = json.loads(
        pinned_project.cli("seam-table", OLD_NAME, "--from", OLD_NAME, "--json", expect=2).stdout
    )
    assert out["hint"] == ".venv/bin/tkv-seam carried   (lists the bases with a queue)"
    out = json.loads(
        pinned_project.cli("seam-table", NEW_NAME, "--from", NEW_NAME, "--json", expect=2).stdout
    )
    assert out["hint"] == f"make seam-table BASE={NEW_NAME}   (from the newest carried base older than it)"
