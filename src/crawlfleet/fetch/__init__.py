"""Fetching: the HTTP fetcher, size/decompression limits, robots.txt and the address guard."""

from __future__ import annotations

from crawlfleet.fetch.guard import GuardedResolver, check_host, is_public_address
from crawlfleet.fetch.http import FetchResult, FetchSettings, HttpFetcher
from crawlfleet.fetch.limits import BodyDecoder
from crawlfleet.fetch.robots import RobotsCache

__all__ = [
    "BodyDecoder",
    "FetchResult",
    "FetchSettings",
    "GuardedResolver",
    "HttpFetcher",
    "RobotsCache",
    "check_host",
    "is_public_address",
]
