"""Build the patched work tree: pristine base commit, then one commit per patch.

Strict: every hunk must match at exactly the line it names (``patch.replay_file``).
Atomic: the tree is built beside the target and swapped in only when every patch
applied; a failure leaves the previous tree as it was. A crash between the two
renames of the swap leaves ``.<tree>.old-*``, which the next run puts back.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import git
from .bases import Base, base_repo
from .errors import ApplyError, RefusedError, SeamError
from .patch import Patch, replay_file
from .progress import QUIET, Progress
from .series import Series, read_series

STATE = "tkv-seam.json"  # kept inside the tree's .git directory
BRANCH = "seam"
BASE_TAG = "tkv-seam-base"


@dataclass
class AppliedPatch:
    name: str
    commit: str
    files: list[str]


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

    def to_json(self) -> dict:
        return asdict(self)


def read_state(tree: Path) -> dict | None:
    try:
        return json.loads((tree / ".git" / STATE).read_text())
    except (OSError, ValueError):
        return None


def _write_state(tree: Path, result: ApplyResult) -> None:
    _write_state_dict(tree, result.to_json())


def inputs_digest(base: Base, source: str, series: Series) -> str:
    h = hashlib.sha256()
    h.update(f"{base.name}\0{source}\0{base.sdist.sha256}\0{base.commit_prefix}\0".encode())
    h.update(series.digest().encode())
    return h.hexdigest()


def recover(tree: Path, progress: Progress = QUIET) -> None:
    """Undo what an interrupted run left: put a swapped-out tree back, drop half-built ones."""
    parent = tree.parent
    if not parent.exists():
        return
    state = read_state(tree) if tree.exists() else None
    if state and state.pop("pending", False):
        progress.step(f"finish the interrupted switch of {tree} to {state['head'][:12]}")
        git.run(tree, "reset", "--quiet", "--hard", state["head"])
        git.run(tree, "update-ref", f"refs/heads/{BRANCH}", state["head"])
        _write_state_dict(tree, state)
    olds = sorted(parent.glob(f".{tree.name}.old-*"))
    if olds and not tree.exists():
        progress.step(f"restore {tree} from an interrupted run ({olds[-1].name})")
        os.replace(olds[-1], tree)
        olds = olds[:-1]
    for leftover in olds + sorted(parent.glob(f".{tree.name}.tmp-*")):
        shutil.rmtree(leftover, ignore_errors=True)


def check_tree_is_safe(tree: Path, force: bool) -> dict | None:
    """Refuse to replace a tree holding work that the patches do not hold. Return its state."""
    if not tree.exists():
        return None
    state = read_state(tree)
    if state is None:
        raise RefusedError(
            f"{tree} exists but was not made by tkv-seam apply",
            hint=f"move it away (mv {tree} {tree}.mine) and run the command again",
        )
    if force:
        return state
    dirty = git.status_porcelain(tree)
    if dirty:
        shown = "\n".join(f"    {line}" for line in dirty[:10])
        raise RefusedError(
            f"{tree} has uncommitted changes:\n{shown}",
            hint=(
                f"keep them: commit in {tree} then `make refresh`; "
                f"drop them: `git -C {tree} reset --hard && git -C {tree} clean -fd`, "
                "or `make apply FORCE=1`"
            ),
        )
    head = git.head(tree)
    if head != state["head"]:
        count = git.out(tree, "rev-list", "--count", f"{state['head']}..{head}", check=False)
        raise RefusedError(
            f"{tree} has commits that are not in patches/ ({count or 'some'} new since apply)",
            hint="keep them: `make refresh`; drop them: `make apply FORCE=1`",
        )
    return state


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


def commit_series(
    repo: Path, base_commit: str, patches: list[Patch], progress: Progress
) -> list[AppliedPatch]:
    """Make one commit per patch on ``base_commit`` in ``repo``'s object store.

    Plumbing only (a private index, blobs, trees, commit-tree): the work tree and the
    real index are not touched, so a failing patch leaves the repository as it was
    (unreferenced objects aside). Every hunk is replayed exactly (``replay_file``).
    """
    index = repo / ".git" / "tkv-seam-index"
    env = {"GIT_INDEX_FILE": str(index)}
    git.run(repo, "read-tree", base_commit, env=env)
    contents: dict[str, str | None] = {}
    parent, applied = base_commit, []
    try:
        for k, patch in enumerate(patches, 1):
            progress.step(f"apply [{k}/{len(patches)}] {patch.name}")
            _refuse_symlinked_paths(repo, parent, patch)
            updates = []
            for fc in patch.files:
                path = fc.old or fc.new
                if path not in contents:
                    proc = git.run(repo, "cat-file", "blob", f"{parent}:{path}", check=False)
                    contents[path] = (
                        proc.stdout.decode("utf-8", "surrogateescape") if proc.returncode == 0 else None
                    )
                new_text = replay_file(
                    patch, fc, contents[path] if fc.kind != "add" else contents.get(fc.new)
                )
                target = fc.new or fc.old
                contents[target] = new_text
                if new_text is None:
                    updates.append(f"0 {'0' * 40}\t{target}")
                else:
                    sha = git.out(
                        repo,
                        "hash-object",
                        "-w",
                        "--stdin",
                        input=new_text.encode("utf-8", "surrogateescape"),
                    )
                    mode = fc.new_mode or _mode(repo, parent, target) or "100644"
                    updates.append(f"{mode} {sha}\t{target}")
            git.run(repo, "update-index", "--index-info", env=env, input=("\n".join(updates) + "\n").encode())
            tree = git.out(repo, "write-tree", env=env)
            parent = git.out(
                repo,
                "commit-tree",
                tree,
                "-p",
                parent,
                "-F",
                "-",
                env=_split_author(patch.header.author),
                input=patch.header.message.encode(),
            )
            applied.append(AppliedPatch(patch.name, parent, [fc.new or fc.old for fc in patch.files]))
    finally:
        index.unlink(missing_ok=True)
    return applied


def _mode(repo: Path, commit: str, path: str) -> str | None:
    out = git.out(repo, "ls-tree", commit, "--", path)
    return out.split()[0] if out else None


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


def switch_in_place(tree: Path, result: ApplyResult) -> None:
    """Move a clean tree from its HEAD to ``result.head``, touching only the files that differ.

    The new state is written first, marked pending; an interrupted switch is finished
    by ``recover`` on the next run (the tree was clean, so nothing of the user's is lost).
    """
    _write_state_dict(tree, {**result.to_json(), "pending": True})
    git.run(tree, "read-tree", "-m", "-u", "HEAD", result.head)
    git.run(tree, "update-ref", f"refs/heads/{BRANCH}", result.head)
    _write_state(tree, result)


def _write_state_dict(tree: Path, data: dict) -> None:
    tmp = tree / ".git" / (STATE + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, tree / ".git" / STATE)


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
        applied = commit_series(tree, base_commit, patches, progress)
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
    recover(tree, progress)
    state = check_tree_is_safe(tree, force)
    if state and state.get("digest") == digest and not force:
        progress.step(f"{tree} is up to date ({len(patches)} patches on {base.name})")
        result = ApplyResult(**{**state, "patches": [AppliedPatch(**p) for p in state["patches"]]})
        result.up_to_date = True
        result.fetched_bytes = 0
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
        )

    if state and state.get("base_commit") == repo.commit and not git.status_porcelain(tree):
        # Same base, clean tree: build the commits in its object store, then move the
        # tree to them; a failing patch leaves it exactly as it was.
        result = result_for(commit_series(tree, repo.commit, patches, progress))
        progress.step(f"switch {tree} to {result.head[:12]}")
        switch_in_place(tree, result)
    else:
        # No tree (or a dirty one under --force, or another base): build aside, swap in.
        tmp, applied = build_tree(tree, repo.path, repo.commit, patches, progress)
        try:
            result = result_for(applied)
            _write_state(tmp / "tree", result)
            swap_in(tmp, tree)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    progress.step(f"{tree}: {len(patches)} patches applied on {base.name} ({repo.commit[:12]})")
    result.seconds = time.monotonic() - started
    return result


def tree_state(tree: Path) -> dict:
    """The apply state of ``tree``, or an error saying to run apply."""
    state = read_state(tree)
    if state is None:
        raise SeamError(f"{tree} is not a tree made by tkv-seam apply", hint="make apply")
    return state
