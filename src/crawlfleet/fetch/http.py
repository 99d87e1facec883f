"""The HTTP fetcher: one aiohttp session, our own redirects, decoding and caps.

:class:`HttpFetcher` is the HTTP side of the fetcher port (:mod:`crawlfleet.fetch.base`): it
applies the route (a proxy) and the session (cookies, headers) and asks :class:`HttpClient`.

``HttpClient.fetch`` turns a URL into a :class:`FetchResult` or raises a
:class:`~crawlfleet.errors.FetchError` subclass, never a client-library exception, so the retry
policy can decide from the error class alone. Non-2xx statuses are results, not errors.

What it does itself rather than leaving to aiohttp, and why:

* **redirects**: every hop is re-checked (scheme, address guard, and the caller's
  ``check_hop``: robots.txt and scope), loops are caught, and ``Authorization``/``Cookie`` are
  dropped when a hop leaves the origin;
* **content decoding** (:mod:`crawlfleet.fetch.limits`): the size cap applies to decoded bytes
  while decoding, which stops decompression bombs; the body as received is kept beside the
  decoded one (``raw_body``: what the WARC archives);
* **the redirects' exchanges** are kept (``hops``: each 3xx with its headers and body, for the
  WARC);
* **the URL as given**: the request target is the URL's WHATWG serialisation, sent as it is
  (aiohttp's own URL handling would decode ``%2F``, ``%7E`` or ``%27`` and re-escape others);
  a redirect's ``Location`` is joined the way a browser joins it, and sent as it comes out;
* **one deadline** per fetch (``timeout``) covering every hop and the body, so a server that
  trickles one byte at a time cannot hold a worker forever.

**Proxies** (``fetch(..., proxy=URL)``): ``http://`` proxies get plain-HTTP requests in absolute
form and tunnel ``https://`` targets with CONNECT; ``https://`` proxies are the same over TLS to
the proxy; ``socks5://`` proxies carry both (the proxy resolves the target's name). Credentials
in the URL become ``Proxy-Authorization`` (or SOCKS authentication) and go to the proxy only:
the header is never sent to an origin (one a caller passes is dropped) nor reported in
``request_headers``. Each proxy has its own connection pool. The address guard still applies to
the target: its name is resolved here and refused if private, before the proxy is asked (the
proxy resolves it again on its side of the network; a name that does not resolve here is left
to the proxy). A failure of the proxy itself raises
:class:`~crawlfleet.errors.ProxyError` (``reason`` ``refused``, ``timeout``, ``auth``, ...), so
the route is blamed, not the request; no message carries the proxy's password.
"""

from __future__ import annotations

import errno
import os
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import aiohttp
import aiohttp_socks
from aiohttp.http_exceptions import LineTooLong
from multidict import CIMultiDict
from yarl import URL

from crawlfleet.errors import (
    BodyTooLarge,
    ConnectError,
    DataLoss,
    FetchError,
    FetchTimeout,
    HostUnreachable,
    InvalidURL,
    LocalResourceError,
    ProxyError,
    TooLarge,
    TooManyRedirects,
)
from crawlfleet.fetch.base import HOP_BODY_MAX, Exchange, FetchRequest, FetchResult, HopCheck
from crawlfleet.fetch.base import mask_url as _mask
from crawlfleet.fetch.connector import BoundedConnector
from crawlfleet.fetch.deadlines import Deadlines
from crawlfleet.fetch.guard import GuardedResolver, host_may_be_private
from crawlfleet.fetch.hops import REDIRECT_STATUSES, Hop, as_given, checked_url, redirected
from crawlfleet.fetch.limits import ACCEPT_ENCODING, BodyDecoder
from crawlfleet.fetch.tls import PROTOCOL, ssl_context, tls_error, verify_failure
from crawlfleet.urls import mask_credentials

if TYPE_CHECKING:
    from crawlfleet.routes.pools import Route
    from crawlfleet.routes.sessions import Session

KiB = 1024
MiB = 1024 * KiB

DEFAULT_USER_AGENT = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"
READ_CHUNK = 64 * KiB
# aiohttp reports header overflows as a generic 400 parse error (re-wrapped, so the original
# LineTooLong is often lost); its messages are the only stable signal.
_HEADER_OVERFLOW_MARKERS = ("Got more than", "Too many headers", "too long", "Header overflow")
_PROXY_SCHEMES = frozenset({"http", "https", "socks5"})
# A target host checked for a proxied fetch stays checked this long (like the DNS cache).
_TARGET_CHECK_TTL = 60.0


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """How one :class:`HttpClient` behaves. Sizes are bytes, times seconds."""

    timeout: float = 30.0
    """Total deadline of one fetch: every redirect hop and the whole body."""
    connect_timeout: float = 10.0
    max_body: int = 16 * MiB
    """Most body bytes, as received and decoded alike; more raises ``TooLarge`` (exactly
    ``max_body`` passes)."""
    max_header_bytes: int = 64 * KiB
    max_redirects: int = 20
    user_agent: str = DEFAULT_USER_AGENT
    concurrency: int = 64
    """Connection pool size: most connections in use at once."""
    max_idle_connections: int = 16
    """Most idle keep-alive connections kept open, the most recently used (see
    :mod:`crawlfleet.fetch.connector`): the pool's sockets are at most ``concurrency`` + this."""
    per_host_connections: int = 0
    """Connections per host (0: no cap here; politeness is enforced by the frontier)."""
    allow_private_addresses: bool = False
    private_ok_hosts: frozenset[str] = frozenset()
    """Hosts (lower-case) that may be loopback/private: the ones named in ``start_urls``."""
    ca_file: str | None = None
    """A PEM file of certificate authorities to trust besides the system's and those of
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` (a TLS-inspecting corporate proxy, a private CA)."""
    tls_verify: bool = True
    """Check certificates (False: any certificate passes, with a warning once per host)."""
    impersonate: str = "chrome"
    """The impersonating fetcher's browser profile: a family (``chrome``, ``safari``,
    ``firefox``) or one of curl_cffi's targets (``chrome146``); see ``fetch.profiles``."""


class HttpFetcher:
    """The HTTP fetcher behind the port: a request over a route, as a session.

    The route's proxy (if any) carries the request; the session's user agent, headers and
    cookies for the URL are sent with it (the response's ``Set-Cookie`` is the caller's to fold
    into the session). Owns its :class:`HttpClient` and closes it.
    """

    kind = "http"

    def __init__(self, client: HttpClient) -> None:
        self.client = client

    async def fetch(
        self,
        request: FetchRequest,
        *,
        route: Route | None = None,
        session: Session | None = None,
    ) -> FetchResult:
        headers = dict(request.headers) if request.headers else {}
        own_cookie = any(name.lower() == "cookie" for name in headers)
        if session is not None:
            for name, value in session.request_headers(request.url, time.time()).items():
                headers.setdefault(name, value)
        return await self.client.fetch(
            request.url,
            jar=session if session is not None and not own_cookie else None,
            method=request.method,
            headers=headers or None,
            body=request.body,
            proxy=route.proxy_url if route is not None else None,
            max_body=request.max_body,
            truncate=request.truncate,
            check_hop=request.check_hop,
        )

    async def close(self) -> None:
        await self.client.close()


class HttpClient:
    """Fetches URLs over a shared keep-alive connection pool.

    Use it as an async context manager, one per worker process::

        async with HttpClient(FetchSettings(private_ok_hosts=frozenset({"localhost"}))) as f:
            result = await f.fetch("http://localhost:8080/")
    """

    def __init__(self, settings: FetchSettings | None = None) -> None:
        self.settings = settings or FetchSettings()
        self._session: aiohttp.ClientSession | None = None
        self._resolver: GuardedResolver | None = None
        self._deadlines = Deadlines(self.settings.timeout)
        # One session (connection pool) per proxy URL, credentials included: two accounts on
        # one proxy are two routes. Keys are never shown.
        self._proxy_sessions: dict[str, aiohttp.ClientSession] = {}
        self._checked_targets: dict[str, float] = {}
        self._ssl: ssl.SSLContext | bool = True

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Open the connection pool (must run inside the event loop that will fetch)."""
        s = self.settings
        self._resolver = GuardedResolver(s)
        self._ssl = ssl_context(s.ca_file, verify=s.tls_verify)
        self._session = self._new_session(self._connector())

    def _connector(self) -> aiohttp.TCPConnector:
        args = self._connector_args()
        return BoundedConnector(max_idle=self.settings.max_idle_connections, **args)

    def _connector_args(self) -> dict[str, Any]:
        s = self.settings
        return {
            "limit": s.concurrency,
            "limit_per_host": s.per_host_connections,
            "ttl_dns_cache": 60,
            "resolver": self._resolver,
            "ssl": self._ssl,
        }

    def _new_session(self, connector: aiohttp.BaseConnector) -> aiohttp.ClientSession:
        s = self.settings
        return aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            # Cookies belong to sessions (routes layer), passed explicitly per request.
            cookie_jar=aiohttp.DummyCookieJar(),
            headers={"User-Agent": s.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
            # The total deadline is ours (self._deadlines): one clock for all hops and the body.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=s.connect_timeout),
            max_line_size=s.max_header_bytes,
            max_field_size=s.max_header_bytes,
            max_headers=max(128, s.max_header_bytes // 32),
            read_bufsize=2 * READ_CHUNK,
            trust_env=False,  # a proxy is a route, chosen per request, never from HTTP_PROXY
        )

    async def close(self) -> None:
        """Close every pooled connection."""
        sessions = [self._session, *self._proxy_sessions.values()]
        self._session = None
        self._proxy_sessions.clear()
        for session in sessions:
            if session is not None:
                await session.close()
        if self._resolver is not None:
            await self._resolver.close()
            self._resolver = None
        self._deadlines.close()

    async def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        proxy: str | None = None,
        max_body: int | None = None,
        truncate: bool = False,
        check_hop: HopCheck | None = None,
        jar: Session | None = None,
    ) -> FetchResult:
        """Fetch ``url``, following redirects, and return the final response.

        ``jar``: the session whose cookies each redirect hop sends (with the ones earlier hops
        set: a login's redirect carries the cookie it just got); every hop's ``Set-Cookie`` is
        reported in ``result.hop_cookies`` for the caller to keep.

        ``max_body`` overrides the settings' cap for this call; with ``truncate=True`` a body
        over the cap is cut there (``result.truncated``) instead of raising ``TooLarge``.
        ``check_hop`` is awaited with every redirect target before it is fetched and raises a
        :class:`~crawlfleet.errors.FetchError` to refuse it. Raises only ``FetchError``
        subclasses.
        """
        if self._session is None:
            raise RuntimeError("HttpClient used outside 'async with' (or after close)")
        request = Hop(
            url=self._checked(as_given(url)),
            method=method.upper(),
            headers=_without_proxy_auth(headers),
            body=body,
        )
        cap = self.settings.max_body if max_body is None else max_body
        started = time.monotonic()
        try:
            with self._deadlines.scope():
                session, http_proxy = await self._route(proxy, request.url)
                result = await self._follow(
                    session, request, http_proxy, cap, truncate, check_hop, jar
                )
        except FetchError:
            raise
        except Exception as exc:
            error = _translate_any(exc, proxy, self.settings.timeout)
            if proxy is None:
                raise error from exc
            # Client-library errors of a proxied request can print the proxy URL, password
            # included (aiohttp's request info): the chain stops here, the message says enough.
            raise error from None
        result.elapsed = time.monotonic() - started
        return result

    async def _route(
        self, proxy: str | None, target: URL
    ) -> tuple[aiohttp.ClientSession, str | None]:
        """The session to send through, and the proxy URL aiohttp should use (http(s) only)."""
        assert self._session is not None
        if proxy is None:
            return self._session, None
        scheme = proxy.partition("://")[0].lower()
        if scheme not in _PROXY_SCHEMES:
            raise ProxyError(
                f"proxy {mask_credentials(proxy)!r}: scheme must be http, https or socks5",
                reason="protocol",
            )
        session = self._proxy_sessions.get(proxy)
        if session is None:
            session = self._proxy_sessions[proxy] = self._proxy_session(proxy, scheme)
        await self._check_target(target)
        return session, None if scheme == "socks5" else proxy

    def _proxy_session(self, proxy: str, scheme: str) -> aiohttp.ClientSession:
        assert self._resolver is not None
        host = URL(proxy).host
        if host:  # the proxy is the user's own: it may be on a private network
            self._resolver.trust(host)
        if scheme == "socks5":
            args = self._connector_args()
            del args["resolver"], args["ttl_dns_cache"]  # the SOCKS server resolves targets
            connector: aiohttp.BaseConnector = aiohttp_socks.ProxyConnector.from_url(
                proxy, rdns=True, **args
            )
        else:
            connector = self._connector()
        return self._new_session(connector)

    async def _check_target(self, url: URL) -> None:
        """Apply the address guard to a proxied fetch's target (literals were checked already):
        resolve the name here and refuse it if private, since the proxy will not ask us."""
        host = url.host or ""
        now = time.monotonic()
        if self._checked_targets.get(host, 0.0) > now or host_may_be_private(host, self.settings):
            return
        assert self._resolver is not None
        try:
            await self._resolver.resolve(host, url.port or 0)  # AddressRefused if private
        except OSError:
            # A name only the proxy's side of the network knows: nothing here to refuse.
            return
        if len(self._checked_targets) > 10_000:
            self._checked_targets.clear()
        self._checked_targets[host] = now + _TARGET_CHECK_TTL

    def _checked(self, url: str | URL) -> URL:
        return checked_url(url, self.settings)

    async def _follow(
        self,
        session: aiohttp.ClientSession,
        request: Hop,
        proxy: str | None,
        cap: int,
        truncate: bool,
        check_hop: HopCheck | None,
        jar: Session | None = None,
    ) -> FetchResult:
        redirects: list[str] = []
        hops: list[Exchange] = []
        hop_cookies: list[tuple[str, str]] = []
        seen = {request.url}
        while True:
            async with session.request(
                request.method,
                request.url,
                headers=request.headers,
                data=request.body,
                proxy=proxy,
                allow_redirects=False,
            ) as resp:
                if resp.status == 407 and proxy is not None:
                    raise ProxyError("the proxy refused the credentials (407)", reason="auth")
                location = (
                    resp.headers.get("Location") if resp.status in REDIRECT_STATUSES else None
                )
                if location is None:
                    result = await _read(resp, request, self.settings, cap, truncate, redirects)
                    result.hop_cookies = hop_cookies
                    result.hops = hops
                    result.method = request.method
                    return result
                set_cookies = resp.headers.getall("Set-Cookie", [])
                if len(redirects) >= self.settings.max_redirects:
                    raise TooManyRedirects(f"more than {self.settings.max_redirects} redirects")
                hops.append(await _hop(resp, request))
            redirects.append(str(request.url))
            hop_cookies.extend((str(request.url), c) for c in set_cookies)
            if jar is not None and set_cookies:
                jar = jar.with_cookies(set_cookies, str(request.url), time.time())
            request = redirected(request, resp.status, location, self.settings, jar)
            if request.url in seen:
                raise TooManyRedirects(f"redirect loop back to {_mask(str(request.url))}")
            seen.add(request.url)
            if check_hop is not None:
                await check_hop(str(request.url))


async def _read(
    resp: aiohttp.ClientResponse,
    request: Hop,
    settings: FetchSettings,
    cap: int,
    truncate: bool,
    redirects: list[str],
) -> FetchResult:
    """Check the header and length caps, then stream and decode the body."""
    raw = resp.raw_headers
    if sum(len(k) + len(v) for k, v in raw) > settings.max_header_bytes:
        raise TooLarge(f"response headers exceed {settings.max_header_bytes} bytes")
    length = resp.content_length
    if length is not None and length > cap and not truncate:
        raise BodyTooLarge(f"Content-Length {length} exceeds {cap} bytes", limit=cap, seen=0)
    remote_ip = _remote_ip(resp)
    body, received, nbytes_wire, truncated = await _read_body(resp, cap, truncate)
    return FetchResult(
        url=str(request.url),
        status=resp.status,
        reason=resp.reason or "",
        http_version=_version(resp),
        headers=_headers(resp),
        body=body,
        elapsed=0.0,
        remote_ip=remote_ip,
        request_headers=_sent(resp),
        redirects=redirects,
        nbytes_wire=nbytes_wire,
        truncated=truncated,
        raw_body=received,
        _header_map=resp.headers,
    )


async def _hop(resp: aiohttp.ClientResponse, request: Hop) -> Exchange:
    """A redirect's exchange as archived: its body as received, up to ``HOP_BODY_MAX``."""
    try:
        body = await resp.content.read(HOP_BODY_MAX + 1)
    except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
        body = b""  # the redirect said where to go: its body is not worth the page
    return Exchange(
        url=str(request.url),
        method=request.method,
        request_headers=_sent(resp),
        request_body=request.body,
        status=resp.status,
        reason=resp.reason or "",
        http_version=_version(resp),
        headers=_headers(resp),
        body=body[:HOP_BODY_MAX],
        remote_ip=_remote_ip(resp),
        truncated=len(body) > HOP_BODY_MAX,
    )


def _version(resp: aiohttp.ClientResponse) -> str:
    version = resp.version
    return f"HTTP/{version.major}.{version.minor}" if version else "HTTP/1.1"


def _headers(resp: aiohttp.ClientResponse) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]


def _sent(resp: aiohttp.ClientResponse) -> list[tuple[str, str]]:
    """The headers the request was sent with. aiohttp puts Proxy-Authorization among a
    plain-HTTP proxied request's headers: it was for the proxy, and the record of what the
    origin was sent must not hold it."""
    return [
        (k, v) for k, v in resp.request_info.headers.items() if k.lower() != "proxy-authorization"
    ]


async def _read_body(
    resp: aiohttp.ClientResponse, cap: int, truncate: bool
) -> tuple[bytes, bytes | None, int, bool]:
    """``(decoded body, body as received if content-coded, bytes on the wire, truncated)``;
    the cap is enforced while reading, on the bytes received and on the decoded ones."""
    encoding = resp.headers.get("Content-Encoding")
    length = resp.content_length
    try:
        if encoding is None and length is not None and length <= cap:
            # The common case, kept lean: an identity body whose declared size is within the
            # cap. aiohttp stops at Content-Length, so reading to EOF cannot pass the cap.
            body = await resp.content.read()
            return body, None, len(body), False
        decoder = BodyDecoder(encoding, cap, truncate=truncate)
        async for chunk in resp.content.iter_chunked(READ_CHUNK):
            if not decoder.feed(chunk):
                break
        body = decoder.finish()
        return body, decoder.received, decoder.wire_bytes, decoder.truncated
    except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
        raise DataLoss(f"response body cut short: {exc}") from exc


def _remote_ip(resp: aiohttp.ClientResponse) -> str | None:
    # aiohttp hands a fully-received small response's connection back to the pool before we
    # see it (resp.connection is None), but the protocol still knows its transport.
    protocol = resp.connection.protocol if resp.connection else getattr(resp, "_protocol", None)
    transport = getattr(protocol, "transport", None)
    peer = transport.get_extra_info("peername") if transport is not None else None
    return str(peer[0]) if peer else None


def _without_proxy_auth(headers: Mapping[str, str] | None) -> CIMultiDict[str] | None:
    """The caller's headers without ``Proxy-Authorization``: proxy credentials come from the
    proxy URL only, so none can reach an origin by mistake."""
    if not headers:
        return None
    clean = CIMultiDict(headers)
    clean.popall("Proxy-Authorization", None)
    return clean


def _translate_any(exc: Exception, proxy: str | None, timeout: float) -> FetchError:
    """Any exception of a fetch as a :class:`FetchError`, with no secret in its message."""
    error: FetchError | None = _proxy_error(exc) if proxy is not None else None
    if error is None:
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            error = HostUnreachable(f"no connection within the connect timeout: {exc}")
        elif isinstance(exc, TimeoutError):
            error = FetchTimeout(f"no complete response within {timeout}s")
        elif isinstance(exc, aiohttp.ClientError | OSError | ValueError):
            error = _translate(exc)
        else:
            raise exc
    if proxy is not None:
        error = _scrubbed(error, proxy)
    return error


def _proxy_error(exc: Exception) -> ProxyError | None:
    """The proxy's own failure behind ``exc``, if it is one."""
    if isinstance(exc, aiohttp.ClientProxyConnectionError | aiohttp_socks.ProxyConnectionError):
        how = "refused" if _refused(exc) else "unreachable"
        return ProxyError(f"cannot connect to the proxy ({how})", reason=how)
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        # Only the proxy answers a CONNECT: a 401 is its word too (tinyproxy answers wrong
        # credentials with 401, not 407).
        if exc.status in (401, 407):
            return ProxyError(f"the proxy refused the credentials ({exc.status})", reason="auth")
        return ProxyError(f"the proxy refused the tunnel ({exc.status})", reason="tunnel")
    if isinstance(exc, aiohttp_socks.ProxyTimeoutError | aiohttp.ConnectionTimeoutError):
        return ProxyError("no connection to the proxy in time", reason="timeout")
    if isinstance(exc, aiohttp_socks.ProxyError):
        # SOCKS replies: authentication failed (code None, message says so) or a reply code.
        auth = "auth" in str(exc).lower()
        return ProxyError(f"SOCKS proxy: {exc}", reason="auth" if auth else "tunnel")
    return None


def _refused(exc: BaseException | None) -> bool:
    """Whether a connection error (or one of its causes) is "connection refused"."""
    while exc is not None:
        os_error = getattr(exc, "os_error", exc)
        if (
            isinstance(os_error, ConnectionRefusedError)
            or getattr(exc, "errno", None) == errno.ECONNREFUSED
        ):
            return True
        exc = exc.__cause__
    return False


#: errors of the worker's own resources: the process's or the system's descriptors, buffers,
#: memory, local ports; a site has no part in them
_LOCAL_ERRNOS = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.EADDRNOTAVAIL}
)


def _local_errno(exc: BaseException | None) -> int | None:
    """The local-resource errno behind a connection error (or one of its causes), if any."""
    while exc is not None:
        os_error = getattr(exc, "os_error", exc)
        for code in (getattr(os_error, "errno", None), getattr(exc, "errno", None)):
            if code in _LOCAL_ERRNOS:
                return int(code)
        exc = exc.__cause__ or exc.__context__
    return None


def _scrubbed(error: FetchError, proxy: str) -> FetchError:
    """``error`` with the proxy's password (plain or percent-encoded) masked in its message."""
    password = URL(proxy).password
    raw = URL(proxy, encoded=True).raw_password
    message = str(error)
    for secret in {password, raw} - {None, ""}:
        assert secret is not None
        message = message.replace(secret, "[secure]")
    if message != str(error):
        error.args = (message,)
    return error


# OpenSSL's reasons for a handshake the two sides cannot complete: no retry will change them
_TLS_PROTOCOL_REASONS = frozenset(
    {
        "WRONG_VERSION_NUMBER",
        "UNSUPPORTED_PROTOCOL",
        "TLSV1_ALERT_PROTOCOL_VERSION",
        "NO_SHARED_CIPHER",
        "SSLV3_ALERT_HANDSHAKE_FAILURE",
        "NO_PROTOCOLS_AVAILABLE",
    }
)


def _tls(exc: BaseException) -> FetchError | None:
    """The :class:`TlsError` behind a client error, if the handshake failed for good."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        where = f"{exc.host}:{exc.port}"
        cause = exc.certificate_error
        if isinstance(cause, ssl.SSLCertVerificationError):
            return tls_error(verify_failure(cause), where)
        return tls_error(str(cause), where)
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        reason = getattr(exc.os_error, "reason", None)
        if reason in _TLS_PROTOCOL_REASONS:
            return tls_error(f"{PROTOCOL}: {reason}", f"{exc.host}:{exc.port}")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return tls_error(verify_failure(exc), "the server")
    return None


def _translate(exc: BaseException) -> FetchError:
    """Map a client-library or OS error to our tree (timeouts were handled before)."""
    tls = _tls(exc)
    if tls is not None:
        return tls
    if isinstance(exc, aiohttp.ClientPayloadError):
        return DataLoss(f"broken response body: {exc}")
    if isinstance(exc, aiohttp.ClientResponseError):
        # Raised by the response parser: oversized header lines/counts, or malformed framing.
        if isinstance(exc.__cause__, LineTooLong) or any(
            marker in exc.message for marker in _HEADER_OVERFLOW_MARKERS
        ):
            return TooLarge(f"response headers over the cap: {exc.message}")
        return DataLoss(f"malformed response: {exc.message}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return DataLoss("server closed the connection without a complete response")
    if isinstance(exc, aiohttp.InvalidURL | ValueError):
        return InvalidURL(f"invalid URL or request: {exc}")
    local = _local_errno(exc)
    if local is not None:
        return LocalResourceError(f"this worker: {errno.errorcode[local]} ({os.strerror(local)})")
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return HostUnreachable(f"no such host (DNS): {exc.os_error}")
    if _refused(exc):
        return HostUnreachable(f"connection refused: {exc}")
    return ConnectError(f"{type(exc).__name__}: {exc}")
