"""The plumbing room's fixtures: the port case's releases and project (``fixtures/portcase.py``),
and the two-patch queue (``two``, ``fixtures/overlay.py``)."""

from ..fixtures.overlay import two  # noqa: F401
from ..fixtures.portcase import port_releases, pproject  # noqa: F401
