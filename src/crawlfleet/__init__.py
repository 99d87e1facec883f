"""crawlfleet: write a spider once, crawl on a laptop (SQLite) or a fleet (PostgreSQL)."""

from __future__ import annotations

from crawlfleet.spider import Request, Spider

__version__ = "0.1.0"

__all__ = ["Request", "Spider", "__version__"]
