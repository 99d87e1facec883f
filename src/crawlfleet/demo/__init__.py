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

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawlfleet.demo.catalog import Catalog
    from crawlfleet.demo.faults import Faults
    from crawlfleet.demo.server import make_app, start_demo_server
    from crawlfleet.demo.spider import DemoShop, Product, make_spider

# Imported on first use, so that ``python -m crawlfleet.demo.server`` does not load the server
# module twice (once by this package, once as __main__).
_HOMES = {
    "Catalog": "catalog",
    "Faults": "faults",
    "make_app": "server",
    "start_demo_server": "server",
    "DemoShop": "spider",
    "Product": "spider",
    "make_spider": "spider",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"crawlfleet.demo.{home}"), name)


__all__ = [
    "Catalog",
    "DemoShop",
    "Faults",
    "Product",
    "make_app",
    "make_spider",
    "start_demo_server",
]
