"""The overlay room's fixtures: the two-patch queue (``two``), its base commit, a real venv."""

from ..fixtures.overlay import base_commit, two, venv  # noqa: F401
