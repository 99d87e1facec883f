"""The demo shop's JavaScript pages: the same shop, with its content written by scripts.

Every page here has a static twin on the same server, and a browser that runs the scripts sees
the same content as a plain HTTP client sees on the twin, so one spider yields the same records
from both. Over plain HTTP the script-written parts are simply missing (0 records, no product
links), which is what a crawler has to notice.

* ``/js/``, ``/js/category/{slug}?page=N``: the listing is built by a script from inline JSON
  (cards and pager). Twin: ``/category/{slug}?page=N``.
* ``/js/product/{sku}``: the article is built by a script from inline JSON, and the price is
  added after a delay (``?delay=MS``, default :data:`PRICE_DELAY_MS`); the article gets
  ``data-ready`` once complete, so ``article.product[data-ready]`` is the selector to wait for.
  Twin: ``/product/{sku}``.
* ``/js/scroll/{slug}``: an infinite-scroll listing of a whole category, fed page by page by
  the JSON API ``/js/api/category/{slug}?page=N`` whenever the window is scrolled to the
  bottom; the list gets ``data-done`` after the last page (:func:`scroll_to_end` does the
  scrolling). Twin: every page of ``/category/{slug}``.
* ``/js/stuck/{sku}``: ``/js/product/{sku}`` plus an async script that never finishes loading
  (``/js/stall`` answers only when the client gives up), so the ``load`` event never fires;
  ``domcontentloaded`` and the ``data-ready`` selector still do.

``register(app, catalog)`` adds the routes to the demo server's application.
"""

from __future__ import annotations

import asyncio
import json
from html import escape
from typing import TYPE_CHECKING, Any

from aiohttp import web

from crawlfleet.demo.catalog import PRODUCTS_PER_PAGE, Catalog, Product
from crawlfleet.demo.pages import Renderer

if TYPE_CHECKING:
    from playwright.async_api import Page

PRICE_DELAY_MS = 250
"""How long the JS product page waits before it shows the price (override with ``?delay=``)."""
STALL_POLL = 0.2

_HTML = "text/html"


class JsLinks:
    """Link spelling of the JS pages: every link leads to another JS page."""

    sorts: tuple[str, ...] = ("name",)

    def category(self, slug: str, page: int = 1, sort: str = "name", variant: int = 0) -> str:
        return f"/js/category/{slug}?page={page}" + ("#listing" if variant % 2 else "")

    def product(self, sku: str, variant: int = 0) -> str:
        return f"/js/product/{sku}" + ("", "#reviews")[variant % 2]


def _inline_json(element_id: str, data: object) -> str:
    # "</" inside a script element would end it early.
    text = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def _card_data(product: Product, links: JsLinks, index: int) -> dict[str, Any]:
    return {
        "sku": product.sku,
        "name": product.name or product.sku,
        "price_text": product.price_text or "Price on request",
        "href": links.product(product.sku, index),
    }


class JsRenderer(Renderer):
    """The shop's pages with the listing and the product article written by scripts."""

    def __init__(self, catalog: Catalog) -> None:
        self.js_links = JsLinks()
        super().__init__(catalog, self.js_links)

    def category(self, slug: str, page: int = 1, sort: str = "name") -> str | None:
        category = self.catalog.category(slug)
        pages = self.catalog.page_count(slug)
        if category is None or not 1 <= page <= pages or sort not in self.js_links.sorts:
            return None
        data = self.listing_data(slug, page)
        body = (
            self._breadcrumbs([(category.name, self.js_links.category(slug))])
            + f"<h1>{escape(category.name)}</h1>"
            + '<div id="listing-root"></div>'
            + _inline_json("listing-data", data)
            + f"<script>{_LISTING_JS}</script>"
        )
        return self._page(category.name, f"/category/{slug}?page={page}", body)

    def listing_data(self, slug: str, page: int) -> dict[str, Any]:
        """One listing page as data: its cards and the pager links (JS page URLs)."""
        pages = self.catalog.page_count(slug)
        start = (page - 1) * PRODUCTS_PER_PAGE
        products = self.catalog.in_category(slug)[start : start + PRODUCTS_PER_PAGE]
        links = self.js_links
        return {
            "products": [_card_data(p, links, i) for i, p in enumerate(products)],
            "page": page,
            "pages": pages,
            "prev": links.category(slug, page - 1) if page > 1 else None,
            "next": links.category(slug, page + 1) if page < pages else None,
        }

    def api_page(self, slug: str, page: int) -> dict[str, Any] | None:
        """The infinite-scroll API's answer for one page, or None past the end."""
        if self.catalog.category(slug) is None or not 1 <= page <= self.catalog.page_count(slug):
            return None
        data = self.listing_data(slug, page)
        more = page < data["pages"]
        return {
            "products": data["products"],
            "page": page,
            "pages": data["pages"],
            "next": f"/js/api/category/{slug}?page={page + 1}" if more else None,
        }

    def scroll(self, slug: str) -> str | None:
        """A whole category as one infinite-scroll page fed by the JSON API."""
        category = self.catalog.category(slug)
        if category is None:
            return None
        body = (
            self._breadcrumbs([(category.name, self.js_links.category(slug))])
            + f"<h1>{escape(category.name)}</h1>"
            + f'<ul class="grid listing" id="feed" data-next="/js/api/category/{slug}?page=1">'
            + "</ul>"
            + f"<script>{_SCROLL_JS}</script>"
        )
        return self._page(category.name, f"/category/{slug}", body)

    def stuck(self, sku: str) -> str | None:
        """The JS product page plus a script that never finishes loading."""
        page = self.product(sku)
        if page is None:
            return None
        return page.replace("</main>", '<script async src="/js/stall"></script></main>', 1)

    def _article(self, p: Product) -> str:
        data = {
            "sku": p.sku,
            "name": p.name,
            "category": p.category,
            "price_text": p.price_text,
            "in_stock": p.in_stock,
            "description": list(p.description),
            "delay_ms": PRICE_DELAY_MS,
        }
        return (
            '<div id="product-root"></div>'
            + _inline_json("product-data", data)
            + f"<script>{_PRODUCT_JS}</script>"
        )


# The scripts build the same elements, classes and attributes as the static pages (pages.py),
# so the demo spider's selectors read both alike.
_CARD_JS = (
    "function card(p){var li=document.createElement('li');li.className='card';"
    "var a=document.createElement('a');a.className='product-link';a.href=p.href;"
    "a.textContent=p.name;var s=document.createElement('span');s.className='card-price';"
    "s.textContent=p.price_text;li.appendChild(a);li.appendChild(s);return li}"
)
_LISTING_JS = (
    "(function(){" + _CARD_JS + "var d=JSON.parse(document.getElementById('listing-data')"
    ".textContent),root=document.getElementById('listing-root');"
    "function pager(){var div=document.createElement('div');div.className='pager';"
    "if(d.prev){var p=document.createElement('a');p.className='prev';p.href=d.prev;"
    "p.textContent='Previous';div.appendChild(p)}var n=document.createElement('span');"
    "n.className='page-no';n.textContent='Page '+d.page+' of '+d.pages;div.appendChild(n);"
    "if(d.next){var x=document.createElement('a');x.className='next';x.href=d.next;"
    "x.textContent='Next';div.appendChild(x)}return div}"
    "var ul=document.createElement('ul');ul.className='grid listing';"
    "d.products.forEach(function(p){ul.appendChild(card(p))});"
    "root.appendChild(pager());root.appendChild(ul);root.appendChild(pager());"
    "root.dataset.ready='1'})();"
)
_PRODUCT_JS = (
    "(function(){var d=JSON.parse(document.getElementById('product-data').textContent),"
    "root=document.getElementById('product-root');"
    "function el(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;"
    "if(text)e.textContent=text;return e}"
    "var art=el('article','product');art.dataset.sku=d.sku;art.dataset.category=d.category;"
    "art.appendChild(el('h1','',d.name));var meta=el('div','meta','SKU ');"
    "meta.appendChild(el('span','sku',d.sku));"
    "var stock=el('span','stock',d.in_stock?'In stock':'Out of stock');"
    "stock.dataset.available=String(d.in_stock);meta.appendChild(document.createTextNode(' '));"
    "meta.appendChild(stock);art.appendChild(meta);var desc=el('section');desc.id='description';"
    "d.description.forEach(function(t){desc.appendChild(el('p','',t))});art.appendChild(desc);"
    "root.appendChild(art);"
    "var q=new URLSearchParams(location.search).get('delay'),ms=q===null?d.delay_ms:+q;"
    "setTimeout(function(){if(d.price_text!==null){"
    "meta.insertBefore(el('span','price',d.price_text),stock);"
    "meta.insertBefore(document.createTextNode(' '),stock)}art.dataset.ready='1'},ms)})();"
)
_SCROLL_JS = (
    "(function(){" + _CARD_JS + "var feed=document.getElementById('feed'),loading=false;"
    "function more(){var next=feed.dataset.next;if(!next||loading)return;loading=true;"
    "fetch(next,{headers:{'Accept':'application/json'}}).then(function(r){return r.json()})"
    ".then(function(d){d.products.forEach(function(p){feed.appendChild(card(p))});"
    "feed.dataset.loaded=String(d.page);if(d.next){feed.dataset.next=d.next}else{"
    "delete feed.dataset.next;feed.dataset.done='1'}loading=false})}"
    "window.addEventListener('scroll',function(){if(window.innerHeight+window.scrollY>="
    "document.documentElement.scrollHeight-200)more()});more()})();"
)


async def scroll_to_end(page: Page, *, max_rounds: int = 100, timeout: float = 10.0) -> int:
    """Scroll an infinite-scroll page (``/js/scroll/...``) until its feed is complete.

    A page action for the browser fetcher; returns how many feed pages were loaded.
    """
    done = "document.getElementById('feed').dataset.done === '1'"
    loaded = "+(document.getElementById('feed').dataset.loaded || 0)"
    await page.wait_for_function(f"{loaded} >= 1 || {done}", timeout=timeout * 1000)
    for _ in range(max_rounds):
        if await page.evaluate(done):
            break
        count = await page.evaluate(loaded)
        await page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        await page.wait_for_function(f"{loaded} > {count} || {done}", timeout=timeout * 1000)
    return int(await page.evaluate(loaded))


class JsShop:
    """The JS pages of one running shop, each rendered once and then served from memory."""

    def __init__(self, catalog: Catalog) -> None:
        self.renderer = JsRenderer(catalog)
        self._cache: dict[str, bytes] = {}

    def html(self, key: str, render: Any) -> web.Response:
        body = self._cache.get(key)
        if body is None:
            text = render()
            if text is None:
                raise web.HTTPNotFound(text="not found")
            body = self._cache[key] = text.encode()
        return web.Response(body=body, content_type=_HTML, charset="utf-8")


JS_SHOP = web.AppKey("js_shop", JsShop)


def register(app: web.Application, catalog: Catalog) -> None:
    """Add the JS pages and their JSON API to the demo shop's application."""
    app[JS_SHOP] = JsShop(catalog)
    app.router.add_get("/js/", _home)
    app.router.add_get("/js/category/{slug}", _category)
    app.router.add_get("/js/product/{sku}", _product)
    app.router.add_get("/js/scroll/{slug}", _scroll)
    app.router.add_get("/js/stuck/{sku}", _stuck)
    app.router.add_get("/js/stall", _stall)
    app.router.add_get("/js/api/category/{slug}", _api_category)


def _page_number(request: web.Request) -> int:
    try:
        return int(request.query.get("page", "1"))
    except ValueError as exc:
        raise web.HTTPNotFound(text="no such page") from exc


async def _home(request: web.Request) -> web.StreamResponse:
    shop = request.app[JS_SHOP]
    return shop.html("home", shop.renderer.home)


async def _category(request: web.Request) -> web.StreamResponse:
    shop, slug, page = request.app[JS_SHOP], request.match_info["slug"], _page_number(request)
    return shop.html(f"category:{slug}:{page}", lambda: shop.renderer.category(slug, page))


async def _product(request: web.Request) -> web.StreamResponse:
    shop, sku = request.app[JS_SHOP], request.match_info["sku"]
    return shop.html(f"product:{sku}", lambda: shop.renderer.product(sku))


async def _scroll(request: web.Request) -> web.StreamResponse:
    shop, slug = request.app[JS_SHOP], request.match_info["slug"]
    return shop.html(f"scroll:{slug}", lambda: shop.renderer.scroll(slug))


async def _stuck(request: web.Request) -> web.StreamResponse:
    shop, sku = request.app[JS_SHOP], request.match_info["sku"]
    return shop.html(f"stuck:{sku}", lambda: shop.renderer.stuck(sku))


async def _stall(request: web.Request) -> web.StreamResponse:
    """Never answers while the client waits; ends when the client (or the server) hangs up."""
    # aiohttp has no event for a client hanging up: look at the transport now and then.
    while request.transport is not None and not request.transport.is_closing():  # noqa: ASYNC110
        await asyncio.sleep(STALL_POLL)
    return web.Response(status=204)


async def _api_category(request: web.Request) -> web.StreamResponse:
    shop, slug = request.app[JS_SHOP], request.match_info["slug"]
    data = shop.renderer.api_page(slug, _page_number(request))
    if data is None:
        raise web.HTTPNotFound(text="no such page")
    return web.json_response(data)
