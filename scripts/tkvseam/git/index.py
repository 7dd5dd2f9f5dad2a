"""Named git operations on the work tree and the index, and the plumbing that makes objects without them.

Plumbing sequences (a private index of this run, blobs, trees, commits made without
touching the work tree or any ref) keep what the tool drops and build commits transactionally.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .core import FIXED_DATE, TOOL, Person, _ok, _z, out, run
from .repo import head

PRIVATE_INDEX = "tkv-seam-index-"  # + pid and random: one run's index file in .git

# --------------------------------------------------------------------------- work tree and index


def toplevel(path: Path) -> Path | None:
    """The work tree ``path`` is in, or None when it is in no git repository."""
    proc = run(path, "rev-parse", "--show-toplevel", check=False)
    return Path(proc.stdout.decode().strip()) if proc.returncode == 0 else None


def status_paths(repo: Path, paths: list[str] = ()) -> list[tuple[str, str]]:  # type: ignore[assignment]
    """(two-letter status, path) of every uncommitted change under ``paths`` (default: all),
    untracked files included."""
    # -z: paths verbatim (no quoting of odd names); --no-renames: one path per entry
    args = ["status", "--porcelain", "-z", "--no-renames", "--untracked-files=all", "--", *paths]
    text = run(repo, *args).stdout
    rows = []
    for entry in text.decode("utf-8", "surrogateescape").split("\0"):
        if entry:
            rows.append((entry[:2], entry[3:]))
    return rows


def ignored_paths(repo: Path) -> list[str]:
    """The files git ignores in the work tree (``.gitignore``, ``.git/info/exclude``); a directory
    ignored as a whole is one entry (``.venv/``); empty directories are left out (nothing in them)."""
    args = [
        "ls-files",
        "-z",
        "--others",
        "--ignored",
        "--exclude-standard",
        "--directory",
        "--no-empty-directory",
    ]
    return _z(run(repo, *args).stdout)


def ignored_repositories(repo: Path) -> list[str]:
    """The git repositories inside ignored directories (``dir/``): git lists one as a directory,
    not descending into it."""
    return [
        p
        for p in _z(run(repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard").stdout)
        if p.endswith("/")
    ]


def status_porcelain(repo: Path) -> list[str]:
    """Uncommitted changes, including untracked files (ignored files do not count)."""
    text = run(repo, "status", "--porcelain", "--untracked-files=all").stdout.decode()
    return [line for line in text.splitlines() if line.strip()]


def staged_paths(repo: Path) -> list[str]:
    return _z(run(repo, "diff", "--cached", "--name-only", "-z").stdout)


def unstaged_paths(repo: Path) -> list[str]:
    """Tracked files changed but not staged, and untracked files (not ignored)."""
    changed = _z(run(repo, "diff", "--name-only", "-z").stdout)
    return changed + _z(run(repo, "ls-files", "--others", "--exclude-standard", "-z").stdout)


def unmerged_paths(repo: Path) -> list[str]:
    return list(dict.fromkeys(_z(run(repo, "diff", "--name-only", "--diff-filter=U", "-z").stdout)))


def staged_diff(repo: Path) -> str:
    """What is staged against HEAD, without context (-U0)."""
    return run(repo, "diff", "--cached", "-U0").stdout.decode("utf-8", "surrogateescape")


def index_matches(repo: Path, rev: str = "HEAD") -> bool:
    """True when the index holds exactly the tree of ``rev``."""
    return _ok(repo, "diff", "--cached", "--quiet", rev)


def stage(repo: Path, paths: list[str] = (), force: bool = False) -> None:  # type: ignore[assignment]
    """Stage ``paths`` (default: the whole tree): additions, changes and deletions (-A).

    ``force``: ignored files too (a base tree from an sdist holds files its .gitignore names).
    """
    gone = [p for p in paths if not os.path.lexists(Path(repo) / p)]
    if gone:  # a deletion already staged (or never tracked): git add would refuse its pathspec
        run(repo, "rm", "-q", "-r", "--cached", "--ignore-unmatch", "--", *gone)
    present = [p for p in paths if p not in gone]
    if present or not paths:
        run(repo, "add", "-A", *(["--force"] if force else []), "--", *(present or ["."]))


def unstage_remove(repo: Path, path: str) -> None:
    """Remove ``path`` from the index (not an error when it is not there)."""
    run(repo, "rm", "-q", "--cached", "-f", "--", path, check=False)


def checkout_paths(repo: Path, rev: str, paths: list[str]) -> None:
    run(repo, "checkout", rev, "--", *paths)


def checkout_branch(repo: Path, name: str, rev: str) -> None:
    """Check out ``rev`` as branch ``name`` (created or reset).

    checkout.workers=0: parallel checkout (a vLLM base is ~7,400 files).
    """
    run(repo, "-c", "checkout.workers=0", "checkout", "--quiet", "-B", name, rev)


def switch_worktree(repo: Path, new: str) -> None:
    """Move a clean work tree and index from HEAD to ``new`` touching only the files that differ.

    read-tree -m -u: a two-tree merge that updates the files (HEAD itself is not moved).
    """
    run(repo, "read-tree", "-m", "-u", "HEAD", new)


def reset_hard(repo: Path, rev: str = "HEAD") -> None:
    """Make the tracked files, index and branch exactly ``rev`` (untracked files stay)."""
    run(repo, "reset", "--quiet", "--hard", rev)


def reset_soft(repo: Path, rev: str) -> None:
    """Move the branch to ``rev``; the index and work tree stay (what was committed is staged)."""
    run(repo, "reset", "--quiet", "--soft", rev)


def reset_clean(repo: Path, rev: str = "HEAD") -> None:
    """Make the work tree, index and branch exactly ``rev``; untracked files go (ignored stay)."""
    reset_hard(repo, rev)
    run(repo, "clean", "-fdq")


def commit_index(
    repo: Path, message: str, author: Person, date: str = FIXED_DATE, empty: bool = False
) -> str:
    """Commit what is staged with ``message`` (byte for byte: -F -) and ``author``; return the id.

    --no-verify: no hooks of the user's run in a tree the tool made.
    """
    run(
        repo,
        "commit",
        "-q",
        "--no-verify",
        *(["--allow-empty"] if empty else []),
        "-F",
        "-",
        "--author",
        str(author),
        env={"GIT_AUTHOR_DATE": date},
        input=message.encode(),
    )
    return head(repo)


def commit(
    repo: Path, message: str, author: str | Person, paths: list[str] | None = None, date: str = FIXED_DATE
) -> str:
    """Stage ``paths`` (default: the whole tree, ignored files too) and commit (empty allowed).

    The date is fixed so that the same inputs always give the same commit id.
    """
    stage(repo, paths or [], force=True)
    who = author if isinstance(author, Person) else Person.parse(author)
    return commit_index(repo, message, who, date, empty=True)


def apply_3way(repo: Path, patch: str) -> tuple[bool, str]:
    """``git apply --3way`` one patch text into the work tree and index: (clean, error lines).

    --whitespace=nowarn: whitespace is the patch's own business, not a warning to show.
    """
    proc = run(repo, "apply", "--3way", "--whitespace=nowarn", "-", input=patch.encode(), check=False)
    errors = [x for x in proc.stderr.decode(errors="replace").splitlines() if x.startswith("error:")]
    return proc.returncode == 0, "; ".join(x.removeprefix("error: ") for x in errors) or "git apply failed"


def reverse_applies(repo: Path, patch: str) -> bool:
    """True when ``patch`` applies in reverse to the work tree (its change is already there)."""
    return _ok(repo, "apply", "--reverse", "--check", "-", input=patch.encode())


def index_stages(repo: Path, path: str) -> bytes:
    """The unmerged index entries of ``path`` (``ls-files -u`` lines), to put back later."""
    return run(repo, "ls-files", "-u", "--", path).stdout


def restore_stages(repo: Path, path: str, stages: bytes) -> None:
    """Put unmerged entries back for ``path`` (the stage-0 entry removed first)."""
    # --index-info: mode 0 removes the stage-0 entry, then the saved stages go back
    info = f"0 {'0' * 40}\t{path}\n".encode() + stages
    run(repo, "update-index", "--index-info", input=info)


# --------------------------------------------------------------------------- plumbing


@contextmanager
def private_index(repo: Path, start: str | None) -> Iterator[dict[str, str]]:
    """An index file of this run only, loaded with ``start`` (None: a copy of the repository's
    own index); yields the env that selects it.

    The repository's real index and work tree are not touched; the file is removed at the end.
    A per-run name: two runs never share (or delete) each other's index.
    """
    index = Path(repo).absolute() / ".git" / f"{PRIVATE_INDEX}{os.getpid()}-{secrets.token_hex(4)}"
    env = {"GIT_INDEX_FILE": str(index)}  # absolute: git -C would resolve a relative one twice
    try:
        if start is None:
            real = Path(repo) / ".git" / "index"
            if real.exists():
                index.write_bytes(real.read_bytes())
            else:
                run(repo, "read-tree", "--empty", env=env)
        else:
            run(repo, "read-tree", start, env=env)
        yield env
    finally:
        index.unlink(missing_ok=True)
        index.with_name(index.name + ".lock").unlink(missing_ok=True)


def hash_blob(repo: Path, data: bytes) -> str:
    """Store ``data`` as a blob; return its id."""
    # -w: write the object (not only compute the id); --stdin: the bytes, not a path
    return out(repo, "hash-object", "-w", "--stdin", input=data)


def holds_blob(repo: Path, data: bytes) -> bool:
    """Whether ``repo``'s object store holds ``data`` as a blob (in a commit, the index, a stash)."""
    sha = out(repo, "hash-object", "--stdin", input=data)  # no -w: the id only, nothing written
    # -e: exit 0 when the object exists, quietly
    return run(repo, "cat-file", "-e", sha, check=False).returncode == 0


def update_index(repo: Path, index_env: dict[str, str], entries: list[tuple[str, str, str]]) -> None:
    """Set ``(mode, blob id, path)`` entries in the private index; mode "0" removes the path."""
    lines = [f"{mode} {'0' * 40 if mode == '0' else sha}\t{path}" for mode, sha, path in entries]
    # --index-info: many entries in one call, read from stdin in ls-files --stage format
    run(repo, "update-index", "--index-info", env=index_env, input=("\n".join(lines) + "\n").encode())


def stage_in(repo: Path, index_env: dict[str, str], paths: list[str] = (), ignored: bool = False) -> None:  # type: ignore[assignment]
    """Stage the work tree's ``paths`` (default: all; ``ignored``: the files git ignores too) into
    the private index."""
    run(repo, "add", "-A", *(["--force"] if ignored else []), "--", *(paths or ["."]), env=index_env)


def resolve_unmerged_in(repo: Path, index_env: dict[str, str]) -> None:
    """Replace the unmerged entries of the private index by the work-tree files (markers and all)."""
    paths = list(
        dict.fromkeys(_z(run(repo, "diff", "--name-only", "--diff-filter=U", "-z", env=index_env).stdout))
    )
    for path in paths:
        run(repo, "update-index", "--force-remove", "--", path, env=index_env)
        if (Path(repo) / path).exists():
            run(repo, "update-index", "--add", "--", path, env=index_env)


def write_tree(repo: Path, index_env: dict[str, str]) -> str:
    """The tree object of the private index; return its id."""
    return out(repo, "write-tree", env=index_env)


def commit_tree(repo: Path, tree: str, parents: list[str], message: str, author: Person = TOOL) -> str:
    """A commit of ``tree`` on ``parents`` (no ref moves); return its id."""
    # -F -: the message from stdin, byte for byte (no -m paragraph rewrapping)
    args = [a for p in parents for a in ("-p", p)]
    return out(repo, "commit-tree", tree, *args, "-F", "-", env=author.author_env(), input=message.encode())


def snapshot_worktree(
    repo: Path, message: str, parent: str | None = None, start: str = "HEAD", ignored: bool = False
) -> str:
    """A commit on ``parent`` (default HEAD) holding the work tree as it is (tracked and untracked;
    ``ignored``: the files git ignores too), starting from the tree of ``start``.

    Nothing in the repository changes but new objects: used to keep what the tool drops.
    """
    with private_index(repo, start) as env:
        # -A: modified, deleted and untracked files; --force (ignored): the ignored ones as well
        stage_in(repo, env, ignored=ignored)
        tree = write_tree(repo, env)
    return commit_tree(repo, tree, [parent or head(repo)], message)


def snapshot_index(repo: Path, message: str) -> str:
    """A commit on HEAD holding what is staged; an unmerged path is kept as its work-tree file."""
    with private_index(repo, None) as env:
        resolve_unmerged_in(repo, env)
        tree = write_tree(repo, env)
    return commit_tree(repo, tree, [head(repo)], message)


def snapshot_files(repo: Path, files: dict[str, bytes], message: str) -> str:
    """A root commit holding ``files`` (path -> bytes): keeps data that lives outside any commit."""
    with private_index(repo, "--empty") as env:
        entries = [("100644", hash_blob(repo, data), path) for path, data in sorted(files.items())]
        if entries:
            update_index(repo, env, entries)
        tree = write_tree(repo, env)
    return commit_tree(repo, tree, [], message)
