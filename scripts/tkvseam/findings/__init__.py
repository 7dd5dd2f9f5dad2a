"""What a port finds of each patch on a new base, as data and decisions (no git, no tree, no text).

- ``model``: statuses as enums, evidence and reports as records (``PatchReport``: what ``port
  report --json`` prints and a stopped port keeps in its state);
- ``analysis``: where each hunk lands, the evidence of obsolescence, a patch's status and its
  draft verdict, decided on data (the bases read through ``BaseView``);
- ``auto``: what the port may do by itself before it stops (``Auto``) and the record of what it
  did (``Did``).
"""
