"""A patch's header: the mail header and commit message above its diff, parsed into ``Header``.

A patch file is ``git format-patch`` output: ``From``/``Subject`` mail headers, the commit
message body, ``---``, then the diff (``patch`` parses that). The subject is
``<slug>: <summary>``; the header fields are git trailers in the last paragraph of the message,
in order:

- ``Verdict`` (required): ``still needed``, ``still needed, fixed`` or ``re-expressed``
- ``Reason`` (required): why upstream still needs it, without leaning on a later patch
- ``Upstream`` (required): ``upstreamable`` (and how), or ``downstream-only`` and why
- ``Depends-on`` (required): slugs of earlier patches the code needs, or ``none``
- ``Test-depends-on``: slugs of earlier patches only the tests need (e.g. a
  test file an earlier patch creates)
- ``Tests`` (required unless ``Checks``): pytest node ids proving the patch;
  they fail before the patch and pass after it
- ``Guard``: node ids that pass with the patch (and may pass before it)
- ``Checks``: for patches without tests (documentation), what is checked
- ``Upstream-tests``: upstream test files that must keep passing
- ``Remove-when``: the event that makes the patch unneeded (e.g. the plugin release
  that no longer needs it); ``port report`` shows it beside the patch's verdict

``PatchFormatError`` is the error of every patch file that cannot be parsed (header or diff).
"""

from __future__ import annotations

import email.header
import re
from dataclasses import dataclass, field

from ..errors import SeamError

REQUIRED_TRAILERS = ("Verdict", "Reason", "Upstream", "Depends-on")
MULTI_TRAILERS = ("Test-depends-on", "Tests", "Guard", "Upstream-tests", "Checks")
_TRAILER_RE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): ?(.*)$")
_SUBJECT_RE = re.compile(r"^(?:\[PATCH[^\]]*\]\s*)?(?P<slug>[a-z0-9][a-z0-9.+-]*): (?P<summary>.+)$")


class PatchFormatError(SeamError):
    """A patch file cannot be parsed: ``patch`` names it, ``detail`` says what is wrong there."""

    default_hint = "make lint  (names every problem in series and patches/)"

    def __init__(self, patch: str, detail: str, hint: str | None = None):
        super().__init__(f"{patch}: {detail}", hint)
        self.patch, self.detail = patch, detail


@dataclass
class Header:
    author: str
    subject: str
    slug: str
    summary: str
    description: str
    trailers: dict[str, list[str]] = field(default_factory=dict)
    body: str = ""  # the commit message body exactly as written (description + trailers)

    @property
    def message(self) -> str:
        """The commit message this header came from (subject, blank line, body)."""
        return f"{self.slug}: {self.summary}\n" + (f"\n{self.body}\n" if self.body else "")

    def get(self, key: str) -> list[str]:
        return self.trailers.get(key, [])

    def _slugs(self, key: str) -> list[str]:
        values = ", ".join(self.get(key))
        return [v.strip() for v in values.split(",") if v.strip() and v.strip() != "none"]

    @property
    def depends_on(self) -> list[str]:
        return self._slugs("Depends-on")

    @property
    def test_depends_on(self) -> list[str]:
        return self._slugs("Test-depends-on")

    @property
    def tests(self) -> list[str]:
        return self.get("Tests")

    @property
    def guards(self) -> list[str]:
        return self.get("Guard")

    @property
    def remove_when(self) -> str:
        """The patch's removal condition (``Remove-when``), or "" when it names none."""
        return " ".join(self.get("Remove-when"))


def _decode(value: str) -> str:
    return str(email.header.make_header(email.header.decode_header(value)))


def parse_header(text: str, name: str) -> Header:
    """Parse the mail header and commit message above the diff."""
    lines = text.split("\n")
    headers: dict[str, str] = {}
    i = 0
    if lines and lines[0].startswith("From "):
        i = 1
    key = None
    while i < len(lines) and lines[i] != "":
        line = lines[i]
        if line[:1] in (" ", "\t") and key:
            headers[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip()] = value.strip()
        else:
            raise PatchFormatError(name, f"line {i + 1}: not a mail header line: {line!r}")
        i += 1
    for required in ("From", "Subject"):
        if required not in headers:
            raise PatchFormatError(
                name,
                f"missing {required}: header (expected git format-patch output)",
                hint="export patches with `make refresh`",
            )
    subject = _decode(headers["Subject"])
    m = _SUBJECT_RE.match(subject)
    if not m:
        raise PatchFormatError(
            name, f"Subject {subject!r} is not '<slug>: <summary>' (slug: lower-case, digits, -)"
        )
    body = lines[i + 1 :]
    if "---" in body:
        body = body[: body.index("---")]
    body_text = "\n".join(body).strip("\n")
    paragraphs = "\n".join(body).strip("\n").split("\n\n")
    trailers: dict[str, list[str]] = {}
    last = paragraphs[-1].split("\n") if paragraphs and paragraphs[-1].strip() else []
    if last and all(_TRAILER_RE.match(x) or x[:1] == " " for x in last) and _TRAILER_RE.match(last[0]):
        cur = None
        for line in last:
            if line[:1] == " " and cur:
                trailers[cur][-1] += " " + line.strip()
                continue
            k, v = _TRAILER_RE.match(line).groups()  # type: ignore[union-attr]
            cur = k
            trailers.setdefault(k, []).append(v.strip())
        paragraphs = paragraphs[:-1]
    return Header(
        author=_decode(headers["From"]),
        subject=subject,
        slug=m.group("slug"),
        summary=m.group("summary"),
        description="\n\n".join(paragraphs).strip(),
        trailers=trailers,
        body=body_text,
    )
