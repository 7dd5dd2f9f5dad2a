"""tkv-seam: a quilt-style patch queue carrying the turbo-attn seam on pinned vLLM releases.

The folders are the layers (docs/design.md; ``tests/tooling/plumbing/test_layers.py`` holds the
table and fails on an import upwards or any import circle). Top to bottom:

- ``cli/``        the command line: click options, rendering, exit codes (one error boundary)
- use cases, one package per family of commands:
  ``edit/``       apply, refresh, stylecheck: the queue and its build tree
  ``port/``       the port verbs (``session``), its crash journal, gate, report and finish; whose a
                  failing test is
  ``release/``    pin, watch, carry, retire, seam-table, lock-cpu: following upstream releases
  ``overlay/``    the patched ``vllm/`` files staged and installed into a venv
  ``image/``      the Docker overlay image, its names, the stand-in base, the plugin wheel
  ``seamtest/``   the test lanes of ``make test`` and the pytest plugins they load
- ``tree/``       ``SeamTree``: every tree the tool makes (lock, state, recovery, user work, kept work);
                  the port tree's mechanics (one trial of a patch, import merges, recorded resolutions)
- domain: ``queue/`` (patch, header fields, commit messages, series, lint, drift), ``findings/`` (what a
  port finds of each patch, the analysis deciding it, what it may do by itself) and ``bases/`` (the pins of
  ``bases.toml``, the carried bases; with the cache's sdists and pristine base repositories)
- plumbing: ``git/`` (the gateway: one function per git operation), ``errors``, ``hints``,
  ``progress``, ``fsutil``, ``lock``, ``outputs``; ``bases.index`` and ``bases.unpack``

``overlay.install``, ``image.plugin_install`` and the pytest plugins in ``seamtest/`` run in
other processes (a user's venv, the image, vLLM's pytest): the standard library only.
"""

__version__ = "0.1.0"
