"""The benchmark shop with adaptive revisit: its product pages listed by a sitemap with
``lastmod`` (written by ``bench_recrawl.py``), revisited when due or when their ``lastmod``
moved.

    BENCH_SITE_URL=http://127.0.0.1:PORT/ \
        crawlfleet crawl benchmarks/shop_revisit_spider.py --recrawl

``revisit_min = "1d"``: a run a day or less after the last one revisits the start URL, the
sitemap and the hubs (pages whose last parse found links the job did not know), and the product
pages whose ``lastmod`` in the sitemap moved since the job saw it; the rest are not due.
"""

from __future__ import annotations

import os
from typing import ClassVar

from crawlfleet.demo import spider as demo

SITE_URL = os.environ.get("BENCH_SITE_URL", "")
if not SITE_URL:
    raise RuntimeError("set BENCH_SITE_URL to the static shop's base URL")


class BenchShopRevisit(demo.DemoShop):
    """``shop_spider.BenchShop`` (same pages, links, extraction and width) with revisit."""

    name: ClassVar[str] = "bench-shop-revisit"
    start_urls: ClassVar[list[str]] = [SITE_URL.rstrip("/") + "/"]
    domain_concurrency: ClassVar[int] = 64
    sitemap_urls: ClassVar[list[str]] = [SITE_URL.rstrip("/") + "/sitemap.xml"]
    revisit_min: ClassVar[str | float | None] = "1d"
    revisit_max: ClassVar[str | float | None] = "30d"
