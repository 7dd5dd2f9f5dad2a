"""The release room's fixtures: the fake wheels of the CPU lock (``wheels``, ``fixtures/carry.py``)."""

from ..fixtures.carry import wheels  # noqa: F401
