"""Forward-port: the queue of one base onto a newer base, as a report or as a resumable operation.

What a port finds and decides is ``findings/``; the port tree's mechanics (one trial of a patch,
``try_patch``), its import merge and its recorded resolutions are the tree layer's
(``tree.porttree``, ``tree.importmerge``, ``tree.replay``). Here, the use cases:

- ``report``: the one-shot report walk (``port report``); ``reportfile``: the report written to a directory;
- ``render``: all port text (report, verdict table, PORT.md, stop, status);
- ``session``: the resumable port, one method per verb (``PortSession``);
- ``journal``: what the port tree records of its port, so that no crash loses or repeats a step;
- ``gate``, ``fixers``, ``prove``, ``environment``: the check at every patch, the base's fixers
  before it fails one, each patch's own tests, and whether a failing test fails on stock too;
- ``finish``: writing the new base's queue (``port finish``), never over reviewed work by surprise;
  ``ending``: the honest end (the queue as written, linted and gated on the pristine base).
"""
