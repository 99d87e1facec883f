"""Fetching: the fetcher port and its HTTP fetcher, size/decompression limits, robots.txt and the
address guard.

The names below load their modules on first use: importing a submodule (``crawlfleet.fetch.
profiles`` for a settings check, as ``crawl``'s coordinator does) does not import aiohttp.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawlfleet.fetch.base import Fetcher, FetcherPool, FetchRequest, FetchResult
    from crawlfleet.fetch.guard import GuardedResolver, check_host, is_public_address
    from crawlfleet.fetch.http import FetchSettings, HttpClient, HttpFetcher
    from crawlfleet.fetch.limits import BodyDecoder
    from crawlfleet.fetch.robots import RobotsCache

_WHERE = {
    "BodyDecoder": "limits",
    "FetchRequest": "base",
    "FetchResult": "base",
    "FetchSettings": "http",
    "Fetcher": "base",
    "FetcherPool": "base",
    "GuardedResolver": "guard",
    "HttpClient": "http",
    "HttpFetcher": "http",
    "RobotsCache": "robots",
    "check_host": "guard",
    "is_public_address": "guard",
}

__all__ = [
    "BodyDecoder",
    "FetchRequest",
    "FetchResult",
    "FetchSettings",
    "Fetcher",
    "FetcherPool",
    "GuardedResolver",
    "HttpClient",
    "HttpFetcher",
    "RobotsCache",
    "check_host",
    "is_public_address",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'crawlfleet.fetch' has no attribute {name!r}")
    return getattr(importlib.import_module(f"crawlfleet.fetch.{module}"), name)
