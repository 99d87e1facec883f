"""Routing of a browser context: resource blocking, the address guard, the document override.

Every request a page makes goes through :meth:`ContextRouter.handle` (Playwright's context
routing) before it leaves the browser, which:

* aborts the resource types in ``block_resources`` (images, fonts, media by default);
* applies the address guard of :mod:`crawlfleet.fetch.guard`: schemes other than http(s) are
  refused, as are private/loopback IP literals and names resolving to such addresses (names are
  resolved here, cached for a minute, unless the context goes through a proxy: then the proxy
  resolves them), except for the hosts the guard settings allow (the seeds);
* lets the current fetch send its document request with another method, body or headers.

What routing does not see, and so the guard does not cover: the hops of a redirect (Playwright
routes only a chain's first request; the fetcher checks a document's chain afterwards and
refuses the page, but the hop's request has been sent), WebSocket connections,
``<link rel=preconnect>`` handshakes (a TCP connection, no request), and a rebinding DNS answer
between this lookup and the browser's own. Service workers are blocked in every context, since
their requests would bypass routing; WebRTC may not send UDP outside the proxy (a launch flag).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crawlfleet.errors import AddressRefused
from crawlfleet.fetch.guard import (
    GuardSettings,
    check_host,
    check_literal_host,
    host_may_be_private,
    parse_ip,
)

if TYPE_CHECKING:
    from playwright.async_api import Route

Resolve = Callable[[str], Awaitable[list[str] | None]]

_SCHEMES = frozenset({"http", "https"})
DNS_TTL = 60.0


async def _getaddrinfo(host: str) -> list[str] | None:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return None  # the browser will fail the request with its own error
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    """Which private hosts a context may reach: a job's (its spider's seeds), or the pool's."""

    allow_private_addresses: bool = False
    private_ok_hosts: frozenset[str] = frozenset()
    tls_verify: bool = True
    """False: the contexts accept any certificate (``tls_verify = False`` of the job)."""

    @classmethod
    def of(cls, settings: GuardSettings) -> GuardPolicy:
        return cls(
            settings.allow_private_addresses,
            frozenset(settings.private_ok_hosts),
            bool(getattr(settings, "tls_verify", True)),
        )


class RouteGuard:
    """The address guard for URLs the browser requests; one per policy (it caches DNS)."""

    def __init__(
        self,
        settings: GuardSettings,
        *,
        resolve: Resolve = _getaddrinfo,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._resolve = resolve
        self._clock = clock
        self._cache: dict[str, tuple[float, list[str] | None]] = {}

    async def refusal(self, url: str, *, resolve_names: bool = True) -> str | None:
        """Why ``url`` may not be requested, or None if it may."""
        parts = urlsplit(url)
        if parts.scheme not in _SCHEMES:
            return f"scheme {parts.scheme!r} is not http(s)"
        host = parts.hostname
        if not host:
            return "URL has no host"
        try:
            check_literal_host(host, self._settings)
        except AddressRefused as exc:
            return str(exc)
        if not resolve_names or parse_ip(host) is not None:
            return None
        if host_may_be_private(host, self._settings):
            return None
        ips = await self._lookup(host)
        if ips is None:
            return None
        try:
            check_host(host, ips, self._settings)
        except AddressRefused as exc:
            return str(exc)
        return None

    async def _lookup(self, host: str) -> list[str] | None:
        now = self._clock()
        cached = self._cache.get(host)
        if cached is not None and cached[0] > now:
            return cached[1]
        ips = await self._resolve(host)
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[host] = (now + DNS_TTL, ips)
        return ips


@dataclass(frozen=True, slots=True)
class DocumentOverride:
    """How the next document request of a page differs from a plain GET."""

    method: str = "GET"
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()


class ContextRouter:
    """The routing of one browser context (one page in flight at a time)."""

    def __init__(self, guard: RouteGuard, blocked: frozenset[str], *, proxied: bool) -> None:
        self._guard = guard
        self._blocked = blocked
        self._proxied = proxied
        self._override: DocumentOverride | None = None
        self.refused: list[tuple[str, str]] = []
        """``(url, reason)`` of the requests refused by the guard since the last ``reset``."""

    def reset(self, override: DocumentOverride | None = None) -> None:
        """Start a new fetch: forget refusals; ``override`` applies to its document request."""
        self._override = override
        self.refused = []

    def end(self) -> None:
        """The fetch is over: an unused override must not change a later navigation (the
        refusals stay readable until the next ``reset``)."""
        self._override = None

    def refusal_of(self, url: str) -> str | None:
        """The reason ``url`` was refused during this fetch, if it was."""
        return next((reason for u, reason in self.refused if u == url), None)

    async def check(self, url: str) -> str | None:
        """Why the guard refuses ``url`` for this context, or None."""
        return await self._guard.refusal(url, resolve_names=not self._proxied)

    async def handle(self, route: Route) -> None:
        request = route.request
        if request.resource_type in self._blocked:
            await route.abort("blockedbyclient")
            return
        reason = await self.check(request.url)
        if reason is not None:
            self.refused.append((request.url, reason))
            await route.abort("accessdenied")
            return
        override = self._override
        if override is not None and request.is_navigation_request():
            self._override = None
            headers = None
            if override.headers:
                headers = dict(request.headers)
                headers.update(override.headers)
            await route.continue_(method=override.method, post_data=override.body, headers=headers)
            return
        await route.continue_()
