"""The spider of ``bench_discovery.py``: follows every link of the discovery site (or of the demo
shop, as the demo spider does) and keeps one record per page.

    BENCH_SITE_URL=http://127.0.0.1:PORT/ crawlfleet submit benchmarks/discovery_spider.py

Trap budgets are raised past any run's size (the default budgets would end a one-host crawl of
a million URLs as traps), but still counted at every enqueue, as in any crawl.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar

from crawlfleet.response import Response
from crawlfleet.spider import Spider

SITE_URL = os.environ.get("BENCH_SITE_URL", "")
if not SITE_URL:
    raise RuntimeError("set BENCH_SITE_URL to the site's base URL")


class Discovery(Spider):
    name: ClassVar[str] = "discovery"
    start_urls: ClassVar[list[str]] = [SITE_URL.rstrip("/") + "/"]
    domain_concurrency: ClassVar[int] = 64
    max_depth: ClassVar[int | None] = 1_000_000  # the --known site goes one level deeper a page
    host_page_budget: ClassVar[int | None] = 1_000_000_000
    pattern_budget: ClassVar[int | None] = 1_000_000_000

    def parse(self, response: Response) -> Iterator[Any]:
        yield from response.follow_all("a")
        n = response.css(".item::attr(data-n)").get()
        if n is not None:
            yield {"n": int(n), "url": response.url}
