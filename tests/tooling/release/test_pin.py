"""pin: a release's entry in bases.toml from its verified sdist, format preserved, conflicts refused."""

from __future__ import annotations

import json
import tomllib


from tkvseam.bases.pins import load_bases

from ..fixtures.upstream import NAME, NEXT_VERSION, bases_toml

NEXT = f"v{NEXT_VERSION}"


def commented_bases(up) -> str:
    """The synthetic pin with comments in the places a maintainer writes them."""
    return (
        "# Known upstream bases. Hand-written header: pin keeps it.\n"
        + bases_toml(up).replace('tag = "', '# the release tag\ntag = "', 1)
        + "# trailing note after the last entry\n"
    )


def downloads(index) -> list[str]:
    return [r for r in index.requests if r.startswith("/files/")]


def test_pin_adds_an_entry_that_apply_then_uses(project, releases, index):
    up = releases[NEXT]
    out = json.loads(project.cli("pin", NEXT_VERSION, "--json").output)
    assert out["status"] == "added" and out["name"] == NEXT
    assert out["commit_prefix"] == up.commit[:9]
    assert out["sdist"] == {"filename": up.tarball.name, "size": up.size, "sha256": up.sha256}
    base = load_bases(project.root / "bases.toml")[NEXT]
    assert (base.version, base.tag, base.commit_prefixes) == (NEXT_VERSION, NEXT, (up.commit[:9],))
    assert base.image.name == f"vllm/vllm-openai:{NEXT}" and base.image.revision_prefix == up.commit[:9]
    assert (base.queue.series, base.queue.patches) == (f"patches/{NEXT}/series", f"patches/{NEXT}")
    (project.root / "patches" / NEXT).mkdir(parents=True)  # an empty queue of its own
    (project.root / "patches" / NEXT / "series").write_text("")
    applied = json.loads(project.cli("apply", "--base", NEXT, "--json").output)
    assert applied["upstream_commit"] == up.commit[:9]
    assert applied["fetched_bytes"] == 0  # pin already downloaded and verified it into the cache
    assert len(downloads(index)) == 1
    assert "9.10.0" in (project.root / f"build/vllm-{NEXT}/vllm/_version.py").read_text()


def test_pin_keeps_comments_and_other_entries_byte_for_byte(project, releases):
    before = commented_bases(releases[NAME])
    (project.root / "bases.toml").write_text(before)
    project.cli("pin", f"v{NEXT_VERSION}")
    after = (project.root / "bases.toml").read_text()
    assert after.startswith(before)
    added = after[len(before) :]
    assert added.lstrip("\n").startswith(f'["{NEXT}"]\n# pinned by `tkv-seam pin {NEXT_VERSION}`')
    assert 'sdist = { filename = "vllm-9.10.0.tar.gz", size = ' in added
    assert set(tomllib.loads(after)) == {NAME, NEXT}


def test_pin_of_an_agreeing_entry_is_a_noop(project, releases):
    (project.root / "bases.toml").write_text(commented_bases(releases[NAME]))
    before = (project.root / "bases.toml").read_bytes()
    out = project.cli("pin", "9.9.9").output
    assert out.startswith(f"{NAME}: unchanged")
    assert (project.root / "bases.toml").read_bytes() == before


def test_pin_refuses_a_conflicting_sha256_before_downloading(project, releases, index):
    up = releases[NEXT]
    pinned = bases_toml(up, sha256="0" * 64, name=NEXT, version=NEXT_VERSION)
    (project.root / "bases.toml").write_text(pinned)
    err = project.cli("pin", NEXT_VERSION, expect=4).stderr
    assert f"{NEXT} is already pinned" in err
    assert f"sdist.sha256: bases file has {'0' * 64}, the release has {up.sha256}" in err
    assert f'next: check the release; to re-pin on purpose, delete the ["{NEXT}"] table' in err
    assert (project.root / "bases.toml").read_text() == pinned
    assert not downloads(index)


def test_pin_refuses_a_conflicting_commit_and_shows_both(project, releases):
    up = releases[NEXT]
    pinned = bases_toml(up, commit="deadbeef" * 5, name=NEXT, version=NEXT_VERSION)
    (project.root / "bases.toml").write_text(pinned)
    err = project.cli("pin", NEXT_VERSION, expect=4).stderr
    assert "commit: bases file has deadbeefd, deadbeefdead" in err
    assert f"the release's vllm/_version.py has {up.commit[:9]}" in err
    assert (project.root / "bases.toml").read_text() == pinned


def test_pin_of_a_release_the_index_lacks_says_how_to_list_them(project):
    err = project.cli("pin", "1.2.3", expect=1).stderr
    assert "lists no sdist of vllm 1.2.3" in err and "next: make watch SINCE=0 PRE=1 YANKED=1" in err
    assert project.cli("pin", "not-a-version", expect=2).stderr.startswith("Error: 'not-a-version'")


def test_pin_refuses_a_yanked_sdist_unless_asked(project, releases, index):
    entry = next(f for f in index.listing["files"] if f["filename"] == releases[NEXT].tarball.name)
    entry["yanked"] = "broken build"
    err = project.cli("pin", NEXT_VERSION, expect=1).stderr
    assert "is yanked on the index (broken build)" in err and "pin --yanked 9.10.0" in err
    assert json.loads(project.cli("pin", "--yanked", NEXT_VERSION, "--json").output)["status"] == "added"
