"""The official image's pins are checks (issue 24: ``image.index_digest_prefix`` was read by no
code): a base image passes for the official one only with its revision label and, where pinned,
a registry digest starting with the index digest prefix. The real image cannot be pulled here:
an engine that answers ``inspect_image`` stands in (tests/image builds on a real engine)."""

from __future__ import annotations

import pytest

from tkvseam.bases.pins import Base, Image, Sdist, load_bases
from tkvseam.errors import DockerError
from tkvseam.image.build import REVISION_LABEL, STAND_IN_LABEL, check_base_image

from ..fixtures.hintcheck import ROOT, problems


class Engine:
    """An engine's ``inspect_image`` for one image (the real one cannot be pulled here)."""

    def __init__(self, labels: dict, repo_digests: list[str] | None = None, present: bool = True):
        self.info = {
            "Id": "sha256:" + "1" * 64,
            "Config": {"Labels": labels},
            "RepoDigests": repo_digests or [],
        }
        self.present = present

    def inspect_image(self, image):
        from docker.errors import ImageNotFound

        if not self.present:
            raise ImageNotFound(f"no such image: {image}")
        return self.info


def pinned(prefix: str = "sha256:c1c9f6fd5c10") -> Base:
    return Base(
        "v0.31.0",
        "0.31.0",
        "v0.31.0",
        ("db9527a46873",),
        Sdist("vllm-0.31.0.tar.gz", 1, "0" * 64),
        Image("vllm/vllm-openai:v0.31.0", "db9527a46873", prefix),
    )


OFFICIAL = {REVISION_LABEL: "db9527a46873" + "0" * 28}


def test_the_index_digest_pin_is_read_from_bases_toml():
    assert load_bases(ROOT / "bases.toml")["v0.31.0"].image.index_digest_prefix == "sha256:c1c9f6fd5c10"


def test_the_official_image_pulled_by_its_pinned_digest_passes():
    engine = Engine(OFFICIAL, ["vllm/vllm-openai@sha256:c1c9f6fd5c10" + "2" * 52])
    revision, _, stand_in = check_base_image(engine, "vllm/vllm-openai:v0.31.0", pinned(), False)
    assert revision.startswith("db9527a46873") and stand_in is False
    # a mirror serves the same bytes: the digest is the image's, whatever repository holds it
    mirror = Engine(OFFICIAL, ["mirror.example/vllm-openai@sha256:c1c9f6fd5c10" + "2" * 52])
    assert check_base_image(mirror, "mirror.example/vllm-openai:v0.31.0", pinned(), False)[2] is False


@pytest.mark.parametrize(
    "digests, found",
    [
        ([], "none (an image built or loaded here, not pulled)"),
        (["vllm/vllm-openai@sha256:" + "9" * 64], "sha256:" + "9" * 64),
    ],
)
def test_a_lookalike_with_the_revision_label_but_not_the_pinned_digest_is_refused(digests, found):
    engine = Engine(OFFICIAL, digests)
    with pytest.raises(DockerError) as e:
        check_base_image(engine, "local/lookalike:1", pinned(), False)
    assert e.value.exit_code == 7
    assert "pins its index digest sha256:c1c9f6fd5c10" in e.value.message and found in e.value.message
    assert "docker pull vllm/vllm-openai:v0.31.0" in e.value.hint and "STAND_IN=1" in e.value.hint
    assert problems(e.value.hint) == []
    # with --stand-in it is built on, as a stand-in (its tag says so)
    assert check_base_image(engine, "local/lookalike:1", pinned(), True)[2] is True


def test_without_a_digest_pin_the_revision_label_decides_as_before():
    engine = Engine(OFFICIAL)
    assert check_base_image(engine, "local/x:1", pinned(prefix=""), False)[2] is False
    stand_in = Engine(
        {**OFFICIAL, STAND_IN_LABEL: "true"}, ["vllm/vllm-openai@sha256:c1c9f6fd5c10" + "2" * 52]
    )
    with pytest.raises(DockerError, match="is a tkv-seam stand-in"):
        check_base_image(stand_in, "x:1", pinned(), False)


def test_no_official_image_in_the_engine_names_the_stand_in_route():
    """Issue 26: `make image` where the official image cannot be pulled says how to try the build."""
    with pytest.raises(DockerError) as e:
        check_base_image(Engine({}, present=False), "vllm/vllm-openai:v0.31.0", pinned(), False)
    assert "docker pull vllm/vllm-openai:v0.31.0" in e.value.hint
    assert "`make standin BASE=v0.31.0`, then `make image BASE=v0.31.0 STAND_IN=1`" in e.value.hint
    assert problems(e.value.hint) == []
