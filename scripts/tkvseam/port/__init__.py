"""Forward-port: the queue of one base onto a newer base, as a report or as a resumable operation.

- ``model``: what a port finds, as data (statuses as enums, evidence as records);
- ``tree``: the port tree's mechanics (the new base + the old base's objects; one trial of a patch, ``try_patch``);
- ``analysis``: placement, obsolescence, status and draft verdict of each patch ;
- ``report``: the one-shot report walk (``port report``);
- ``render``: all port text (report, verdict table, PORT.md, stop, status);
- ``session``: the resumable port, one method per verb (``PortSession``);
- ``journal``: what the port tree records of its port, so that no crash loses or repeats a step;
- ``finish``: writing the new base's queue (``port finish``), never over reviewed work by surprise.
"""
