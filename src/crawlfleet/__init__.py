"""crawlfleet: write a spider once, crawl on a laptop (SQLite) or a fleet (PostgreSQL).

The public API is what this module exports; everything else is internal and may change. The
names are imported on first use (PEP 562): ``crawlfleet --help`` and the command line's start-up
do not pay for the selector and HTTP stacks a spider needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "CrawlfleetError": "crawlfleet.errors",
    "Request": "crawlfleet.spider",
    "Response": "crawlfleet.response",
    "Selector": "crawlfleet.selectors",
    "SelectorList": "crawlfleet.selectors",
    "Spider": "crawlfleet.spider",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'crawlfleet' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
