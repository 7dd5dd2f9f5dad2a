"""A patch's commit message as the port edits it: its trailers set, its header read back, its verdict checked.

A patch header is its commit message (``patch.Header``); the port commits a resolved patch with
the message the user edited, so what that message must keep is said here, beside the header:
its subject keeps the patch's slug, its last paragraph the header fields
(``patch.REQUIRED_TRAILERS``), and its ``Verdict:`` is one a queue patch may have (``VERDICTS``).
"""

from __future__ import annotations

from .patch import REQUIRED_TRAILERS, Header, Patch, PatchFormatError, parse_text

# The verdicts of a patch in a queue (README, docs/patches.md). A patch the port leaves out
# (``port skip``) is "obsolete" or "dropped" (``SKIP_VERDICTS``) and is in no queue.
VERDICTS = ("still needed", "still needed, fixed", "re-expressed")
SKIP_VERDICTS = ("obsolete", "dropped")


def verdict_problem(verdict: str) -> str | None:
    """Why ``verdict`` is no queue patch's verdict, or None when it is one."""
    if verdict in VERDICTS:
        return None
    return f"Verdict {verdict!r} is not one of {', '.join(repr(v) for v in VERDICTS)}"


def set_trailer(message: str, key: str, value: str) -> str:
    """``message`` with its ``key:`` trailer (and continuation lines) replaced by ``value``."""
    lines = message.rstrip("\n").split("\n")
    out, skipping, done = [], False, False
    for line in lines:
        if line.startswith(f"{key}:"):
            if not done:
                out.append(f"{key}: {value}")
                done = True
            skipping = True
            continue
        if skipping and line.startswith(" "):
            continue
        skipping = False
        out.append(line)
    if not done:
        out.append(f"{key}: {value}")
    return "\n".join(out) + "\n"


def message_header(patch: Patch, message: str) -> Header:
    """The header fields (Verdict, Reason, ...) of a commit message written for ``patch``.

    Raises ``PatchFormatError`` for a message that is no patch header (its subject not
    ``<slug>: <summary>``).
    """
    return parse_text(
        f"From: {patch.header.author}\nSubject: {message}\ndiff --git a/x b/x\n", patch.name
    ).header


def message_problem(patch: Patch, message: str) -> str | None:
    """Why committing ``message`` for ``patch`` would lose the patch's identity or header fields
    (or give it a verdict no queue patch has); None when the message keeps them."""
    try:
        header = message_header(patch, message)
    except PatchFormatError as e:
        return e.message
    if header.slug != patch.header.slug:
        return (
            f"the subject starts with {header.slug!r}, not the patch's slug {patch.header.slug!r} "
            "(the patch would be renamed)"
        )
    missing = [key for key in REQUIRED_TRAILERS if not header.get(key)]
    if missing:
        return (
            f"the message lost the header field(s) {', '.join(missing)} (a blank line inside "
            "the fields, or a field removed, ends them): the exported patch would fail lint"
        )
    bad = [v for v in header.get("Verdict") if verdict_problem(v)]
    if bad:
        return f"{verdict_problem(bad[0])}: the exported patch would fail lint"
    return None
