"""The ``tkv-seam`` command line (``main``: the group and its one error boundary), one module per
command family: ``queue``, ``overlay``, ``seamtest``, ``port``, ``releases``, ``carry``; what every
command shares in ``options``."""
