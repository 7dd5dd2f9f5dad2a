"""lock-cpu: a base's CPU lock resolved by uv against a local index of tiny fake wheels (no PyPI).

The fake vllm 9.10.0 asks for torch==9.2.0 (not here: only 9.0.0+cpu and 9.1.0+cpu are, in a
find-links directory standing for $PIP_FIND_LINKS) and torchvision, whose builds must stay out
(``carrying.make_wheels``).
"""

from __future__ import annotations

import json
import shlex
import shutil
import os
import subprocess

import pytest

from tkvseam.release.cpulock import uv_executable

from ..fixtures.carrying import NEW, NEW_NAME, OLD_NAME, wheel


def lock_args(wheels, *extra: str) -> list[str]:
    index, cpu = wheels
    return ["lock-cpu", NEW_NAME, "--no-index", "--find-links", str(index), "--find-links", str(cpu), *extra]


def test_the_lock_has_that_vllm_the_local_cpu_torch_and_no_torchvision(pinned_project, wheels):
    out = json.loads(pinned_project.cli(*lock_args(wheels), "--json").output)
    assert out["status"] == "written" and out["path"] == f"ci/lock-cpu-{NEW_NAME}.txt"
    text = (pinned_project.root / out["path"]).read_text()
    pins = [line for line in text.splitlines() if not line.startswith("#")]
    assert pins == sorted(pins)
    assert "vllm==9.10.0" in pins and "torch==9.1.0+cpu" in pins  # the newest CPU build here
    assert "helper==2.0" in pins and "filelock-fake==1.0" in pins  # torch's own deps resolved
    assert "pytest==9.1.0" in pins and "tblib==3.1.0" in pins
    assert not [p for p in pins if p.startswith(("torchvision", "pillow-fake", "nvidia-stuff", "torch==9.2"))]
    head = [line for line in text.splitlines() if line.startswith("#")]
    said = "\n".join(head)
    assert f"Made by `tkv-seam lock-cpu {NEW_NAME}`" in said
    assert "torch overridden to 9.1.0+cpu" in said and "the release asks for torch==9.2.0+cpu" in said
    assert "excluded: torchvision torchaudio torchcodec" in said
    # pytest-mock is not in the release's requirements/test/cpu.txt
    assert "(not pinned there, resolved: pytest-asyncio pytest-mock pytest-timeout)" in said
    assert "index: none (--no-index); find-links: " in said
    # made with options make does not pass: the tool's own command (see the test of the Remake line)
    assert f"Remake: .venv/bin/tkv-seam lock-cpu {NEW_NAME} --find-links " in said
    assert f"--no-index --exclude-newer {out['exclude_newer']})" in said


def test_a_lock_made_with_the_defaults_is_remade_by_make():
    from tkvseam.release.cpulock import remake_commands

    base = "v9.10.0"
    assert remake_commands(base, "2030-01-01") == (
        "make lock-cpu BASE=v9.10.0",
        "make lock-cpu BASE=v9.10.0 EXCLUDE_NEWER=2030-01-01",
    )
    odd = remake_commands(base, "2030-01-01", ["/a b/c"], "9.1.0+cpu", "http://x/simple")
    assert odd[1] == (
        ".venv/bin/tkv-seam lock-cpu v9.10.0 --find-links '/a b/c' --torch 9.1.0+cpu "
        "--index-url http://x/simple --exclude-newer 2030-01-01"
    )


def test_the_venv_installs_from_the_lock_as_the_makefile_does(pinned_project, wheels, tmp_path):
    """`make venv-vllm`'s command (uv pip install --no-deps -r lock) reads past the header."""
    index, cpu = wheels
    lock = pinned_project.root / json.loads(pinned_project.cli(*lock_args(wheels), "--json").output)["path"]
    uv = uv_executable()
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", "python3.11", str(venv)], check=True)
    proc = subprocess.run(
        [uv, "pip", "install", "-q", "-p", str(venv / "bin/python"), "--no-deps", "--no-index"]
        + ["--find-links", str(index), "--find-links", str(cpu), "-r", str(lock)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    freeze = subprocess.run(
        [uv, "pip", "freeze", "-p", str(venv / "bin/python")], capture_output=True, text=True
    )
    assert sorted(freeze.stdout.split()) == sorted(
        line for line in lock.read_text().splitlines() if "#" not in line
    )


def test_a_remade_lock_is_unchanged_or_replaced_keeping_the_old_one(pinned_project, wheels):
    first = json.loads(pinned_project.cli(*lock_args(wheels), "--json").output)
    lock = pinned_project.root / first["path"]
    text = lock.read_text()
    again = json.loads(
        pinned_project.cli(*lock_args(wheels, "--exclude-newer", "2030-01-01"), "--json").output
    )
    assert again["status"] == "unchanged" and lock.read_text() == text  # same pins: header kept too
    lock.write_text(text.replace("helper==2.0", "helper==1.0"))
    edited = lock.read_text()
    out = json.loads(pinned_project.cli(*lock_args(wheels), "--json").output)
    assert out["status"] == "replaced" and "helper==2.0" in lock.read_text()
    assert (pinned_project.root / out["kept"] / first["path"]).read_text() == edited
    assert not list(lock.parent.glob(".*.tmp-*"))


def test_a_killed_runs_temporary_lock_is_removed_and_nothing_else(pinned_project, wheels):
    """Only `.<lock>.tmp-<pid>` files (what a killed write leaves) go; a user's files of a near
    shape, a directory and a symlink of that shape stay."""
    first = json.loads(pinned_project.cli(*lock_args(wheels), "--json").output)
    lock = pinned_project.root / first["path"]
    ci = lock.parent
    left = ci / f".{lock.name}.tmp-4242"
    left.write_text("half\n")
    mine = [ci / f".{lock.name}.tmp-mine", ci / f".{lock.name}.tmp-1.bak", ci / "notes.txt"]
    for p in mine:
        p.write_text("mine\n")
    (ci / f".{lock.name}.tmp-77").mkdir()
    (ci / f".{lock.name}.tmp-78").symlink_to(ci / "notes.txt")
    lock.write_text(lock.read_text().replace("helper==2.0", "helper==1.0"))
    pinned_project.cli(*lock_args(wheels), "--json")
    assert not left.exists()
    assert all(p.read_text() == "mine\n" for p in mine)
    assert (ci / f".{lock.name}.tmp-77").is_dir() and (ci / f".{lock.name}.tmp-78").is_symlink()


def test_the_lock_takes_the_cpu_torch_the_release_asks_for_when_it_is_there(pinned_project, wheels, tmp_path):
    index, cpu = wheels
    out = json.loads(pinned_project.cli(*lock_args(wheels), "--json").output)
    assert out["torch"]["version"] == "9.1.0+cpu"
    # v9.9.9's requirements/cpu.txt asks for 9.0.0+cpu, which the directory has
    (pinned_project.root / "ci" / f"lock-cpu-{OLD_NAME}.txt").unlink()
    wheel(index, "vllm", "9.9.9", ["torch==9.0.0"])
    try:
        old = json.loads(
            pinned_project.cli(
                "lock-cpu",
                OLD_NAME,
                "--no-index",
                "--find-links",
                str(index),
                "--find-links",
                str(cpu),
                "--json",
            ).output
        )
    finally:
        (index / "vllm-9.9.9-py3-none-any.whl").unlink()
    assert old["torch"] == {
        "version": "9.0.0+cpu",
        "source": "torch-9.0.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "asked": "9.0.0+cpu",
    }
    assert "torch==9.0.0+cpu" in (pinned_project.root / "ci" / f"lock-cpu-{OLD_NAME}.txt").read_text()


def test_no_cpu_torch_or_an_unresolvable_release_is_an_error_and_writes_nothing(
    pinned_project, wheels, tmp_path
):
    index, _ = wheels
    empty = tmp_path / "empty"
    empty.mkdir()
    err = pinned_project.cli("lock-cpu", NEW_NAME, "--no-index", "--find-links", str(empty), expect=1).stderr
    assert "no CPU torch wheel" in err and str(empty) in err and "--find-links" in err
    err = pinned_project.cli(
        "lock-cpu", NEW_NAME, "--no-index", "--find-links", str(empty), "--torch", "9.1.0+cpu", expect=1
    ).stderr
    assert "uv could not resolve vllm==9.10.0 with torch==9.1.0+cpu" in err
    assert not (pinned_project.root / "ci" / f"lock-cpu-{NEW_NAME}.txt").exists()
    err = pinned_project.cli(*lock_args(wheels, "--exclude-newer", "yesterday"), expect=2).stderr
    assert "--exclude-newer 'yesterday'" in err


def test_a_lock_is_never_written_through_a_linked_ci_directory(pinned_project, wheels, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    ci = pinned_project.root / "ci"
    for f in ci.iterdir():
        os.replace(f, outside / f.name)
    ci.rmdir()
    ci.symlink_to(outside)
    err = pinned_project.cli(*lock_args(wheels), expect=1).stderr
    assert "would not be a file of the project's ci/ directory" in err
    assert sorted(p.name for p in outside.iterdir()) == [f"lock-cpu-{OLD_NAME}.txt"]


def test_the_remake_line_gives_the_options_the_lock_was_made_with(pinned_project, wheels):
    """Made with --no-index and --find-links: `make lock-cpu BASE=…` (PyPI and $PIP_FIND_LINKS)
    would not give these pins again; the header's own command, run as written, does."""
    import shlex

    out = json.loads(pinned_project.cli(*lock_args(wheels), "--json").output)
    text = (pinned_project.root / out["path"]).read_text()
    (remake,) = [line for line in text.splitlines() if line.startswith("# Remake: ")]
    again = remake.split("(the same pins again: ", 1)[1].removesuffix(")")
    words = shlex.split(again)
    assert words[0] == ".venv/bin/tkv-seam" and "--no-index" in words
    assert words.count("--find-links") == 2 and f"--exclude-newer={out['exclude_newer']}" not in words
    assert words[words.index("--exclude-newer") + 1] == out["exclude_newer"]
    redo = json.loads(pinned_project.cli(*words[1:], "--json").output)
    assert redo["status"] == "unchanged" and redo["pins"] == out["pins"]


def test_an_index_url_with_credentials_is_refused_and_never_written_into_the_lock(pinned_project, wheels):
    """The header (a committed file) recorded 'index: http://user:secret@…' and so would its Remake line."""
    _, cpu = wheels
    res = pinned_project.cli(
        "lock-cpu",
        NEW_NAME,
        "--index-url",
        "http://user:secret@127.0.0.1:9/simple",
        "--find-links",
        str(cpu),
        "--json",
        expect=2,
    )
    assert "secret" not in res.output and "secret" not in res.stderr
    assert "carries credentials" in json.loads(res.stdout)["error"]
    assert not (pinned_project.root / "ci" / f"lock-cpu-{NEW_NAME}.txt").exists()


def test_a_torch_that_is_no_version_is_a_usage_error_before_uv_runs(pinned_project, wheels):
    """It went to uv ('Couldn't parse requirement … torch==x y') with a 'check network access' hint."""
    out = json.loads(pinned_project.cli(*lock_args(wheels, "--torch", "x y"), "--json", expect=2).stdout)
    assert out["error"] == "--torch 'x y' is not a version (e.g. 2.13.0+cpu)"


def test_the_rules_are_data_of_the_base_and_the_header_gives_each_with_its_reason(pinned_project, wheels):
    """What the lock leaves out comes from bases.toml (the base carried from, until the new base
    has a table of its own), never from the tool's code; the header says each rule and why."""
    out = json.loads(pinned_project.cli(*lock_args(wheels), "--json").output)
    head = "\n".join(
        x for x in (pinned_project.root / out["path"]).read_text().splitlines() if x.startswith("#")
    )
    assert (
        f'rules: ["{NEW_NAME}".seam.cpu] of bases.toml ({OLD_NAME}\'s, the base it is carried from)' in head
    )
    assert "    torchvision: needs CUDA libraries" in head and out["excluded"][0] == "torchvision"
    # a rule added to the data changes the lock: helper left out too
    bases = pinned_project.root / "bases.toml"
    rule = '    { name = "torchcodec", why = "needs CUDA libraries" },\n'
    bases.write_text(bases.read_text().replace(rule, rule + '    { name = "helper", why = "not wanted" },\n'))
    again = json.loads(pinned_project.cli(*lock_args(wheels), "--json").output)
    assert again["status"] == "replaced" and again["excluded"][-1] == "helper"
    assert "helper==2.0" in out["pins"] and not [p for p in again["pins"] if p.startswith("helper")]


def test_a_pin_the_index_does_not_serve_stops_naming_it_and_the_command_that_leaves_it_out(
    pinned_project, wheels, tmp_path
):
    index, cpu = wheels
    odd = tmp_path / "index"
    shutil.copytree(index, odd)
    for f in odd.glob("vllm-*.whl"):
        f.unlink()
    wheel(odd, "vllm", NEW, ["torch==9.2.0", "torchvision==2.0.0", "kernels-fake==0.7.3"])
    for version in ("0.7.1", "0.7.2.post1", "0.7.4", "0.8.0", "0.9.0"):
        wheel(odd, "kernels-fake", version)
    args = ["lock-cpu", NEW_NAME, "--no-index", "--find-links", str(odd), "--find-links", str(cpu)]
    err = json.loads(pinned_project.cli(*args, "--json", expect=1).stdout)
    assert "vllm 9.10.0 needs kernels-fake==0.7.3, which the index does not serve" in err["error"]
    assert "it has 0.7.1, 0.7.2.post1, 0.7.4, 0.8.0 …" in err["error"]
    assert "network" not in err["hint"]
    assert not (pinned_project.root / "ci" / f"lock-cpu-{NEW_NAME}.txt").exists()
    # the hint, as written: make lock-cpu BASE=… EXCLUDE=… WHY='…' (make passes them as these options)
    words = shlex.split(err["hint"].split("`")[1])
    assert words[:2] == ["make", "lock-cpu"]
    given = dict(w.split("=", 1) for w in words[2:])
    assert given["BASE"] == NEW_NAME and given["EXCLUDE"] == "kernels-fake"
    done = json.loads(
        pinned_project.cli(*args, "--exclude", given["EXCLUDE"], "--why", given["WHY"], "--json").output
    )
    assert done["status"] == "written" and "kernels-fake" in done["excluded"]
    assert not [p for p in done["pins"] if p.startswith("kernels-fake")]
    from tkvseam.bases.pins import load_bases

    rules = load_bases(pinned_project.root / "bases.toml")[NEW_NAME].seam.cpu
    assert rules.excluded == ("torchvision", "torchaudio", "torchcodec", "kernels-fake")
    assert rules.exclude[-1].why.startswith(
        "vllm 9.10.0 needs kernels-fake==0.7.3, which the index does not serve"
    )
    head = (pinned_project.root / done["path"]).read_text()
    assert f'rules: ["{NEW_NAME}".seam.cpu] of bases.toml (its own)' in head
    assert "kernels-fake: vllm 9.10.0 needs kernels-fake==0.7.3" in head


def test_an_exclusion_that_is_no_package_name_or_a_why_alone_is_a_usage_error(pinned_project, wheels):
    err = pinned_project.cli(*lock_args(wheels, "--exclude", "../x"), expect=2).stderr
    assert "'../x' is not a package name" in err
    err = pinned_project.cli(*lock_args(wheels, "--why", "because"), expect=2).stderr
    assert "--why is the reason of an --exclude" in err
    assert f'["{NEW_NAME}".seam' not in (pinned_project.root / "bases.toml").read_text()


@pytest.mark.parametrize("name", ["vllm", "torch", "VLLM", "Torch"])
def test_vllm_and_torch_are_never_left_out_and_nothing_is_recorded(pinned_project, wheels, name):
    """The lock is of that vLLM; torch has its own rule (``torch``): a rule leaving either out would
    make every later lock (or the venv) fail, so it is refused before bases.toml is written."""
    before = (pinned_project.root / "bases.toml").read_text()
    err = json.loads(pinned_project.cli(*lock_args(wheels, "--exclude", name, "--json"), expect=2).stdout)
    assert f"--exclude {name!r}" in err["error"] and "never left out" in err["error"]
    assert (pinned_project.root / "bases.toml").read_text() == before
    assert not (pinned_project.root / "ci" / f"lock-cpu-{NEW_NAME}.txt").exists()


@pytest.mark.parametrize("why", ["  ", "\t", ""])
def test_a_blank_why_records_the_default_reason_and_bases_toml_stays_readable(pinned_project, wheels, why):
    from tkvseam.bases.pins import load_bases

    pinned_project.cli(*lock_args(wheels, "--exclude", "helper", "--why", why))
    rules = load_bases(pinned_project.root / "bases.toml")[NEW_NAME].seam.cpu
    assert rules.exclude[-1].name == "helper" and rules.exclude[-1].why == "given to lock-cpu --exclude"


def test_a_name_left_out_already_in_another_spelling_is_not_recorded_twice(pinned_project, wheels):
    pinned_project.cli(*lock_args(wheels, "--exclude", "TorchVision", "--exclude", "Helper", "--why", "x"))
    from tkvseam.bases.pins import load_bases

    rules = load_bases(pinned_project.root / "bases.toml")[NEW_NAME].seam.cpu
    assert rules.excluded == ("torchvision", "torchaudio", "torchcodec", "helper")
