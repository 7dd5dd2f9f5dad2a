"""A pytest plugin: vLLM's global test cleanup once per test file, not after every test.

``-p tkvseam.seamtest.module_cleanup`` (stdlib + pytest only: it runs inside the
vLLM venv's pytest). vLLM's ``tests/conftest.py`` has an autouse ``cleanup_fixture``
that calls ``cleanup_dist_env_and_memory()`` after every test unless the
fixture ``should_do_global_cleanup_after_test`` says no, which it does for a
test carrying the ``skip_global_cleanup`` marker (upstream's own opt-out). The
cleanup's ``gc.collect()`` walks every object a test process holds (vLLM and
torch imported: ~0.3 s a test here), most of the upstream lane's time.

The plugin adds that marker to every collected test except the last one that
runs before the next test file (or the session's end): upstream's own fixture
still cleans up once per file, so a distributed environment, an enabled envs
cache or garbage one file leaves does not reach the next. Tests statically
marked ``skip``/``skipif`` at the end of a file keep the cleanup too and so does
the last test before them: a skipped test never sets up its fixtures, so it
cannot be the one that cleans up.
"""

from __future__ import annotations

import pytest

MARKER = "skip_global_cleanup"
_SKIPS = ("skip", "skipif")


def _may_skip(item: pytest.Item) -> bool:
    """Marked skip/skipif: may never set up its fixtures (skipping happens before them)."""
    return any(item.get_closest_marker(name) for name in _SKIPS)


def keep_cleanup(items: list[pytest.Item]) -> set[int]:
    """Indexes of the items that keep upstream's cleanup: per run of one file, from its last
    test that surely runs its fixtures to the run's end."""
    keep: set[int] = set()
    end = len(items)
    while end:
        start = end - 1
        while start and items[start - 1].path == items[end - 1].path:
            start -= 1
        for i in range(end - 1, start - 1, -1):
            keep.add(i)
            if not _may_skip(items[i]):
                break
        end = start
    return keep


@pytest.hookimpl(trylast=True)  # after any reordering or deselection: the order that runs
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    keep = keep_cleanup(items)
    for i, item in enumerate(items):
        if i not in keep:
            item.add_marker(MARKER)


def pytest_report_header() -> str:
    return f"tkvseam.seamtest.module_cleanup: '{MARKER}' on every test but the last of each file"
