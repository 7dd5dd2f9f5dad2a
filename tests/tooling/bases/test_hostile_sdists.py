"""Hostile sdists (issue 20, item 2 and its tracebacks): every member is checked before
anything is written, whatever the Python; a refusal is exit 4 naming the member.

Each crafted sdist is served by the local PEP 691 index and reached through the commands a
user runs (apply, pin, watch --report); the test then looks for what the archive tried to
write outside the cache.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
import tkvseam

from ..fixtures.upstream import FILES, NAME, VERSION, Upstream, bases_toml

COMMIT = "abcdef0123456789abcdef0123456789abcdef01"
SCRIPTS = Path(tkvseam.__file__).resolve().parents[1]  # the tkvseam under test


def _info(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = "", mode: int = 0o644):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def crafted(tmp_path: Path, extra: list, version: str = VERSION, drop: tuple[str, ...] = ()) -> Upstream:
    """The synthetic release's files as vllm-<version>.tar.gz, plus ``extra`` (TarInfo, bytes) members."""
    top = f"vllm-{version}"
    tarball = tmp_path / "crafted" / f"{top}.tar.gz"
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, "w:gz") as tar:
        for rel, text in FILES.items():
            if rel in drop:
                continue
            data = text.replace("{commit}", COMMIT[:9]).replace(f"'{VERSION}'", f"'{version}'").encode()
            tar.addfile(*_with_stream(_info(f"{top}/{rel}", data=data)))
        for info, data in extra:
            tar.addfile(*_with_stream((info, data)))
    data = tarball.read_bytes()
    return Upstream(None, COMMIT, tarball, hashlib.sha256(data).hexdigest(), len(data))  # type: ignore[arg-type]


def _with_stream(pair):
    info, data = pair
    return (info, io.BytesIO(data)) if info.type == tarfile.REGTYPE else (info,)


def serve(index, up: Upstream) -> None:
    """Serve ``up``'s tarball at /files/<name>, replacing a listed file of that name."""
    index.files[f"/files/{up.tarball.name}"] = up.tarball.read_bytes()
    index.listing["files"] = [f for f in index.listing["files"] if f["filename"] != up.tarball.name]
    index.listing["files"].append(
        {
            "filename": up.tarball.name,
            "url": f"/files/{up.tarball.name}",
            "size": up.size,
            "hashes": {"sha256": up.sha256},
        }
    )


def pin_crafted(project, index, up: Upstream) -> None:
    serve(index, up)
    (project.root / "bases.toml").write_text(bases_toml(up))


def hostile_members(tmp_path: Path, version: str = VERSION) -> dict[str, list]:
    """What an archive can ask tarfile for that an sdist never needs (the first member is the bad one)."""
    outside = tmp_path / "outside"
    top = f"vllm-{version}"
    return {
        "an in-tree symlink": [_info(f"{top}/docs", tarfile.SYMTYPE, link="vllm")],
        "a symlink out": [
            _info(f"{top}/vllm/evil", tarfile.SYMTYPE, link=str(outside)),
            _info(f"{top}/vllm/evil/planted.txt", data=b"planted\n"),
        ],
        "a hard link": [_info(f"{top}/vllm/hard", tarfile.LNKTYPE, link=f"{top}/README.md")],
        "a device": [_info(f"{top}/vllm/null", tarfile.CHRTYPE)],
        "a FIFO": [_info(f"{top}/vllm/pipe", tarfile.FIFOTYPE)],
        "a .. path": [_info(f"{top}/../../outside/planted.txt", data=b"planted\n")],
        "an absolute path": [_info(str(outside / "planted.txt"), data=b"planted\n")],
        "a second top directory": [_info("other/planted.txt", data=b"planted\n")],
        "a name twice": [_info(f"{top}/README.md", data=b"second copy\n")],
        "a file below a file": [_info(f"{top}/README.md/x", data=b"x\n")],
    }


@pytest.mark.parametrize(
    "case",
    [
        "an in-tree symlink",
        "a symlink out",
        "a hard link",
        "a device",
        "a FIFO",
        "a .. path",
        "an absolute path",
        "a second top directory",
        "a name twice",
        "a file below a file",
    ],
)
def test_apply_refuses_a_hostile_member_naming_it_and_writes_nothing(project, index, tmp_path, case):
    extra = hostile_members(tmp_path)[case]
    pin_crafted(project, index, crafted(tmp_path, extra))
    res = project.apply("--json", expect=4)
    bad = extra[0][0].name
    assert f"member {bad!r}" in res.stderr and "nothing was unpacked" in res.stderr
    assert json.loads(res.stdout)["exit_code"] == 4  # one object under --json
    assert not (tmp_path / "outside").exists()
    assert not project.tree.exists() and not (project.cache / "bases" / f"{NAME}-sdist").exists()
    assert not [p for p in (project.cache / "bases").glob(".*")]  # no half-unpacked leftovers


def test_a_git_directory_in_the_sdist_never_reaches_git(project, index, tmp_path):
    """A .git/config in the archive would be the base repository's config: its fsmonitor
    command runs on `git add` (checked on today's code: it ran)."""
    marker = tmp_path / "ran"
    config = f'[core]\n\tfsmonitor = "touch {marker}"\n'.encode()
    hook = f"#!/bin/sh\ntouch {marker}\n".encode()
    top = f"vllm-{VERSION}"
    extra = [
        _info(f"{top}/.git/config", data=config),
        _info(f"{top}/.git/hooks/post-commit", data=hook, mode=0o755),
    ]
    pin_crafted(project, index, crafted(tmp_path, extra))
    err = project.apply(expect=4).stderr
    assert f"member '{top}/.git/config' is inside a .git directory" in err
    assert not marker.exists()


def test_pin_and_watch_report_refuse_a_hostile_sdist_before_writing_anything(project, index, tmp_path):
    up = crafted(tmp_path, hostile_members(tmp_path, "9.11.0")["a symlink out"], "9.11.0")
    serve(index, up)
    before = (project.root / "bases.toml").read_bytes()
    err = project.cli("pin", "9.11.0", expect=4).stderr
    assert "member 'vllm-9.11.0/vllm/evil' is a symlink to" in err
    assert (project.root / "bases.toml").read_bytes() == before
    res = project.cli("watch", "--report", "--json", expect=4)
    out = json.loads(res.stdout)
    row = next(r for r in out["releases"] if r["version"] == "9.11.0")
    assert "member 'vllm-9.11.0/vllm/evil' is a symlink" in row["error"]
    assert not (tmp_path / "outside").exists()


def test_an_sdist_without_its_version_file_or_as_a_zip_is_exit_4(project, index, tmp_path):
    pin_crafted(project, index, crafted(tmp_path, [], drop=("vllm/_version.py",)))
    err = project.apply(expect=4).stderr
    assert f"has no file vllm-{VERSION}/vllm/_version.py" in err and "next:" in err
    shutil.rmtree(project.cache)
    zipped = tmp_path / "zip" / f"vllm-{VERSION}.tar.gz"  # a zip under the pinned name
    zipped.parent.mkdir()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr(f"vllm-{VERSION}/vllm/_version.py", "__version__ = '9.9.9'\n")
    data = zipped.read_bytes()
    pin_crafted(project, index, Upstream(None, COMMIT, zipped, hashlib.sha256(data).hexdigest(), len(data)))  # type: ignore[arg-type]
    res = project.apply("--json", expect=4)
    assert "is not a readable .tar.gz sdist" in res.stderr and "a .zip or damaged sdist" in res.stderr
    assert json.loads(res.stdout)["ok"] is False


def test_the_checks_need_no_tarfile_filter_on_debian_python_3_11_2(tmp_path):
    """Debian 12's python3.11 (3.11.2) has no extractall(filter=); the unpacker never asks for it."""
    python = Path("/usr/bin/python3.11")
    if not python.exists():
        pytest.skip("no /usr/bin/python3.11 here (Debian's 3.11.2); the in-process tests cover the checks")
    good = crafted(tmp_path / "good", [])
    bad = crafted(tmp_path / "bad", hostile_members(tmp_path)["an in-tree symlink"])
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path\n"
        "from tkvseam.bases.unpack import Sdist\n"
        "from tkvseam.errors import VerifyError\n"
        "print(sys.version.split()[0])\n"
        "with Sdist(Path(sys.argv[2]), 'hint') as s: s.extract(Path(sys.argv[4]))\n"
        "try:\n"
        "    Sdist(Path(sys.argv[3]), 'hint')\n"
        "except VerifyError as e: print(e.message)\n"
    )
    out = subprocess.run(
        [
            str(python),
            "-c",
            script,
            str(SCRIPTS),
            str(good.tarball),
            str(bad.tarball),
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].startswith("3.11.")
    assert (tmp_path / "t/vllm/_version.py").read_text().count(COMMIT[:9]) == 1
    assert f"member 'vllm-{VERSION}/docs' is a symlink to 'vllm'" in out[1]


@pytest.mark.parametrize(
    "name, why",
    [
        (f"vllm-{VERSION}/bad\nname.py", "printable characters"),
        (f"vllm-{VERSION}/back\\slash.py", "printable characters"),
        (f"vllm-{VERSION}/" + "x" * 300, "too long for a file name"),
    ],
)
def test_names_no_sdist_has_are_refused(project, index, tmp_path, name, why):
    pin_crafted(project, index, crafted(tmp_path, [_info(name, data=b"x\n")]))
    err = project.apply(expect=4).stderr
    assert why in err and "member " in err


def test_the_unpacked_size_and_member_count_are_capped(project, index, tmp_path, monkeypatch):
    top = f"vllm-{VERSION}"
    pin_crafted(
        project, index, crafted(tmp_path, [_info(f"{top}/big{i}.bin", data=b"0" * 4000) for i in range(3)])
    )
    monkeypatch.setattr("tkvseam.bases.unpack.MAX_BYTES", 10_000)
    assert f"member '{top}/big2.bin' takes the unpacked size past" in project.apply(expect=4).stderr
    monkeypatch.setattr("tkvseam.bases.unpack.MAX_BYTES", 1 << 30)
    monkeypatch.setattr("tkvseam.bases.unpack.MAX_MEMBERS", len(FILES) + 1)
    assert (
        f"member '{top}/big1.bin' is past the {len(FILES) + 1}-member limit" in project.apply(expect=4).stderr
    )
