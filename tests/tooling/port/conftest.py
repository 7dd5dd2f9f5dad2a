"""The port room's fixtures: the port case's releases and project (``fixtures/portcase.py``)."""

from ..fixtures.portcase import port_releases, pproject, pproject_once  # noqa: F401
