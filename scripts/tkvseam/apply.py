"""Build the patched work tree: pristine base commit, then one commit per patch.

Strict: every hunk must match at exactly the line it names (``patch.replay_file``).

Crash safety. A run holds the tree's lock (``lock.locked``) from its first look at
the tree to its last write, so no two runs interleave. The commits are always made
first, with plumbing only (a private index of this run, blobs, trees, commit-tree),
so a crash or a failing patch before the tree moves leaves it as it was. The tree then
moves in one of two ways, each with a state a crash can leave: (a) in place (same base,
clean tree): the new state is saved marked ``pending`` (with the HEAD it starts from)
before ``read-tree -m -u``; the next run finds it pending and finishes the switch,
but only after checking that nothing was added since (uncommitted files that are in
neither the old nor the new commit, or commits beyond both), and refuses otherwise
(``finish_pending_switch``); ``refresh`` refuses a pending tree. (b) aside: the new tree
is built in ``.<tree>.tmp-*`` and swapped in with two renames; a crash between them
leaves ``.<tree>.old-*``, which the next run puts back before anything else
(``recover``). ``--force`` drops user work only after listing it and keeping it in
``refs/tkv-seam/dropped/<time>`` of the tree (``state.keep_dropped``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import git
from .bases import Base, base_repo
from .errors import TOOL, ApplyError, RefusedError, SeamError, VerifyError
from .lock import locked, tree_lock_path
from .patch import Patch, replay_file
from .progress import QUIET, Progress
from .series import Series, read_series
from .state import DROPPED_REFS, AppliedPatch, TreeState, UserWork, keep_dropped, load_state, user_work

__all__ = ["AppliedPatch", "ApplyResult", "TreeState", "apply_series", "load_state"]

BRANCH = "seam"
BASE_TAG = "tkv-seam-base"


@dataclass
class ApplyResult:
    tree: str
    base: str
    source: str
    base_commit: str
    upstream_commit: str
    head: str
    digest: str
    up_to_date: bool = False
    fetched_bytes: int = 0
    seconds: float = 0.0
    patches: list[AppliedPatch] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # refs keeping what --force dropped
    inputs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        data = asdict(self)
        data.pop("inputs")
        return data

    # What an apply result and the tree's recorded state have in common.
    SHARED = (
        "tree",
        "base",
        "source",
        "base_commit",
        "upstream_commit",
        "head",
        "digest",
        "patches",
        "inputs",
    )

    def state(self) -> TreeState:
        return TreeState(**{name: getattr(self, name) for name in self.SHARED})

    @classmethod
    def from_state(cls, state: TreeState) -> ApplyResult:
        return cls(**{name: getattr(state, name) for name in cls.SHARED})


class CorruptObject(VerifyError):
    """An object the base needs cannot be read (missing or corrupt)."""


def inputs_digest(base: Base, source: str, series: Series) -> str:
    h = hashlib.sha256()
    h.update(f"{base.name}\0{source}\0{base.sdist.sha256}\0{base.commit_prefix}\0".encode())
    h.update(series.digest().encode())
    return h.hexdigest()


def recover(tree: Path, progress: Progress = QUIET) -> None:
    """Undo what an interrupted run left beside the tree: put a swapped-out tree back, drop
    half-built ones. Call it holding the tree's lock (the ``.tmp-*`` may be another run's)."""
    parent = tree.parent
    if not parent.exists():
        return
    olds = sorted(parent.glob(f".{tree.name}.old-*"))
    if olds and not tree.exists():
        progress.step(f"restore {tree} from an interrupted run ({olds[-1].name})")
        os.replace(olds[-1], tree)
        olds = olds[:-1]
    for leftover in olds + sorted(parent.glob(f".{tree.name}.tmp-*")):
        shutil.rmtree(leftover, ignore_errors=True)


def _pending_work(tree: Path, state: TreeState) -> UserWork:
    """What a user added to a half-switched tree: a file counts as the switch's own only when
    the switch touches it and its content is that of the old or the new commit."""
    start = state.switch_from or state.head
    touched = set(git.out(tree, "diff", "--name-only", "--no-renames", "-z", start, state.head).split("\0"))
    work = user_work(tree, state, expected_heads=(start,))
    work.dirty = [
        (st, path)
        for st, path in work.dirty
        if path not in touched
        or git.file_blob_id(tree, path)
        not in (git.blob_id(tree, state.head, path), git.blob_id(tree, start, path))
    ]
    return work


def finish_pending_switch(tree: Path, state: TreeState, force: bool, progress: Progress) -> str | None:
    """Finish an interrupted in-place switch, never over work added since; return a kept ref."""
    work = _pending_work(tree, state)
    ref = None
    if work and not force:
        raise RefusedError(
            f"{tree}: an interrupted apply left it half-switched to {state.head[:12]}, and it holds "
            f"work added since:\n{work.describe()}",
            hint=f"finish the switch and keep that work in a ref it names: `make apply FORCE=1` "
            f"(then `git -C {tree} checkout <ref> -- <file>` or `cherry-pick` brings it back)",
        )
    if work:
        ref = keep_dropped(tree, work, "finishing an interrupted switch")
        progress.warn(
            f"--force drops from {tree}:\n{work.describe()}\nkept in {ref} (git -C {tree} show {ref})"
        )
    progress.step(f"finish the interrupted switch of {tree} to {state.head[:12]}")
    git.run(tree, "reset", "--quiet", "--hard", state.head)
    if work:
        git.run(tree, "clean", "-fdq")  # the untracked files are in the kept ref
    git.run(tree, "update-ref", f"refs/heads/{BRANCH}", state.head)
    state.pending, state.switch_from = False, None
    state.save(tree)
    return ref


def check_tree_is_safe(
    tree: Path, force: bool, progress: Progress = QUIET
) -> tuple[TreeState | None, str | None]:
    """Refuse to replace a tree holding work that the patches do not hold.

    Return its state and, under ``force``, the ref keeping what will be dropped (listed first).
    """
    if not tree.exists():
        return None, None
    state = TreeState.load(tree)
    if state is None:
        raise RefusedError(
            f"{tree} exists but was not made by tkv-seam apply",
            hint=f"move it away (mv {tree} {tree}.mine) and run the command again",
        )
    work = user_work(tree, state)
    if not work:
        return state, None
    if force:
        ref = keep_dropped(tree, work, "apply --force")
        progress.warn(
            f"--force drops from {tree}:\n{work.describe()}\nkept in {ref} (git -C {tree} show {ref})"
        )
        return state, ref
    if work.dirty:
        shown = "\n".join(f"    {st} {path}" for st, path in work.dirty[:10])
        raise RefusedError(
            f"{tree} has uncommitted changes:\n{shown}",
            hint=(
                f"keep them: commit in {tree} then `make refresh`; "
                "drop them: `make apply FORCE=1` (lists them and keeps them in a ref)"
            ),
        )
    shown = "\n".join(f"    {c[:12]} {subject}" for c, subject in work.commits[:10])
    raise RefusedError(
        f"{tree} has commits that are not in patches/ ({len(work.commits) or 'HEAD moved, no'} new since apply)"
        + (f":\n{shown}" if shown else ""),
        hint="keep them: `make refresh`; drop them: `make apply FORCE=1` (keeps them in a ref)",
    )


def _guard_symlinks(root: Path, rel: str, patch: Patch) -> Path:
    """The real path of ``rel`` inside ``root``; refuse a path that goes through a symlink."""
    cur = root
    for part in Path(rel).parts:
        cur = cur / part
        if cur.is_symlink():
            raise ApplyError(
                f"{patch.name}: {rel}: goes through the symlink {cur.relative_to(root)}: refused"
            )
    real = cur.resolve()
    if root.resolve() not in real.parents:
        raise ApplyError(f"{patch.name}: {rel}: resolves outside the tree: refused")
    return cur


def apply_patch(tree: Path, patch: Patch) -> list[str]:
    """Replay every file of ``patch`` exactly into ``tree`` (all checked before any write)."""
    results: list[tuple[Path, str | None, str | None]] = []
    for fc in patch.files:
        src = _guard_symlinks(tree, fc.old, patch) if fc.old else None
        dst = _guard_symlinks(tree, fc.new, patch) if fc.new else None
        old_text = src.read_bytes().decode("utf-8", "surrogateescape") if src and src.exists() else None
        if fc.kind == "add" and dst is not None and dst.exists():
            old_text = dst.read_bytes().decode("utf-8", "surrogateescape")
        new_text = replay_file(patch, fc, old_text)
        results.append((dst or src, new_text, fc.new_mode))  # type: ignore[arg-type]
    touched = []
    for path, text, mode in results:
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8", "surrogateescape"))
            if mode:
                path.chmod(0o755 if mode == "100755" else 0o644)
        touched.append(str(path.relative_to(tree)))
    return touched


def _split_author(author: str) -> dict[str, str]:
    name, _, email = author.rpartition("<")
    return {
        "GIT_AUTHOR_NAME": name.strip(),
        "GIT_AUTHOR_EMAIL": email.rstrip(">").strip(),
        "GIT_AUTHOR_DATE": git.FIXED_DATE,
    }


def _read_base_file(
    repo: Path, commit: str, patch: Patch, path: str, origin: str
) -> tuple[str | None, str | None]:
    """(text, mode) of ``path`` at ``commit``, (None, None) when absent; CorruptObject when unreadable."""
    try:
        entry = git.tree_entry(repo, commit, path)
        if entry is None:
            return None, None
        mode, sha = entry
        if mode == "040000":
            raise ApplyError(
                f"{patch.name}: {path}: is a directory at {commit[:12]}, the patch treats it as a file"
            )
        return git.read_blob(repo, sha).decode("utf-8", "surrogateescape"), mode
    except ApplyError:
        raise
    except SeamError as e:
        raise CorruptObject(
            f"{patch.name}: {path}: cannot read it from {origin} (missing or corrupt object): "
            f"{e.message.splitlines()[-1]}",
            hint=f"mv {repo} {repo}.corrupt, then run the command again",
        ) from e


def commit_series(
    repo: Path, base_commit: str, patches: list[Patch], progress: Progress, origin: str | None = None
) -> list[AppliedPatch]:
    """Make one commit per patch on ``base_commit`` in ``repo``'s object store.

    Plumbing only (``git.private_index``, blobs, trees, commit-tree): the work tree and
    the real index are not touched, so a failing patch leaves the repository as it was
    (unreferenced objects aside). Every hunk is replayed exactly (``replay_file``).
    ``origin`` names where the objects came from, for the error when one is unreadable.
    """
    contents: dict[str, str | None] = {}
    modes: dict[str, str | None] = {}
    parent, applied = base_commit, []
    with git.private_index(repo, base_commit) as index:
        for k, patch in enumerate(patches, 1):
            progress.step(f"apply [{k}/{len(patches)}] {patch.name}")
            _refuse_symlinked_paths(repo, parent, patch)
            entries = []
            for fc in patch.files:
                path = fc.old or fc.new
                if path not in contents:
                    contents[path], modes[path] = _read_base_file(
                        repo, parent, patch, path, origin or str(repo)
                    )
                new_text = replay_file(
                    patch, fc, contents[path] if fc.kind != "add" else contents.get(fc.new)
                )
                target = fc.new or fc.old
                contents[target] = new_text
                if new_text is None:
                    entries.append(("0", "", target))
                else:
                    sha = git.hash_blob(repo, new_text.encode("utf-8", "surrogateescape"))
                    mode = fc.new_mode or modes.get(target) or "100644"
                    modes[target] = mode
                    entries.append((mode, sha, target))
            git.update_index(repo, index, entries)
            tree = git.write_tree(repo, index)
            parent = git.commit_tree(
                repo, tree, parent, patch.header.message, _split_author(patch.header.author)
            )
            applied.append(AppliedPatch(patch.name, parent, [fc.new or fc.old for fc in patch.files]))
    return applied


def _refuse_symlinked_paths(repo: Path, commit: str, patch: Patch) -> None:
    """Refuse a patch path that is, or goes through, a symlink in the tree it applies to."""
    prefixes = sorted(
        {
            str(Path(*Path(p).parts[: i + 1]))
            for fc in patch.files
            for p in {fc.old, fc.new} - {None}
            for i in range(len(Path(p).parts))
        }
    )
    for line in git.out(repo, "ls-tree", commit, "--", *prefixes).splitlines():
        mode, _, rest = line.partition(" ")
        if mode == "120000":
            link = rest.split("\t", 1)[1]
            bad = next(
                p
                for fc in patch.files
                for p in (fc.old, fc.new)
                if p and (p == link or p.startswith(link + "/"))
            )
            raise ApplyError(f"{patch.name}: {bad}: goes through the symlink {link}: refused")


def _ignored_in_the_way(tree: Path, new_head: str) -> list[str]:
    """Files the switch would add that already exist in a clean tree: ignored files git would overwrite."""
    added = git.out(tree, "diff", "--name-only", "--no-renames", "--diff-filter=A", "-z", "HEAD", new_head)
    return [p for p in added.split("\0") if p and ((tree / p).exists() or (tree / p).is_symlink())]


def _set_aside(tree: Path, paths: list[str]) -> Path:
    """Move ``paths`` of ``tree`` into ``.git/tkv-seam-dropped/<time>/``; return that directory."""
    keep = (
        tree / ".git" / "tkv-seam-dropped" / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    )
    for rel in paths:
        (keep / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(tree / rel, keep / rel)
    return keep


def switch_in_place(tree: Path, result: ApplyResult, force: bool = False, progress: Progress = QUIET) -> None:
    """Move a clean tree from its HEAD to ``result.head``, touching only the files that differ.

    The new state is saved first, marked pending with the HEAD it starts from; an
    interrupted switch is finished by the next run (``finish_pending_switch``). An ignored
    file at a path the switch adds is refused (``force``: set aside, and said so).
    """
    in_the_way = _ignored_in_the_way(tree, result.head)
    if in_the_way and not force:
        shown = "\n".join(f"    {p}" for p in in_the_way[:10])
        raise RefusedError(
            f"{tree}: the patches add files that exist there as ignored files; the switch would "
            f"overwrite them:\n{shown}",
            hint=f"keep them: mv {tree / in_the_way[0]} {tree / in_the_way[0]}.mine (each), then make apply; "
            "or `make apply FORCE=1` (sets them aside in .git/tkv-seam-dropped/)",
        )
    if in_the_way:
        keep = _set_aside(tree, in_the_way)
        progress.warn(f"--force sets aside ignored files the patches add, in {keep}: {', '.join(in_the_way)}")
    state = result.state()
    state.pending, state.switch_from = True, git.head(tree)
    state.save(tree)
    git.run(tree, "read-tree", "-m", "-u", "HEAD", result.head)
    git.run(tree, "update-ref", f"refs/heads/{BRANCH}", result.head)
    result.state().save(tree)


def build_tree(
    target: Path, repo_path: Path, base_commit: str, patches: list[Patch], progress: Progress
) -> tuple[Path, list[AppliedPatch]]:
    """Clone the base beside ``target`` and commit every patch; return the temporary tree."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        progress.step(f"clone the pristine base {base_commit[:12]}")
        tree = tmp / "tree"
        git.run(None, "clone", "--quiet", "--no-checkout", "--local", str(repo_path), str(tree))
        git.run(tree, "tag", "-f", BASE_TAG, base_commit)
        git.run(tree, "remote", "remove", "origin", check=False)
        applied = commit_series(tree, base_commit, patches, progress, origin=f"the cached base {repo_path}")
        progress.step("check out the patched tree")
        # parallel checkout: the base is ~7,400 files
        git.run(
            tree,
            "-c",
            "checkout.workers=0",
            "checkout",
            "--quiet",
            "-B",
            BRANCH,
            applied[-1].commit if applied else base_commit,
        )
        return tmp, applied
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _carry_dropped_refs(old: Path, new: Path) -> None:
    """Copy the refs keeping dropped work from the tree being replaced into its replacement."""
    if git.out(old, "for-each-ref", "--count=1", DROPPED_REFS):
        git.run(new, "fetch", "--quiet", "--no-tags", str(old), f"+{DROPPED_REFS}/*:{DROPPED_REFS}/*")


def swap_in(tmp: Path, target: Path) -> None:
    """Replace ``target`` by ``tmp/tree`` with two renames; the old tree is removed last."""
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        os.replace(target, old)
    os.replace(tmp / "tree", target)
    shutil.rmtree(tmp, ignore_errors=True)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def apply_series(
    root: Path,
    base: Base,
    tree: Path,
    cache: Path,
    git_url: str | None = None,
    index_url: str | None = None,
    force: bool = False,
    progress: Progress = QUIET,
) -> ApplyResult:
    """Make ``tree`` the base plus the series of ``root``; quick no-op when nothing changed."""
    started = time.monotonic()
    series = read_series(root, base.queue, base.name)  # the base's own queue (bases.toml)
    patches = series.load()  # every patch parses before anything is touched
    source = "git" if git_url else "sdist"
    digest = inputs_digest(base, source, series)
    with locked(tree_lock_path(tree), str(tree), progress):
        recover(tree, progress)
        dropped = []
        pending = TreeState.load(tree) if tree.exists() else None
        if pending and pending.pending:
            dropped.append(finish_pending_switch(tree, pending, force, progress))
        state, ref = check_tree_is_safe(tree, force, progress)
        dropped = [r for r in (*dropped, ref) if r]
        if state and state.digest == digest and not force:
            progress.step(f"{tree} is up to date ({len(patches)} patches on {base.name})")
            result = ApplyResult.from_state(state)
            result.up_to_date = True
            result.seconds = time.monotonic() - started
            return result
        repo, fetched = base_repo(base, cache, git_url, index_url, progress)

        def result_for(applied: list[AppliedPatch]) -> ApplyResult:
            return ApplyResult(
                tree=str(tree),
                base=base.name,
                source=source,
                base_commit=repo.commit,
                upstream_commit=repo.upstream_commit,
                head=applied[-1].commit if applied else repo.commit,
                digest=digest,
                fetched_bytes=fetched,
                patches=applied,
                dropped=dropped,
                inputs=series.file_digests(),
            )

        if state and state.base_commit == repo.commit and not git.status_paths(tree):
            # Same base, clean tree: build the commits in its object store, then move the
            # tree to them; a failing patch leaves it exactly as it was.
            result = result_for(commit_series(tree, repo.commit, patches, progress))
            progress.step(f"switch {tree} to {result.head[:12]}")
            switch_in_place(tree, result, force, progress)
        else:
            # No tree (or a dirty one under --force, or another base): build aside, swap in.
            try:
                tmp, applied = build_tree(tree, repo.path, repo.commit, patches, progress)
            except CorruptObject as e:
                raise VerifyError(
                    f"the cached base {repo.path} is damaged: {e.message}",
                    hint=f"check and rebuild it: {TOOL} fetch --base {base.name}, then run the command again",
                ) from e
            try:
                result = result_for(applied)
                result.state().save(tmp / "tree")
                if state is not None:
                    _carry_dropped_refs(tree, tmp / "tree")
                swap_in(tmp, tree)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    progress.step(f"{tree}: {len(patches)} patches applied on {base.name} ({repo.commit[:12]})")
    result.seconds = time.monotonic() - started
    return result
