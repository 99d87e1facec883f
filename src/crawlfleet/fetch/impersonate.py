"""The impersonating fetcher: an HTTP client that speaks as a browser does, before any header.

Bot managers judge a client by its TLS ClientHello (cipher suites, extensions and their order,
GREASE, ALPN) and its HTTP/2 SETTINGS and header order before they read a header; Python's
OpenSSL looks like no browser. :class:`ImpersonateFetcher` sends requests through curl_cffi,
whose wheels carry curl-impersonate (curl built on BoringSSL with each browser's handshake and
HTTP/2 frames), as one of the profiles of :mod:`crawlfleet.fetch.profiles`: the session's
profile, the same for its whole life, with that browser's user agent and default headers (the
worker's ``user_agent`` is not sent: it would give the handshake away).

Everything else is the HTTP fetcher's (:mod:`crawlfleet.fetch.http`), behind the same port:

* **redirects** are ours, each hop checked (:mod:`crawlfleet.fetch.hops`, the caller's
  ``check_hop``: robots.txt and scope), origin-bound headers dropped;
* **content decoding** is ours (curl's is off): the size cap applies to decoded bytes while
  decoding (:class:`~crawlfleet.fetch.limits.BodyDecoder`), so bombs stop at the cap;
* **one deadline** per fetch over every hop and the body;
* **the address guard**: a target's name is resolved here, refused if private, and curl is
  pinned to the addresses checked (``CURLOPT_RESOLVE``: no second lookup to rebind); through a
  proxy the name is checked and left to the proxy, as the HTTP fetcher does;
* **proxies** ``http://`` (plain requests in absolute form, CONNECT tunnels for ``https://``),
  ``https://`` and ``socks5://`` (the proxy resolves), credentials to the proxy only; a proxy's
  own failure is a :class:`~crawlfleet.errors.ProxyError`, its password in no message;
* **TLS**: the same authorities as every fetcher (:func:`crawlfleet.fetch.tls.ca_bundle`),
  certificate errors as :class:`~crawlfleet.errors.TlsError`; HTTP/2 where the server offers
  it (ALPN), HTTP/1.1 otherwise.

The headers archived with a response are the ones curl sent, read from its debug stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from crawlfleet.errors import (
    BodyTooLarge,
    ConnectError,
    DataLoss,
    FetchError,
    FetchTimeout,
    InvalidURL,
    ProxyError,
    TooLarge,
    TooManyRedirects,
)
from crawlfleet.fetch.base import (
    HOP_BODY_MAX,
    Exchange,
    FetchRequest,
    FetchResult,
    HopCheck,
    mask_url,
)
from crawlfleet.fetch.curlpool import CurlPool, HeadCheck
from crawlfleet.fetch.deadlines import Deadlines
from crawlfleet.fetch.guard import check_host, host_may_be_private, parse_ip
from crawlfleet.fetch.hops import REDIRECT_STATUSES, Hop, as_given, checked_url, redirected
from crawlfleet.fetch.profiles import family_profiles, profile_for
from crawlfleet.fetch.tls import PROTOCOL, ca_bundle, message_failure, tls_error
from crawlfleet.urls import mask_credentials

if TYPE_CHECKING:
    from crawlfleet.fetch.http import FetchSettings
    from crawlfleet.routes.pools import Route
    from crawlfleet.routes.sessions import Session

__all__ = ["ImpersonateClient", "ImpersonateFetcher"]

_PROXY_SCHEMES: Final = {"http": "http", "https": "https", "socks5": "socks5h"}
#: seconds a checked name's addresses are kept (like the HTTP fetcher's DNS cache)
_DNS_TTL: Final = 60.0
_DNS_MAX: Final = 10_000


class ImpersonateFetcher:
    """The impersonating fetcher behind the port: a request over a route, as a session that
    speaks one browser profile (see the module docstring). Owns its client and closes it."""

    kind = "impersonate"

    def __init__(self, client: ImpersonateClient) -> None:
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
            now = time.time()
            for name, value in session.request_headers(request.url, now).items():
                if name.lower() != "user-agent":  # the profile's own, consistent with its TLS
                    headers.setdefault(name, value)
        return await self.client.fetch(
            request.url,
            profile=self.client.profile_of(session),
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


class ImpersonateClient:
    """Fetches URLs as a browser over curl_cffi's connection pool (one per worker process)::

    async with ImpersonateClient(FetchSettings(impersonate="safari")) as client:
        result = await client.fetch("https://shop.example/", profile="safari2601")
    """

    def __init__(self, settings: FetchSettings | None = None) -> None:
        from crawlfleet.fetch.http import FetchSettings

        self.settings = settings or FetchSettings()
        self.profiles = family_profiles(self.settings.impersonate)
        self._session: CurlPool | None = None
        #: each profile's default request headers, as curl sent them once (for the WARC)
        self._defaults: dict[str, list[tuple[str, str]]] = {}
        self._deadlines = Deadlines(self.settings.timeout)
        self._dns: dict[str, tuple[float, list[str]]] = {}

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

    def profile_of(self, session: Session | None) -> str:
        """The profile ``session`` speaks (the family's newest without one)."""
        return profile_for(session.id if session is not None else None, self.settings.impersonate)

    async def start(self) -> None:
        """Open the connection pool (inside the event loop that will fetch)."""
        s = self.settings
        cacert = await asyncio.to_thread(ca_bundle, s.ca_file) if s.tls_verify else None
        self._session = CurlPool(
            cacert=cacert, connect_timeout=s.connect_timeout, timeout=s.timeout + 5
        )
        await self._session.start()

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        self._deadlines.close()

    async def fetch(
        self,
        url: str,
        *,
        profile: str | None = None,
        jar: Session | None = None,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        proxy: str | None = None,
        max_body: int | None = None,
        truncate: bool = False,
        check_hop: HopCheck | None = None,
    ) -> FetchResult:
        """Fetch ``url`` as ``profile`` (default: the settings' family's newest), following
        redirects; raises only :class:`~crawlfleet.errors.FetchError` subclasses."""
        if self._session is None:
            raise RuntimeError("ImpersonateClient is not started (use 'async with')")
        request = Hop(
            url=checked_url(as_given(url), self.settings),
            method=method.upper(),
            headers=_without_proxy_auth(headers),
            body=body,
        )
        cap = self.settings.max_body if max_body is None else max_body
        started = time.monotonic()
        try:
            with self._deadlines.scope():
                if proxy is not None:
                    proxy = _proxy_url(proxy)
                result = await self._follow(
                    request, profile or self.profiles[0], proxy, cap, truncate, check_hop, jar
                )
        except FetchError as exc:
            raise _scrubbed(exc, proxy) if proxy else exc from None
        except TimeoutError:
            raise FetchTimeout(f"no complete response within {self.settings.timeout}s") from None
        result.elapsed = time.monotonic() - started
        return result

    async def _follow(
        self,
        request: Hop,
        profile: str,
        proxy: str | None,
        cap: int,
        truncate: bool,
        check_hop: HopCheck | None,
        jar: Session | None,
    ) -> FetchResult:
        redirects: list[str] = []
        hops: list[Exchange] = []
        hop_cookies: list[tuple[str, str]] = []
        seen = {request.url}
        while True:
            result = await self._one(request, profile, proxy, cap, truncate)
            location = result.header("location") if result.status in REDIRECT_STATUSES else None
            if location is None:
                result.redirects = redirects
                result.hop_cookies = hop_cookies
                result.hops = hops
                result.method = request.method
                return result
            set_cookies = list(result.header_map.getall("set-cookie", []))
            if len(redirects) >= self.settings.max_redirects:
                raise TooManyRedirects(f"more than {self.settings.max_redirects} redirects")
            hops.append(_exchange(request, result))
            redirects.append(str(request.url))
            hop_cookies.extend((str(request.url), c) for c in set_cookies)
            if jar is not None and set_cookies:
                jar = jar.with_cookies(set_cookies, str(request.url), time.time())
            request = redirected(request, result.status, location, self.settings, jar)
            if request.url in seen:
                raise TooManyRedirects(f"redirect loop back to {mask_url(str(request.url))}")
            seen.add(request.url)
            if check_hop is not None:
                await check_hop(str(request.url))

    async def _one(
        self, request: Hop, profile: str, proxy: str | None, cap: int, truncate: bool
    ) -> FetchResult:
        """One request and its response (a redirect's body is read and dropped)."""
        from curl_cffi import CurlError

        assert self._session is not None
        pinned = None
        if proxy is None:
            pinned = await self._pinned(request.url)
        else:
            await self._check_target(request.url)
        headers = list(request.headers.items()) if request.headers else []
        record = profile not in self._defaults
        try:
            t = await self._session.perform(
                profile=profile,
                method=request.method,
                url=str(request.url),
                headers=headers,
                body=request.body,
                proxy=proxy,
                resolve=pinned,
                cap=cap,
                truncate=truncate,
                check_head=self._check_head(cap, truncate),
                record_heads=record,
            )
        except CurlError as exc:
            raise _translate(exc, request.url, proxy) from None
        if record:
            self._defaults[profile] = _defaults(_sent_headers(t.sent), headers)
        header_map = CIMultiDictProxy(CIMultiDict(t.headers))
        return FetchResult(
            url=str(request.url),
            status=t.status,
            reason=t.reason,
            http_version=t.http_version,
            headers=t.headers,
            body=t.body,
            elapsed=0.0,
            remote_ip=t.remote_ip,
            request_headers=_compose(request.url, self._defaults[profile], headers),
            nbytes_wire=t.wire_bytes,
            truncated=t.truncated,
            raw_body=t.received,
            _header_map=header_map,
        )

    def _check_head(self, cap: int, truncate: bool) -> HeadCheck:
        limit = self.settings.max_header_bytes

        def check(size: int, headers: list[tuple[str, str]]) -> None:
            if size > limit:
                raise TooLarge(f"response headers exceed {limit} bytes")
            if truncate:
                return
            for name, value in headers:
                if name.lower() == "content-length":
                    length = _int(value)
                    if length is not None and length > cap:
                        raise BodyTooLarge(
                            f"Content-Length {length} exceeds {cap} bytes", limit=cap, seen=0
                        )

        return check

    async def _addresses(self, host: str) -> list[str]:
        now = time.monotonic()
        cached = self._dns.get(host)
        if cached is not None and cached[0] > now:
            return cached[1]
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, None, type=1)  # SOCK_STREAM
        except OSError as exc:
            raise ConnectError(f"cannot resolve {host}: {exc}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if len(self._dns) >= _DNS_MAX:
            self._dns.clear()
        self._dns[host] = (now + _DNS_TTL, addresses)
        return addresses

    async def _pinned(self, url: URL) -> str | None:
        """``host:port:addresses`` for curl's resolver: the addresses checked by the guard."""
        host = url.host or ""
        if parse_ip(host) is not None:
            return None  # a literal, checked already
        addresses = await self._addresses(host)
        check_host(host, addresses, self.settings)  # AddressRefused if private
        shown = ",".join(f"[{a}]" if ":" in a else a for a in addresses)
        return f"{host}:{url.port}:{shown}"

    async def _check_target(self, url: URL) -> None:
        """The guard for a proxied fetch: refuse a name that resolves to a private address
        here; one this side of the network does not know is the proxy's to resolve."""
        host = url.host or ""
        if parse_ip(host) is not None or host_may_be_private(host, self.settings):
            return
        try:
            addresses = await self._addresses(host)
        except ConnectError:
            return
        check_host(host, addresses, self.settings)


def _exchange(request: Hop, result: FetchResult) -> Exchange:
    """A redirect's exchange as archived: its body as received, up to ``HOP_BODY_MAX``."""
    body = result.body if result.raw_body is None else result.raw_body
    return Exchange(
        url=str(request.url),
        method=request.method,
        request_headers=result.request_headers,
        request_body=request.body,
        status=result.status,
        reason=result.reason,
        http_version=result.http_version,
        headers=result.headers,
        body=body[:HOP_BODY_MAX],
        remote_ip=result.remote_ip,
        truncated=len(body) > HOP_BODY_MAX or result.truncated,
    )


def _int(value: str) -> int | None:
    try:
        return int(value.strip())
    except ValueError:
        return None


#: request headers that are the request's own, never a profile's defaults
_OWN: Final = frozenset({"host", "cookie", "authorization", "content-length", "content-type"})


def _sent_headers(sent: list[bytes]) -> list[tuple[str, str]]:
    """The header pairs of the last request head curl sent (the final one, after a proxy's
    CONNECT), without ``Proxy-Authorization``."""
    for head in reversed(sent):
        text = head.decode("latin-1")
        first, _, rest = text.partition("\r\n")
        if first.upper().startswith("CONNECT "):
            continue
        pairs = []
        for line in rest.split("\r\n"):
            name, colon, value = line.partition(":")
            if colon and name.lower() != "proxy-authorization":
                pairs.append((name.strip(), value.strip()))
        return pairs
    return []


def _defaults(sent: list[tuple[str, str]], own: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A profile's default headers, in its order: what curl sent but the request's own."""
    mine = {k.lower() for k, _ in own} | _OWN
    return [(k, v) for k, v in sent if k.lower() not in mine]


def _compose(
    url: URL, defaults: list[tuple[str, str]], own: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The headers a request was sent with, as curl-impersonate builds them: ``Host``, the
    profile's defaults in their order (a request's header of the same name in its place),
    then the request's others."""
    mine = {k.lower(): (k, v) for k, v in own}
    port = url.port
    host = url.host or "" if url.is_default_port() else f"{url.host}:{port}"
    out = [("Host", host)]
    for name, value in defaults:
        out.append(mine.pop(name.lower(), (name, value)))
    out.extend(mine.values())
    return out


def _without_proxy_auth(headers: Mapping[str, str] | None) -> CIMultiDict[str] | None:
    if not headers:
        return None
    clean = CIMultiDict(headers)
    clean.popall("Proxy-Authorization", None)
    return clean


def _proxy_url(proxy: str) -> str:
    """The proxy URL as curl takes it (``socks5h``: the proxy resolves the target)."""
    scheme, sep, rest = proxy.partition("://")
    mapped = _PROXY_SCHEMES.get(scheme.lower())
    if not sep or mapped is None:
        raise ProxyError(
            f"proxy {mask_credentials(proxy)!r}: scheme must be http, https or socks5",
            reason="protocol",
        )
    return f"{mapped}://{rest}"


# curl's error codes (CURLcode) by what they mean here
_TIMEOUT: Final = {28}
_DATA_LOSS: Final = {16, 18, 52, 55, 56, 61, 92}
_CONNECT: Final = {6, 7}
_PROXY_CODES: Final = {5, 97}
_TLS_CERT: Final = {51, 60, 83, 90, 91}
_TLS_HANDSHAKE: Final = {35, 59}


def _translate(exc: Exception, url: URL, proxy: str | None) -> FetchError:
    """A curl error of one request as a :class:`FetchError` (see ``errors``)."""
    code = int(getattr(exc, "code", 0) or 0)
    message = str(exc)
    where = f"{url.host}:{url.port}"
    if code in _TLS_CERT:
        return tls_error(message_failure(message), where)
    if code in _TLS_HANDSHAKE and ("alert" in message.lower() or "certificate" in message):
        return tls_error(f"{PROTOCOL}: {_short(message)}", where)
    if proxy is not None:
        error = _proxy_error(code, message)
        if error is not None:
            return error
    if code in _TIMEOUT:
        return FetchTimeout(f"curl: {_short(message)}")
    if code in _DATA_LOSS:
        return DataLoss(f"response cut short: {_short(message)}")
    if code == 3:
        return InvalidURL(f"invalid URL or request: {_short(message)}")
    return ConnectError(f"curl: {_short(message)}")


def _proxy_error(code: int, message: str) -> ProxyError | None:
    """The proxy's own failure behind a curl error, if it is one."""
    lowered = message.lower()
    if "407" in message or ("socks" in lowered and "auth" in lowered):
        return ProxyError("the proxy refused the credentials", reason="auth")
    if "connect tunnel failed" in lowered:
        if "401" in message:  # tinyproxy answers wrong credentials with 401
            return ProxyError("the proxy refused the credentials (401)", reason="auth")
        return ProxyError(f"the proxy refused the tunnel: {_short(message)}", reason="tunnel")
    if code in _PROXY_CODES or ("proxy" in lowered and code in _CONNECT):
        how = "refused" if "refused" in lowered or code == 7 else "unreachable"
        if code == 97 and "socks" in lowered:
            return ProxyError(f"SOCKS proxy: {_short(message)}", reason="tunnel")
        return ProxyError(f"cannot connect to the proxy ({how})", reason=how)
    return None


def _short(message: str) -> str:
    """curl's message without its trailing "See https://curl.se/..." pointer."""
    return message.split(". See ", 1)[0].strip()


def _scrubbed(error: FetchError, proxy: str) -> FetchError:
    """``error`` with the proxy's password (plain or percent-encoded) masked in its message."""
    parsed = URL(proxy)
    raw = URL(proxy, encoded=True).raw_password
    message = str(error)
    for secret in {parsed.password, raw} - {None, ""}:
        assert secret is not None
        message = message.replace(secret, "[secure]")
    if message != str(error):
        error.args = (message,)
    return error
