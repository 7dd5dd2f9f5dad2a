"""The patch queue as data: one patch file (``patch``: header fields, diff, exact replay), the
``series`` file and its directory (``series``), what a queue replaces in vLLM (``footprint``),
its consistency checks (``lint``), and how a patch changed between bases (``drift``,
``interdiff``)."""
