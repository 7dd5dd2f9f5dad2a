"""carry's hints run as written and are the next step (issue 26): a stop's skip hint quotes its
reason placeholder, a version that is no version is answered with the releases there are and
``make carry``, and a verdict no queue patch may have is refused before anything is done."""

from __future__ import annotations

import shlex

from ..fixtures.carry import carry, carry_project, wheels  # noqa: F401  (fixtures)
from ..fixtures.carrying import NEW, NEW_NAME


def test_a_stop_hints_a_skip_whose_reason_placeholder_is_quoted(carry_project, wheels):  # noqa: F811
    err = carry(carry_project, wheels, expect=12).stderr
    skip = f"make port VERB=skip TO={NEW_NAME} REASON='<why>'"
    assert skip in err and "REASON=<why>" not in err  # unquoted, the shell reads <why> as a redirection
    assert shlex.split(skip)[-1] == "REASON=<why>"  # filled in, it is one word


def test_a_version_that_is_no_version_names_watch_and_carry_not_a_made_up_pin(carry_project):  # noqa: F811
    before = (carry_project.root / "bases.toml").read_bytes()
    err = carry_project.cli("carry", "banana", expect=2).stderr
    assert "'banana' is not a PEP 440 version" in err
    assert "`make watch`" in err and "`make carry VERSION=<version>`" in err
    assert "make pin" not in err and "0.34.0`" not in err
    assert (carry_project.root / "bases.toml").read_bytes() == before


def test_carry_refuses_an_unknown_verdict_before_it_pins(carry_project, wheels):  # noqa: F811
    before = (carry_project.root / "bases.toml").read_bytes()
    err = carry(carry_project, wheels, "--verdict", "bogus", "--reason", "x", expect=2).stderr
    assert "Verdict 'bogus' is not one of 'still needed', 'still needed, fixed', 're-expressed'" in err
    assert f"make carry VERSION={NEW} VERDICT='still needed'" in err
    assert (carry_project.root / "bases.toml").read_bytes() == before  # nothing pinned
    assert not (carry_project.root / "build" / f"port-{NEW_NAME}").exists()


def test_a_carry_refused_at_its_stop_names_carry_again_not_a_port_verb(carry_project, wheels):  # noqa: F811
    """Run again before the stop is resolved: the refusal's next step is the carry (which proves
    the patch), never `make port VERB=continue` (which does not)."""
    carry(carry_project, wheels, expect=12)
    err = carry(carry_project, wheels, expect=5).stderr
    assert "0002-add-mul.patch: still unmerged: vllm/engine/arg_utils.py" in err
    assert "then `make carry VERSION=9.10.0`" in err and "VERB=continue" not in err
