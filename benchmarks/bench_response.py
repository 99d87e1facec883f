"""Microseconds per call for the ``Response`` hot paths a spider's ``parse`` hits on every page.

Run: ``.venv/bin/python benchmarks/bench_response.py``. The page imitates a shop's product page:
about 45 KB of HTML with about 230 links, most of them a mega-menu and footer repeated on every
page, a breadcrumb, related products, pagination and inline ``<script>``/``<style>`` blocks.

* ``follow_all("a")``: a fresh ``Response`` (nothing parsed yet), parse, select, build every
  ``Request`` (target: < 400 µs).
* ``css(".price::text").get()``: on an already parsed page (target: < 20 µs).

The last two lines time what goes through lxml (parsel's parser): XPath from a CSS result on a
fresh page (both trees built), and ``get()`` of an element on a page whose trees are built.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from crawlfleet.response import Response

ROUNDS = 2000
URL = "https://shop.test/products/item-4711?color=red"
HEADERS = {"Content-Type": "text/html; charset=utf-8", "Server": "bench"}


def mega_menu() -> str:
    """A 12 x 12 category menu: the bulk of the links on a real shop page."""
    columns = []
    for c in range(12):
        items = "".join(
            f'<li class="menu-item"><a class="menu-link" href="/category/{c}/{s}" '
            f'data-track="menu-{c}-{s}">Category {c} &rsaquo; Sub {s}</a></li>\n'
            for s in range(12)
        )
        columns.append(
            f'<div class="menu-col"><h3><a href="/category/{c}">Dept {c}</a></h3>\n'
            f'<ul class="menu-list">\n{items}</ul></div>\n'
        )
    return f'<nav class="mega-menu" aria-label="Shop">\n{"".join(columns)}</nav>\n'


def product_block() -> str:
    description = " ".join(
        f"<p>Feature {i}: durable, light &amp; water-proof.</p>" for i in range(30)
    )
    return (
        '<article class="product" itemscope itemtype="https://schema.org/Product">\n'
        '<ol class="breadcrumb"><li><a href="/">Home</a></li><li><a href="/category/3">Shoes</a>'
        '</li><li><a href="/category/3/7">Running</a></li></ol>\n'
        '<h1 itemprop="name">Trail Runner 4711</h1>\n'
        '<span class="sku">SKU-4711</span>\n'
        '<div class="offer"><span class="price">&euro;129.95</span> '
        '<span class="old-price">&euro;149.95</span></div>\n'
        '<form action="/cart" method="post"><input type="hidden" name="sku" value="SKU-4711">'
        '<select name="size">'
        + "".join(f"<option>{s}</option>" for s in range(36, 48))
        + "</select>"
        '<button type="submit" class="btn">Add to cart</button></form>\n'
        f'<section class="description">{description}</section>\n'
        "</article>\n"
    )


def reviews() -> str:
    """Customer reviews: the text-heavy part of a product page."""
    body = (
        "Fits true to size, the grip on wet rock is excellent &amp; the upper dries fast. "
        "After 300 km the sole shows little wear; I would buy it again for longer trail runs. "
    )
    items = "".join(
        f'<li class="review"><strong class="author">Runner {i}</strong> '
        f'<span class="stars" data-rating="{i % 5 + 1}">{"&#9733;" * (i % 5 + 1)}</span>'
        f"<p>{body * 2}</p></li>\n"
        for i in range(20)
    )
    return f'<section class="reviews"><h2>Reviews</h2><ul>\n{items}</ul></section>\n'


def related() -> str:
    cards = "".join(
        f'<li class="card"><a class="product-link" href="../products/item-{i}?color=red">'
        f'<img src="/img/{i}.jpg" alt="Item {i}"></a><span class="card-price">&euro;{i}.99</span>'
        "</li>\n"
        for i in range(50)
    )
    return f'<section class="related"><h2>Related</h2><ul class="cards">\n{cards}</ul></section>\n'


def footer() -> str:
    links = (
        '<a href="https://shop.test/about">About</a> <a href="https://shop.test/contact?ref=f">'
        'Contact</a> <a href="https://help.shop.test/faq#top">FAQ</a> '
        '<a href="mailto:help@shop.test">Mail</a> <a href="#main">Top</a>\n'
    )
    pages = '<a class="prev" href="?page=1">Prev</a> <a class="next" href="?page=3">Next</a>\n'
    return f'<footer><div class="pager">{pages}</div>{links * 4}</footer>\n'


def page() -> bytes:
    """The benchmark page, as the bytes a fetcher hands over."""
    script = (
        "<script>window.dataLayer = ["
        + ",".join(f'{{"i":{i}}}' for i in range(250))
        + "];</script>"
    )
    style = "<style>" + "".join(f".c{i}{{margin:{i}px}}" for i in range(250)) + "</style>"
    html = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>Trail Runner 4711 | Shop</title>\n"
        '<link rel="canonical" href="https://shop.test/products/item-4711">\n'
        f"{style}\n</head>\n<body>\n<header>{mega_menu()}</header>\n"
        f'<main id="main">{product_block()}{reviews()}{related()}</main>\n'
        f"{footer()}{script}\n</body>\n</html>\n"
    )
    return html.encode()


def per_call_us(fn: Callable[[], object], rounds: int = ROUNDS) -> float:
    """Best of five runs, in microseconds per call (the minimum is the least noisy estimate)."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / rounds * 1e6


def main() -> None:
    body = page()

    def follow_all() -> object:
        return list(Response(URL, 200, HEADERS, body).follow_all("a"))

    parsed = Response(URL, 200, HEADERS, body)
    parsed.css("html")  # parse once, outside the timing

    def price() -> object:
        return parsed.css(".price::text").get()

    links = len(list(Response(URL, 200, HEADERS, body).follow_all("a")))
    print(f"page: {len(body) / 1000:.1f} KB, {links} links followed")
    print(f"Response(...).follow_all('a') -> list : {per_call_us(follow_all):8.1f} µs/call")
    print(f"css('.price::text').get() (parsed)    : {per_call_us(price):8.1f} µs/call")
    h1 = per_call_us(lambda: parsed.css("h1::text").get())
    print(f"css('h1::text').get() (parsed)        : {h1:8.1f} µs/call")
    text = per_call_us(lambda: Response(URL, 200, HEADERS, body).text)
    print(f"Response(...).text                    : {text:8.1f} µs/call")

    def mixed() -> object:
        author = Response(URL, 200, HEADERS, body).css("strong.author")[3]
        return author.xpath("following-sibling::span/@data-rating").get()

    mixed_us = per_call_us(mixed, ROUNDS // 10)
    print(f"Response(...).css(q)[3].xpath(...)    : {mixed_us:8.1f} µs/call")
    parsed.css("h1")[0].get()  # both trees built, outside the timing
    element = per_call_us(lambda: parsed.css("div.offer").get())
    print(f"css('div.offer').get() (parsed)       : {element:8.1f} µs/call")


if __name__ == "__main__":
    main()
