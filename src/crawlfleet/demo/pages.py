"""HTML for the demo shop, shared by the live server and the static benchmark site.

Pages are as heavy as a real shop's: a product page is ~45 KB with ~230 links, most of them the
header mega-menu that every page repeats. The links include duplicate spellings of the same URL
(fragments, session ids, query parameters in another order) that a crawler must canonicalise,
and links into ``/cart/`` and ``/account/`` that robots.txt disallows.

Two link styles exist: ``DynamicLinks`` (the aiohttp server: query-string pagination and sorting,
session ids) and ``StaticLinks`` (files behind nginx: path-based pagination, fragments only).
Everything that is the same on every page is rendered once per ``Renderer``.
"""

from __future__ import annotations

import json
from html import escape
from typing import Protocol

from crawlfleet.demo.catalog import FACETS, PRODUCTS_PER_PAGE, Catalog, Product

SITE_NAME = "Crawlfleet Demo Shop"
ROBOTS_TXT = (
    "# The demo shop: carts and accounts are for humans (a signed-in spider may read its orders).\n"
    "User-agent: *\n"
    "Disallow: /cart/\n"
    "Allow: /account/orders\n"
    "Disallow: /account/\n"
    "Disallow: /__admin/\n"
)
CALENDAR_START = (2024, 1)
RELATED_COUNT = 8
FEATURED_PER_CATEGORY = 3


class LinkStyle(Protocol):
    """How a site spells its URLs; ``variant`` picks one of several spellings of the same URL."""

    sorts: tuple[str, ...]

    def category(self, slug: str, page: int = 1, sort: str = "name", variant: int = 0) -> str: ...

    def product(self, sku: str, variant: int = 0) -> str: ...


class DynamicLinks:
    """Links of the live server: ``?page=N&sort=S`` listings, session ids on some product links."""

    sorts: tuple[str, ...] = ("name", "price")

    def category(self, slug: str, page: int = 1, sort: str = "name", variant: int = 0) -> str:
        if variant % 2:
            return f"/category/{slug}?sort={sort}&page={page}"
        return f"/category/{slug}?page={page}&sort={sort}"

    def product(self, sku: str, variant: int = 0) -> str:
        # a session token in the query (a long random value), one as a path parameter
        suffix = ("", "?sid=9f3a1c7e2b8d4f60a1c3", ";jsessionid=9F3A1C", "#reviews")[variant % 4]
        return f"/product/{sku}{suffix}"


class StaticLinks:
    """Links of the static site: one file per URL, so duplicates differ only by fragment."""

    sorts: tuple[str, ...] = ("name",)

    def category(self, slug: str, page: int = 1, sort: str = "name", variant: int = 0) -> str:
        path = f"/category/{slug}" if page == 1 else f"/category/{slug}/page-{page}"
        return path + ("#listing" if variant % 2 else "")

    def product(self, sku: str, variant: int = 0) -> str:
        return f"/product/{sku}" + ("", "#reviews", "#specs", "#description")[variant % 4]


class Renderer:
    """Renders every page of one shop; the shared chrome is built once, pages on demand."""

    def __init__(self, catalog: Catalog, links: LinkStyle, *, trap: bool = False) -> None:
        self.catalog = catalog
        self.links = links
        self.trap = trap
        self._header = self._render_header()
        self._footer = _render_footer()

    def home(self) -> str:
        featured = [p for c in self.catalog.categories for p in self._featured(c.slug)]
        cards = "".join(self._card(p, i) for i, p in enumerate(featured))
        body = (
            '<section class="hero"><h1>Everything for home, garden and office</h1>'
            f"<p>{len(self.catalog.products)} products in {len(self.catalog.categories)} "
            'categories.</p></section><ul class="grid featured">' + cards + "</ul>"
        )
        return self._page("Home", "/", body)

    def category(self, slug: str, page: int = 1, sort: str = "name") -> str | None:
        """A listing page, or None when the category, page or sort does not exist."""
        category = self.catalog.category(slug)
        pages = self.catalog.page_count(slug)
        if category is None or not 1 <= page <= pages or sort not in self.links.sorts:
            return None
        start = (page - 1) * PRODUCTS_PER_PAGE
        products = self.catalog.in_category(slug, sort)[start : start + PRODUCTS_PER_PAGE]
        cards = "".join(self._card(p, i) for i, p in enumerate(products))
        body = (
            self._breadcrumbs([(category.name, self.links.category(slug))])
            + f"<h1>{escape(category.name)}</h1>"
            + self._pager(slug, page, pages, sort, variant=1)
            + f'<ul class="grid listing">{cards}</ul>'
            + self._pager(slug, page, pages, sort, variant=0)
        )
        return self._page(category.name, self.links.category(slug, page, sort), body)

    def product(self, sku: str) -> str | None:
        """A product page, or None for an unknown sku."""
        product = self.catalog.product(sku)
        if product is None:
            return None
        category = self.catalog.category(product.category)
        assert category is not None  # every product's category is in the catalog
        body = (
            self._breadcrumbs(
                [(category.name, self.links.category(category.slug)), (product.name, "")]
            )
            + self._article(product)
            + self._related(product)
            + _json_ld(product)
        )
        return self._page(product.name or product.sku, product.path, body)

    def calendar(self, year: int, month: int) -> str:
        """One month of the endless events archive (the crawler trap): links the next month."""
        ny, nm = (year + 1, 1) if month == 12 else (year, month + 1)
        py, pm = (year - 1, 12) if month == 1 else (year, month - 1)
        body = (
            f"<h1>Events in {year:04d}-{month:02d}</h1><p>No events this month.</p>"
            f'<a class="prev" href="/calendar/{py:04d}/{pm:02d}">Previous month</a> '
            f'<a class="next" href="/calendar/{ny:04d}/{nm:02d}">Next month</a>'
        )
        return self._page("Events", f"/calendar/{year:04d}/{month:02d}", body)

    def not_found(self) -> str:
        return self._page("Not found", "", "<h1>Page not found</h1>")

    # -- pieces ---------------------------------------------------------------------------------

    def _page(self, title: str, canonical: str, body: str) -> str:
        canonical_link = f'<link rel="canonical" href="{escape(canonical)}">' if canonical else ""
        return (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{escape(title)} | {SITE_NAME}</title>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"{canonical_link}<style>{_CSS}</style></head><body>"
            f"{self._header}<main>{body}</main>{self._footer}<script>{_JS}</script></body></html>"
        )

    def _render_header(self) -> str:
        links = self.links
        nav = "".join(
            f'<a href="{links.category(c.slug)}">{escape(c.name)}</a>'
            for c in self.catalog.categories
        )
        events = ""
        if self.trap:
            y, m = CALENDAR_START
            events = f'<nav class="events"><a href="/calendar/{y:04d}/{m:02d}">Events</a></nav>'
        menu = "".join(self._menu_section(c.slug, c.name) for c in self.catalog.categories)
        return (
            f'<header class="site-header"><a class="logo" href="/">{SITE_NAME}</a>'
            '<form class="search" action="/search" method="get"><input name="q" '
            'placeholder="Search 2,000 products"><button>Search</button></form>'
            '<nav class="account"><a href="/account/">My account</a>'
            '<a href="/account/wishlist">Wishlist</a><a href="/cart/">Cart (0)</a></nav>'
            f'<nav class="main"><a href="/">Home</a>{nav}</nav>{events}'
            f'<div class="megamenu">{menu}</div></header>'
        )

    def _menu_section(self, slug: str, name: str) -> str:
        """One category of the mega-menu: facets, sort orders, featured products (14 links)."""
        links = self.links
        main = links.category(slug)
        items = [f'<a href="{main}">All {escape(name)}</a>']
        items += [f'<a href="{main}#facet-{f}">{f.replace("-", " ").title()}</a>' for f in FACETS]
        # The same listing spelled with its query parameters in the other order.
        items.append(f'<a href="{links.category(slug, variant=1)}">Sorted by name</a>')
        if "price" in links.sorts:
            items.append(f'<a href="{links.category(slug, sort="price")}">Sorted by price</a>')
        else:
            items.append(f'<a href="{links.category(slug, page=2)}">More {escape(name)}</a>')
        items += [
            f'<a href="{links.product(p.sku, variant=i)}">{escape(p.name or p.sku)}</a>'
            for i, p in enumerate(self._featured(slug))
        ]
        lis = "".join(f"<li>{item}</li>" for item in items)
        return f'<section class="menu-col"><h3>{escape(name)}</h3><ul>{lis}</ul></section>'

    def _featured(self, slug: str) -> tuple[Product, ...]:
        return self.catalog.in_category(slug)[:FEATURED_PER_CATEGORY]

    def _card(self, product: Product, index: int) -> str:
        price = escape(product.price_text or "Price on request")
        return (
            '<li class="card"><a class="product-link" '
            f'href="{self.links.product(product.sku, index)}">'
            f'{escape(product.name or product.sku)}</a><span class="card-price">{price}</span></li>'
        )

    def _pager(self, slug: str, page: int, pages: int, sort: str, variant: int) -> str:
        parts = []
        if page > 1:
            href = self.links.category(slug, page - 1, sort, variant)
            parts.append(f'<a class="prev" href="{href}">Previous</a>')
        parts.append(f'<span class="page-no">Page {page} of {pages}</span>')
        if page < pages:
            href = self.links.category(slug, page + 1, sort, variant)
            parts.append(f'<a class="next" href="{href}">Next</a>')
        return f'<div class="pager">{"".join(parts)}</div>'

    def _breadcrumbs(self, trail: list[tuple[str, str]]) -> str:
        crumbs = ['<a href="/">Home</a>']
        for label, href in trail:
            text = escape(label)
            crumbs.append(f'<a href="{href}">{text}</a>' if href else f"<span>{text}</span>")
        return f'<nav class="breadcrumbs">{" &rsaquo; ".join(crumbs)}</nav>'

    def _article(self, p: Product) -> str:
        price = f'<span class="price">{escape(p.price_text)}</span>' if p.price_text else ""
        stock = "In stock" if p.in_stock else "Out of stock"
        paragraphs = "".join(f"<p>{escape(text)}</p>" for text in p.description)
        path = p.path
        return (
            f'<article class="product" data-sku="{p.sku}" data-category="{p.category}">'
            f'<h1>{escape(p.name)}</h1><div class="meta">SKU <span class="sku">{p.sku}</span> '
            f'{price} <span class="stock" data-available="{str(p.in_stock).lower()}">{stock}</span>'
            "</div>"
            f'<nav class="product-actions"><a href="/cart/add?sku={p.sku}">Add to cart</a></nav>'
            f'<div class="product-tools"><a href="/account/wishlist/add?sku={p.sku}">Wishlist</a>'
            f'<a href="/account/compare/add?sku={p.sku}">Compare</a></div>'
            f'<nav class="tabs"><a href="{path}#description">Description</a>'
            f'<a href="{path}#specs">Specifications</a><a href="{path}#reviews">Reviews</a></nav>'
            f'<section id="description">{paragraphs}</section>'
            f'<section id="specs">{_specs(p)}</section>'
            f'<section id="reviews">{_reviews(p)}</section></article>'
        )

    def _related(self, product: Product) -> str:
        siblings = self.catalog.in_category(product.category)
        at = siblings.index(product)
        picks = [siblings[(at + k) % len(siblings)] for k in range(1, RELATED_COUNT + 1)]
        picks = [p for p in dict.fromkeys(picks) if p.sku != product.sku]
        cards = "".join(self._card(p, i) for i, p in enumerate(picks))
        return f'<aside class="related"><h2>You may also like</h2><ul>{cards}</ul></aside>'


def robots_txt() -> str:
    return ROBOTS_TXT


def captcha_page() -> str:
    """A status-200 block page, as anti-bot services serve them."""
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Just a moment...</title></head>'
        '<body><div class="challenge"><h1>Please verify you are a human</h1>'
        "<p>Access denied: our systems detected unusual traffic. Complete the CAPTCHA to continue."
        '</p><div class="g-recaptcha" data-sitekey="demo"></div></div></body></html>'
    )


def _specs(p: Product) -> str:
    rows = [
        ("SKU", p.sku),
        ("Category", p.category),
        ("Weight", f"{(int(p.sku[3:]) % 37) / 10 + 0.2:.1f} kg"),
        ("Warranty", "2 years"),
        ("Origin", ("Portugal", "Poland", "Germany", "Vietnam")[int(p.sku[3:]) % 4]),
        ("Packaging", "Recycled cardboard"),
    ]
    cells = "".join(f"<tr><th>{k}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="specs">{cells}</table>'


def _reviews(p: Product) -> str:
    n = int(p.sku[3:])
    items = []
    for k in range(3):
        stars = 3 + (n + k) % 3
        text = escape(p.description[k % len(p.description)][:220])
        items.append(
            f'<li class="review"><span class="stars" data-stars="{stars}">{"★" * stars}</span>'
            f'<p>{text}</p><span class="author">Customer {(n * 7 + k) % 1000}</span></li>'
        )
    return f'<h2>Reviews</h2><ul class="reviews">{"".join(items)}</ul>'


def _json_ld(p: Product) -> str:
    data: dict[str, object] = {
        "@context": "https://schema.org",
        "@type": "Product",
        "sku": p.sku,
        "name": p.name,
        "category": p.category,
        "description": p.description[0],
    }
    if p.price is not None:
        availability = "InStock" if p.in_stock else "OutOfStock"
        data["offers"] = {
            "@type": "Offer",
            "priceCurrency": "EUR",
            "price": f"{p.price:.2f}",
            "availability": f"https://schema.org/{availability}",
        }
    # "</" inside a script element would end it early.
    text = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/ld+json">{text}</script>'


def _render_footer() -> str:
    """Footer boilerplate: plain links (outside any nav, so spiders leave them alone) and text."""
    groups = {
        "Customer service": "Contact Shipping Returns Payment Tracking FAQ Warranty",
        "About us": "Story Careers Press Sustainability Stores Blog Affiliates",
        "Legal": "Terms Privacy Cookies Imprint Accessibility Compliance Recalls",
        "Follow us": "Newsletter Instagram Mastodon YouTube Podcast Giftcards Reviews",
    }
    cols = "".join(
        f"<div><h4>{title}</h4><ul>"
        + "".join(f'<li><a href="/help/{name.lower()}">{name}</a></li>' for name in names.split())
        + "</ul></div>"
        for title, names in groups.items()
    )
    legal = (
        "Prices include VAT and exclude shipping unless stated otherwise. Offers are valid while "
        "stocks last. The demo shop is generated for testing crawlers: every product, price and "
        "review on this site is fictional. "
    ) * 4
    return f'<footer class="site-footer">{cols}<p class="legal">{legal}</p></footer>'


def _css() -> str:
    """A stylesheet of realistic size: shops inline several KB of critical CSS in every page."""
    rules = [
        "body{margin:0;font-family:system-ui,sans-serif;color:#222;background:#fafafa}",
        ".site-header{display:flex;flex-wrap:wrap;gap:1rem;padding:1rem;background:#fff}",
        ".megamenu{display:grid;grid-template-columns:repeat(6,1fr);gap:.5rem;font-size:.8rem}",
        ".grid{display:grid;grid-template-columns:repeat(4,1fr);gap:1rem;list-style:none}",
        ".product h1{font-size:1.6rem}.price{font-weight:700;color:#b00}",
        ".site-footer{display:grid;grid-template-columns:repeat(4,1fr);background:#eee}",
    ]
    for i in range(310):
        rules.append(
            f".u-{i}{{margin:{i % 7 * 4}px;padding:{i % 5 * 2}px;"
            f"color:#{(i * 2654435761) % 0xFFFFFF:06x};border-radius:{i % 4}px}}"
        )
    return "".join(rules)


def _js() -> str:
    """Inline script of the kind shops carry (consent banner, analytics stub)."""
    events = ",".join(f'"evt_{i}":{{"sample":{i % 10 / 10},"ttl":{i * 60}}}' for i in range(80))
    return (
        "window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}"
        f"var CONSENT_CONFIG={{{events}}};"
        "document.addEventListener('DOMContentLoaded',function(){var b=document.querySelector"
        "('.consent');if(b&&localStorage.getItem('consent')){b.remove()}});"
    )


_CSS = _css()
_JS = _js()
