"""The overlay image, built for real on a local stand-in of vllm/vllm-openai:<base> ($BASE, default v0.31.0).

Needs a Docker engine (CI starts Debian's dockerd) and the applied build tree
(``make apply``). Without an engine these tests skip with the reason, unless
TKV_SEAM_REQUIRE_DOCKER=1 (CI), where a missing engine is a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tkvseam import git
from tkvseam.state import TreeState
from tkvseam.bases import default_cache_dir, load_bases
from tkvseam.cli import main
from tkvseam.overlay import overlay_paths
from tkvseam.series import read_series
from .standin import VLLM_PATH, build_stand_in, rootfs

ROOT = Path(__file__).resolve().parents[2]
BASE = os.environ.get("BASE", "v0.31.0")
TREE = ROOT / "build" / f"vllm-{BASE}"
PINS = load_bases(ROOT / "bases.toml")[BASE]
STAND_IN = "tkv-seam-test/stand-in"
TARGET = "tkv-seam-test/vllm-openai"

HASH_ALL = f"""
import hashlib, json, pathlib
root = pathlib.Path("/{VLLM_PATH}")
print(json.dumps({{str(p.relative_to(root.parent)): hashlib.sha256(p.read_bytes()).hexdigest()
                  for p in root.rglob("*.py")}}))
"""


@pytest.fixture(scope="module")
def api():
    import docker
    from docker.errors import DockerException

    try:
        client = docker.APIClient(**docker.utils.kwargs_from_env())
        client.ping()
    except DockerException as e:
        if os.environ.get("TKV_SEAM_REQUIRE_DOCKER") == "1":
            pytest.fail(f"TKV_SEAM_REQUIRE_DOCKER=1 but no Docker engine is reachable: {e}")
        pytest.skip(f"no Docker engine reachable ({e}); CI starts one")
    return client


@pytest.fixture(scope="module")
def tree():
    state = TreeState.load(TREE)
    series = read_series(ROOT, PINS.queue, BASE)
    assert state is not None, f"{TREE} missing: run `make apply` first"
    assert len(state.patches) == len(series.names), "build tree is stale: run `make apply`"
    return TREE, state


@pytest.fixture(scope="module")
def stand_in(api, tree):
    path, state = tree
    tar = rootfs(default_cache_dir())
    made = []

    def make(tag: str, **kw) -> str:
        made.append(f"{STAND_IN}:{tag}")
        return build_stand_in(api, tar, path, state.base_commit, STAND_IN, tag, **kw)

    yield make
    for image in [f"{TARGET}:test", *made]:
        try:
            api.remove_image(image, force=True)
        except Exception:  # already gone: nothing to clean
            pass
    api.prune_images(filters={"dangling": True})


def run_image(cli_args: list[str]):
    return CliRunner().invoke(main, ["--root", str(ROOT), "-q", "image", "--base", BASE, *cli_args])


def blob_sha(tree: Path, commit: str, path: str) -> str:
    return hashlib.sha256(git.run(tree, "show", f"{commit}:{path}").stdout).hexdigest()


def test_overlay_replaces_exactly_the_patched_files(api, tree, stand_in):
    import docker

    path, state = tree
    stand_in("good")
    res = run_image(
        [
            "--base-image",
            f"{STAND_IN}:good",
            "--stand-in",
            "--turbo-attn",
            "",
            "--tag",
            f"{TARGET}:test",
            "--json",
        ]
    )
    assert res.exit_code == 0, res.output + res.stderr
    out = json.loads(res.stdout)
    patched = overlay_paths(read_series(ROOT, PINS.queue, BASE).load())
    n = len(patched)
    assert f"tkv-seam overlay: {n} file(s) replaced, {n} verified" in res.stderr
    labels = api.inspect_image(out["tag"])["Config"]["Labels"]
    assert labels["io.tkv-seam.series.digest"] == state.digest
    assert labels["io.tkv-seam.base.image"] == f"{STAND_IN}:good"
    assert labels["io.tkv-seam.turbo-attn"] == ""  # TURBO_ATTN empty: no plugin step ran
    assert out["added_bytes"] < 5_000_000, out["added_layers"]
    hashes = json.loads(
        docker.from_env().containers.run(out["tag"], ["python3", "-c", HASH_ALL], remove=True)
    )
    # the overlay is what the applied tree changed under vllm/ (git's view, not the patches')
    assert patched == sorted(
        p for p in git.out(path, "diff", "--name-only", state.base_commit, "HEAD", "--", "vllm/").split()
    )
    pristine = [
        p
        for p in git.out(path, "ls-tree", "-r", "--name-only", state.base_commit, "vllm/").split()
        if p.endswith(".py")
    ]
    assert set(hashes) == set(pristine)
    for p in pristine:
        want = blob_sha(path, "HEAD" if p in patched else state.base_commit, p)
        assert hashes[p] == want, p
    assert sum(blob_sha(path, "HEAD", p) != blob_sha(path, state.base_commit, p) for p in patched) == n


def test_altered_base_file_fails_the_build_naming_it(api, tree, stand_in):
    victim = overlay_paths(read_series(ROOT, PINS.queue, BASE).load())[3]
    stand_in("altered", alter=victim)
    res = run_image(
        [
            "--base-image",
            f"{STAND_IN}:altered",
            "--stand-in",
            "--turbo-attn",
            "",
            "--tag",
            f"{TARGET}:altered",
        ]
    )
    assert res.exit_code == 7
    assert f"base is not vLLM {BASE}: {victim} has sha256" in res.output + res.stderr
    assert not api.images(name=f"{TARGET}:altered")


def test_base_image_with_a_foreign_revision_is_refused_before_building(api, tree, stand_in):
    stand_in("foreign", revision="0123456789ab")
    res = run_image(["--base-image", f"{STAND_IN}:foreign", "--turbo-attn", "", "--tag", f"{TARGET}:foreign"])
    assert res.exit_code == 7
    pinned = PINS.image.revision_prefix
    assert f"org.opencontainers.image.revision=0123456789ab; {BASE} pins {pinned}" in res.stderr
    assert "Step 1/" not in res.output  # nothing was built
    assert not api.images(name=f"{TARGET}:foreign")
