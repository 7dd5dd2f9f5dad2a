"""The cli room's fixtures: real ``make`` with the tool replaced by a recorder (``make``)."""

from ..fixtures.make import make  # noqa: F401
