"""``BrowserFetcher``: a URL rendered by Chromium, returned like an HTTP fetch plus the DOM.

``fetch`` navigates a pooled page to the URL, waits (``wait_until``, then ``wait_for``), runs
the caller's page actions, and returns a :class:`BrowserResult`: the document response as the
browser received it (status, headers, body, the request headers it sent, the server address,
the redirect chain), the rendered DOM, the XHR/``fetch()`` JSON responses the page got, and
timings. Like the HTTP fetcher it raises only :class:`~crawlfleet.errors.FetchError`
subclasses, and a non-2xx status is a result, not an error.

Every page has a total deadline (``timeout``) over navigation, waits, actions and reading; when
it passes, or the navigation alone passes ``navigation_timeout``, the page and its context are
closed and :class:`~crawlfleet.errors.FetchTimeout` (retryable) is raised. The pool goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Self

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
from crawlfleet.fetch.browser.pool import BrowserPool, ContextKey, PageLease
from crawlfleet.fetch.browser.result import (
    BrowserResult,
    PageTimings,
    XhrResponse,
    classify_error,
)
from crawlfleet.fetch.browser.routing import DocumentOverride
from crawlfleet.fetch.browser.settings import WAIT_STATES, BrowserSettings, WaitUntil
from crawlfleet.fetch.guard import check_literal_host
from crawlfleet.urls import mask_credentials

if TYPE_CHECKING:
    from playwright.async_api import Page, Response

PageAction = Callable[["Page"], Awaitable[None]]

_SCHEMES = frozenset({"http", "https"})
_XHR_TYPES = frozenset({"xhr", "fetch"})


class BrowserFetcher:
    """Fetches URLs with a pooled Chromium; use it as an async context manager, one per
    worker process::

        async with BrowserFetcher(BrowserSettings(private_ok_hosts=frozenset({"127.0.0.1"}))) as f:
            result = await f.fetch("http://127.0.0.1:8080/js/", wait_for="ul.listing")
            Response(result.url, result.status, result.header_map,
                     result.rendered_html.encode(), encoding="utf-8").css(...)
    """

    kind = "browser"

    def __init__(
        self,
        settings: BrowserSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or BrowserSettings()
        self.pool = BrowserPool(self.settings, clock=clock)
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
        """Start the pool (sweeps orphaned browsers, launches Chromium)."""
        await self.pool.start()

    async def close(self) -> None:
        await self.pool.close()

    async def retire(self, session_key: str) -> None:
        """End a session identity (e.g. after a block): its contexts are closed."""
        await self.pool.retire(session_key)

    async def fetch(
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
        CSS selector to wait for after it; ``actions(page)`` runs last (scroll, click...).
        Raises only :class:`~crawlfleet.errors.FetchError` subclasses.
        """
        target = _checked(url, self.settings)
        until = wait_until or self.settings.wait_until
        if until not in WAIT_STATES:
            raise ValueError(f"wait_until must be one of {sorted(WAIT_STATES)}")
        override = None
        if method.upper() != "GET" or body is not None or headers:
            override = DocumentOverride(method.upper(), body, tuple((headers or {}).items()))
        started = self._clock()
        async with self.pool.page(ContextKey(session_key, proxy, user_agent)) as lease:
            timings = PageTimings(admission=self._clock() - started)
            visit = _Visit(self, lease, timings)
            try:
                async with asyncio.timeout(self.settings.timeout):
                    result = await visit.run(target, until, wait_for, actions, override)
            except TimeoutError as exc:
                lease.discard("timeout")
                raise FetchTimeout(
                    f"page not ready within {self.settings.timeout}s: {mask_credentials(target)}"
                ) from exc
            except PlaywrightError as exc:
                raise visit.failure(exc, target) from exc
        timings.total = self._clock() - started
        return result


class _Visit:
    """One fetch on one leased page."""

    def __init__(self, fetcher: BrowserFetcher, lease: PageLease, timings: PageTimings) -> None:
        self.settings = fetcher.settings
        self.clock = fetcher._clock
        self.lease = lease
        self.timings = timings
        self.deadline = self.clock() + self.settings.timeout
        self.xhr = _XhrWatch(self.settings)

    def remaining_ms(self, cap: float | None = None) -> float:
        left = max(0.001, self.deadline - self.clock())
        return 1000 * (left if cap is None else min(left, cap))

    async def run(
        self,
        target: str,
        until: WaitUntil,
        wait_for: str | None,
        actions: PageAction | None,
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
            t = self.clock()
            if wait_for:
                await page.wait_for_selector(
                    wait_for, state="attached", timeout=self.remaining_ms()
                )
            self.timings.wait = self.clock() - t
            t = self.clock()
            if actions is not None:
                await actions(page)
            self.timings.actions = self.clock() - t
            t = self.clock()
            result = await self._read(page, response)
            self.timings.capture = self.clock() - t
            return result
        finally:
            page.remove_listener("response", self.xhr.on_response)
            router.end()

    async def _check_redirects(self, response: Response) -> None:
        """Refuse a document whose redirect chain passed a refused host (hops are not routed,
        so their requests were sent; their answers go no further)."""
        request = response.request
        while request.redirected_from is not None:
            reason = await self.lease.router.check(request.url)
            if reason is not None:
                raise AddressRefused(f"redirect to {mask_credentials(request.url)}: {reason}")
            request = request.redirected_from

    async def _read(self, page: Page, response: Response) -> BrowserResult:
        html, body, headers, sent, server = await asyncio.gather(
            page.content(),
            response.body(),
            response.headers_array(),
            response.request.headers_array(),
            response.server_addr(),
        )
        cap = self.settings.max_body
        for size in (len(body), len(html)):
            if size > cap:
                raise BodyTooLarge(f"document or DOM of {size} exceeds {cap}", limit=cap, seen=size)
        xhr = await self.xhr.collect(self.remaining_ms() / 1000)
        chain = []
        hop = response.request.redirected_from
        while hop is not None:
            chain.append(hop.url)
            hop = hop.redirected_from
        return BrowserResult(
            url=response.url,
            status=response.status,
            reason=response.status_text,
            http_version="HTTP/1.1",
            headers=[(h["name"], h["value"]) for h in headers],
            body=body,
            elapsed=0.0,
            remote_ip=server["ipAddress"] if server else None,
            request_headers=[(h["name"], h["value"]) for h in sent],
            redirects=chain[::-1],
            nbytes_wire=len(body),
            rendered_html=html,
            xhr=xhr,
            xhr_dropped=self.xhr.dropped,
            timings=self.timings,
            page_url=page.url,
        )

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
        error = classify_error(str(exc))
        if error is BrowserError or error is FetchTimeout:
            self.lease.discard("timeout" if error is FetchTimeout else "crash")
        return error(f"{shown}: {_first_line(exc)}")


class _XhrWatch:
    """Collects the JSON responses to a page's XHR/``fetch()`` calls, within the caps."""

    def __init__(self, settings: BrowserSettings) -> None:
        self.settings = settings
        self.dropped = 0
        self._tasks: list[asyncio.Task[XhrResponse]] = []
        self._bytes = 0

    def on_response(self, response: Response) -> None:
        if response.request.resource_type not in _XHR_TYPES:
            return
        content_type = response.headers.get("content-type", "")
        if "json" not in content_type.lower():
            return
        if len(self._tasks) >= self.settings.max_xhr:
            self.dropped += 1
            return
        self._tasks.append(asyncio.ensure_future(self._read(response, content_type)))

    async def _read(self, response: Response, content_type: str) -> XhrResponse:
        body: bytes | None = None
        declared = response.headers.get("content-length", "")
        if not (declared.isdigit() and int(declared) > self.settings.max_xhr_body):
            try:
                body = await response.body()
            except PlaywrightError:
                body = None
        if body is not None:
            too_big = len(body) > self.settings.max_xhr_body
            if too_big or self._bytes + len(body) > self.settings.max_xhr_total:
                body = None
            else:
                self._bytes += len(body)
        return XhrResponse(
            url=response.url,
            status=response.status,
            content_type=content_type,
            body=body,
            method=response.request.method,
        )

    async def collect(self, timeout: float) -> list[XhrResponse]:
        """The responses read so far and within ``timeout``; slower ones are dropped."""
        if not self._tasks:
            return []
        done, pending = await asyncio.wait(self._tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        self.dropped += len(pending)
        return [t.result() for t in self._tasks if t in done]


def _checked(url: str, settings: BrowserSettings) -> str:
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
    return str(parsed.with_fragment(None))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
