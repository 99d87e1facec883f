"""Raw snapshots: every fetched response and its request, appended to rolling WARC/1.1 files.

::

    with WarcWriter("raw/", prefix="worker-1") as warc:
        ref = warc.write(url=..., method="GET", request_headers=[...], status=200, reason="OK",
                         http_version="HTTP/1.1", response_headers=[...], body=body,
                         fetched_at=time.time())
        ...
        warc.flush()          # durable: now the leases behind these pages may be acknowledged

Files are ``{prefix}-{YYYYmmddHHMMSS}-{seq:05d}.warc.gz.open`` while written, renamed to
``.warc.gz`` once closed; ``recover`` repairs the ``.open`` files a crashed writer left behind.

Why not ``warcio.WARCWriter``: it gzips at level 9 in the calling thread, about 2 ms per 45 KB page,
more than fetching and parsing it. Here the caller only builds header text (tens of µs); digests,
compression (gzip level 1, through ISA-L when installed: four times zlib's speed) and file writes
run in one background thread, and hashlib and the compressors release the GIL, so that work
overlaps with the event loop on a second core. The output is plain
WARC/1.1, one gzip member per record, which warcio (and every other WARC reader) reads back.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import queue
import random
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Final
from urllib.parse import unquote_plus

from crawlfleet.urls import mask_credentials

_isal_zlib: Any
try:
    from isal import isal_zlib as _isal_zlib
except ImportError:  # pragma: no cover - isal has wheels for the usual platforms
    _isal_zlib = None

__all__ = [
    "REVISIT_PROFILE",
    "SECRET_FIELDS",
    "SECRET_HEADERS",
    "Capture",
    "WarcRef",
    "WarcWriter",
    "mask_form_secrets",
    "recover",
]

OPEN_SUFFIX: Final = ".warc.gz.open"
CLOSED_SUFFIX: Final = ".warc.gz"
INVALID_SUFFIX: Final = ".warc.gz.invalid"

#: Header values never written in clear (lower-case names). Set-Cookie too: a session cookie the
#: server hands out is the same secret the next request's Cookie header carries.
SECRET_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
MASK: Final = "[secure]"
#: form fields whose values are never written in clear (a login's password), by name: any name
#: holding one of these (lower-case)
SECRET_FIELDS: Final = ("password", "passwd", "pwd", "passphrase", "secret")

# Framing headers that describe how the body travelled, not the body we store (de-chunked:
# WARC 1.1 §6.3.2's payload is the entity with any transfer-encoding removed): kept under this
# prefix so readers do not try to de-chunk it, and a Content-Length of the stored body set.
# Content-Encoding is one of them only when the body stored is the decoded one (a browser's).
_FRAMING_HEADERS: Final = frozenset({"transfer-encoding", "content-length"})
_ENCODING_HEADERS: Final = _FRAMING_HEADERS | {"content-encoding"}
_ORIGINAL_PREFIX: Final = "X-Crawlfleet-Original-"
_CRLF: Final = "\r\n"
_FILE_BUFFER: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class WarcRef:
    """Where a response was archived: the closed file's base name and its ``WARC-Record-ID``,
    with the record's ``WARC-Target-URI`` and ``WARC-Date`` (what a later revisit refers to) and
    whether it is itself a ``revisit``."""

    file: str
    record_id: str
    target_uri: str = ""
    date: str = ""
    revisit: bool = False


@dataclass(frozen=True, slots=True)
class Capture:
    """A response already archived in full, that later identical payloads refer to (``revisit``).

    ``file`` is the WARC file holding it as the caller locates it (a path or object URL),
    ``record_id`` its ``WARC-Record-ID``, ``target_uri`` and ``date`` its ``WARC-Target-URI`` and
    ``WARC-Date`` (WARC/1.1 ``WARC-Refers-To-*``).
    """

    file: str | None
    record_id: str
    target_uri: str
    date: str


#: the WARC/1.1 revisit profile for a payload identical to an earlier capture's
REVISIT_PROFILE: Final = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
#: the WARC/1.1 revisit profile for a server's 304 Not Modified to a conditional request
NOT_MODIFIED_PROFILE: Final = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


# --- Work items for the writer thread ---------------------------------------------------------


@dataclass(slots=True)
class _Record:
    """One record, ready but for its digests, length and compression (done in the thread)."""

    head: bytes  # WARC header lines, without digests, Content-Length and the blank line
    block_head: bytes  # start of the block: the HTTP header block ("" for warcinfo)
    payload: bytes
    #: a revisit record: the payload its WARC-Payload-Digest is computed over, not written
    omitted: bytes | None = None
    #: the payload's SHA-1, when the caller has it already (its content hash): not computed again
    payload_sha1: bytes | None = None
    #: whether the record names a payload digest (a 304's revisit has no payload to digest)
    payload_digest: bool = True


@dataclass(slots=True)
class _Open:
    path: Path


@dataclass(slots=True)
class _Close:
    path: Path
    final: Path


@dataclass(slots=True)
class _Flush:
    done: threading.Event = field(default_factory=threading.Event)


# Records travel in tuples: one queue hand-off (two lock round trips) per exchange, not per record.
_Item = tuple[_Record, ...] | _Open | _Close | _Flush | None  # None: stop the thread


# --- Record text --------------------------------------------------------------------------------


#: a version-4 UUID: its random bits, and its version (4) and variant (RFC 4122) bits
_UUID_RANDOM: Final = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID_V4: Final = (0x4000 << 64) | (0x8000 << 48)


class _RecordIds:
    """Version-4 UUIDs for ``WARC-Record-ID`` from a generator seeded once a process from the
    OS's randomness (``uuid.uuid4`` asks the kernel for 16 bytes each time: a system call, two
    records a page). Unique as uuid4 is: 122 random bits; reseeded in a forked child."""

    def __init__(self) -> None:
        self._pid = -1
        self._bits = random.Random()

    def __call__(self) -> str:
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._bits = random.Random(os.urandom(32))
        h = f"{self._bits.getrandbits(128) & _UUID_RANDOM | _UUID_V4:032x}"
        return f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}>"


_record_id = _RecordIds()


def _warc_date(ts: float) -> str:
    """WARC/1.1 date with microseconds: ``2024-05-01T12:00:00.123456Z``."""
    secs = int(ts)
    micros = round((ts - secs) * 1_000_000)
    if micros == 1_000_000:
        secs, micros = secs + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{micros:06d}Z"


def _clean(value: str) -> str:
    """A header value on one line: a CR or LF inside it would forge the next header."""
    if "\r" in value or "\n" in value:
        return value.replace("\r", " ").replace("\n", " ")
    return value


def _encode(text: str) -> bytes:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        # Clients decode raw header bytes as UTF-8 with surrogateescape; this restores them.
        return text.encode("utf-8", "surrogateescape")


def _http_block_head(
    start_line: str,
    headers: Sequence[tuple[str, str]],
    body_len: int,
    *,
    framed: bool,
    decoded: bool = False,
) -> bytes:
    """The HTTP header block as stored: secrets masked, framing rewritten for the stored body.

    ``Transfer-Encoding`` (and ``Content-Encoding`` when the body stored is ``decoded``) is kept
    as ``X-Crawlfleet-Original-*`` and a ``Content-Length`` matching the stored body is set
    (always if ``framed``; otherwise when the message had framing headers or a body: a bodiless
    GET gets none).
    """
    lines = [start_line]
    framed = framed or body_len > 0
    rewritten = _ENCODING_HEADERS if decoded else _FRAMING_HEADERS
    for name, value in headers:
        lower = name.lower()
        if lower in rewritten:
            framed = True
            if lower != "content-length" or value.strip() != str(body_len):
                lines.append(f"{_ORIGINAL_PREFIX}{name}: {_clean(value)}")
        elif lower in SECRET_HEADERS:
            lines.append(f"{name}: {MASK}")
        else:
            lines.append(f"{name}: {_clean(value)}")
    if framed:
        lines.append(f"Content-Length: {body_len}")
    lines.append(_CRLF)
    return _encode(_CRLF.join(lines))


def mask_form_secrets(body: bytes, headers: Sequence[tuple[str, str]]) -> bytes:
    """A URL-encoded form body with the values of its secret fields (:data:`SECRET_FIELDS`)
    masked; every other byte as it was. Other bodies are returned as they are."""
    if not body or b"=" not in body:
        return body
    content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
    if not content_type.lower().startswith("application/x-www-form-urlencoded"):
        return body
    pairs = body.split(b"&")
    changed = False
    for i, pair in enumerate(pairs):
        name, eq, _ = pair.partition(b"=")
        plain = unquote_plus(name.decode("latin-1")).lower()
        if eq and any(secret in plain for secret in SECRET_FIELDS):
            pairs[i] = name + b"=" + MASK.encode()
            changed = True
    return b"&".join(pairs) if changed else body


def _request_target(url: str) -> str:
    """Path and query of ``url``, as on an HTTP/1.1 request line."""
    scheme_sep = url.find("//")
    slash = url.find("/", scheme_sep + 2) if scheme_sep >= 0 else -1
    if slash < 0:
        query = url.find("?", scheme_sep + 2) if scheme_sep >= 0 else -1
        return "/" + url[query:] if query >= 0 else "/"
    fragment = url.find("#", slash)
    return url[slash:fragment] if fragment >= 0 else url[slash:]


def _target_uri(url: str) -> str:
    """``WARC-Target-URI`` of ``url``: credentials masked, and no fragment (never sent)."""
    return _clean(mask_credentials(url)).partition("#")[0]


def _warc_head(fields: Sequence[tuple[str, str]]) -> bytes:
    text = "WARC/1.1\r\n" + "".join(f"{name}: {value}\r\n" for name, value in fields)
    return _encode(text)


def _http_record(
    kind: str,
    record_id: str,
    concurrent_to: str,
    common: Sequence[tuple[str, str]],
    block_head: bytes,
    payload: bytes,
) -> _Record:
    head = _warc_head(
        [
            ("WARC-Type", kind),
            ("WARC-Record-ID", record_id),
            *common,
            ("WARC-Concurrent-To", concurrent_to),
            ("Content-Type", f"application/http; msgtype={kind}"),
        ]
    )
    return _Record(head=head, block_head=block_head, payload=payload)


def _revisit_record(
    record_id: str,
    concurrent_to: str,
    common: Sequence[tuple[str, str]],
    block_head: bytes,
    payload: bytes,
    original: Capture,
) -> _Record:
    """A ``revisit`` record (identical-payload-digest profile): the response's HTTP headers, no
    payload, and the original capture it stands for."""
    head = _warc_head(
        [
            ("WARC-Type", "revisit"),
            ("WARC-Record-ID", record_id),
            *common,
            ("WARC-Concurrent-To", concurrent_to),
            ("WARC-Profile", REVISIT_PROFILE),
            ("WARC-Refers-To", original.record_id),
            ("WARC-Refers-To-Target-URI", original.target_uri),
            ("WARC-Refers-To-Date", original.date),
            ("Content-Type", "application/http; msgtype=response"),
        ]
    )
    return _Record(head=head, block_head=block_head, payload=b"", omitted=payload)


def _not_modified_record(
    record_id: str,
    concurrent_to: str,
    common: Sequence[tuple[str, str]],
    block_head: bytes,
    original: Capture | None,
) -> _Record:
    """A ``revisit`` record (server-not-modified profile): the server's 304 to a conditional
    request, its headers only, referring to the last full capture of the page when known."""
    fields = [
        ("WARC-Type", "revisit"),
        ("WARC-Record-ID", record_id),
        *common,
        ("WARC-Concurrent-To", concurrent_to),
        ("WARC-Profile", NOT_MODIFIED_PROFILE),
    ]
    if original is not None:
        if original.record_id:
            fields.append(("WARC-Refers-To", original.record_id))
        fields.append(("WARC-Refers-To-Target-URI", original.target_uri))
        fields.append(("WARC-Refers-To-Date", original.date))
    fields.append(("Content-Type", "application/http; msgtype=response"))
    return _Record(
        head=_warc_head(fields), block_head=block_head, payload=b"", payload_digest=False
    )


def _sha1_b32(digest: hashlib._Hash) -> bytes:
    return b"sha1:" + base64.b32encode(digest.digest())


def _raw_size(record: _Record) -> int:
    """Uncompressed size of a record, digests and framing included (about 120 bytes)."""
    return len(record.head) + len(record.block_head) + len(record.payload) + 120


def _frame(record: _Record, level: int) -> bytes:
    """Digest, finish and gzip one record as its own member (runs in the writer thread)."""
    if record.payload_sha1 is not None:
        payload_sha1 = record.payload_sha1
    else:
        digested = record.payload if record.omitted is None else record.omitted
        payload_sha1 = hashlib.sha1(digested).digest()  # noqa: S324 - WARC digests are sha1
    block_digest = hashlib.sha1(record.block_head)  # noqa: S324
    block_digest.update(record.payload)
    length = len(record.block_head) + len(record.payload)
    head = b"".join(
        (
            record.head,
            b"WARC-Payload-Digest: sha1:" + base64.b32encode(payload_sha1) + b"\r\n"
            if record.block_head and record.payload_digest
            else b"",
            b"WARC-Block-Digest: " + _sha1_b32(block_digest) + b"\r\n",
            b"Content-Length: %d\r\n\r\n" % length,
        )
    )
    gz = _compressor(level)
    parts = [gz.compress(head), gz.compress(record.block_head), gz.compress(record.payload)]
    parts.append(gz.compress(b"\r\n\r\n"))
    parts.append(gz.flush())
    return b"".join(parts)


def _compressor(level: int) -> Any:
    """A gzip-member compressor (wbits 31). Levels 1-3 use ISA-L's deflate where installed:
    standard gzip, about four times faster than zlib's level 1 and no larger."""
    if _isal_zlib is not None and 1 <= level <= 3:
        return _isal_zlib.compressobj(level, _isal_zlib.DEFLATED, 31)
    return zlib.compressobj(level, zlib.DEFLATED, 31)


def _warcinfo(filename: str, record_id: str) -> _Record:
    head = _warc_head(
        [
            ("WARC-Type", "warcinfo"),
            ("WARC-Record-ID", record_id),
            ("WARC-Date", _warc_date(time.time())),
            ("WARC-Filename", filename),
            ("Content-Type", "application/warc-fields"),
        ]
    )
    info = (
        "software: crawlfleet\r\n"
        "format: WARC File Format 1.1\r\n"
        "conformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n"
    )
    return _Record(head=head, block_head=b"", payload=info.encode())


# --- The writer ---------------------------------------------------------------------------------


class WarcWriter:
    """Append request/response pairs to rolling gzipped WARC/1.1 files in ``directory``.

    Call ``write`` from one thread (the worker's event loop); ``flush`` may run in another
    (``asyncio.to_thread``) while writes go on, and covers the writes that returned before it
    was called. ``write`` returns at once;
    a background thread digests, compresses and writes. When ``queue_size`` records are waiting,
    ``write`` blocks until the thread catches up (back-pressure instead of unbounded memory).
    Nothing is durable before ``flush()`` or ``close()`` returns. If the thread fails (disk full),
    the next ``write``/``flush``/``close`` raises its error.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        prefix: str,
        max_size: int = 1 << 30,
        gzip_level: int = 1,
        fsync: bool = True,
        queue_size: int = 256,
    ) -> None:
        if "/" in prefix or os.sep in prefix or not prefix:
            raise ValueError(f"prefix must be a non-empty file name part, not {prefix!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.max_size = max_size
        self.gzip_level = gzip_level
        self.fsync = fsync
        self._queue: queue.Queue[_Item] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._seq = 0
        # The current file, as the caller sees it (the thread may lag behind).
        self._file: str | None = None  # final base name
        self._warcinfo_id = ""
        self._raw_queued = 0  # uncompressed bytes handed over for the current file
        # Written by the thread, read by the caller: (file, raw bytes done, compressed bytes).
        self._progress: tuple[str | None, int, int] = (None, 0, 0)

    # Public API

    def write(
        self,
        *,
        url: str,
        method: str,
        request_headers: Sequence[tuple[str, str]],
        status: int,
        reason: str,
        http_version: str,
        response_headers: Sequence[tuple[str, str]],
        body: bytes,
        fetched_at: float,
        ip: str | None = None,
        request_body: bytes | None = None,
        revisit_of: Capture | None = None,
        payload_sha1: bytes | None = None,
        not_modified: bool = False,
        as_received: bytes | None = None,
        truncated: bool = False,
    ) -> WarcRef:
        """Archive one exchange as a ``request`` and a ``response`` record; returns the response's.

        ``body`` is the body as received, or, with ``as_received``, the decoded one: the record
        then holds ``as_received`` (content-coded, its ``Content-Encoding`` as sent) and its
        payload digest is over those bytes, as WARC 1.1 and other crawlers' indexes have it.
        A decoded ``body`` alone (a browser's) is stored with ``Content-Encoding`` renamed
        ``X-Crawlfleet-Original-Content-Encoding``. ``truncated``: the body is cut short
        (``WARC-Truncated: length``). Credentials in headers and URL are masked. With
        ``revisit_of`` (an earlier capture of the same payload) the response is a ``revisit``
        record instead: its headers, the payload's digest, and a reference to ``revisit_of``;
        the payload itself is not stored again. ``payload_sha1`` is the stored payload's SHA-1
        if the caller has computed it already (it is then not computed again). ``not_modified``: the
        server answered a conditional request with 304; the response is a ``revisit`` record of
        the server-not-modified profile, referring to ``revisit_of`` (the page's last full
        capture) when given.
        """
        self._check()
        if self._file is None:
            self._start_file()
        assert self._file is not None
        target = _target_uri(url)
        request, response, response_id = self._build_pair(
            url=url,
            method=method,
            request_headers=request_headers,
            status=status,
            reason=reason,
            http_version=http_version,
            response_headers=response_headers,
            body=body,
            fetched_at=fetched_at,
            ip=ip,
            request_body=request_body or b"",
            revisit_of=revisit_of,
            not_modified=not_modified,
            as_received=as_received,
            truncated=truncated,
        )
        response.payload_sha1 = payload_sha1
        ref = WarcRef(
            self._file,
            response_id,
            target,
            _warc_date(fetched_at),
            revisit_of is not None or not_modified,
        )
        self._put(request, response)
        if self._estimated_size() >= self.max_size:
            self._end_file()
        return ref

    def write_resource(
        self,
        *,
        url: str,
        body: bytes,
        content_type: str,
        fetched_at: float,
        concurrent_to: str | None = None,
    ) -> WarcRef:
        """Archive ``body`` as a ``resource`` record (e.g. the DOM a browser rendered from a
        response), linked to that response record by ``WARC-Concurrent-To``."""
        self._check()
        if self._file is None:
            self._start_file()
        assert self._file is not None
        record_id, target = _record_id(), _target_uri(url)
        fields = [
            ("WARC-Type", "resource"),
            ("WARC-Record-ID", record_id),
            ("WARC-Date", _warc_date(fetched_at)),
            ("WARC-Target-URI", target),
            ("WARC-Warcinfo-ID", self._warcinfo_id),
        ]
        if concurrent_to:
            fields.append(("WARC-Concurrent-To", concurrent_to))
        fields.append(("Content-Type", _clean(content_type)))
        self._put(_Record(head=_warc_head(fields), block_head=b"", payload=body))
        ref = WarcRef(self._file, record_id, target, _warc_date(fetched_at))
        if self._estimated_size() >= self.max_size:
            self._end_file()
        return ref

    def write_metadata(
        self,
        *,
        url: str,
        fields: Sequence[tuple[str, str]],
        fetched_at: float,
        refers_to: str,
    ) -> WarcRef:
        """A ``metadata`` record about the record ``refers_to`` (``application/warc-fields``:
        one ``name: value`` line per field), e.g. that a response was a block page."""
        self._check()
        if self._file is None:
            self._start_file()
        assert self._file is not None
        record_id, target = _record_id(), _target_uri(url)
        head = [
            ("WARC-Type", "metadata"),
            ("WARC-Record-ID", record_id),
            ("WARC-Date", _warc_date(fetched_at)),
            ("WARC-Target-URI", target),
            ("WARC-Warcinfo-ID", self._warcinfo_id),
            ("WARC-Refers-To", refers_to),
            ("Content-Type", "application/warc-fields"),
        ]
        body = "".join(f"{_clean(k)}: {_clean(v)}\r\n" for k, v in fields).encode()
        self._put(_Record(head=_warc_head(head), block_head=b"", payload=body))
        ref = WarcRef(self._file, record_id, target, _warc_date(fetched_at))
        if self._estimated_size() >= self.max_size:
            self._end_file()
        return ref

    def flush(self) -> None:
        """Block until everything written so far is on disk (and fsynced, if enabled)."""
        self._check()
        if self._thread is None:
            return
        item = _Flush()
        self._queue.put(item)
        item.done.wait()
        self._check()

    def close(self) -> None:
        """Flush, close and rename the current file to ``.warc.gz``; stop the thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            if self._file is not None and self._error is None:
                self._end_file()
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # Caller side

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ValueError("WarcWriter is closed")

    def _put(self, *records: _Record) -> None:
        self._raw_queued += sum(map(_raw_size, records))
        self._queue.put(records)

    def _estimated_size(self) -> int:
        """Size the current file will reach: compressed bytes written + raw bytes still queued.

        Counting queued bytes uncompressed errs on the big side, so a file never overshoots
        ``max_size`` by more than one exchange.
        """
        file, raw_done, compressed = self._progress
        if file != self._file:
            return self._raw_queued
        return compressed + self._raw_queued - raw_done

    def _start_file(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="warc-writer", daemon=True)
            self._thread.start()
        name = self._next_name()
        self._file = name
        self._raw_queued = 0
        self._warcinfo_id = _record_id()
        self._queue.put(_Open(self.directory / (name + ".open")))
        self._put(_warcinfo(name, self._warcinfo_id))

    def _end_file(self) -> None:
        assert self._file is not None
        final = self.directory / self._file
        self._queue.put(_Close(self.directory / (self._file + ".open"), final))
        self._file = None

    def _next_name(self) -> str:
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        while True:
            base = f"{self.prefix}-{stamp}-{self._seq:05d}"
            self._seq += 1
            # A restarted worker with the same prefix may reuse a second: skip taken names.
            suffixes = (CLOSED_SUFFIX, OPEN_SUFFIX, INVALID_SUFFIX)
            if not any((self.directory / (base + s)).exists() for s in suffixes):
                return base + CLOSED_SUFFIX

    def _build_pair(
        self,
        *,
        url: str,
        method: str,
        request_headers: Sequence[tuple[str, str]],
        status: int,
        reason: str,
        http_version: str,
        response_headers: Sequence[tuple[str, str]],
        body: bytes,
        fetched_at: float,
        ip: str | None,
        request_body: bytes,
        revisit_of: Capture | None = None,
        not_modified: bool = False,
        as_received: bytes | None = None,
        truncated: bool = False,
    ) -> tuple[_Record, _Record, str]:
        """The request and response records (digests to come), and the response's record id."""
        version = (
            http_version if http_version.upper().startswith("HTTP/") else f"HTTP/{http_version}"
        )
        target_uri = _target_uri(url)
        date = _warc_date(fetched_at)
        request_id, response_id = _record_id(), _record_id()
        common = [("WARC-Date", date), ("WARC-Target-URI", target_uri)]
        if ip:
            common.append(("WARC-IP-Address", ip))
        common.append(("WARC-Warcinfo-ID", self._warcinfo_id))
        request_line = f"{method.upper()} {_request_target(target_uri)} {version}"
        request_body = mask_form_secrets(request_body, request_headers)
        request = _http_record(
            "request",
            request_id,
            response_id,
            common,
            _http_block_head(request_line, request_headers, len(request_body), framed=False),
            request_body,
        )
        status_line = f"{version} {status} {_clean(reason)}".rstrip()
        decoded = as_received is None
        if as_received is not None:
            body = as_received
        block_head = _http_block_head(
            status_line, response_headers, len(body), framed=True, decoded=decoded
        )
        if truncated:
            common = [*common, ("WARC-Truncated", "length")]
        if not_modified:
            response = _not_modified_record(response_id, request_id, common, block_head, revisit_of)
        elif revisit_of is not None:
            response = _revisit_record(
                response_id, request_id, common, block_head, body, revisit_of
            )
        else:
            response = _http_record("response", response_id, request_id, common, block_head, body)
        return request, response, response_id

    # Writer thread

    def _run(self) -> None:
        handle: BinaryIO | None = None
        file: str | None = None
        raw = compressed = 0
        while True:
            item = self._queue.get()
            if item is None:
                break
            if self._error is not None:
                # Failed: drain so callers never block, and wake anyone waiting on a flush.
                if isinstance(item, _Flush):
                    item.done.set()
                continue
            try:
                if isinstance(item, tuple):
                    assert handle is not None
                    for record in item:
                        data = _frame(record, self.gzip_level)
                        handle.write(data)
                        raw += _raw_size(record)
                        compressed += len(data)
                    self._progress = (file, raw, compressed)
                elif isinstance(item, _Open):
                    handle = open(item.path, "xb", buffering=_FILE_BUFFER)  # noqa: SIM115
                    # held while the file is written: recover() leaves a locked file alone
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    file, raw, compressed = item.path.name[: -len(".open")], 0, 0
                    self._sync_dir()
                elif isinstance(item, _Close):
                    assert handle is not None
                    self._sync(handle)
                    os.replace(item.path, item.final)  # renamed while still locked
                    handle.close()
                    handle = None
                    self._sync_dir()
                else:
                    if handle is not None:
                        self._sync(handle)
                    item.done.set()
            except BaseException as exc:  # handed to the caller on its next call
                self._error = exc
                if isinstance(item, _Flush):
                    item.done.set()
        if handle is not None:  # only after an error: the .open file stays for recover()
            handle.close()

    def _sync(self, handle: BinaryIO) -> None:
        handle.flush()
        if self.fsync:
            os.fsync(handle.fileno())

    def _sync_dir(self) -> None:
        """Make a created or renamed file's directory entry durable too."""
        if not self.fsync:
            return
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --- Crash recovery -----------------------------------------------------------------------------


def recover(directory: str | Path, *, prefix: str | None = None) -> list[str]:
    """Close the ``.open`` files dead writers left in ``directory`` (those of ``prefix`` only,
    if given); returns the paths they were renamed to.

    Each file is cut after its last complete record (one gzip member with an intact WARC record)
    and renamed to ``.warc.gz`` -- the name its records carry -- or to ``.warc.gz.invalid`` when
    no record survives. A live writer holds an exclusive lock (``flock``) on its ``.open`` file,
    on any machine that shares the directory's locks: such a file is left alone, so this is safe
    to run at any time, by any process.
    """
    renamed: list[str] = []
    for path in sorted(Path(directory).glob("*" + OPEN_SUFFIX)):
        if prefix is not None and not path.name.startswith(prefix + "-"):
            continue
        target = _recover_one(path)
        if target is not None:
            renamed.append(target)
    return renamed


def _recover_one(path: Path) -> str | None:
    """Close one ``.open`` file if no writer holds it; returns its new path."""
    try:
        handle = open(path, "r+b")  # noqa: SIM115 - closed below, after the rename
    except FileNotFoundError:
        return None  # closed by its writer meanwhile
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # a live writer
        try:
            if os.stat(path).st_ino != os.fstat(handle.fileno()).st_ino:
                return None  # renamed (closed) by its writer before the lock was ours
        except FileNotFoundError:
            return None
        good = _complete_prefix(path)
        base = str(path)[: -len(OPEN_SUFFIX)]
        if good == 0:
            target = base + INVALID_SUFFIX
        else:
            handle.truncate(good)
            handle.flush()
            os.fsync(handle.fileno())
            target = base + CLOSED_SUFFIX
        os.replace(path, target)
    return target


def _complete_prefix(path: Path) -> int:
    """Length of the leading run of gzip members that each hold one complete WARC record."""
    good = 0
    member = 0  # compressed bytes of the member being read
    inflater = zlib.decompressobj(31)
    out = bytearray()
    with open(path, "rb") as handle:
        while chunk := handle.read(_FILE_BUFFER):
            while chunk:
                try:
                    out += inflater.decompress(chunk)
                except zlib.error:  # corrupt bytes: keep what came before
                    return good
                member += len(chunk) - len(inflater.unused_data)
                if not inflater.eof:
                    break
                if not _is_complete_record(out):
                    return good
                good += member
                member = 0
                chunk = inflater.unused_data
                inflater = zlib.decompressobj(31)
                out = bytearray()
    return good


def _is_complete_record(data: bytes | bytearray) -> bool:
    if not data.startswith(b"WARC/1."):
        return False
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return False
    length = -1
    for line in bytes(data[:end]).split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip()) if value.strip().isdigit() else -1
    return length >= 0 and len(data) == end + 4 + length + 4 and data.endswith(b"\r\n\r\n")
