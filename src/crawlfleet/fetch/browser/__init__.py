"""The browser fetcher: Playwright driving the system's Chromium, pooled per worker process.

* :class:`BrowserFetcher`: the fetcher (``fetch(request, route=, session=)``, the port of
  :mod:`crawlfleet.fetch.base`, and ``render(url, ...)``), returning :class:`BrowserResult`;
  :class:`BrowserRequest` adds ``wait_until``, ``wait_for`` and page ``actions``;
* :class:`BrowserPool`: one browser, N contexts (session identities), recycling, restarts,
  memory budget and admission;
* :class:`BrowserSettings`: every knob, with defaults for a crawler;
* :mod:`~crawlfleet.fetch.browser.budget` (pure decisions), :mod:`.procs` (/proc: memory,
  the orphan sweep), :mod:`.routing` (blocking, the address guard), :mod:`.result`.

Importing this package imports Playwright; nothing in ``crawlfleet.fetch`` imports it eagerly.
"""

from __future__ import annotations

from crawlfleet.fetch.browser.fetcher import BrowserFetcher
from crawlfleet.fetch.browser.pool import BrowserPool, ContextKey, PageLease, PoolStats
from crawlfleet.fetch.browser.request import BrowserRequest, PageAction
from crawlfleet.fetch.browser.result import BrowserResult, PageTimings, XhrResponse
from crawlfleet.fetch.browser.settings import BrowserSettings

__all__ = [
    "BrowserFetcher",
    "BrowserPool",
    "BrowserRequest",
    "BrowserResult",
    "BrowserSettings",
    "ContextKey",
    "PageAction",
    "PageLease",
    "PageTimings",
    "PoolStats",
    "XhrResponse",
]
