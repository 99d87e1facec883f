"""Capturing the JSON answers to a page's XHR/``fetch()`` calls, bounded in count and size."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from playwright.async_api import Error as PlaywrightError

from crawlfleet.fetch.browser.result import XhrResponse
from crawlfleet.fetch.browser.settings import BrowserSettings

if TYPE_CHECKING:
    from playwright.async_api import Response

_XHR_TYPES = frozenset({"xhr", "fetch"})


class XhrWatch:
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
