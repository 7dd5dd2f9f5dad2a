"""What in a tree tkv-seam made is the user's, and which of the user's checkouts stand in the way.

A tree's *work* (``UserWork``) is what the tool did not record there: changed, untracked and
ignored files (ignored ones are the user's too: vLLM's ``.gitignore`` names ``.env``, ``.venv``,
``.vscode/``, ``*.log``), commits after the recorded head, the branch ``seam`` moved while HEAD is
elsewhere, and, for a tree that is removed rather than rebuilt, the user's own branches, tags and
stash and what the tool kept in the tree earlier (``refs/tkv-seam/dropped/``,
``.git/tkv-seam-dropped/``). The tool writes nothing into a tree's work tree but the checked-out
files (its own files live in ``.git``), so every file git does not track is the user's, whatever
the ignore list says.

A switch writes the branch ``seam`` and points HEAD at it; a rebuilt tree replaces the whole
repository. So a ``seam/...`` branch (git cannot hold both), worktrees linked to the tree and an
unborn HEAD are refused before anything moves (``refuse_checkouts``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import git, hints
from ..errors import RefusedError
from ..layout import BASE_TAG, BRANCH, DROPPED_DIR, DROPPED_REFS
from .state import TreeState

IGNORED = "!!"  # the status of an ignored file (as ``git status --ignored`` shows it)


@dataclass
class UserWork:
    """What a user added to a tree since tkv-seam recorded it."""

    tree: Path
    dirty: list[tuple[str, str]] = field(default_factory=list)  # (status, path); "!!": ignored
    commits: list[tuple[str, str]] = field(default_factory=list)  # (id, subject), newest first
    moved_head: str | None = None  # HEAD, when it is not the recorded one
    moved_seam: str | None = None  # the seam branch, when HEAD is elsewhere and it holds commits of its own
    refs: list[str] = field(default_factory=list)  # a removed tree's refs the user or the tool keeps there
    kept_files: bool = False  # a removed tree holds files the tool set aside (.git/tkv-seam-dropped/)
    nested: list[str] = field(default_factory=list)  # git repositories inside the tree (no ref can keep them)

    def __bool__(self) -> bool:
        return bool(self.dirty or self.moved_head or self.moved_seam or self.refs or self.kept_files)

    @property
    def ignored(self) -> list[str]:
        return [p for st, p in self.dirty if st == IGNORED]

    def describe(self, limit: int = 20) -> str:
        """Lines naming the files and commits (id + subject), for a refusal or a --force warning."""
        out = []
        changed = [(st, p) for st, p in self.dirty if st != IGNORED]
        if changed:
            out.append(f"uncommitted changes ({len(changed)} paths):")
            out += [f"    {st} {path}" for st, path in changed[:limit]]
            if len(changed) > limit:
                out.append(
                    f"    … and {len(changed) - limit} more ({hints.shell('git', '-C', self.tree, 'status')})"
                )
        if self.ignored:
            out.append(f"files git ignores, yours all the same ({len(self.ignored)} paths):")
            out += [f"    !! {path}" for path in self.ignored[:limit]]
            if len(self.ignored) > limit:
                more = hints.shell("git", "-C", self.tree, "status", "--ignored")
                out.append(f"    … and {len(self.ignored) - limit} more ({more})")
        if self.commits:
            out.append(f"commits that are not in patches/ ({len(self.commits)}):")
            out += [f"    {c[:12]} {subject}" for c, subject in self.commits[:limit]]
        elif self.moved_head:
            out.append(f"HEAD moved to {self.moved_head[:12]} (not the recorded result)")
        if self.moved_seam:
            out.append(f"the branch {BRANCH} (HEAD is not on it) moved to {self.moved_seam[:12]}")
        if self.refs:
            out.append(f"refs of yours, or kept there by an earlier step ({len(self.refs)}):")
            out += [f"    {ref}" for ref in self.refs[:limit]]
        if self.kept_files:
            out.append(f"files an earlier step kept in .git/{DROPPED_DIR}/")
        return "\n".join(out)


def uncommitted(tree: Path, ignored: bool = False) -> UserWork:
    """The changed and untracked files of the tree; ``ignored``: the files git ignores too (each
    directory git ignores as a whole is one entry, ``.venv/``)."""
    work = UserWork(tree, dirty=[(st.strip() or "??", p) for st, p in git.index.status_paths(tree)])
    work.nested = [p for st, p in work.dirty if st == "??" and p.endswith("/")]  # git shows a repository so
    if ignored:
        work.dirty += [(IGNORED, p) for p in git.index.ignored_paths(tree)]
        work.nested += git.index.ignored_repositories(tree)
    return work


def user_work(
    tree: Path,
    state: TreeState,
    expected_heads: tuple[str, ...] = (),
    ignored: bool = True,
    removing: bool = False,
) -> UserWork:
    """What the tree holds that its recorded state does not: files (``ignored``: also those git
    ignores), commits, a moved ``seam``; ``removing`` (the tree goes, nothing is carried to a new
    one): also the user's own refs and what the tool kept in the tree."""
    work = uncommitted(tree, ignored)
    head = git.repo.head(tree)
    known = [h for h in (state.head, *expected_heads) if h]
    if head not in known:
        work.moved_head = head
        work.commits = git.repo.subjects(tree, head, *(f"^{h}" for h in known))
    seam = git.repo.resolve(tree, f"refs/heads/{BRANCH}")
    if seam and git.repo.branch(tree) != f"refs/heads/{BRANCH}" and seam not in (*known, head):
        work.commits += git.repo.subjects(tree, seam, f"^{head}", *(f"^{h}" for h in known))
        work.moved_seam = seam
    if removing:
        old_base = state.port.old_commit if state.port else ""  # a port tree's tkv-seam-old-base
        work.refs = holding_refs(tree, [*known, state.base_commit, old_base], state.clone_refs)
        work.refs += git.repo.refs(tree, DROPPED_REFS)
        kept = tree / ".git" / DROPPED_DIR
        work.kept_files = kept.is_dir() and any(kept.iterdir())
    return work


def user_refs(tree: Path) -> list[str]:
    """The refs of a tree that are the user's: branches and tags the tool did not make, the stash."""
    ours = {f"refs/heads/{BRANCH}", f"refs/tags/{BASE_TAG}"}
    found = (
        git.repo.refs(tree, "refs/heads/")
        + git.repo.refs(tree, "refs/tags/")
        + git.repo.refs(tree, "refs/stash")
    )
    return [r for r in found if r not in ours]


def holding_refs(tree: Path, known: list[str], cloned: dict[str, str] | None = None) -> list[str]:
    """The user's refs that a removed tree would lose something with: the stash, an annotated tag,
    a branch or tag reaching a commit none of ``known`` reaches; a ref the base's clone brought
    (``cloned``: name -> commit) holds nothing while it points where it did."""
    out = []
    for ref in user_refs(tree) + git.repo.refs(tree, "refs/notes/"):
        if (cloned or {}).get(ref) is not None and git.repo.resolve(tree, ref) == cloned[ref]:
            continue
        commit = git.repo.resolve(tree, f"{ref}^{{commit}}")
        if (
            not ref.startswith("refs/heads/")
            and not ref.startswith("refs/tags/")
            or commit is None
            or commit != git.repo.resolve(tree, ref)  # an annotated tag: its message is the user's
            or git.repo.subjects(tree, commit, *(f"^{k}" for k in known if k))
        ):
            out.append(ref)
    return out


# --------------------------------------------------------------------------- the user's checkouts


def in_the_way(
    tree: Path,
    state: TreeState,
    rerun: str,
    force: bool = False,
    force_hint: str | None = None,
    ignored: bool = True,
) -> UserWork:
    """What stands in the way of replacing ``tree``: the checkouts a switch or a rebuild would break
    are refused (``refuse_checkouts``); the work it holds is returned, to keep or refuse."""
    refuse_checkouts(tree, state.head, rerun, force, force_hint)
    return user_work(tree, state, ignored=ignored)


def refuse_checkouts(
    tree: Path, head: str, rerun: str, force: bool = False, force_hint: str | None = None
) -> None:
    """Refuse (exit 5, nothing changed) what a switch or a rebuild would break: a ``seam/...``
    branch, linked worktrees, an unborn HEAD (``force``: HEAD is pointed at ``head`` first)."""
    refuse_blocked_branch(tree, rerun)
    refuse_linked_worktrees(tree, rerun)
    put_back_unborn_head(tree, head, force, rerun, force_hint)


def refuse_blocked_branch(tree: Path, rerun: str) -> None:
    """Refuse (exit 5, nothing changed) when a branch of the user's is named ``seam/...``: git
    then cannot write the tool's branch ``seam``, and a switch would stop half done."""
    blocking = [r.removeprefix("refs/heads/") for r in git.repo.refs(tree, f"refs/heads/{BRANCH}/")]
    if not blocking:
        return
    name = blocking[0]
    raise RefusedError(
        f"{tree}: the branch {', '.join(blocking)} blocks the branch `{BRANCH}` tkv-seam moves "
        f"(git cannot hold both {BRANCH} and {BRANCH}/...); nothing was changed",
        hint=f"rename it (each): `{hints.shell('git', '-C', tree, 'branch', '-m', name, name.replace('/', '-'))}`, "
        f"then {rerun}",
    )


def refuse_linked_worktrees(tree: Path, rerun: str) -> None:
    """Refuse (exit 5, nothing changed) a tree with worktrees linked to it (``git worktree add``):
    a switch moves ``seam`` under the one that has it checked out, and a tree replaced or removed
    takes their git data (.git/worktrees) with it."""
    linked = git.repo.linked_worktrees(tree)
    if not linked:
        return
    shown = "\n".join(f"    {path} ({branch or 'detached'})" for path, branch in linked)
    raise RefusedError(
        f"{tree} has worktrees linked to it; tkv-seam would move their branch or drop their git "
        f"data; nothing was changed:\n{shown}",
        hint=f"commit what they hold, then unlink each: `{hints.shell('git', '-C', tree, 'worktree', 'remove', linked[0][0])}`, "
        f"then {rerun}",
    )


def put_back_unborn_head(tree: Path, head: str, force: bool, rerun: str, force_hint: str | None) -> None:
    """HEAD on a branch with no commits (``git checkout --orphan``, a symbolic ref to a missing
    branch): refused, naming it (exit 5); ``force`` points HEAD at the recorded head first (the
    files and the index stay: what differs is then the user's work, kept by the usual rule)."""
    if git.repo.resolve(tree, "HEAD") is not None:
        return
    if force and force_hint:
        git.repo.detach_head(tree, head)
        return
    seam = f"refs/heads/{BRANCH}"
    back = (
        hints.shell("git", "-C", tree, "symbolic-ref", "HEAD", seam)
        if git.repo.resolve(tree, seam)
        else hints.shell("git", "-C", tree, "update-ref", "--no-deref", "HEAD", head)
    )
    raise RefusedError(
        f"{tree}: HEAD is on {git.repo.branch(tree)}, a branch with no commits (not the recorded "
        f"{head[:12]}); nothing was changed",
        hint=f"put HEAD back (your files and index stay; they then show as changes): `{back}`, then {rerun}"
        + (f"; or {force_hint} (does that, then keeps what differs in a ref)" if force_hint else ""),
    )
