"""The image's names, labels and plugin pin, and the refusals that come before any engine is asked.

Offline, no Docker engine: these are the decisions ``tkv-seam image`` takes before it
builds (tests/image builds for real).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tkvseam import git
from tkvseam.bases.pins import Base, Image, Plugin, SeamPins, Sdist
from tkvseam.cli.main import main
from tkvseam.errors import DockerError, UsageError
from tkvseam.image.build import (
    BASE_DIGEST_LABEL,
    REVISION_LABEL,
    SOURCE_LABEL,
    ImageResult,
    image_labels,
    image_reference,
    parse_reference,
    provenance,
    tag_name,
)
from tkvseam.image.engine import push
from tkvseam.image.wheel import plugin_spec

PIN = Plugin("turbo-attn==0.70.1", ("sha256:" + "ab" * 32,))
BASE = Base(
    name="v0.31.0",
    version="0.31.0",
    tag="v0.31.0",
    commit_prefixes=("db9527a46",),
    sdist=Sdist("vllm-0.31.0.tar.gz", 1, "0" * 64),
    image=Image("vllm/vllm-openai:v0.31.0", "db9527a46873"),
    seam=SeamPins(plugin=PIN),
)
DIGEST = "c7b90da04a5a" + "0" * 52
OTHER = "sha256:" + "cd" * 32


def spec(text: str):
    return plugin_spec(text, PIN, BASE.name)


def test_only_the_real_image_with_the_pinned_plugin_gets_the_plain_tag():
    pinned = spec("turbo-attn==0.70.1")
    assert tag_name(BASE, DIGEST, False, pinned) == "v0.31.0-c7b90da04a5a"
    assert tag_name(BASE, DIGEST, False, None) == "v0.31.0-c7b90da04a5a-noplugin"
    assert tag_name(BASE, DIGEST, True, pinned) == "v0.31.0-c7b90da04a5a-standin"
    assert tag_name(BASE, DIGEST, True, None) == "v0.31.0-c7b90da04a5a-noplugin-standin"
    other = spec(f"turbo-attn==0.71.0+local --hash={OTHER}")
    assert tag_name(BASE, DIGEST, False, other) == "v0.31.0-c7b90da04a5a-turbo-attn-0.71.0-local"


def test_the_run_hint_only_for_a_real_base_with_the_plugin():
    def result(plugin: str, stand_in: bool) -> ImageResult:
        return ImageResult("t:x", "sha256:1", "b", "r", DIGEST, stand_in=stand_in, plugin=plugin)

    assert result("turbo-attn==0.70.1", False).run_hint.endswith("t:x <model> --kv-cache-dtype tkv")
    assert result("", False).run_hint is None
    assert result("turbo-attn==0.70.1", True).run_hint is None
    assert result("", True).to_json()["run"] is None


def test_the_plugin_is_the_pin_with_its_hashes_or_brings_its_own():
    assert spec("turbo-attn==0.70.1").hashes == PIN.hashes
    assert spec("Turbo_Attn==0.70.1").requirement == "turbo-attn==0.70.1"  # one name, however spelled
    assert (
        spec(f"turbo-attn==0.71.0 --hash={OTHER}").requirements_txt()
        == f"turbo-attn==0.71.0 --hash={OTHER}\n"
    )
    for bad, why in [
        ("turbo-attn==0.71.0", "carries no --hash"),
        ("turbo-attn>=0.70", "one exact release"),
        ("turbo-attn==0.70.*", "one exact release"),
        ("turbo-attn[vllm]==0.70.1", "one exact release"),
        ("turbo-attn==0.70.1 --hash=md5:00", "is not sha256:<64 hex digits>"),
        ("turbo-attn==0.70.1 --no-deps", "optionally with --hash"),
        ("turbo attn", "optionally with --hash"),
        ("../x.whl", "TURBO_ATTN='../x.whl'"),
    ]:
        with pytest.raises(UsageError) as e:
            spec(bad)
        assert why in e.value.message, (bad, e.value.message)
        assert e.value.exit_code == 2 and "make image" in e.value.hint


def test_references_are_checked_before_anything_is_built():
    assert parse_reference("127.0.0.1:5000/tkv-seam/vllm-openai:v0.31.0-x") == (
        "127.0.0.1:5000/tkv-seam/vllm-openai",
        "v0.31.0-x",
    )
    assert parse_reference("localhost/a") == ("localhost/a", "latest")
    assert parse_reference("[::1]:5000/a:b") == ("[::1]:5000/a", "b")
    assert image_reference(BASE, DIGEST, False, None, "ghcr.io/me/", "tkv-seam/vllm-openai") == (
        "ghcr.io/me/tkv-seam/vllm-openai:v0.31.0-c7b90da04a5a-noplugin"
    )
    for bad in [
        "Tkv/Upper:x",
        "a:b:c",
        "a@sha256:" + "0" * 64,
        "a:" + "x" * 129,
        "a:-x",
        "bad host:1/a:b",
        "a//b:c",
    ]:
        with pytest.raises(UsageError) as e:
            parse_reference(bad)
        assert bad in e.value.message and e.value.exit_code == 2
    with pytest.raises(UsageError, match="registry 'nohost'"):
        image_reference(BASE, DIGEST, False, None, "nohost", "tkv-seam/vllm-openai")


def test_provenance_is_the_commit_and_a_credential_free_source(tmp_path):
    git.repo.init(tmp_path)
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    (tmp_path / "notes.txt").write_text("not an input of the image\n")
    commit = git.index.commit(tmp_path, "init\n", "A <a@example.invalid>")
    git.core.run(tmp_path, "remote", "add", "origin", "https://user:s3cret@example.invalid/org/tkv-seam.git")
    assert provenance(tmp_path) == ("https://example.invalid/org/tkv-seam.git", commit)
    (tmp_path / "notes.txt").write_text("edited\n")  # not an input: still clean
    assert provenance(tmp_path, "https://elsewhere.invalid/x") == ("https://elsewhere.invalid/x", commit)
    (tmp_path / "Dockerfile").write_text("FROM y\n")
    assert provenance(tmp_path)[1] == f"{commit}-dirty"
    assert provenance(tmp_path / "nothing-here-is-git") == ("", "")


def test_labels_name_source_commit_base_digest_and_series():
    info = {
        "Id": "sha256:" + "1" * 64,
        "RepoDigests": ["vllm/vllm-openai@sha256:" + "c1c9f6fd5c10" + "2" * 52],
    }
    labels = image_labels(BASE, "vllm/vllm-openai:v0.31.0", info, "db9527a46873", DIGEST, spec("turbo-attn==0.70.1"),
                          False, "https://example.invalid/x.git", "abc123")  # fmt: skip
    assert labels[SOURCE_LABEL] == "https://example.invalid/x.git"
    assert labels[REVISION_LABEL] == "abc123"  # the tkv-seam commit; vLLM's stays below
    assert labels["io.tkv-seam.base.revision"] == "db9527a46873"
    assert labels[BASE_DIGEST_LABEL] == "sha256:c1c9f6fd5c10" + "2" * 52  # the registry digest when pulled
    assert labels["org.opencontainers.image.base.name"] == "vllm/vllm-openai:v0.31.0"
    assert labels["io.tkv-seam.series.digest"] == DIGEST
    assert labels["io.tkv-seam.turbo-attn"] == "turbo-attn==0.70.1"
    assert labels["io.tkv-seam.turbo-attn.hashes"] == PIN.hashes[0]
    assert labels["io.tkv-seam.stand-in"] == "false"
    local = image_labels(
        BASE, "local:x", {"Id": "sha256:" + "1" * 64}, "stand-in", DIGEST, None, True, "", ""
    )
    assert local[BASE_DIGEST_LABEL] == "sha256:" + "1" * 64  # never pulled: its image id
    assert local["io.tkv-seam.turbo-attn"] == "" and local["io.tkv-seam.stand-in"] == "true"


class FakeApi:
    def __init__(self, chunks):
        self.chunks = chunks

    def push(self, repository, tag, stream, decode):
        assert stream and decode
        yield from self.chunks


def test_push_reports_the_digest_and_the_registrys_own_error():
    ok = FakeApi(
        [
            {"status": "The push refers to repository [127.0.0.1:5000/a]"},
            {"status": "Preparing", "id": "l1"},
            {"status": "Pushing", "id": "l1", "progressDetail": {"current": 5, "total": 10}},
            {"status": "Pushed", "id": "l1"},
            {"aux": {"Tag": "t", "Digest": "sha256:" + "9" * 64, "Size": 953}},
        ]
    )
    lines: list[str] = []
    out = push(ok, "127.0.0.1:5000/a:t", lines.append)
    assert vars(out) == {
        "reference": "127.0.0.1:5000/a:t",
        "digest": "sha256:" + "9" * 64,
        "size": 953,
        "pinned": "127.0.0.1:5000/a@sha256:" + "9" * 64,
    }
    assert "  l1: Pushed" in lines
    bad = FakeApi(
        [{"status": "Preparing", "id": "l1"}, {"error": "denied: requested access to the resource"}]
    )
    with pytest.raises(DockerError, match="push of 127.0.0.1:5000/a:t failed: denied") as e:
        push(bad, "127.0.0.1:5000/a:t", lines.append)
    assert "docker login 127.0.0.1:5000" in e.value.hint
    with pytest.raises(UsageError, match="names no registry host"):
        push(ok, "tkv-seam/vllm-openai:t", lines.append)  # would go to Docker Hub


def run(tmp_path, monkeypatch, *args):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    return CliRunner().invoke(main, ["--root", str(tmp_path), "-q", *args])


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["image", "--push", "--json"], 2, "--push needs a registry"),
        (["image", "--turbo-attn", "turbo-attn==0.71.0", "--json"], 2, "carries no --hash"),
        (
            ["image", "--tag", "x:y", "--registry", "127.0.0.1:5000", "--json"],
            2,
            "either --tag or --registry",
        ),
        (["image", "--registry", "Bad Host", "--json"], 2, "image reference"),
        (
            ["image", "--turbo-attn", "", "--json"],
            5,
            "is not a tree made by tkv-seam apply",
        ),  # before the engine (SeamTree.require's one code; it was 2)
        (["standin", "--json"], 7, "no Docker engine reachable"),
    ],
)
def test_usage_errors_come_before_the_engine_and_json_is_one_object(tmp_path, monkeypatch, args, code, words):
    (tmp_path / "bases.toml").write_text(
        '["v0.31.0"]\nversion = "0.31.0"\ncommit_prefixes = ["db9527a46"]\n'
        'sdist = { filename = "vllm-0.31.0.tar.gz", size = 1, sha256 = "' + "0" * 64 + '" }\n'
        'image = { name = "vllm/vllm-openai:v0.31.0", revision_prefix = "db9527a46873" }\n'
        '["v0.31.0".seam]\nplugin = { requirement = "turbo-attn==0.70.1", hashes = ["sha256:'
        + "ab" * 32
        + '"] }\n'
    )
    res = run(tmp_path, monkeypatch, *args)
    assert res.exit_code == code, res.output + res.stderr
    out = json.loads(res.stdout)  # exactly one object
    assert out["ok"] is False and out["exit_code"] == code and words in out["error"], out
    assert out["hint"]
