"""The bundled demo shop: deterministic catalog, realistic pages, a server with fault switches,
and the spider that crawls it.

``crawlfleet demo`` uses it end to end::

    catalog = Catalog(n_products=2000)
    base_url, runner = await start_demo_server(catalog, Faults())
    spider_cls = make_spider(base_url)
    ...  # crawl; compare the records with catalog.expected_records()
    await runner.cleanup()
"""

from __future__ import annotations

from crawlfleet.demo.catalog import Catalog
from crawlfleet.demo.faults import Faults
from crawlfleet.demo.server import make_app, start_demo_server
from crawlfleet.demo.spider import DemoShop, Product, make_spider

__all__ = [
    "Catalog",
    "DemoShop",
    "Faults",
    "Product",
    "make_app",
    "make_spider",
    "start_demo_server",
]
