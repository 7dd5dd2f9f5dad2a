"""The upstream bases: their pins (``pins``, ``bases.toml`` read and checked; ``file``, its edits),
the carried ones (``carried``), and what the cache holds of each: the verified sdist (``sdist``,
over ``index`` and ``unpack``) and the pristine base repository (``repo``)."""
