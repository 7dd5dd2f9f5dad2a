"""Named git operations on repositories, revisions, content and diffs (nothing here writes a work tree)."""

from __future__ import annotations

from pathlib import Path

from .core import Commit, Person, TreeEntry, _ok, _z, out, run

# --------------------------------------------------------------------------- repositories


def init(repo: Path, branch: str = "main") -> None:
    run(None, "init", "-q", "-b", branch, str(repo))


def clone_local(src: Path, dest: Path) -> None:
    """A clone of the local repository ``src`` without a work tree and without its remote.

    --local: hard links to the objects (fast, no copy); --no-checkout: the caller checks
    out what it needs; the remote goes so that nothing points back at the cache.
    """
    run(None, "clone", "--quiet", "--no-checkout", "--local", str(src), str(dest))
    run(dest, "remote", "remove", "origin", check=False)


def clone_bare(url: str, dest: Path) -> None:
    run(None, "clone", "--quiet", "--bare", url, str(dest))


def fetch(repo: Path, source: Path | str, *refspecs: str) -> None:
    """Fetch ``refspecs`` (or commit ids) from ``source``; --no-tags: only what is named."""
    run(repo, "fetch", "--quiet", "--no-tags", str(source), *refspecs)


def fetch_tags(repo: Path, url: str) -> None:
    """Every tag of ``url``; --force: a moved tag is taken (the caller checks it against the pin)."""
    run(repo, "fetch", "--quiet", "--tags", "--force", url)


def bundle(repo: Path, dest: Path, refs: list[str]) -> None:
    """A bundle file holding ``refs`` and every object they reach (``git clone <file>`` restores)."""
    run(repo, "bundle", "create", str(dest), *refs)


def fsck(repo: Path, commit: str, full: bool) -> str | None:
    """The first problem git finds with what ``commit`` reaches, or None.

    --no-dangling: unreferenced objects are normal (old builds); ``full``: every object's
    content is hashed again, else only connectivity is checked (cheap).
    """
    args = ["fsck", "--no-dangling", "--no-progress"] + ([] if full else ["--connectivity-only"])
    proc = run(repo, *args, commit, check=False)
    if proc.returncode == 0:
        return None
    lines = proc.stderr.decode(errors="replace").strip().splitlines() or ["git fsck failed"]
    return lines[0]


# --------------------------------------------------------------------------- revisions


def head(repo: Path) -> str:
    return out(repo, "rev-parse", "HEAD")


def resolve(repo: Path, rev: str) -> str | None:
    """The object id ``rev`` names (``HEAD``, ``tag^{commit}``, ``c:path``), or None."""
    proc = run(repo, "rev-parse", "--verify", "--quiet", rev, check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def rev_parse(repo: Path, rev: str) -> str:
    """The object id ``rev`` names; SeamError when it names nothing."""
    return out(repo, "rev-parse", rev)


def tree_of(repo: Path, commit: str) -> str | None:
    return resolve(repo, f"{commit}^{{tree}}")


def commit_info(repo: Path, rev: str = "HEAD") -> Commit:
    """The commit ``rev``: id, parents, author and message."""
    # %x00 separators: a message may hold anything but NUL
    text = out(repo, "log", "-1", "--format=%H%x00%P%x00%an%x00%ae%x00%B", rev)
    cid, parents, name, email, message = text.split("\0", 4)
    return Commit(cid, tuple(parents.split()), Person(name, email), message.strip("\n") + "\n")


def commits_after(repo: Path, base: str, tip: str = "HEAD") -> list[str]:
    """The commits after ``base`` up to ``tip``, oldest first."""
    text = out(repo, "rev-list", "--reverse", f"{base}..{tip}")
    return text.split() if text else []


def merges_after(repo: Path, base: str, tip: str = "HEAD") -> list[str]:
    text = out(repo, "rev-list", "--merges", f"{base}..{tip}")
    return text.split() if text else []


def subjects(repo: Path, *revs: str) -> list[tuple[str, str]]:
    """(commit id, subject) of the commits ``revs`` select (e.g. ``B ^A``), newest first."""
    proc = run(repo, "log", "--format=%H %s", *revs, "--", check=False)
    text = proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else ""
    return [tuple(line.split(" ", 1)) if " " in line else (line, "") for line in text.splitlines()]


def line_commit(repo: Path, path: str, line: int, rev: str = "HEAD") -> str | None:
    """The commit that last changed line ``line`` of ``path`` at ``rev`` (git blame), or None when
    git cannot say (no such line or file)."""
    proc = run(repo, "blame", "--porcelain", "-L", f"{line},{line}", rev, "--", path, check=False)
    first = proc.stdout.decode("utf-8", "replace").split(" ", 1)[0] if proc.returncode == 0 else ""
    return first or None


def files_of(repo: Path, commit: str) -> list[str]:
    """The paths ``commit`` changes against its parent."""
    return out(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", commit).split()


def remote_url(repo: Path, name: str) -> str | None:
    """The URL of remote ``name``, or None when there is no such remote (or no repository)."""
    proc = run(repo, "remote", "get-url", name, check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def tag(repo: Path, name: str, rev: str) -> None:
    run(repo, "tag", "-f", name, rev)


def update_ref(repo: Path, ref: str, commit: str) -> None:
    run(repo, "update-ref", ref, commit)


def attach_head(repo: Path, ref: str) -> None:
    """Point HEAD at the branch ``ref`` (full name) without touching the index or the files."""
    run(repo, "symbolic-ref", "HEAD", ref)


def detach_head(repo: Path, commit: str) -> None:
    """Point HEAD at ``commit`` itself (detached) without touching the index or the files."""
    run(repo, "update-ref", "--no-deref", "HEAD", commit)


def is_ancestor(repo: Path, rev: str, of: str) -> bool:
    """``rev`` is ``of`` or one of its ancestors."""
    return run(repo, "merge-base", "--is-ancestor", rev, of, check=False).returncode == 0


def delete_ref(repo: Path, ref: str) -> None:
    run(repo, "update-ref", "-d", ref)


def stash_entries(repo: Path) -> list[tuple[str, str]]:
    """(commit, message) of every stash entry, newest first (``stash@{0}``, ``stash@{1}``, …): the
    ref ``refs/stash`` holds only the newest, its reflog the others."""
    if resolve(repo, "refs/stash") is None:
        return []
    text = out(repo, "log", "-g", "--format=%H%x00%gs", "refs/stash", "--")  # -g: walk the reflog
    return [tuple(line.split("\0", 1)) for line in text.splitlines() if "\0" in line]  # type: ignore[misc]


def stash_store(repo: Path, commit: str, message: str) -> None:
    """Add ``commit`` (a stash entry fetched in) as the newest stash entry, with ``message``."""
    run(repo, "stash", "store", "-q", "-m", message, commit)


def linked_worktrees(repo: Path) -> list[tuple[str, str | None]]:
    """(path, branch or None) of each worktree ``git worktree add`` linked to ``repo`` (not itself)."""
    found: list[tuple[str, str | None]] = []
    for block in out(repo, "worktree", "list", "--porcelain").split("\n\n")[1:]:  # the first: repo
        lines = dict(line.split(" ", 1) if " " in line else (line, "") for line in block.splitlines())
        if "worktree" in lines:
            found.append((lines["worktree"], lines.get("branch")))
    return found


def refs(repo: Path, prefix: str) -> list[str]:
    """The full names of the refs under ``prefix``."""
    return out(repo, "for-each-ref", "--format=%(refname)", prefix).split()


def branch(repo: Path) -> str | None:
    """The full name of the checked-out branch, or None (detached)."""
    proc = run(repo, "symbolic-ref", "--quiet", "HEAD", check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


# --------------------------------------------------------------------------- content


def show(repo: Path, rev: str, path: str) -> bytes | None:
    """The bytes of ``path`` at ``rev``, or None when ``rev`` has no such file."""
    proc = run(repo, "show", f"{rev}:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None


def show_required(repo: Path, rev: str, path: str) -> bytes:
    """The bytes of ``path`` at ``rev``; SeamError naming both when it is not there."""
    return run(repo, "show", f"{rev}:{path}").stdout


def exists_at(repo: Path, rev: str, path: str) -> bool:
    return _ok(repo, "cat-file", "-e", f"{rev}:{path}")


def archive(repo: Path, rev: str, paths: list[str]) -> bytes:
    """A tar of ``paths`` at ``rev``."""
    return run(repo, "archive", "--format=tar", rev, *paths).stdout


def files_at(repo: Path, rev: str, path: str) -> list[str]:
    """Every file under ``path`` at ``rev`` (recursive), as tree-relative paths."""
    return _z(run(repo, "ls-tree", "-r", "-z", "--name-only", rev, "--", path).stdout)


def ls_tree(repo: Path, commit: str, paths: list[str]) -> list[TreeEntry]:
    """The entries ``paths`` name at ``commit`` (each a file, link or directory; not recursive).
    No path names nothing (``git ls-tree`` without one lists the whole top level)."""
    if not paths:
        return []
    text = run(repo, "ls-tree", "-z", commit, "--", *paths).stdout
    rows = []
    for line in _z(text):
        meta, _, path = line.partition("\t")
        mode, _, rest = meta.partition(" ")
        rows.append(TreeEntry(mode, rest.split(" ", 1)[1], path))
    return rows


def tree_entry(repo: Path, commit: str, path: str) -> TreeEntry | None:
    """The entry of ``path`` at ``commit``; None when absent.

    Raises SeamError when git cannot read the commit or a tree on the way (a corrupt
    or missing object), which a plain "does it exist" check would report as absent.
    """
    line = out(repo, "ls-tree", "--full-tree", commit, "--", path)
    if not line:
        return None
    meta, _, name = line.partition("\t")
    mode, _, rest = meta.partition(" ")
    return TreeEntry(mode, rest.split(" ", 1)[1], name)


def read_blob(repo: Path, sha: str) -> bytes:
    """The bytes of blob ``sha`` (SeamError when the object is missing or corrupt)."""
    return run(repo, "cat-file", "blob", sha).stdout


def blob_id(repo: Path, commit: str, path: str) -> str | None:
    """The blob id of ``path`` at ``commit``, or None when the commit has no such file."""
    return resolve(repo, f"{commit}:{path}")


def file_blob_id(repo: Path, path: str) -> str | None:
    """The blob id the work-tree file ``path`` would have, or None when it does not exist."""
    full = Path(repo) / path
    if not full.exists() and not full.is_symlink():
        return None
    # --no-filters: the bytes as they are on disk, like the tool writes them
    return out(repo, "hash-object", "--no-filters", "--", path)


def grep(repo: Path, pattern: str, rev: str, path: str) -> list[str]:
    """``rev:path:line:text`` of each line matching the extended regexp ``pattern`` under ``path``."""
    proc = run(repo, "grep", "-n", "-E", pattern, rev, "--", path, check=False)
    return proc.stdout.decode(errors="replace").splitlines()


# --------------------------------------------------------------------------- diffs


def changed_paths(
    repo: Path,
    a: str,
    b: str,
    paths: list[str] = (),
    only: str | None = None,  # type: ignore[assignment]
) -> list[str]:
    """The paths that differ between commits ``a`` and ``b`` (``only``: a --diff-filter)."""
    # --no-renames: one path per change
    args = ["diff", "--name-only", "--no-renames", "-z", a, b]
    if only:
        args.insert(3, f"--diff-filter={only}")
    return _z(run(repo, *args, "--", *paths).stdout)


def renames(repo: Path, a: str, b: str, paths: list[str], similarity: str = "30%") -> dict[str, list[str]]:
    """Old path -> new paths its content went to between commits ``a`` and ``b`` (renames and copies).

    diff.renameLimit=0: no limit (vLLM changes thousands of files between releases);
    -C: copies too, at ``similarity``.
    """
    text = out(
        repo,
        "-c",
        "diff.renameLimit=0",
        "diff",
        "-M",
        f"-C{similarity}",
        "--name-status",
        a,
        b,
        "--",
        *paths,
    )
    moves: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if parts[0][:1] in ("R", "C") and len(parts) == 3:
            moves.setdefault(parts[1], []).append(parts[2])
    return moves


def diff_files(repo: Path, a: str, b: str) -> str:
    """The unified diff (3 lines of context) between two blobs named ``rev:path``."""
    return run(repo, "diff", "-U3", "--no-renames", a, b).stdout.decode("utf-8", "surrogateescape")


def format_patch(repo: Path, commit: str) -> bytes:
    """One commit as ``git format-patch`` text, made byte-stable.

    --zero-commit: the ``From <id>`` line is all zeros, so ids never churn;
    --full-index: full blob ids on ``index`` lines (a later 3-way finds the preimages);
    --no-signature: no git-version trailer; --no-stat: no diffstat (its layout varies);
    --no-renames: plain deletions/additions every tool reads; -N: no ``n/m`` numbering.
    """
    return run(
        repo,
        "format-patch",
        "-1",
        "--stdout",
        "--zero-commit",
        "--full-index",
        "--no-signature",
        "--no-stat",
        "--no-renames",
        "-N",
        "--encoding=UTF-8",
        commit,
    ).stdout
