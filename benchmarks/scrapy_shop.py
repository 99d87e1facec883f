"""The benchmark shop crawled by Scrapy: same link CSS, same extraction, same model check.

    BENCH_SITE_URL=http://127.0.0.1:PORT/ scrapy runspider benchmarks/scrapy_shop.py -O out.jsonl

Records that fail the crawlfleet ``Product`` model are dropped (and counted in the stats as
``shop/invalid``), so the feed holds what crawlfleet's records table would.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from pydantic import ValidationError
from scrapy.http import Response

from crawlfleet.demo.spider import LINK_CSS, Product, extract_product
from crawlfleet.urls import canonicalize


class ShopBench(scrapy.Spider):
    name = "shop-bench"
    # BENCH_CONCURRENCY: the same concurrency as the crawlfleet run it is compared with
    custom_settings = {
        "CONCURRENT_REQUESTS": int(os.environ.get("BENCH_CONCURRENCY", "64")),
        "CONCURRENT_REQUESTS_PER_DOMAIN": int(os.environ.get("BENCH_CONCURRENCY", "64")),
        "DOWNLOAD_DELAY": 0,
        "ROBOTSTXT_OBEY": True,
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "AUTOTHROTTLE_ENABLED": False,
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        url = os.environ.get("BENCH_SITE_URL")
        if not url:
            raise ValueError("set BENCH_SITE_URL to the static shop's base URL")
        self.start_urls = [url.rstrip("/") + "/"]
        self.allowed_domains = [urlsplit(url).hostname or ""]

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        # crawlfleet's canonical form (session ids dropped, query sorted): the same pages as
        # crawlfleet's crawl, not the demo shop's duplicate spellings of them again
        for href in response.css(LINK_CSS).xpath("@href").getall():
            try:
                url = canonicalize(response.urljoin(href))
            except ValueError:
                continue
            yield scrapy.Request(url, callback=self.parse)
        record = extract_product(response)
        if record is None:
            return
        try:
            Product.model_validate(record)
        except ValidationError:
            assert self.crawler.stats is not None
            self.crawler.stats.inc_value("shop/invalid")
            return
        yield record
