"""The patch queue as data: one patch file (``patch``: the diff and exact replay; ``header``: its
mail header, message and trailer fields; ``message``: a commit message's trailers as the port edits
them), the ``series`` file and its directory (``series``), a queue written from patch texts (``writer``), what a queue replaces in vLLM
(``footprint``), its consistency checks (``lint``), and how a patch changed between bases
(``drift``, ``interdiff``)."""
