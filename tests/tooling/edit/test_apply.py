"""apply: strict, atomic, refuses to lose work; refresh round trip."""

from __future__ import annotations

import json
import re

import pytest

from tkvseam import git

from ..fixtures.queue import message
from ..fixtures.upstream import NAME


def make_two_patches(project):
    """Apply the empty series, commit two changes in the tree, refresh: two patch files."""
    project.apply()
    project.commit_in_tree(
        "vllm/config/cache.py",
        (project.tree / "vllm/config/cache.py").read_text().replace("line 10\n", "line 10 (seam)\n"),
        message("cache-tweak", "mark line 10"),
    )
    project.commit_in_tree(
        "vllm/engine/arg_utils.py",
        (project.tree / "vllm/engine/arg_utils.py").read_text() + "\n\ndef mul(a, b):\n    return a * b\n",
        message("add-mul", "add mul()", "Adds mul().").replace("Depends-on: none", "Depends-on: cache-tweak"),
    )
    project.refresh()
    return (project.root / "series").read_text().split()


def patch_bytes(project) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((project.root / "patches").glob("*"))}


def test_empty_series_gives_pristine_base_and_second_run_is_a_noop(project):
    out = json.loads(project.apply("--json").output)
    assert out["patches"] == [] and out["up_to_date"] is False
    assert git.core.out(project.tree, "rev-list", "--count", "HEAD") == "1"
    assert (project.tree / "vllm/_version.py").exists()
    again = json.loads(project.apply("--json").output)
    assert again["up_to_date"] is True and again["head"] == out["head"]


def test_series_applies_one_commit_per_patch_in_order(project):
    names = make_two_patches(project)
    assert names == ["0001-cache-tweak.patch", "0002-add-mul.patch"]
    out = json.loads(project.apply("--force", "--json").output)
    assert [p["name"] for p in out["patches"]] == names
    log = git.core.out(project.tree, "log", "--format=%s|%an", f"{out['base_commit']}..HEAD").splitlines()
    assert log == ["add-mul: add mul()|Seam Dev", "cache-tweak: mark line 10|Seam Dev"]
    assert "line 10 (seam)" in (project.tree / "vllm/config/cache.py").read_text()


def test_same_inputs_give_the_same_commits(project):
    make_two_patches(project)
    first = json.loads(project.apply("--force", "--json").output)["head"]
    second = json.loads(project.apply("--force", "--json").output)["head"]
    assert first == second


def test_refresh_round_trip_is_byte_stable(project):
    make_two_patches(project)
    before = patch_bytes(project)
    series_before = (project.root / "series").read_bytes()
    project.apply("--force")
    out = json.loads(project.refresh("--json").output)["exported"]
    assert {r["status"] for r in out} == {"unchanged"}
    assert patch_bytes(project) == before
    assert (project.root / "series").read_bytes() == series_before
    text = before["0001-cache-tweak.patch"].decode()
    assert text.startswith("From 0000000000000000000000000000000000000000 ")
    assert "\nDate:" not in text and not re.search(r"^-- \n\d", text, re.M)
    assert re.search(r"^index [0-9a-f]{40}\.\.[0-9a-f]{40} 100644$", text, re.M)
    assert "--- a/vllm/config/cache.py\n+++ b/vllm/config/cache.py\n" in text


def _shift_first_hunk(text: str, delta: int) -> str:
    def shift(m):
        return f"@@ -{int(m.group(1)) + delta},{m.group(2)} +{int(m.group(3)) + delta},{m.group(4)} @@"

    return re.sub(r"@@ -(\d+),(\d+) \+(\d+),(\d+) @@", shift, text, count=1)


def test_hunk_needing_an_offset_is_refused_with_details(project):
    make_two_patches(project)
    p = project.root / "patches/0001-cache-tweak.patch"
    p.write_text(_shift_first_hunk(p.read_text(), 2))
    res = project.apply("--force", expect=3)
    err = res.stderr
    assert "0001-cache-tweak.patch: vllm/config/cache.py: hunk 1" in err
    assert "does not apply at line 9" in err
    assert "offset -2" in err and "strict mode refuses offsets" in err
    assert "next:" in err


def test_hunk_needing_fuzz_is_refused(project):
    make_two_patches(project)
    p = project.root / "patches/0001-cache-tweak.patch"
    p.write_text(p.read_text().replace("\n # line 7\n", "\n # line seven\n", 1))
    err = project.apply("--force", expect=3).stderr
    assert "expected '# line seven'" in err and "found    '# line 7'" in err
    assert "would need fuzz 1" in err


def test_failing_last_patch_leaves_the_previous_tree(project):
    make_two_patches(project)
    project.apply("--force")
    head = git.repo.head(project.tree)
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("     return a - b\n", "     return b - a\n"))
    project.apply(expect=3)
    assert git.repo.head(project.tree) == head
    assert git.index.status_porcelain(project.tree) == []
    assert not [x for x in project.tree.parent.iterdir() if x.name.startswith(".")]


def _leftovers(project) -> list[str]:
    """What runs left beside the tree or in its .git (scratch trees, private index files)."""
    beside = [
        x.name for x in project.tree.parent.iterdir() if x.name.startswith(".") and "lock" not in x.name
    ]
    return beside + [x.name for x in (project.tree / ".git").glob("tkv-seam-index*")]


@pytest.mark.parametrize("in_place", [True, False], ids=["in-place", "aside"])
def test_a_run_killed_during_the_build_leaves_the_old_tree_and_the_next_cleans_up(
    project, crash_at, in_place
):
    make_two_patches(project)
    project.apply("--force")
    head = git.repo.head(project.tree)
    if not in_place:  # an untracked file + --force takes the build-aside path
        (project.tree / "scratch.txt").write_text("mine\n")
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("return a * b", "return b * a"))
    # killed (SIGKILL) as the second patch is replayed: commits half made, nothing moved
    crash_at("tkvseam.tree.commits.replay_file", *project.argv("apply", "--base", NAME, "--force"), nth=2)
    assert git.repo.head(project.tree) == head
    assert git.index.status_porcelain(project.tree) == ([] if in_place else ["?? scratch.txt"])
    project.apply("--force")  # the next run removes what the killed one left, then applies
    assert not _leftovers(project)
    assert "return b * a" in (project.tree / "vllm/engine/arg_utils.py").read_text()


def test_a_run_killed_between_the_swap_renames_is_recovered(project, crash_at):
    make_two_patches(project)
    project.apply("--force")
    head = git.repo.head(project.tree)
    (project.tree / "scratch.txt").write_text("mine\n")  # untracked + --force: build aside, swap
    crash_at("os.replace", *project.argv("apply", "--base", NAME, "--force"), after=True, when=".old-")
    assert not project.tree.exists()
    olds = list(project.tree.parent.glob(f".{project.tree.name}.old-*"))
    assert len(olds) == 1  # recoverable: the previous tree is intact beside the target
    err = project.apply(expect=5).stderr  # the next run puts it back first, then refuses: it is dirty
    assert "scratch.txt" in err
    assert git.repo.head(project.tree) == head and (project.tree / "scratch.txt").read_text() == "mine\n"
    assert not [x for x in project.tree.parent.glob(".*") if "lock" not in x.name]


def test_a_run_killed_during_the_in_place_switch_is_finished_next_run(project, crash_at):
    make_two_patches(project)
    project.apply("--force")
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("return a * b", "return b * a"))
    # killed after the files moved, before the branch and the state do
    crash_at("tkvseam.git.index.switch_worktree", *project.argv("apply", "--base", NAME), after=True)
    assert json.loads((project.tree / ".git/tkv-seam.json").read_text())["pending"] is True
    out = json.loads(project.apply("--json").output)
    assert out["up_to_date"] is True
    assert "return b * a" in (project.tree / "vllm/engine/arg_utils.py").read_text()
    assert git.index.status_porcelain(project.tree) == []
    assert git.repo.head(project.tree) == out["head"]


def test_dirty_tree_is_never_overwritten(project):
    make_two_patches(project)
    project.apply("--force")
    (project.tree / "vllm/engine/arg_utils.py").write_text("my edit\n")
    (project.tree / "notes.txt").write_text("untracked\n")
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("a * b", "b * a"))
    err = project.apply(expect=5).stderr
    assert "uncommitted changes" in err and "vllm/engine/arg_utils.py" in err and "make refresh" in err
    assert (project.tree / "vllm/engine/arg_utils.py").read_text() == "my edit\n"
    assert (project.tree / "notes.txt").exists()


def test_unrefreshed_commits_are_never_overwritten(project):
    project.apply()
    project.commit_in_tree("vllm/new.py", "x = 1\n", message("new-file"))
    (project.root / "series").write_text("")  # an edit to the inputs forces a rebuild
    (project.root / "patches" / "unused").write_text("")
    err = project.apply(expect=5).stderr
    assert "commits that are not in patches/" in err and "make refresh" in err
    assert (project.tree / "vllm/new.py").exists()


def test_apply_from_git_source(project, upstream):
    out = json.loads(project.apply("--git", str(upstream.root), "--json").output)
    assert out["source"] == "git" and out["base_commit"] == upstream.commit
    assert git.core.out(project.tree, "rev-parse", "HEAD") == upstream.commit


# --------------------------------------------------------------------------- issue 8, items 2-5


def _crash_right_after_switch_starts(project, crash_at):
    """Edit patch 2, then run apply and kill it right after '==> switch' (state saved pending)."""
    make_two_patches(project)
    project.apply("--force")
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("return a * b", "return b * a"))
    crash_at("tkvseam.git.index.switch_worktree", *project.argv("apply", "--base", NAME))


def test_interrupted_switch_never_discards_edits_made_after_it(project, crash_at):
    _crash_right_after_switch_starts(project, crash_at)
    (project.tree / "vllm/config/cache.py").write_text("my edit after the crash\n")
    (project.tree / "notes.txt").write_text("mine\n")
    err = project.apply(expect=None).stderr
    assert (project.tree / "vllm/config/cache.py").read_text() == "my edit after the crash\n"
    assert (project.tree / "notes.txt").read_text() == "mine\n"
    assert "half-switched" in err and "vllm/config/cache.py" in err and "notes.txt" in err and "next:" in err
    project.apply(expect=5)


def test_interrupted_switch_never_discards_commits_made_after_it(project, crash_at):
    _crash_right_after_switch_starts(project, crash_at)
    project.commit_in_tree("vllm/mine.py", "z = 3\n", message("mine", "my commit"))
    head = git.repo.head(project.tree)
    err = project.apply(expect=5).stderr
    assert "mine: my commit" in err
    assert git.repo.head(project.tree) == head
    out = json.loads(project.apply("--force", "--json").stdout)  # FORCE finishes it, keeping the commit
    (ref,) = out["dropped"]
    assert git.core.out(project.tree, "log", "--format=%s", "-1", ref) == "mine: my commit"
    assert "return b * a" in (project.tree / "vllm/engine/arg_utils.py").read_text()


def test_refresh_refuses_a_half_switched_tree_before_writing(project, crash_at):
    _crash_right_after_switch_starts(project, crash_at)
    before = patch_bytes(project)
    series = (project.root / "series").read_bytes()
    res = project.refresh(expect=5)
    assert "half-switched" in res.stderr and "next:" in res.stderr
    assert patch_bytes(project) == before and (project.root / "series").read_bytes() == series
    project.apply()  # finishes the switch (nothing was added since)
    assert "return b * a" in (project.tree / "vllm/engine/arg_utils.py").read_text()
    project.refresh()


def test_force_lists_what_it_drops_and_keeps_it_in_a_ref(project):
    make_two_patches(project)
    project.apply("--force")
    project.commit_in_tree("vllm/mine.py", "z = 3\n", message("mine", "my unrefreshed commit"))
    mine = git.repo.head(project.tree)
    (project.tree / "vllm/engine/arg_utils.py").write_text("my edit\n")
    (project.tree / "notes.txt").write_text("untracked\n")
    res = project.apply("--force", "--json")
    assert "--force drops" in res.stderr
    assert "M vllm/engine/arg_utils.py" in res.stderr and "?? notes.txt" in res.stderr
    assert f"{mine[:12]} mine: my unrefreshed commit" in res.stderr
    (ref,) = json.loads(res.stdout)["dropped"]
    assert ref.startswith("refs/tkv-seam/dropped/") and ref in res.stderr
    assert git.core.out(project.tree, "show", f"{ref}:notes.txt") == "untracked"
    assert git.core.out(project.tree, "show", f"{ref}:vllm/engine/arg_utils.py") == "my edit"
    assert git.core.out(project.tree, "rev-parse", f"{ref}^") == mine
    assert git.index.status_porcelain(project.tree) == []


def test_in_place_switch_refuses_to_overwrite_an_ignored_file_a_patch_adds(project):
    project.apply()
    project.commit_in_tree("vllm/new.py", "x = 1\n", message("new-file", "add new.py"))
    project.refresh()
    saved = patch_bytes(project)
    project.write_series()
    (project.root / "patches/0001-new-file.patch").unlink()
    project.apply("--force")  # the tree is the bare base again, clean
    (project.root / "series").write_text("0001-new-file.patch\n")
    (project.root / "patches/0001-new-file.patch").write_bytes(saved["0001-new-file.patch"])
    (project.tree / ".git/info/exclude").write_text("vllm/new.py\n")
    (project.tree / "vllm/new.py").write_text("my ignored file\n")
    err = project.apply(expect=5).stderr
    assert "vllm/new.py" in err and "ignored" in err and "next:" in err
    assert (project.tree / "vllm/new.py").read_text() == "my ignored file\n"
    res = project.apply("--force")
    assert "sets aside" in res.stderr
    (kept,) = (project.tree / ".git/tkv-seam-dropped").glob("*/vllm/new.py")
    assert kept.read_text() == "my ignored file\n"
    assert (project.tree / "vllm/new.py").read_text() == "x = 1\n"


def test_tree_state_saves_atomically_and_reads_older_files(project, crash_at):
    from tkvseam.tree.state import TreeState

    make_two_patches(project)
    path = TreeState.path(project.tree)
    before = path.read_bytes()
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("return a * b", "return b * a"))
    # killed while saving the new state (its first save: the pending switch), before the rename
    crash_at("os.replace", *project.argv("apply", "--base", NAME), when="tkv-seam.json")
    assert path.read_bytes() == before  # the old file, whole
    old = {k: v for k, v in json.loads(before).items() if k in ("base", "source", "base_commit")}
    old |= {"tree": "/elsewhere", "upstream_commit": "x", "head": "y", "digest": "z", "patches": []}
    path.write_text(json.dumps(old | {"schema": 2, "future_field": 1}))  # an unknown field is ignored
    state = TreeState.load(project.tree)
    assert state.head == "y" and state.kind == "apply"
    # no schema: a development version's state (0.1.0 was never released): not read, so the tree
    # is not one apply replaces (refused, exit 5), never taken for another
    path.write_text(json.dumps(old))
    assert TreeState.load(project.tree) is None
    assert "was not made by tkv-seam apply" in project.apply(expect=5).stderr
    path.write_text(json.dumps(old | {"schema": 99}))  # a newer tkv-seam's
    err = project.apply(expect=1).stderr
    assert "schema 99" in err and "next:" in err


@pytest.mark.parametrize("where", ["detached", "own-branch"])
def test_a_switch_from_another_checkout_ends_on_the_seam_branch(project, where):
    """The user checked out a detached commit or a branch of their own in the tree, then re-applied:
    the tree ends on the `seam` branch at the new head, clean; their branch is left where it was."""
    make_two_patches(project)
    first = json.loads(project.apply("--force", "--json").output)["head"]
    if where == "detached":
        git.core.run(project.tree, "checkout", "-q", "--detach", "HEAD~1")
    else:
        git.core.run(project.tree, "checkout", "-q", "-b", "mine", "HEAD~1")
    p = project.root / "patches/0002-add-mul.patch"
    p.write_text(p.read_text().replace("return a * b", "return b * a"))
    out = json.loads(project.apply("--force", "--json").stdout)  # stderr: what --force kept
    assert out["head"] != first
    assert git.repo.branch(project.tree) == "refs/heads/seam"
    assert git.repo.head(project.tree) == out["head"]
    assert git.index.status_porcelain(project.tree) == []
    if where == "own-branch":
        assert git.core.out(project.tree, "rev-parse", "mine") == git.core.out(
            project.tree, "rev-parse", f"{first}~1"
        )


def test_a_patch_file_reverted_by_hand_the_hint_and_apply_agree_and_keep_the_tree_commits(project):
    """Issue 37: after a refreshed edit was reverted in patches/ by hand, refresh refused and said
    apply keeps the tree's commits in a ref; plain apply replaced the tree and kept no ref."""
    make_two_patches(project)
    patch = project.root / "patches/0002-add-mul.patch"
    before = patch.read_bytes()
    # the README's edit recipe: change the patch's file, fold it into its commit, refresh
    text = (project.tree / "vllm/engine/arg_utils.py").read_text()
    (project.tree / "vllm/engine/arg_utils.py").write_text(text.replace("return a * b", "return b * a"))
    git.core.run(project.tree, "commit", "-qa", "--amend", "--no-edit")
    project.refresh()
    edited = git.repo.head(project.tree)
    assert patch.read_bytes() != before
    patch.write_bytes(before)  # reverted by hand (git checkout patches/)
    err = project.refresh(expect=5).stderr
    hint = err.split("next: ", 1)[1]
    assert f"`make apply BASE={NAME}` (the tree made anew from them; its commits kept in a ref" in hint
    res = project.apply("--json")  # what the hint says: plain apply
    (ref,) = json.loads(res.stdout)["dropped"]
    assert ref.startswith("refs/tkv-seam/dropped/") and ref in res.stderr
    assert git.repo.resolve(project.tree, ref) == edited  # the refreshed edit, kept
    assert b"return b * a" in git.core.run(project.tree, "show", f"{ref}:vllm/engine/arg_utils.py").stdout
    assert "return a * b" in (project.tree / "vllm/engine/arg_utils.py").read_text()  # the queue's now
    assert project.refresh().stdout  # the tree is the queue again: refresh goes through
    assert patch.read_bytes() == before
    # nothing changed since: the next apply keeps nothing new
    assert json.loads(project.apply("--json").stdout)["dropped"] == []


def test_a_changed_queue_whose_old_patches_the_project_git_holds_keeps_no_ref(project):
    """The queue changed by git (a pull, a checkout): the tree's commits are in the project's git
    as patch files, so apply replaces them without keeping a ref (``make clean`` stays free)."""
    make_two_patches(project)
    identity = ["-c", "user.name=Dev", "-c", "user.email=dev@example.invalid"]
    git.core.run(project.root, "init", "-q")
    git.core.run(project.root, "add", "-A", "series", "patches")
    git.core.run(project.root, *identity, "commit", "-qm", "the queue")
    patch = project.root / "patches/0002-add-mul.patch"
    patch.write_text(patch.read_text().replace("return a * b", "return b * a"))  # as a pull would
    res = project.apply("--json")
    out = json.loads(res.stdout)
    assert out["dropped"] == [] and not git.repo.refs(project.tree, "refs/tkv-seam/dropped/")
    assert "return b * a" in (project.tree / "vllm/engine/arg_utils.py").read_text()
    # said, not silent: the user knows where the replaced commits are (the refresh hint says so too)
    assert (
        "in the project's git as patch files already" in res.stderr
        and "without keeping them in a ref" in (res.stderr)
    )


def test_apply_over_commits_says_refresh_keeps_them_and_over_edits_says_commit_them(project):
    """Issue 37: "keep it: commit it" was said for what is already a commit."""
    make_two_patches(project)
    project.commit_in_tree("vllm/extra.py", "y = 2\n", message("extra-file", "add extra.py"))
    patch = project.root / "patches/0001-cache-tweak.patch"
    patch.write_text(patch.read_text().replace("Changes things.", "Edited."))  # apply has work to do
    hint = project.apply(expect=5).stderr.split("next: ", 1)[1]
    assert hint.startswith(f"keep the commits: `make refresh BASE={NAME}` (writes them into the queue)")
    assert "commit them" not in hint
    (project.tree / "vllm/extra.py").write_text("y = 3\n")
    hint = project.apply(expect=5).stderr.split("next: ", 1)[1]
    assert hint.startswith(f"keep the changes: commit them, then `make refresh BASE={NAME}`")
