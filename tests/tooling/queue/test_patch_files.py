"""Patch files: header fields, corrupt input, paths that leave the tree."""

from __future__ import annotations

import pytest

from tkvseam import git
from tkvseam.tree.commits import commit_series
from tkvseam.errors import ApplyError
from tkvseam.queue.header import PatchFormatError
from tkvseam.queue.patch import parse_text, path_problem
from tkvseam.progress import QUIET

from ..fixtures.queue import message

DIFF = """diff --git a/{p} b/{p}
index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644
--- a/{p}
+++ b/{p}
@@ -1,2 +1,2 @@
 a
-b
+c
"""


def apply_patch(tree, patch) -> None:
    """Apply ``patch`` the way ``apply`` does (``commits.commit_series``, exact replay, plumbing only)
    onto a commit of ``tree``'s files as they are; then check the result out."""
    if not (tree / ".git").exists():
        git.repo.init(tree)
    base = git.index.commit(tree, "base\n", "Base <base@example.invalid>")
    (applied,) = commit_series(tree, base, [patch], QUIET)
    git.index.reset_hard(tree, applied.commit)


def patch_text(path: str = "vllm/x.py", msg: str | None = None) -> str:
    msg = msg or message("demo", "demo change")
    subject, body = msg.split("\n", 1)
    return (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Seam Dev <dev@example.invalid>\n"
        f"Subject: [PATCH] {subject}\n{body}---\n" + DIFF.format(p=path)
    )


def test_header_fields_are_parsed_above_the_diff():
    msg = (
        message("demo", "demo change", "What it does.\n\nMore detail.").replace(
            "Reason: upstream lacks it\n", "Reason: upstream lacks it,\n and says so at length\n"
        )
        + "Guard: tests/test_math.py::test_guard\n"
    )
    p = parse_text(patch_text(msg=msg), "0001-demo.patch")
    h = p.header
    assert (h.slug, h.summary, h.author) == ("demo", "demo change", "Seam Dev <dev@example.invalid>")
    assert h.description == "What it does.\n\nMore detail."
    assert h.get("Reason") == ["upstream lacks it, and says so at length"]
    assert h.tests == ["tests/test_math.py::test_add"] and h.guards == ["tests/test_math.py::test_guard"]
    assert h.depends_on == []
    assert h.message == msg


@pytest.mark.parametrize(
    "path, reason",
    [
        ("../outside.py", "leaves the tree"),
        ("vllm/../../x.py", "leaves the tree"),
        ("/etc/passwd", None),
        (".git/hooks/post-commit", "path into .git"),
    ],
)
def test_paths_that_leave_the_tree_are_refused(path, reason):
    text = (
        patch_text(path).replace(f"a//{path[1:]}", f"a/{path}") if path.startswith("/") else patch_text(path)
    )
    if path.startswith("/"):
        # an absolute path appears without the a/ b/ prefixes
        text = text.replace(f"a/{path}", path).replace(f"b/{path}", path)
        with pytest.raises(PatchFormatError, match="prefix|absolute"):
            parse_text(text, "0001-demo.patch")
        assert path_problem(path) == "absolute path"
        return
    with pytest.raises(PatchFormatError, match=reason):
        parse_text(text, "0001-demo.patch")


def test_symlink_escape_is_refused_at_apply(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("a\nb\n")
    tree = tmp_path / "tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "link").symlink_to(outside)
    p = parse_text(patch_text("vllm/link/x.py"), "0001-demo.patch")
    with pytest.raises(ApplyError, match="goes through the symlink vllm/link: refused"):
        apply_patch(tree, p)
    assert (outside / "x.py").read_text() == "a\nb\n"


def test_symlink_creation_is_refused():
    text = (
        patch_text()
        .replace(
            "index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644\n",
            "new file mode 120000\nindex 0000000..2222222\n",
        )
        .replace("--- a/vllm/x.py", "--- /dev/null")
        .replace("@@ -1,2 +1,2 @@\n a\n-b\n+c\n", "@@ -0,0 +1 @@\n+/etc\n")
    )
    with pytest.raises(PatchFormatError, match="symlinks are not allowed"):
        parse_text(text, "0001-demo.patch")


def test_truncated_patch_is_reported_by_name():
    text = patch_text()
    cut = text[: text.rindex("-b\n")]
    with pytest.raises(PatchFormatError, match="0001-demo.patch: corrupt or truncated diff"):
        parse_text(cut, "0001-demo.patch")


def test_text_that_is_not_a_patch_is_an_error():
    with pytest.raises(PatchFormatError, match="no 'diff --git' section"):
        parse_text("hello\n", "0001-demo.patch")


def test_binary_hunk_is_refused():
    text = patch_text().split("diff --git")[0] + (
        "diff --git a/img.png b/img.png\nindex 1111111..2222222 100644\nBinary files a/img.png and b/img.png differ\n"
    )
    with pytest.raises(PatchFormatError, match="binary"):
        parse_text(text, "0001-demo.patch")


def test_modify_and_no_newline_at_end_are_exact(tmp_path):
    tree = tmp_path / "t"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm/x.py").write_text("a\nb")  # no final newline
    text = patch_text().replace("-b\n+c\n", "-b\n\\ No newline at end of file\n+c\n")
    apply_patch(tree, parse_text(text, "0001-demo.patch"))
    assert (tree / "vllm/x.py").read_text() == "a\nc\n"


def test_end_of_file_hunk_must_end_the_file(tmp_path):
    """A hunk without trailing context is anchored at the end (as patch and git apply do)."""
    tree = tmp_path / "t"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm/x.py").write_text("a\nb\nc\nmore\n")
    text = patch_text().replace("@@ -1,2 +1,2 @@\n a\n-b\n+c\n", "@@ -1,3 +1,4 @@\n a\n b\n c\n+d\n")
    with pytest.raises(ApplyError, match="the hunk ends the file"):
        apply_patch(tree, parse_text(text, "0001-demo.patch"))
    (tree / "vllm/x.py").write_text("a\nb\nc\n")
    apply_patch(tree, parse_text(text, "0001-demo.patch"))
    assert (tree / "vllm/x.py").read_text() == "a\nb\nc\nd\n"


def test_placement_is_structured_and_searches_the_whole_file():
    from tkvseam.queue.patch import _diagnose, split_lines

    text = patch_text().replace("@@ -1,2 +1,2 @@\n a\n-b\n+c\n", "@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n")
    hunk = parse_text(text, "0001-demo.patch").files[0].pfile[0]
    lines = split_lines("".join(f"pad {i}\n" for i in range(500)) + "a\nb\nd\nrest\n")
    pl = _diagnose(lines, hunk)
    assert (pl.kind, pl.line, pl.delta, pl.fuzz) == ("offset", 501, 500, 0)
    assert pl.status == "offset +500" and "offset +500" in pl.explain()
