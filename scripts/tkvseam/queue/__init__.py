"""The patch queue as data: one patch file (``patch``: the diff and exact replay; ``header``: its
mail header, message and trailer fields), the ``series`` file and its directory (``series``), what
a queue replaces in vLLM (``footprint``), its consistency checks (``lint``), and how a patch
changed between bases (``drift``, ``interdiff``)."""
