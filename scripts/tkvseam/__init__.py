"""tkv-seam: a quilt-style patch queue carrying the turbo-attn seam on a pinned vLLM.

The library has one module per job; ``cli`` is a thin click layer over them:

- ``bases``   known upstream bases (bases.toml, checked), fetching and verifying their sources
- ``index``   the package index client (PEP 691 pages and downloads, bounded)
- ``unpack``  an sdist checked member by member, then unpacked by the tool itself
- ``outputs``  where the tool writes: output directories it made, no symlink on the way
- ``series``  the ``series`` file and ``patches/`` directory
- ``patch``   one patch file: header fields, diff, path safety, exact replay
- ``apply``   build the patched git work tree (strict, atomic)
- ``export``  refresh: git commits back to patch files
- ``lint``    consistency checks over series and patches
- ``overlay`` the set of patched vllm/ files, manifests, venv overlay
- ``image``   the Docker overlay image (docker SDK)
- ``port``    forward-port report against a newer base
- ``seamtest`` (a package) the test lanes (bisect, full, upstream, plugin) against overlaid venvs
- ``stylecheck`` upstream's style gate (the base's ruff pin) on the patched files
"""

__version__ = "0.1.0"
