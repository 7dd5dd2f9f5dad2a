"""Test runs of the series against an overlaid vLLM venv (``tkv-seam seamtest``).

One module per job:

- ``runner``    venv slots (hard-linked copies of the test venv), overlays, test roots,
                and one scheduler running the jobs of any set of lanes on the slots
- ``outcomes``  the pytest plugin recording outcomes per node id, and their folding
- ``hfcache``   the offline Hugging Face cache upstream's tests need
- ``bisect``    patch k's Tests pass at prefix k and fail at k-1; Guards pass
- ``full``      every seam test on the full series (and again CUDA-alike)
- ``upstream``  upstream's test files on stock and patched: no new failure
                (the stock baseline cached per base, lock and test files)
- ``plugin``    the real client (turbo-attn) breaks stock and works patched
- ``differential`` patched vs pristine modules on random inputs (tests/differential)
- ``lanes``     the lane registry: add a lane there
- ``passes``    what passed: one record per lane step and key (``build/passes/``), skipped next
                time; the timing record the docs' figures come from
- ``keys``      the digests a pass is keyed by (tool source, files, interpreter, base inputs)
- ``command_lane`` a lane that is one command (make's tooling, series, image lanes)
- ``run``       the seamtest commands' use cases: a run opened, ``--patch`` read, the answers

Kept free of imports: ``outcomes`` is loaded into the vLLM venv's pytest, where
only the standard library is available.
"""
