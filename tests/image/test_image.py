"""The overlay image, built for real on local stand-ins of vllm/vllm-openai:<base> ($BASE, default v0.31.0).

Needs a Docker engine (CI starts Debian's dockerd), the applied build tree (``make apply``)
and, for the push, Debian's ``docker-registry`` (CI installs it; the test serves a registry
on 127.0.0.1 and stops it). Without an engine or the registry these tests skip with the
reason, unless TKV_SEAM_REQUIRE_DOCKER=1 (CI), where either missing is a failure.

The stand-ins are made with the tool (``tkv-seam standin``, with uv and with no installer);
the variants a test needs (an altered vllm/ file, a foreign revision, an image that passes
for the official one) are small builds on top of them. The plugin's wheel is the base's pin,
fetched once from the package index into the cache; the builds themselves never reach a network.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from docker.errors import ImageNotFound

from tkvseam import git, layout
from tkvseam.bases.pins import load_bases
from tkvseam.cli.main import main
from tkvseam.image.build import REVISION_LABEL, SOURCE_LABEL, STAND_IN_LABEL
from tkvseam.queue.footprint import overlay_paths
from tkvseam.queue.series import read_series
from tkvseam.image.standin import VLLM_PATH
from tkvseam.tree.state import TreeState

ROOT = Path(__file__).resolve().parents[2]
BASE = os.environ.get("BASE", "v0.31.0")
TREE = ROOT / "build" / f"vllm-{BASE}"
PINS = load_bases(ROOT / "bases.toml")[BASE]
REQUIRE = os.environ.get("TKV_SEAM_REQUIRE_DOCKER") == "1"
STAND_IN = "tkv-seam-test/stand-in"
TARGET = "tkv-seam-test/vllm-openai"
SOURCE = "https://example.invalid/tkv-seam.git"

HASH_ALL = f"""
import hashlib, json, pathlib
root = pathlib.Path("/{VLLM_PATH}")
print(json.dumps({{str(p.relative_to(root.parent)): hashlib.sha256(p.read_bytes()).hexdigest()
                  for p in root.rglob("*.py")}}))
"""
# A freeze of the image's Python: every distribution it sees, name==version.
FREEZE = """
import importlib.metadata as m
print("\\n".join(sorted(d.metadata["Name"] + "==" + d.version for d in m.distributions())))
"""


def _missing(what: str) -> None:
    if REQUIRE:
        pytest.fail(f"TKV_SEAM_REQUIRE_DOCKER=1 but {what}")
    pytest.skip(f"{what}; CI provides it")


@pytest.fixture(scope="module")
def api():
    import docker
    from docker.errors import DockerException

    try:
        client = docker.APIClient(**docker.utils.kwargs_from_env())
        client.ping()
    except DockerException as e:
        _missing(f"no Docker engine is reachable ({e})")
    return client


@pytest.fixture(scope="module")
def tree():
    state = TreeState.load(TREE)
    series = read_series(ROOT, PINS.queue, BASE)
    assert state is not None, f"{TREE} missing: run `make apply` first"
    assert len(state.patches) == len(series.names), "build tree is stale: run `make apply`"
    return TREE, state


def cli(*args: str):
    return CliRunner().invoke(main, ["--root", str(ROOT), "-q", *args])


def image_cli(*args: str):
    return cli("image", "--base", BASE, "--source", SOURCE, *args)


def build_log(out: dict) -> str:
    """The builder's whole log of a build, which the tool keeps in a file and names in its answer."""
    return (ROOT / out["log"]).read_text(encoding="utf-8")


def nothing_built(refused) -> bool:
    """``refused`` (a call of the tool) started no build: the builder's log it would write is not there."""
    log = layout.image_log(ROOT, BASE)
    log.unlink(missing_ok=True)
    refused()
    return not log.exists()


@pytest.fixture(scope="module")
def images(api, tree):
    """Make stand-ins with the tool and variants on top of them; remove every image made here."""
    made: list[str] = []

    def standin(installer: str) -> str:
        tag = f"{STAND_IN}:{BASE}-{installer}"
        res = cli("standin", "--base", BASE, "--installer", installer, "--tag", tag, "--json")
        assert res.exit_code == 0, res.output + res.stderr
        assert json.loads(res.stdout)["tag"] == tag
        made.append(tag)
        return tag

    def variant(name: str, *lines: str) -> str:
        tag = f"{STAND_IN}:{BASE}-{name}"
        dockerfile = "\n".join([f"FROM {uv}", *lines]) + "\n"
        for chunk in api.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, decode=True):
            assert "error" not in chunk, chunk
        made.append(tag)
        return tag

    def built(tag: str) -> str:
        made.append(tag)
        return tag

    uv = standin("uv")
    yield {"uv": uv, "standin": standin, "variant": variant, "built": built}
    for image in reversed(made):
        try:
            api.remove_image(image, force=True)
        except Exception:  # already gone: nothing to clean
            pass


def blob_sha(tree: Path, commit: str, path: str) -> str:
    return hashlib.sha256(git.core.run(tree, "show", f"{commit}:{path}").stdout).hexdigest()


def run_in(image: str, script: str) -> str:
    import docker

    return docker.from_env().containers.run(image, ["python3", "-c", script], remove=True).decode()


def dangling(api) -> set[str]:
    return set(api.images(filters={"dangling": True}, quiet=True))


def test_overlay_replaces_exactly_the_patched_files(api, tree, images):
    path, state = tree
    tag = f"{TARGET}:test"
    refused = []
    assert nothing_built(
        lambda: refused.append(
            image_cli("--base-image", images["uv"], "--stand-in", "--turbo-attn", "", "--tag", tag)
        )
    )
    res = refused[0]
    assert res.exit_code == 2 and "could pass for the real image" in res.stderr  # a tag by hand says so too
    assert not api.images(name=tag)
    tag += "-noplugin-standin"
    res = image_cli("--base-image", images["uv"], "--stand-in", "--turbo-attn", "", "--tag", tag, "--json")
    assert res.exit_code == 0, res.output + res.stderr
    out = json.loads(res.stdout)
    images["built"](out["tag"])
    patched = overlay_paths(read_series(ROOT, PINS.queue, BASE).load())
    n = len(patched)
    assert f"tkv-seam overlay: {n} file(s) replaced, {n} verified" in build_log(out)
    labels = api.inspect_image(out["tag"])["Config"]["Labels"]
    assert labels["io.tkv-seam.series.digest"] == state.digest
    assert labels["io.tkv-seam.base.image"] == images["uv"]
    assert labels["io.tkv-seam.turbo-attn"] == ""  # TURBO_ATTN empty: no plugin step ran
    assert out["plugin"] == "" and out["run"] is None
    assert out["added_bytes"] < 5_000_000, out["added_layers"]
    hashes = json.loads(run_in(out["tag"], HASH_ALL))
    # the overlay is what the applied tree changed under vllm/ (git's view, not the patches')
    assert patched == sorted(
        p for p in git.core.out(path, "diff", "--name-only", state.base_commit, "HEAD", "--", "vllm/").split()
    )
    pristine = [
        p
        for p in git.core.out(path, "ls-tree", "-r", "--name-only", state.base_commit, "vllm/").split()
        if p.endswith(".py")
    ]
    assert set(hashes) == set(pristine)
    for p in pristine:
        want = blob_sha(path, "HEAD" if p in patched else state.base_commit, p)
        assert hashes[p] == want, p
    assert sum(blob_sha(path, "HEAD", p) != blob_sha(path, state.base_commit, p) for p in patched) == n
    # rebuilt under the same tag with other labels: the image it replaced (ours, now untagged) goes
    res = image_cli("--base-image", images["uv"], "--stand-in", "--turbo-attn", "", "--tag", out["tag"],
                    "--source", "https://example.invalid/other.git", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output + res.stderr
    again = json.loads(res.stdout)
    assert again["image_id"] != out["image_id"] and again["removed"] == [out["image_id"]]
    with pytest.raises(ImageNotFound):
        api.inspect_image(out["image_id"])


def test_altered_base_file_fails_the_build_naming_it_and_leaves_no_dangling_image(api, tree, images):
    victim = overlay_paths(read_series(ROOT, PINS.queue, BASE).load())[3]
    altered = images["variant"]("altered", f"RUN echo '# altered' >> /{VLLM_PATH}/{victim[len('vllm/') :]}")
    before = dangling(api)
    res = image_cli(
        "--base-image",
        altered,
        "--stand-in",
        "--turbo-attn",
        "",
        "--tag",
        f"{TARGET}:altered-noplugin-standin",
    )
    assert res.exit_code == 7
    # the overlay's own words are the error, not the engine's "The command ... returned a non-zero code"
    assert (
        f"Error: image build failed: tkv-seam overlay: base is not vLLM {BASE}: {victim} has sha256"
        in res.stderr
    )
    assert "returned a non-zero code" not in res.stderr.split("Error:", 1)[1]
    assert "Step 1/" in build_log({"log": layout.image_log(ROOT, BASE)})  # the builder's own log is kept
    assert not api.images(name=f"{TARGET}:altered-noplugin-standin")
    assert dangling(api) == before


def test_base_image_with_a_foreign_revision_is_refused_before_building(api, tree, images):
    foreign = images["variant"]("foreign", f"LABEL {STAND_IN_LABEL}=false {REVISION_LABEL}=0123456789ab")
    refused = []
    assert nothing_built(
        lambda: refused.append(
            image_cli("--base-image", foreign, "--turbo-attn", "", "--tag", f"{TARGET}:foreign")
        )
    )
    res = refused[0]
    assert res.exit_code == 7
    pinned = PINS.image.revision_prefix
    assert f"org.opencontainers.image.revision=0123456789ab; {BASE} pins {pinned}" in res.stderr
    assert not api.images(name=f"{TARGET}:foreign")


def test_a_stand_in_with_the_pinned_revision_still_needs_stand_in(api, tree, images):
    """The stand-in label is enough to refuse: a revision label can be copied, the tag must not lie."""
    lookalike = images["variant"]("lookalike", f"LABEL {REVISION_LABEL}={PINS.image.revision_prefix}")
    res = image_cli("--base-image", lookalike, "--turbo-attn", "")
    assert res.exit_code == 7
    assert f"base image {lookalike} is a tkv-seam stand-in ({STAND_IN_LABEL}=true)" in res.stderr
    assert "STAND_IN=1" in res.stderr


def test_plugin_installed_hash_checked_changes_no_other_package(api, tree, images):
    path, state = tree
    res = image_cli("--base-image", images["uv"], "--stand-in", "--json")
    assert res.exit_code == 0, res.output + res.stderr
    out = json.loads(res.stdout)
    tag = images["built"](out["tag"])
    # a stand-in build can never pass for the real image, nor suggest serving it
    assert tag == f"tkv-seam/vllm-openai:{BASE}-{state.digest[:12]}-standin"
    assert out["stand_in"] is True and out["run"] is None
    assert out["plugin"] == PINS.seam.plugin.requirement
    log = build_log(out)
    assert "--require-hashes" in log and "--no-deps" in log and "--no-index" in log
    assert f"tkv-seam plugin: installed {PINS.seam.plugin.requirement} with uv" in log
    before = run_in(images["uv"], FREEZE).split()
    after = run_in(tag, FREEZE).split()
    assert len(before) > 100  # the stand-in carries the base's locked packages (metadata)
    assert set(after) - set(before) == {PINS.seam.plugin.requirement} and set(before) <= set(after)
    labels = api.inspect_image(tag)["Config"]["Labels"]
    assert labels["io.tkv-seam.turbo-attn.hashes"] == ",".join(PINS.seam.plugin.hashes)
    assert labels[STAND_IN_LABEL] == "true"
    assert labels[SOURCE_LABEL] == SOURCE
    assert labels[REVISION_LABEL].split("-")[0] == git.core.out(ROOT, "rev-parse", "HEAD")
    assert labels["org.opencontainers.image.base.digest"] == api.inspect_image(images["uv"])["Id"]


def test_a_base_without_uv_or_pip_fails_in_the_installers_words(api, tree, images):
    bare = images["standin"]("none")
    before = dangling(api)
    res = image_cli("--base-image", bare, "--stand-in")
    assert res.exit_code == 7, res.output + res.stderr
    error = res.stderr.split("Error:", 1)[1]
    assert error.startswith(" image build failed: tkv-seam plugin: the base image has neither uv nor pip")
    assert "TURBO_ATTN=" in error  # the next step: build without the plugin
    assert dangling(api) == before  # the steps the failed build committed are gone


def test_a_base_lacking_the_plugins_requirements_fails_naming_them(api, tree, images):
    """--no-deps never fills a gap in the base: the build says what the plugin needs instead."""
    site = VLLM_PATH.rsplit("/", 1)[0]
    no_torch = images["variant"]("no-torch", f"RUN rm -r /{site}/torch-*.dist-info")
    res = image_cli("--base-image", no_torch, "--stand-in")
    assert res.exit_code == 7, res.output + res.stderr
    error = res.stderr.split("Error:", 1)[1]
    assert (
        f"tkv-seam plugin: {PINS.seam.plugin.requirement} needs torch>=2.1, which the base image does not carry"
        in error
    )
    assert "carries the plugin's requirements" in error  # next: the official image, or no plugin


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path):
    """Debian's docker-registry on 127.0.0.1 (the engine trusts 127.0.0.0/8 without TLS)."""
    exe = shutil.which("docker-registry")
    if not exe:
        _missing("docker-registry is not installed (apt-get install docker-registry)")
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = open(tmp_path / "registry.log", "wb")
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/v2/", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "registry.log").read_text()
                time.sleep(0.2)
        else:
            pytest.fail("docker-registry did not answer: " + (tmp_path / "registry.log").read_text())
        yield f"127.0.0.1:{port}", url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def _get(url: str, accept: str = "") -> tuple[dict, bytes]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return dict(resp.headers), resp.read()


def _pulled_by_digest(api, image: str, host: str, made) -> tuple[str, str]:
    """``image`` as the engine holds an image it has from a registry: pushed to the test's
    registry, so that the engine records its digest (``RepoDigests``). The reference and digest."""
    repository, tag = f"{host}/tkv-seam-test/official", BASE
    api.tag(image, repository, tag)
    made(f"{repository}:{tag}")
    for chunk in api.push(repository, tag=tag, stream=True, decode=True):
        assert "error" not in chunk, chunk
    digests = [d.split("@", 1)[1] for d in api.inspect_image(f"{repository}:{tag}")["RepoDigests"]]
    assert digests, "the engine recorded no digest of the pushed image"
    return f"{repository}:{tag}", digests[0]


def _bases_pinning(tmp_path: Path, digest: str) -> Path:
    """A copy of bases.toml whose BASE pins ``digest`` (a prefix of it) as its image's index digest."""
    import tomlkit

    doc = tomlkit.parse((ROOT / "bases.toml").read_text())
    doc[BASE]["image"]["index_digest_prefix"] = digest[:19]
    out = tmp_path / "bases.toml"
    out.write_text(tomlkit.dumps(doc))
    return out


def test_the_real_path_tags_plainly_and_push_prints_the_registry_digest(
    api, tree, images, registry, tmp_path
):
    """On an image that passes for the official one: the plain tag, the run hint, the push.

    Where bases.toml pins the official image's index digest, passing for it takes an image the
    engine has from a registry by that digest: the lookalike is pushed to the test's registry and
    a copy of bases.toml pins its digest (a lookalike built here is refused, test_answers.py)."""
    path, state = tree
    official = images["variant"](
        "official", f"LABEL {STAND_IN_LABEL}=false {REVISION_LABEL}={PINS.image.revision_prefix}"
    )
    host, url = registry
    bases: tuple[str, ...] = ()
    digest = None
    if PINS.image.index_digest_prefix:
        refused = image_cli(
            "--base-image", official, "--turbo-attn", "", "--tag", f"{TARGET}:lookalike-noplugin"
        )
        assert (
            refused.exit_code == 7
            and f"pins its index digest {PINS.image.index_digest_prefix}" in refused.stderr
        )
        official, digest = _pulled_by_digest(api, official, host, images["built"])
        bases = ("--bases", str(_bases_pinning(tmp_path, digest)))
    res = cli(
        *bases,
        "image",
        "--base",
        BASE,
        "--source",
        SOURCE,
        "--base-image",
        official,
        "--registry",
        host,
        "--push",
    )
    assert res.exit_code == 0, res.output + res.stderr
    tag = images["built"](f"{host}/tkv-seam/vllm-openai:{BASE}-{state.digest[:12]}")
    assert f"built {tag} " in res.stdout
    assert f"run:  docker run --gpus all -p 8000:8000 {tag} <model> --kv-cache-dtype tkv" in res.stdout
    pushed = [line for line in res.stdout.splitlines() if line.startswith(f"pushed {tag}: digest sha256:")]
    assert len(pushed) == 1, res.stdout
    digest_pushed = pushed[0].split("digest ", 1)[1].split()[0]
    manifest_types = (
        "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
    )
    headers, body = _get(f"{url}/v2/tkv-seam/vllm-openai/manifests/{tag.rsplit(':', 1)[1]}", manifest_types)
    assert headers["Docker-Content-Digest"] == digest_pushed
    _, config = _get(f"{url}/v2/tkv-seam/vllm-openai/blobs/{json.loads(body)['config']['digest']}")
    labels = json.loads(config)["config"]["Labels"]
    assert labels[SOURCE_LABEL] == SOURCE
    assert labels[REVISION_LABEL].split("-")[0] == git.core.out(ROOT, "rev-parse", "HEAD")
    assert labels["io.tkv-seam.series.digest"] == state.digest
    # the base's registry digest when the engine has one, else (built here) its image id
    assert labels["org.opencontainers.image.base.digest"] == (digest or api.inspect_image(official)["Id"])
    assert labels["io.tkv-seam.base.revision"] == PINS.image.revision_prefix
    assert labels[STAND_IN_LABEL] == "false"
