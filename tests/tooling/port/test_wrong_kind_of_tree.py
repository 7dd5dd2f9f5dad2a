"""A port verb given another kind of tree tkv-seam made (``PORT_TREE=build/vllm-<base>``, a slip).

The answer named the build tree as "no port tkv-seam can go on with", and its hint said to move
the build tree aside and start a port *at its path*. A tree the tool made for something else is
the user's tree of that kind: the hint names the port's own tree, and moves nothing.
"""

from __future__ import annotations

from ..fixtures.carrying import NEW_NAME
from ..fixtures.carry import carry_project, wheels  # noqa: F401


def test_a_build_tree_given_as_the_port_tree_is_not_to_be_moved_aside(carry_project):  # noqa: F811
    carry_project.cli("pin", "9.10.0")
    build_tree = carry_project.root / "build" / "vllm-v9.9.9"
    assert build_tree.is_dir()
    for verb in ("status", "continue", "abort"):
        err = carry_project.cli("port", verb, "--to", NEW_NAME, "--tree", str(build_tree), expect=1).stderr
        assert "a tkv-seam apply tree of v9.9.9, not a port" in err
        hint = err.split("next: ", 1)[1]
        assert "mv " not in hint and str(build_tree) not in hint, hint
        assert f"make port VERB=status TO={NEW_NAME}" in hint
    assert (build_tree / ".git" / "tkv-seam.json").is_file()


def test_a_tree_inside_a_git_directory_is_refused_and_nothing_is_made_there(carry_project):  # noqa: F811
    """A tree under the project's .git (``--tree .git/refs/heads/port``) would be files git reads as
    its own: refs it cannot parse (``git gc``: fatal: bad object). Refused, for apply and port alike."""
    from tkvseam import git

    carry_project.cli("pin", "9.10.0")
    inside = carry_project.root / ".git" / "refs" / "heads" / "port"
    err = carry_project.cli(
        "port", "start", "--base", "v9.9.9", "--to", NEW_NAME, "--tree", str(inside), expect=5
    ).stderr
    assert "inside the git directory" in err and not inside.exists()
    err = carry_project.cli("apply", "--base", "v9.9.9", "--tree", str(inside), expect=5).stderr
    assert "inside the git directory" in err and not inside.exists()
    assert git.core.run(carry_project.root, "for-each-ref").stdout.decode().count("refs/heads/") == 1


def test_a_file_given_as_the_port_tree_is_named_and_no_start_is_hinted_there(carry_project):  # noqa: F811
    """``--tree bases.toml`` (a slip): said to be a file, not "no port in progress" with a hint to
    start a port at that path (which start refuses)."""
    carry_project.cli("pin", "9.10.0")
    bases = carry_project.root / "bases.toml"
    for verb in ("status", "continue", "abort"):
        err = carry_project.cli("port", verb, "--to", NEW_NAME, "--tree", str(bases), expect=1).stderr
        assert f"{bases} is a file, not a port tree" in err
        assert "PORT_TREE=" not in err and "choose another --tree" in err
    own = carry_project.root / "build" / f"port-{NEW_NAME}"
    own.write_text("a file where the port tree goes\n")
    err = carry_project.cli("port", "status", "--to", NEW_NAME, expect=1).stderr
    assert (
        f"`mv {own} {own}.mine` (or choose another --tree), then `make port VERB=start TO={NEW_NAME}`" in err
    )
