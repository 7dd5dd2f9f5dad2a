"""The package index client: a project's PEP 691 JSON page and file downloads, both bounded.

``listing`` reads at most ``MAX_LISTING_BYTES`` of the project page and checks its shape
(an object whose ``files`` is a list of objects); each entry with a string ``filename``
becomes an ``IndexFile``, whose other fields are checked when the entry is used
(``IndexFile.problem``), so one odd entry does not hide the others; one naming no file is
``Listing.skipped`` (a release list never says "nothing new" past it). File URLs are resolved against the page and
followed only in the index's own scheme (an index on http(s) never sends the tool to
``file://``), redirects included. ``download`` writes at most the expected size.

Errors: the index unreachable, an HTTP error or a download cut short are network errors
(exit 8, run again); an answer that is not a PEP 691 page is exit 8 too, naming what is
wrong; a write to this machine that fails (disk full) is a local error (exit 1), never
"network".
"""

from __future__ import annotations

import http.client
import json
import os
import shlex
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..errors import NetworkError, SeamError, UsageError, VerifyError
from ..progress import QUIET, Progress

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
MAX_LISTING_BYTES = 32 << 20  # PyPI's vllm page: 128 KB on 2026-12-01
TIMEOUT = 60
CHUNK = 1 << 20
INDEX_HINT = "check network access to the package index (TKV_SEAM_INDEX_URL), then run the command again"


PYPI_SIMPLE = "https://pypi.org/simple"  # pip's and uv's default index
INDEX_VARIABLES = ("TKV_SEAM_INDEX_URL", "PIP_INDEX_URL", "UV_INDEX_URL")  # the first one set wins
SCHEMES = ("https", "http", "file")


def default_index_url() -> str:
    """The package index's Simple API root: ``TKV_SEAM_INDEX_URL``, else the index pip or uv is
    told to use (``PIP_INDEX_URL``, ``UV_INDEX_URL``), else PyPI's (``PYPI_SIMPLE``)."""
    for var in INDEX_VARIABLES:
        value = os.environ.get(var, "").strip()
        if value:
            return checked_index_url(value, f"${var}").rstrip("/")
    return PYPI_SIMPLE


def checked_index_url(index_url: str, where: str = "the index URL") -> str:
    """``index_url`` if it is an http(s) or file URL without credentials; a usage error (exit 2)
    naming ``where`` it came from otherwise."""
    no_credentials(index_url)
    try:
        parts = urllib.parse.urlsplit(index_url)
    except ValueError as e:
        parts, why = None, str(e)
    else:
        why = ""
    if parts is not None and parts.scheme not in SCHEMES:
        why = f"its scheme is {parts.scheme + ':' if parts.scheme else 'missing'}, not one of {', '.join(SCHEMES)}"
    elif parts is not None and parts.scheme != "file" and not parts.hostname:
        why = "it names no host"
    if why:
        raise UsageError(
            f"{where} {index_url!r} is not a package index URL: {why}",
            hint=f"export TKV_SEAM_INDEX_URL={PYPI_SIMPLE}  (a PEP 691 Simple API root)",
        )
    return index_url


class _SameScheme(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only in the scheme the request started with."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, newurl)).scheme
        if new != urllib.parse.urlsplit(req.full_url).scheme:
            raise urllib.error.HTTPError(
                req.full_url, code, f"redirect to another scheme refused: {newurl}", headers, fp
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameScheme)


def _open(url: str, what: str, hint: str, accept: str | None = None):
    try:
        req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
        return _OPENER.open(req, timeout=TIMEOUT)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
        raise NetworkError(f"cannot fetch {what}: {e}", hint=hint) from e


@dataclass(frozen=True)
class IndexFile:
    """One entry of a project page; ``problem`` says why it cannot be downloaded ('' if it can)."""

    filename: str
    url: str
    size: int | None
    sha256: str | None
    yanked: bool | str
    problem: str = ""

    def usable(self) -> IndexFile:
        """This entry, or a VerifyError naming what the index got wrong about it."""
        if self.problem:
            raise VerifyError(
                f"the index's entry for {self.filename}: {self.problem}",
                hint="use an index that serves PEP 691 JSON (TKV_SEAM_INDEX_URL); nothing was downloaded",
            )
        return self


def _entry(raw: dict, page: str) -> IndexFile:
    problems = []
    url = raw.get("url")
    if not isinstance(url, str) or not url:
        problems.append("no url")
        url = ""
    else:
        url = urllib.parse.urljoin(page, url)
        scheme, want = urllib.parse.urlsplit(url).scheme, urllib.parse.urlsplit(page).scheme
        if scheme != want:
            problems.append(f"its url {url} is {scheme or 'not a URL'}:, not the index's {want}:")
    hashes = raw.get("hashes", {})
    sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
    if isinstance(sha256, str):
        sha256 = sha256.lower()  # hex: either case is the same digest
    if not isinstance(hashes, dict):
        problems.append(f"hashes is a {type(hashes).__name__}, not a table")
    elif sha256 is not None and not (
        isinstance(sha256, str) and len(sha256) == 64 and all(c in "0123456789abcdef" for c in sha256)
    ):
        problems.append(f"hashes.sha256 {sha256!r} is not 64 hex digits")
        sha256 = None
    size = raw.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        problems.append(f"size {size!r} is not a number of bytes")
        size = None
    yanked = raw.get("yanked", False)
    if not isinstance(yanked, bool | str) or yanked == "":
        yanked = True  # PEP 592: anything but false/absent marks it yanked ("" too, as pip and uv read it)
    return IndexFile(raw["filename"], url, size, sha256, yanked, "; ".join(problems))


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


@dataclass(frozen=True)
class Listing:
    url: str
    files: list[IndexFile]
    skipped: tuple[str, ...] = ()  # the entries that name no file (so cannot be read), and why


def no_credentials(index_url: str) -> None:
    """Refuse an index URL carrying user:password (never sent, and never printed back)."""
    try:
        parts = urllib.parse.urlsplit(index_url)
    except ValueError:
        return  # not a URL at all: ``checked_index_url`` says so
    if parts.username is not None or parts.password is not None:
        shown = parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]).geturl()
        raise UsageError(
            f"the index URL {shown} carries credentials; tkv-seam sends none (and prints none)",
            hint="export TKV_SEAM_INDEX_URL=<the Simple API root, without user:password>",
        )


def _same_api_and_project(data: dict, project: str, url: str) -> None:
    """PEP 629: a major API version other than 1 is refused; a page naming another project too."""
    meta = data.get("meta")
    version = meta.get("api-version") if isinstance(meta, dict) else None
    if version is not None and not (isinstance(version, str) and version.split(".", 1)[0] == "1"):
        raise NetworkError(
            f"{url} speaks Simple API {version}; tkv-seam reads 1.x (PEP 691)",
            hint="check TKV_SEAM_INDEX_URL: it must be a PEP 691 Simple API root",
        )
    name = data.get("name")
    if isinstance(name, str) and canonicalize_name(name) != canonicalize_name(project):
        raise NetworkError(
            f"{url} is the page of {name!r}, not of {project}",
            hint="check TKV_SEAM_INDEX_URL: it must be a PEP 691 Simple API root",
        )


def listing(project: str, index_url: str, hint: str = INDEX_HINT) -> Listing:
    """The project's page on the Simple API (PEP 691 JSON), checked and bounded."""
    checked_index_url(index_url)
    url = f"{index_url.rstrip('/')}/{urllib.parse.quote(project)}/"
    with _open(url, url, hint, SIMPLE_JSON) as resp:
        declared = resp.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > MAX_LISTING_BYTES:
            raise NetworkError(
                f"{url} answers {int(declared)} bytes, more than the {_size(MAX_LISTING_BYTES)} "
                "a project page may have; not read",
                hint="check TKV_SEAM_INDEX_URL: it must be a PEP 691 Simple API root",
            )
        try:
            body = resp.read(MAX_LISTING_BYTES + 1)
        except (http.client.HTTPException, OSError) as e:
            raise NetworkError(f"cannot read {url}: {e}", hint=hint) from e
    if len(body) > MAX_LISTING_BYTES:
        raise NetworkError(
            f"{url} is larger than the {_size(MAX_LISTING_BYTES)} a project page may have; not read further",
            hint="check TKV_SEAM_INDEX_URL: it must be a PEP 691 Simple API root",
        )
    try:
        data = json.loads(body)
    except ValueError as e:
        raise NetworkError(f"{url} did not answer PEP 691 JSON: {e}", hint=hint) from e
    except RecursionError as e:  # "[[[[…" past the parser's depth: no project page is shaped so
        raise NetworkError(
            f"{url} did not answer PEP 691 JSON: nested deeper than the parser goes "
            f"({sys.getrecursionlimit()} levels)",
            hint="check TKV_SEAM_INDEX_URL: it must be a PEP 691 Simple API root",
        ) from e
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        what = (
            f"'files' is a {type(files).__name__}" if isinstance(data, dict) else f"a {type(data).__name__}"
        )
        raise NetworkError(
            f"{url} is not a PEP 691 project page ({what}; expected an object with a 'files' list)",
            hint="check TKV_SEAM_INDEX_URL: it must be a PEP 691 Simple API root",
        )
    _same_api_and_project(data, project, url)
    entries, skipped = [], []
    for i, f in enumerate(files):
        if not isinstance(f, dict):  # a list of anything but entries is no project page
            raise NetworkError(
                f"{url} is not a PEP 691 project page (files[{i}] is a {type(f).__name__}; each entry is "
                "an object naming its file)",
                hint="check TKV_SEAM_INDEX_URL: it must be a PEP 691 Simple API root",
            )
        if isinstance(f.get("filename"), str):
            entries.append(_entry(f, url))
        else:  # one odd entry does not hide the others; who lists releases says it was there
            skipped.append(f"files[{i}] has no string 'filename'")
    return Listing(url, entries, tuple(skipped))


def download(
    url: str, part: Path, size: int, label: str, hint: str = INDEX_HINT, progress: Progress = QUIET
) -> int:
    """Write ``url``'s bytes to ``part`` (created afresh, never through a symlink), at most ``size``.

    Returns the bytes fetched. Raises NetworkError when the transfer fails or ends short,
    VerifyError when the server sends more than ``size``, SeamError (exit 1) when ``part``
    cannot be written. The caller removes ``part`` on failure.
    """
    fetched = 0
    with _open(url, url, hint) as resp:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            while True:
                try:
                    chunk = resp.read(min(CHUNK, size + 1 - fetched))
                except (http.client.HTTPException, OSError) as e:
                    raise NetworkError(
                        f"download of {url} failed after {fetched} of {size} bytes: {e}",
                        hint="run the command again to download it afresh",
                    ) from e
                if not chunk:
                    break
                fetched += len(chunk)
                if fetched > size:
                    raise VerifyError(
                        f"{url} sends more than the {size} bytes expected of {label}; the download was deleted",
                        hint="check that the index serves the pinned release (bases.toml), then run the command again",
                    )
                _write_all(fd, chunk, part)
                progress.bytes(label, fetched, size)
            try:
                os.fsync(fd)
            except OSError as e:
                raise local_write_error(part, e) from e
        finally:
            os.close(fd)
    if fetched < size:
        raise NetworkError(
            f"download of {url} cut short: {fetched} of {size} bytes; nothing was kept",
            hint="run the command again to download it afresh",
        )
    return fetched


def _write_all(fd: int, data: bytes, path: Path) -> None:
    """Write every byte (unbuffered: a failing write is seen here, not at close)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except OSError as e:
            raise local_write_error(path, e) from e


def local_write_error(path: Path, e: OSError) -> SeamError:
    """A write to this machine failed (disk full, quota, read-only): exit 1, not 'network'."""
    where = shlex.quote(str(path.parent))
    return SeamError(
        f"cannot write {path}: {e.strerror or e}; nothing was kept",
        hint=f"df -h {where}  (free space there, or export TKV_SEAM_CACHE=<a roomier directory>), "
        "then run the command again",
    )
