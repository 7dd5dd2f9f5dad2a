"""The git gateway: one named function per git operation the tool uses. Knows nothing about
the project layout. A caller names the module of each call (``git.repo.head(tree)``):

- ``core``: the primitives (``run``, ``out``) and the typed values that cross the boundary
  (``Person``, ``Commit``, ``TreeEntry``);
- ``repo``: repositories, revisions, content and diffs;
- ``index``: the work tree, the index and the plumbing (a private index, blobs, trees, commits
  made without touching the work tree);
- ``merge``: conflicts (a file's three sides merged again, recorded resolutions).

No module outside this package calls ``core.run``/``core.out`` or runs git itself
(``tests/tooling/plumbing/test_git_gateway.py`` checks). Each unusual flag carries its reason.
"""

from . import core, index, merge, repo

__all__ = ["core", "index", "merge", "repo"]
