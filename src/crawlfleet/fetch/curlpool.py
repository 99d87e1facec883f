"""curl-impersonate's easy handles on curl_cffi's event-loop driver, with as little Python per
request as the impersonating fetcher can get by with.

curl_cffi's own ``AsyncSession`` rebuilds every option of a handle in Python per request (two
dozen ``setopt`` calls, a cookie jar, a response object, a queue for the streamed body): as
much CPU as the whole HTTP fetcher spends on a page. Here a request is: a handle from a pool,
primed once with its profile (``curl_easy_impersonate``: the TLS ClientHello, the HTTP/2
settings and the browser's default headers) and the options all requests share, the request's
own few options (URL, headers, pinned addresses, callbacks), the body handed to a decoder as
curl receives it (its cap raised from inside curl's write callback, which ends the transfer at
once), and the response head read from curl's header callback. Connections live in the multi
handle and are reused across handles. A plain GET's handle goes back to the pool primed, its
header and resolve lists emptied; any other request's is reset (primed again when next taken);
one whose transfer was cancelled is closed instead.

:class:`Transfer` is one request's outcome. ``errors`` raised here are curl_cffi's
``CurlError`` (``code``: the ``CURLcode``) or what the body callback raised; the fetcher
translates them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from crawlfleet.fetch.limits import BodyDecoder

__all__ = ["CurlPool", "HeadCheck", "Transfer"]

#: the caps of a response head, given its size in bytes and its header pairs (raises)
HeadCheck = Callable[[int, list[tuple[str, str]]], None]

#: idle handles kept per profile
_KEEP: Final = 64
#: bytes curl hands the body callback at most at once (its default is 16 KiB)
_BUFFER: Final = 128 * 1024
_HEADER_OUT: Final = 2  # CURLINFO_HEADER_OUT: the request head curl sent
# curl's HTTP version numbers (CURLINFO_HTTP_VERSION)
VERSIONS: Final = {1: "HTTP/1.0", 2: "HTTP/1.1", 3: "HTTP/2", 30: "HTTP/3"}


@dataclass(slots=True)
class Transfer:
    """One request's response: its head (the final one: not a proxy's CONNECT answer, not a
    1xx), its body decoded under the cap, and what curl said of the connection."""

    status: int = 0
    reason: str = ""
    http_version: str = "HTTP/1.1"
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    received: bytes | None = None
    """The body as received when it had a content-coding (``body`` is it decoded)."""
    wire_bytes: int = 0
    truncated: bool = False
    remote_ip: str | None = None
    sent: list[bytes] = field(default_factory=list)
    """The request heads curl sent, when asked to record them."""


class _Truncated(Exception):
    """The body reached the cap of a request that asked to be cut there."""


class _Reading:
    """The callbacks of one transfer: header lines, then body chunks into the decoder. The
    final head is parsed once, when the body starts (or the transfer ends without one)."""

    __slots__ = ("cap", "check", "decoder", "head_size", "headers", "lines", "reason", "truncate")

    def __init__(self, cap: int, truncate: bool, check: HeadCheck) -> None:
        self.cap = cap
        self.truncate = truncate
        self.check = check  # the head's caps, once it is complete
        self.lines: list[bytes] = []
        self.decoder: BodyDecoder | None = None
        self.reason = ""
        self.headers: list[tuple[str, str]] | None = None
        self.head_size = 0

    def head(self, line: bytes) -> int:
        if line[:5] == b"HTTP/":  # a new response head (after a 1xx or a proxy's CONNECT)
            self.lines = [line]
        else:
            self.lines.append(line)
        return len(line)

    def body(self, chunk: bytes) -> int:
        if self.decoder is None:
            self.decoder = self.start()
        if not self.decoder.feed(chunk):
            raise _Truncated  # cut at the cap: ends the transfer (curl_cffi hands it back)
        return len(chunk)

    def parse(self) -> list[tuple[str, str]]:
        """The final head's header pairs (its reason in ``reason``), parsed in one pass."""
        if self.headers is None:
            raw = b"".join(self.lines)
            self.head_size = len(raw)
            first, _, rest = raw.decode("latin-1").partition("\n")
            parts = first.strip().split(" ", 2)
            self.reason = parts[2] if len(parts) > 2 else ""
            pairs = []
            for line in rest.split("\n"):  # curl's lines end in CRLF (LF from some servers)
                name, colon, value = line.partition(":")
                if colon:
                    pairs.append((name.strip(), value.strip()))
            self.headers = pairs
        return self.headers

    def start(self) -> BodyDecoder:
        """The decoder of the body the parsed head announces, once the head passed its caps."""
        headers = self.parse()
        self.check(self.head_size, headers)
        encoding = None
        for name, value in headers:
            if name.lower() == "content-encoding":
                encoding = value
        return BodyDecoder(encoding, self.cap, truncate=self.truncate)


class CurlPool:
    """Easy handles by profile on one multi handle (start and close it in the fetching loop)."""

    def __init__(self, *, cacert: str | None, connect_timeout: float, timeout: float) -> None:
        self._cacert = cacert  # None: no verification
        self._connect_ms = int(connect_timeout * 1000)
        self._timeout_ms = int(timeout * 1000)
        # idle handles by profile, each with whether it is primed: its profile and the
        # options every request shares set already, nothing of one request's own left on it
        self._free: dict[str, list[tuple[Any, bool]]] = {}
        self._multi: Any = None

    async def start(self) -> None:
        from curl_cffi import AsyncCurl

        self._multi = AsyncCurl(cacert=self._cacert or "")

    async def close(self) -> None:
        multi, self._multi = self._multi, None
        for handles in self._free.values():
            for handle, _ in handles:
                handle.close()
        self._free.clear()
        if multi is not None:
            await multi.close()

    def _handle(self, profile: str) -> tuple[Any, bool]:
        from curl_cffi import Curl

        handles = self._free.get(profile)
        return handles.pop() if handles else (Curl(cacert=self._cacert or ""), False)

    def _prime(self, handle: Any, profile: str) -> None:
        """The profile and the options every request of the pool shares, on a fresh (or
        reset) handle."""
        from curl_cffi import CurlOpt

        if handle.impersonate(profile, default_headers=True) != 0:
            handle.close()
            raise ValueError(f"curl_cffi cannot impersonate {profile}")
        setopt = handle.setopt
        setopt(CurlOpt.HTTP_CONTENT_DECODING, 0)  # ours, under the cap
        setopt(CurlOpt.BUFFERSIZE, _BUFFER)  # fewer, larger body callbacks
        setopt(CurlOpt.CONNECTTIMEOUT_MS, self._connect_ms)
        setopt(CurlOpt.TIMEOUT_MS, self._timeout_ms)  # a backstop to the fetcher's deadline
        if self._cacert is None:
            setopt(CurlOpt.SSL_VERIFYPEER, 0)
            setopt(CurlOpt.SSL_VERIFYHOST, 0)
        setopt(CurlOpt.PROXY, "")  # a proxy is a route, chosen per request: never the env's

    def _release(self, profile: str, handle: Any, plain: bool) -> None:
        """Back to the pool: a plain request's handle stays primed (its header and resolve
        lists cleared), any other is reset (a method, a body, a proxy, a debug stream)."""
        from curl_cffi import CurlOpt

        # curl_cffi appends to a handle's header and resolve lists on every setopt and frees
        # them only after its own perform, never after the multi handle's: without this, a
        # reused handle sent every header of the requests before it (another session's Cookie)
        handle.clean_handles_and_buffers()
        if plain:  # curl holds the lists freed above: point it at none
            handle.setopt(CurlOpt.HTTPHEADER, [])
            handle.setopt(CurlOpt.RESOLVE, [])
        else:
            handle.reset()
        handles = self._free.setdefault(profile, [])
        if len(handles) < _KEEP:
            handles.append((handle, plain))
        else:
            handle.close()

    async def perform(
        self,
        *,
        profile: str,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        proxy: str | None,
        resolve: str | None,
        cap: int,
        truncate: bool,
        check_head: HeadCheck,
        record_heads: bool = False,
    ) -> Transfer:
        """One request as ``profile``; raises curl_cffi's ``CurlError`` or what
        ``check_head`` and the decoder raised (the caps)."""
        from curl_cffi import CurlInfo, CurlOpt

        assert self._multi is not None, "CurlPool.start() first"
        handle, primed = self._handle(profile)
        if not primed:
            self._prime(handle, profile)
        plain = method == "GET" and body is None and proxy is None and not record_heads
        reading = _Reading(cap, truncate, check_head)
        out = Transfer()
        setopt = handle.setopt
        setopt(CurlOpt.URL, url)
        setopt(CurlOpt.HEADERFUNCTION, reading.head)
        setopt(CurlOpt.WRITEFUNCTION, reading.body)
        if method == "HEAD":
            setopt(CurlOpt.NOBODY, 1)
        elif method != "GET":
            setopt(CurlOpt.CUSTOMREQUEST, method)
        if body is not None:
            setopt(CurlOpt.POSTFIELDS, body)
            setopt(CurlOpt.POSTFIELDSIZE, len(body))
        if headers:
            setopt(CurlOpt.HTTPHEADER, [f"{k}: {v}".encode("latin-1") for k, v in headers])
        if proxy is not None:
            setopt(CurlOpt.PROXY, proxy)
            if url.startswith("https:") and not proxy.startswith("socks"):
                setopt(CurlOpt.HTTPPROXYTUNNEL, 1)
        if resolve is not None:
            setopt(CurlOpt.RESOLVE, [resolve])
        if record_heads:
            setopt(CurlOpt.VERBOSE, 1)
            setopt(
                CurlOpt.DEBUGFUNCTION,
                lambda kind, data: out.sent.append(data) if kind == _HEADER_OUT else None,
            )
        try:
            await self._multi.add_handle(handle)
        except asyncio.CancelledError:
            self._multi.remove_handle(handle)
            handle.close()
            raise
        except _Truncated:
            pass  # our own stop at the cap: the body so far is the answer
        except BaseException:
            self._release(profile, handle, plain)
            raise
        out.status = int(handle.getinfo(CurlInfo.RESPONSE_CODE))
        out.http_version = VERSIONS.get(int(handle.getinfo(CurlInfo.HTTP_VERSION)), "HTTP/1.1")
        ip = handle.getinfo(CurlInfo.PRIMARY_IP)
        out.remote_ip = ip.decode() if isinstance(ip, bytes) and ip else None
        self._release(profile, handle, plain)
        decoder = reading.decoder
        if decoder is None:  # no body at all
            reading.parse()
            check_head(reading.head_size, reading.headers or [])
            decoder = BodyDecoder(None, cap, truncate=truncate)
        out.reason, out.headers = reading.reason, reading.headers or []
        out.body = decoder.finish()
        out.received = decoder.received
        out.wire_bytes, out.truncated = decoder.wire_bytes, decoder.truncated
        return out
