"""The edit loop of a queue (README, "Edit a patch"): ``apply`` builds the base's build tree from
its queue, ``refresh`` writes the tree's commits back to the queue (``tree.export``, ``queue.writer``), ``stylecheck`` runs the base's
style gate on the patched files."""
