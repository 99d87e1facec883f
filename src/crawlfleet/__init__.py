"""crawlfleet: write a spider once, crawl on a laptop (SQLite) or a fleet (PostgreSQL).

The public API is what this module exports; everything else is internal and may change.
"""

from __future__ import annotations

from crawlfleet.errors import CrawlfleetError
from crawlfleet.response import Response
from crawlfleet.selectors import Selector, SelectorList
from crawlfleet.spider import Request, Spider

__version__ = "0.1.0"

__all__ = [
    "CrawlfleetError",
    "Request",
    "Response",
    "Selector",
    "SelectorList",
    "Spider",
    "__version__",
]
