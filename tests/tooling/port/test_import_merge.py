"""The import-only merge (``tree.importmerge``): what it takes by itself and what stays a conflict.

A conflict whose three sides are imports alone is merged as sets of one-name statements; a name
two statements bind to different things is a real conflict (None: the port stops there).
"""

from __future__ import annotations

from tkvseam.tree.importmerge import Region, merge_region


def test_both_sides_adding_imports_are_merged():
    region = Region(
        ours=["import os\n", "import json\n"], base=["import os\n"], theirs=["import os\n", "import sys\n"]
    )
    assert merge_region(region) == (["import json\n", "import os\n", "import sys\n"], ["import sys"], [])


def test_a_plain_import_and_a_from_import_of_one_name_are_a_conflict():
    """Upstream adds the standard library's json, the patch vllm's: merged, the later binding would
    silently shadow the other in upstream's code."""
    region = Region(
        ours=["import json\n", "import os\n"],
        base=["import os\n"],
        theirs=["import os\n", "from vllm.utils import json\n"],
    )
    assert merge_region(region) is None


def test_a_dotted_import_binds_its_package_name():
    region = Region(
        ours=["import os\n", "import a.b\n"],
        base=["import os\n"],
        theirs=["import os\n", "from x import a\n"],
    )
    assert merge_region(region) is None


def test_plain_imports_of_one_package_bind_it_once():
    region = Region(
        ours=["import os\n", "import a.b\n"], base=["import os\n"], theirs=["import os\n", "import a.c\n"]
    )
    assert merge_region(region) == (["import a.b\n", "import a.c\n", "import os\n"], ["import a.c"], [])
