"""A catalogue that changes between crawls: products on listing pages, each product page with
``ETag`` and ``Last-Modified`` (and 304 to a matching conditional request), gzipped sitemaps
(an index of two, listed by robots.txt) with each product's ``lastmod``. The test changes it
in place between runs: prices changed, products gone (404, off every listing and sitemap), new
ones linked, or listed only by the sitemaps.

It counts what it served: requests and 304s per path kind, and body bytes.
"""

from __future__ import annotations

import gzip
import hashlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime

from aiohttp import web

PER_LIST = 10
T0 = 1_700_000_000.0


@dataclass
class Product:
    sku: str
    name: str
    price: float
    modified: float = T0
    linked: bool = True  # on a listing page (False: only in the sitemaps)


@dataclass
class CatalogSite:
    products: dict[str, Product] = field(default_factory=dict)
    port: int = 0
    served: Counter[str] = field(default_factory=Counter)
    not_modified: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    clock: float = T0
    made: int = 0  # products made so far: the next one's number

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, n: int, *, linked: bool = True) -> list[Product]:
        start, self.made = self.made, self.made + n
        new = [
            Product(f"sku-{i:04d}", f"Product {i}", 10.0 + i, self.clock, linked)
            for i in range(start, start + n)
        ]
        self.products.update((p.sku, p) for p in new)
        return new

    def change(self, sku: str, price: float) -> None:
        self.clock += 60
        p = self.products[sku]
        p.price, p.modified = price, self.clock

    def remove(self, sku: str) -> None:
        del self.products[sku]

    def linked(self) -> list[Product]:
        return [p for p in self.products.values() if p.linked]

    def lists(self) -> int:
        return max(1, -(-len(self.linked()) // PER_LIST))

    def reset_counts(self) -> None:
        self.served.clear()
        self.not_modified.clear()
        self.bytes = 0


SITE = web.AppKey("site", CatalogSite)


def _kind(path: str) -> str:
    return path.strip("/").split("/")[0].split("-")[0].split(".")[0] or "home"


def _send(request: web.Request, body: bytes, content_type: str, modified: float) -> web.Response:
    """``body`` with its validators, or a 304 when the request's match."""
    site = request.app[SITE]
    kind = _kind(request.path)
    site.served[kind] += 1
    etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
    last_modified = formatdate(modified, usegmt=True)
    headers = {"ETag": etag, "Last-Modified": last_modified}
    match = request.headers.get("If-None-Match")
    since = request.headers.get("If-Modified-Since")
    if match is not None:
        fresh = etag in [m.strip() for m in match.split(",")]
    elif since is not None:
        try:
            fresh = parsedate_to_datetime(since).timestamp() >= int(modified)
        except (TypeError, ValueError):
            fresh = False
    else:
        fresh = False
    if fresh:
        site.not_modified[kind] += 1
        return web.Response(status=304, headers=headers)
    site.bytes += len(body)
    return web.Response(body=body, content_type=content_type, headers=headers)


async def _home(request: web.Request) -> web.Response:
    site = request.app[SITE]
    links = "".join(f'<a class="list" href="/list/{n}">{n}</a>' for n in range(1, site.lists() + 1))
    return _send(request, f"<html><body><nav>{links}</nav></body></html>".encode(), "text/html", T0)


async def _list(request: web.Request) -> web.Response:
    site = request.app[SITE]
    n = int(request.match_info["n"])
    page = sorted(site.linked(), key=lambda p: p.sku)[(n - 1) * PER_LIST : n * PER_LIST]
    if not page:
        raise web.HTTPNotFound()
    items = "".join(
        f'<li><a class="product" href="/product/{p.sku}">{p.name}</a></li>' for p in page
    )
    body = f"<html><body><ul>{items}</ul></body></html>".encode()
    return _send(request, body, "text/html", max(p.modified for p in page))


async def _product(request: web.Request) -> web.Response:
    site = request.app[SITE]
    p = site.products.get(request.match_info["sku"])
    if p is None:
        site.served["product"] += 1
        raise web.HTTPNotFound()
    body = (
        f'<html><body><article class="product"><h1>{p.name}</h1>'
        f'<span class="sku">{p.sku}</span><span class="price">{p.price:.2f}</span>'
        "</article></body></html>"
    ).encode()
    return _send(request, body, "text/html", p.modified)


async def _robots(request: web.Request) -> web.Response:
    site = request.app[SITE]
    site.served["robots"] += 1
    return web.Response(
        text=f"User-agent: *\nAllow: /\nSitemap: {site.base_url}/sitemap_index.xml.gz\n"
    )


def _gz(xml: str) -> bytes:
    return gzip.compress(xml.encode(), mtime=0)


async def _sitemap_index(request: web.Request) -> web.Response:
    site = request.app[SITE]
    entries = "".join(
        f"<sitemap><loc>{site.base_url}/sitemap-{n}.xml.gz</loc></sitemap>" for n in (1, 2)
    )
    xml = f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</sitemapindex>'
    return _send(request, _gz(xml), "application/gzip", T0)


async def _sitemap(request: web.Request) -> web.Response:
    site = request.app[SITE]
    half = int(request.match_info["n"]) - 1
    every = sorted(site.products.values(), key=lambda p: p.sku)[half::2]
    urls = "".join(
        f"<url><loc>{site.base_url}/product/{p.sku}</loc>"
        f"<lastmod>{_w3c(p.modified)}</lastmod></url>"
        for p in every
    )
    xml = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    modified = max((p.modified for p in every), default=T0)
    return _send(request, _gz(xml), "application/gzip", modified)


def _w3c(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def start_catalog(site: CatalogSite) -> Callable[[], Awaitable[None]]:
    """Serve ``site`` on 127.0.0.1 (its ``port`` set); returns ``stop``."""
    app = web.Application()
    app[SITE] = site
    app.router.add_get("/", _home)
    app.router.add_get("/robots.txt", _robots)
    app.router.add_get("/list/{n:\\d+}", _list)
    app.router.add_get("/product/{sku}", _product)
    app.router.add_get("/sitemap_index.xml.gz", _sitemap_index)
    app.router.add_get("/sitemap-{n:[12]}.xml.gz", _sitemap)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    site.port = runner.addresses[0][1]
    return runner.cleanup
