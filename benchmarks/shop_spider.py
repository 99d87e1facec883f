"""The benchmark shop crawled by crawlfleet (WARC and records on, as by default).

    BENCH_SITE_URL=http://127.0.0.1:PORT/ \
        crawlfleet crawl benchmarks/shop_spider.py --workers 1 -o out.jsonl

The spider is the demo shop's (same link CSS, extraction and model as ``scrapy_shop.py``),
pointed at the static copy from ``make_site.py``.
"""

from __future__ import annotations

import os
from typing import ClassVar

from crawlfleet.demo import spider as demo

SITE_URL = os.environ.get("BENCH_SITE_URL", "")
if not SITE_URL:
    raise RuntimeError("set BENCH_SITE_URL to the static shop's base URL")


class BenchShop(demo.DemoShop):
    name: ClassVar[str] = "bench-shop"
    start_urls: ClassVar[list[str]] = [SITE_URL.rstrip("/") + "/"]
    domain_concurrency: ClassVar[int] = 64
