"""The gate checks what is written (issue 33): the queue as patches/<base>/ holds it, and every
commit of the port tree as it is now.

The gate case (``fixtures/gatecase.py``): 0003 calls ``mul()``, which v9.10.0's 0002 (resolved as
``product()``) no longer defines. A queue file edited back to ``mul`` is not carried because a
tree's working file is fixed; an earlier commit amended after it passed the gate is gated again.
"""

from __future__ import annotations

import json


from tkvseam import git

from ..fixtures.carry import carry, wheels  # noqa: F401  (fixtures)
from ..fixtures.carrying import NEW_NAME
from ..fixtures.gatecase import ARG_UTILS, fix_square, gate_project, make_gate_queue, resolve_as_product  # noqa: F401  (gate_project: a fixture)

CACHE = "vllm/config/cache.py"
_GIT = ["-c", "user.name=A User", "-c", "user.email=user@example.com"]


def _tree(project):
    return project.root / "build" / f"port-{NEW_NAME}"


def _at_0003(project, wheels) -> None:  # noqa: F811
    """The port stopped at 0003 (breaks: F821 `mul`), 0001 and 0002 committed."""
    carry(project, wheels, expect=12)
    resolve_as_product(_tree(project))
    assert "stopped at 0003-use-mul.patch: breaks" in carry(project, wheels, expect=12).stderr


def test_an_uncommitted_fix_in_a_tree_does_not_make_the_queue_carried(gate_project, wheels):  # noqa: F811
    _at_0003(gate_project, wheels)
    fix_square(_tree(gate_project))
    assert json.loads(carry(gate_project, wheels, "--json").stdout)["carried"]
    # the queue file says mul() again (edited by hand); a tree of it has the fix, not committed
    patch = gate_project.root / "patches" / NEW_NAME / "0003-use-mul.patch"
    patch.write_text(patch.read_text().replace("+    return product(a, a)", "+    return mul(a, a)"))
    gate_project.cli("apply", "--base", NEW_NAME)
    build = gate_project.root / "build" / f"vllm-{NEW_NAME}"
    (build / ARG_UTILS).write_text((build / ARG_UTILS).read_text().replace("mul(a, a)", "product(a, a)"))
    res = carry(gate_project, wheels, expect=6)
    assert f"{NEW_NAME}: NOT carried" in res.output and f"{NEW_NAME}: carried" not in res.output
    assert f"{ARG_UTILS}:2:12: F821 Undefined name `mul`" in res.stderr
    assert "lint + style gate of the queue as written" in res.output


def _amend(tree, slug: str, path: str, old: str, new: str) -> None:
    """Change ``path`` in the commit of ``slug`` (fixup + autosquash), keeping what is staged."""
    git.core.run(tree, *_GIT, "stash", "-q")
    text = (tree / path).read_text()
    assert old in text
    (tree / path).write_text(text.replace(old, new, 1))
    git.core.run(tree, *_GIT, "commit", "-q", "-a", f"--fixup=:/^{slug}:")
    git.core.run(
        tree, *_GIT, "rebase", "-q", "-i", "--autosquash", "tkv-seam-base", env={"GIT_SEQUENCE_EDITOR": ":"}
    )
    git.core.run(tree, *_GIT, "stash", "pop", "-q", "--index")


def test_an_earlier_commit_amended_after_it_passed_the_gate_is_gated_again(gate_project, wheels):  # noqa: F811
    tree = _tree(gate_project)
    _at_0003(gate_project, wheels)
    _amend(tree, "cache-tweak", CACHE, "# line 10 (seam)\n", "# line 10 (seam)\nseam = undefined_name\n")
    fix_square(tree)  # 0003's own fix: it passes now; 0001 does not
    stop = carry(gate_project, wheels, expect=12).stderr
    assert "port to v9.10.0 stopped at 0001-cache-tweak.patch: breaks" in stop
    assert "was changed after it passed the gate" in stop
    assert f"{CACHE}:13 F821 Undefined name `undefined_name`" in stop
    assert "--fixup=:/^cache-tweak:" in stop and "stash pop --index" in stop  # how, the staged work aside
    assert not (gate_project.root / "patches" / NEW_NAME).exists()

    _amend(tree, "cache-tweak", CACHE, "seam = undefined_name\n", "")
    out = json.loads(carry(gate_project, wheels, "--json").stdout)
    assert out["carried"] and out["problems"] == []
