"""``BrowserFetcher``: a URL rendered by Chromium, returned like an HTTP fetch plus the DOM.

``fetch(request, route=, session=)`` is the fetcher port (:mod:`crawlfleet.fetch.base`);
``render(url, ...)`` the same with plain arguments. Either navigates a pooled page to the URL,
waits (``wait_until``, then ``wait_for``), runs the caller's page actions, and returns a
:class:`BrowserResult`: the document response as the browser received it (status, headers,
body, the request headers it sent, the server address, the redirect chain), the rendered DOM,
the XHR/``fetch()`` JSON responses the page got, the context's cookies, and timings. Like the
HTTP fetcher it raises only :class:`~crawlfleet.errors.FetchError` subclasses, and a non-2xx
status is a result, not an error.

Every page has a total deadline (``timeout``) over navigation, waits, actions and reading; when
it passes, or the navigation alone passes ``navigation_timeout``, the page and its context are
closed and :class:`~crawlfleet.errors.FetchTimeout` (retryable) is raised. The pool goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout
from yarl import URL

from crawlfleet.errors import (
    AddressRefused,
    BodyTooLarge,
    BrowserError,
    FetchError,
    FetchTimeout,
    InvalidURL,
    UnsupportedScheme,
)
from crawlfleet.fetch.base import Exchange, FetchRequest
from crawlfleet.fetch.browser.pool import BrowserPool, ContextKey, PageLease
from crawlfleet.fetch.browser.request import BrowserRequest, ContextSeed, PageAction, seed_of
from crawlfleet.fetch.browser.result import (
    BrowserResult,
    PageTimings,
    classify_error,
)
from crawlfleet.fetch.browser.routing import DocumentOverride, GuardPolicy
from crawlfleet.fetch.browser.settings import WAIT_STATES, BrowserSettings, WaitUntil
from crawlfleet.fetch.browser.xhr import XhrWatch
from crawlfleet.fetch.guard import GuardSettings, check_literal_host
from crawlfleet.fetch.tls import message_failure, tls_error, warn_unverified
from crawlfleet.urls import mask_credentials

if TYPE_CHECKING:
    from playwright.async_api import Page, Response

    from crawlfleet.fetch.base import Fetcher
    from crawlfleet.routes.pools import Route
    from crawlfleet.routes.sessions import Session

__all__ = ["BrowserFetcher", "BrowserRequest", "PageAction"]

_SCHEMES = frozenset({"http", "https"})


class BrowserFetcher:
    """Fetches URLs with a pooled Chromium; use it as an async context manager, one per
    worker process::

        async with BrowserFetcher(BrowserSettings(private_ok_hosts=frozenset({"127.0.0.1"}))) as f:
            result = await f.render("http://127.0.0.1:8080/js/", wait_for="ul.listing")
            Response(result.url, result.status, result.header_map,
                     result.rendered_html.encode(), encoding="utf-8").css(...)

    With ``pool``, the fetcher uses a pool the caller owns (one browser per worker process,
    shared by its jobs: start and close it yourself) and ``guard`` (e.g. the job's
    ``FetchSettings``) says which private hosts it may reach; its contexts are its own.
    """

    kind = "browser"

    def __init__(
        self,
        settings: BrowserSettings | None = None,
        *,
        pool: BrowserPool | None = None,
        guard: GuardSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = pool.settings if pool is not None else settings or BrowserSettings()
        self.pool = pool if pool is not None else BrowserPool(self.settings, clock=clock)
        self._owns_pool = pool is None
        self.guard = GuardPolicy.of(guard if guard is not None else self.settings)
        self._clock = clock

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
        """Start the pool if it is this fetcher's (sweeps orphaned browsers, launches Chromium)."""
        if self._owns_pool:
            await self.pool.start()

    async def close(self) -> None:
        """Close the pool if it is this fetcher's."""
        if self._owns_pool:
            await self.pool.close()

    async def retire(self, session_key: str) -> None:
        """End a session identity (e.g. after a block): its contexts are closed."""
        await self.pool.retire(session_key)

    async def fetch(
        self,
        request: FetchRequest,
        *,
        route: Route | None = None,
        session: Session | None = None,
    ) -> BrowserResult:
        """The fetcher port: render ``request`` over ``route`` as ``session``.

        A session is one context (its id is the key; its user agent, headers and cookies seed
        the context when it opens; ``result.cookies`` are the context's cookies after the page);
        the route's proxy is the context's. A :class:`BrowserRequest` also says how to wait and
        which page actions to run. Raises only :class:`~crawlfleet.errors.FetchError`
        subclasses.
        """
        key = ContextKey(
            session.id if session is not None else None,
            route.proxy_url if route is not None else None,
            session.user_agent if session is not None else None,
            self.guard,
        )
        return await self._fetch(request, key, seed_of(session) if session is not None else None)

    async def render(
        self,
        url: str,
        *,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        proxy: str | None = None,
        session_key: str | None = None,
        user_agent: str | None = None,
        actions: PageAction | None = None,
        wait_until: WaitUntil | None = None,
        wait_for: str | None = None,
    ) -> BrowserResult:
        """Render ``url`` and return the document, the DOM after scripts, and the XHR JSON.

        ``session_key``, ``proxy`` and ``user_agent`` pick the context (one identity each:
        equal values share cookies). ``method``/``body``/``headers`` change the document request
        only. ``wait_until`` ends the navigation (default from the settings); ``wait_for`` is a
        CSS selector to wait for after it; ``actions(page)`` runs last (scroll, click...). Neither
        applies to an error page (status 400 and up), which is returned as it arrived.
        Raises only :class:`~crawlfleet.errors.FetchError` subclasses.
        """
        request = BrowserRequest(
            url,
            method=method,
            body=body,
            headers=headers,
            wait_until=wait_until,
            wait_for=wait_for,
            actions=actions,
        )
        key = ContextKey(session_key, proxy, user_agent, self.guard)
        return await self._fetch(request, key, None)

    async def _fetch(
        self, request: FetchRequest, key: ContextKey, seed: ContextSeed | None
    ) -> BrowserResult:
        target = _checked(request.url, self.guard)
        options = request if isinstance(request, BrowserRequest) else _PLAIN
        until = options.wait_until or self.settings.wait_until
        if until not in WAIT_STATES:
            raise ValueError(f"wait_until must be one of {sorted(WAIT_STATES)}")
        method = request.method.upper()
        override = None
        if method != "GET" or request.body is not None or request.headers:
            headers = tuple((request.headers or {}).items())
            override = DocumentOverride(method, request.body, headers)
        started = self._clock()
        async with self.pool.page(key, seed) as lease:
            timings = PageTimings(admission=self._clock() - started)
            visit = _Visit(self, lease, timings, request)
            try:
                async with asyncio.timeout(self.settings.timeout):
                    result = await visit.run(target, until, options, override)
            except TimeoutError as exc:
                lease.discard("timeout")
                raise FetchTimeout(
                    f"page not ready within {self.settings.timeout}s: {mask_credentials(target)}"
                ) from exc
            except PlaywrightError as exc:
                raise visit.failure(exc, target) from exc
        timings.total = self._clock() - started
        return result


_PLAIN = BrowserRequest("")


class _Visit:
    """One fetch on one leased page."""

    def __init__(
        self, fetcher: BrowserFetcher, lease: PageLease, timings: PageTimings, request: FetchRequest
    ) -> None:
        self.settings = fetcher.settings
        self.clock = fetcher._clock
        self.lease = lease
        self.timings = timings
        self.request = request
        self.deadline = self.clock() + self.settings.timeout
        self.xhr = XhrWatch(self.settings)

    def remaining_ms(self, cap: float | None = None) -> float:
        left = max(0.001, self.deadline - self.clock())
        return 1000 * (left if cap is None else min(left, cap))

    async def run(
        self,
        target: str,
        until: WaitUntil,
        options: BrowserRequest,
        override: DocumentOverride | None,
    ) -> BrowserResult:
        page, router = self.lease.page, self.lease.router
        router.reset(override)
        page.on("response", self.xhr.on_response)
        try:
            t = self.clock()
            response = await page.goto(
                target,
                wait_until=until,
                timeout=self.remaining_ms(self.settings.navigation_timeout),
            )
            self.timings.navigation = self.clock() - t
            if response is None:
                raise BrowserError(f"no document response for {mask_credentials(target)}")
            await self._check_redirects(response)
            # An error page (404, 429, 503...) is the answer as it stands: the selector and the
            # actions are for the page the spider asked for, which this is not.
            ready = response.status < 400
            t = self.clock()
            if options.wait_for and ready:
                await page.wait_for_selector(
                    options.wait_for, state="attached", timeout=self.remaining_ms()
                )
            self.timings.wait = self.clock() - t
            t = self.clock()
            if options.actions is not None and ready:
                await options.actions(page)
            self.timings.actions = self.clock() - t
            t = self.clock()
            result = await self._read(page, response)
            self.timings.capture = self.clock() - t
            return result
        finally:
            page.remove_listener("response", self.xhr.on_response)
            router.end()

    async def _check_redirects(self, response: Response) -> None:
        """Refuse a document whose redirect chain passed a refused host, or a hop the caller's
        ``check_hop`` refuses (robots.txt). Hops are not routed, so this comes after the fact:
        their requests were sent, their answers go no further."""
        hops = []
        request = response.request
        while request.redirected_from is not None:
            hops.append(request.url)
            request = request.redirected_from
        for url in reversed(hops):
            reason = await self.lease.router.check(url)
            if reason is not None:
                raise AddressRefused(f"redirect to {mask_credentials(url)}: {reason}")
            if self.request.check_hop is not None:
                await self.request.check_hop(url)

    async def _read(self, page: Page, response: Response) -> BrowserResult:
        html, body, headers, sent, server = await asyncio.gather(
            page.content(),
            response.body(),
            response.headers_array(),
            response.request.headers_array(),
            response.server_addr(),
        )
        body, truncated = self._capped(body, len(html))
        xhr = await self.xhr.collect(self.remaining_ms() / 1000)
        cookies: list[dict[str, Any]] = []
        if self.lease.key.session:
            cookies = [dict(c) for c in await self.lease.context.cookies()]
        # The site's answer time for the document, as the browser's network stack saw it
        # (ms after the request started): what pacing must see, not the page's rendering.
        answered = response.request.timing.get("responseEnd", -1)
        elapsed = answered / 1000 if answered > 0 else self.timings.navigation
        chain = []
        hop = response.request.redirected_from
        while hop is not None:
            chain.append(hop.url)
            hop = hop.redirected_from
        hops = await _exchanges(response)
        return BrowserResult(
            url=response.url,
            status=response.status,
            reason=response.status_text,
            http_version="HTTP/1.1",
            headers=[(h["name"], h["value"]) for h in headers],
            body=body,
            elapsed=elapsed,
            remote_ip=server["ipAddress"] if server else None,
            request_headers=[(h["name"], h["value"]) for h in sent],
            redirects=chain[::-1],
            hops=hops,
            nbytes_wire=len(body),
            truncated=truncated,
            rendered_html=html,
            xhr=xhr,
            xhr_dropped=self.xhr.dropped,
            timings=self.timings,
            page_url=page.url,
            cookies=cookies,
        )

    def _capped(self, body: bytes, dom_size: int) -> tuple[bytes, bool]:
        """The document within the request's cap (cut there if it asks to be); the DOM within
        the settings' cap."""
        cap = self.request.max_body or self.settings.max_body
        if len(body) > cap and self.request.truncate:
            return body[:cap], True
        for size, limit in ((len(body), cap), (dom_size, self.settings.max_body)):
            if size > limit:
                raise BodyTooLarge(
                    f"document or DOM of {size} exceeds {limit}", limit=limit, seen=size
                )
        return body, False

    def failure(self, exc: PlaywrightError, target: str) -> FetchError:
        """The error to raise for a Playwright error, discarding the context when needed."""
        self.lease.replace_page()
        shown = mask_credentials(target)
        refused = self.lease.router.refusal_of(target) if self.lease.router.refused else None
        if refused is None and self.lease.router.refused:
            # The browser may have normalised the URL (a trailing slash): the document is the
            # first refused navigation, if any.
            refused = self.lease.router.refused[0][1]
        if refused is not None and "ERR_ACCESS_DENIED" in str(exc):
            return AddressRefused(f"{shown}: {refused}")
        if isinstance(exc, PlaywrightTimeout):
            self.lease.discard("timeout")
            return FetchTimeout(f"{shown}: {_first_line(exc)}")
        if "net::ERR_CERT_" in str(exc) or "ERR_SSL_VERSION_OR_CIPHER" in str(exc):
            parts = URL(target)
            return tls_error(message_failure(str(exc)), f"{parts.host}:{parts.port}")
        error = classify_error(str(exc))
        if error is BrowserError or error is FetchTimeout:
            self.lease.discard("timeout" if error is FetchTimeout else "crash")
        return error(f"{shown}: {_first_line(exc)}")


if TYPE_CHECKING:

    def _a_fetcher(fetcher: BrowserFetcher) -> Fetcher:
        return fetcher  # the type checker holds BrowserFetcher to the port


def _checked(url: str, settings: GuardSettings) -> str:
    """``url`` if a browser may be sent there: http(s), a host, no refused IP literal."""
    try:
        parsed = URL(url)
    except (ValueError, TypeError) as exc:
        raise InvalidURL(f"cannot parse URL {url!r}") from exc
    if parsed.scheme not in _SCHEMES:
        raise UnsupportedScheme(f"scheme {parsed.scheme!r} is not http(s)")
    if not parsed.host:
        raise InvalidURL(f"URL {mask_credentials(url)} has no host")
    check_literal_host(parsed.host, settings)
    if parsed.scheme == "https" and not getattr(settings, "tls_verify", True):
        warn_unverified(parsed.host)
    return str(parsed.with_fragment(None))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def _exchanges(response: Response) -> list[Exchange]:
    """The redirects before ``response``, in order, as archived: their requests' and answers'
    headers (a browser keeps no redirect's body: stored empty, ``truncated``)."""
    out: list[Exchange] = []
    request = response.request.redirected_from
    while request is not None:
        answer = await request.response()
        if answer is not None:
            sent, headers = await asyncio.gather(request.headers_array(), answer.headers_array())
            out.append(
                Exchange(
                    url=request.url,
                    method=request.method,
                    request_headers=[(h["name"], h["value"]) for h in sent],
                    request_body=request.post_data_buffer,
                    status=answer.status,
                    reason=answer.status_text,
                    http_version="HTTP/1.1",
                    headers=[(h["name"], h["value"]) for h in headers],
                    body=b"",
                    remote_ip=None,
                    truncated=True,
                )
            )
        request = request.redirected_from
    return out[::-1]
