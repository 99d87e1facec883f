"""Fetching: the fetcher port and its HTTP fetcher, size/decompression limits, robots.txt and the
address guard."""

from __future__ import annotations

from crawlfleet.fetch.base import Fetcher, FetcherPool, FetchRequest, FetchResult
from crawlfleet.fetch.guard import GuardedResolver, check_host, is_public_address
from crawlfleet.fetch.http import FetchSettings, HttpClient, HttpFetcher
from crawlfleet.fetch.limits import BodyDecoder
from crawlfleet.fetch.robots import RobotsCache

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
