"""tkv-seam: a quilt-style patch queue carrying the turbo-attn seam on a pinned vLLM.

One module per job; ``cli`` is a thin click layer over them (docs/design.md):

- ``cli``       the command line, one module per command family, one error boundary
- ``apply``     build the patched git work tree (strict, atomic)
- ``export``    refresh: git commits back to patch files; writing a queue
- ``port``      (a package) forward-port: report, and the resumable port's verbs (``PortSession``)
- ``seamtree``  ``SeamTree``: the one owner of a tree tkv-seam made (lock, recovery, user work, kept work)
- ``state``     the one versioned state schema of those trees
- ``commits``   a queue as commits made with plumbing only; the symlink guard
- ``git``       (a package) the git gateway: one named function per git operation
- ``bases``     known upstream bases (bases.toml, checked), fetching and verifying their sources
- ``index``     the package index client (PEP 691 pages and downloads, bounded)
- ``unpack``    an sdist checked member by member, then unpacked by the tool itself
- ``outputs``   where the tool writes: output directories it made, no symlink on the way
- ``series``    the ``series`` file and ``patches/`` directory
- ``patch``     one patch file: header fields, diff, path safety, exact replay
- ``lint``      consistency checks over series and patches
- ``overlay``   the set of patched vllm/ files, manifests, venv overlay
- ``image``     the Docker overlay image (docker SDK)
- ``pin``, ``watch``  follow upstream releases
- ``seamtest``  (a package) the test lanes (bisect, full, upstream, plugin) against overlaid venvs
- ``stylecheck`` upstream's style gate (the base's ruff pin) on the patched files
- ``fsutil``    the one atomic write (modes kept), names for what the tool keeps
"""

__version__ = "0.1.0"
