"""Forward-port: the queue of one base onto a newer base, as a report or as a resumable operation.

- ``model``: what a port finds, as data (statuses as enums, evidence as records);
- ``tree``: the port tree's mechanics (the new base + the old base's objects; applying into it);
- ``analysis``: placement, obsolescence, status and draft verdict of each patch (``try_patch``);
- ``report``: the one-shot report walk (``port report``);
- ``render``: all port text (report, verdict table, PORT.md, stop, status);
- ``session``: the resumable port, one method per verb (``PortSession``);
- ``finish``: writing the new base's queue (``port finish``), never over reviewed work by surprise.
"""

from . import render
from .model import APPLIED, Evidence, EvidenceKind, FileStatus, HunkNote, PatchReport, PatchStatus
from .report import refuse_direction, report
from .finish import Finished
from .session import Aborted, PortSession, port_tree

__all__ = [
    "APPLIED",
    "Aborted",
    "Evidence",
    "EvidenceKind",
    "FileStatus",
    "Finished",
    "HunkNote",
    "PatchReport",
    "PatchStatus",
    "PortSession",
    "port_tree",
    "refuse_direction",
    "render",
    "report",
]
