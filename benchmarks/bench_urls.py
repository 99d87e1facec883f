"""Microseconds per link: ``LinkCanonicalizer.resolve`` (cached, uncached) and ``canonicalize``
(the block-page check has its own: ``bench_blocks.py``).

Run: ``.venv/bin/python benchmarks/bench_urls.py``. The link mix imitates a shop page: about 230
links, most of them a mega-menu and footer repeated on every page (absolute and root-relative),
plus page-specific relative links, fragments and ``mailto:``/``javascript:`` links.
"""

from __future__ import annotations

import time

from crawlfleet.urls import LinkCanonicalizer, canonicalize

ROUNDS = 200


def page_links(page: int) -> list[str]:
    menu = [f"/category/{c}/{s}" for c in range(12) for s in range(12)]  # 144 shared links
    footer = [
        "https://shop.test/about",
        "https://shop.test/contact?ref=footer",
        "https://help.shop.test/faq#top",
        "mailto:help@shop.test",
        "javascript:void(0)",
        "#main",
    ] * 4
    products = [f"../products/item-{page * 100 + i}?color=red&size=M" for i in range(50)]
    paging = [f"?page={page + 1}", f"?page={page - 1}", f"/search?q=shoes&page={page}"]
    return menu + footer + products + paging


def per_link_us(seconds: float, links: int) -> float:
    return seconds / links * 1e6


def bench_uncached() -> float:
    links = [
        (href, f"https://shop.test/list/{p}/") for p in range(ROUNDS) for href in page_links(p)
    ]
    total = 0.0
    for href, base in links:
        canon = LinkCanonicalizer()  # empty cache every time: the full price of one link
        start = time.perf_counter()
        canon.resolve(href, base)
        total += time.perf_counter() - start
    return per_link_us(total, len(links))


def bench_cached() -> float:
    canon = LinkCanonicalizer()
    links = page_links(1)
    base = "https://shop.test/list/1/"
    for href in links:  # warm
        canon.resolve(href, base)
    start = time.perf_counter()
    for _ in range(ROUNDS):
        for href in links:
            canon.resolve(href, base)
    return per_link_us(time.perf_counter() - start, ROUNDS * len(links))


def bench_crawl_mix() -> float:
    """A worker crawling many pages: the menu hits the cache, page-specific links do not."""
    canon = LinkCanonicalizer()
    pages = [(f"https://shop.test/list/{p}/", page_links(p)) for p in range(ROUNDS)]
    start = time.perf_counter()
    n = 0
    for base, links in pages:
        for href in links:
            canon.resolve(href, base)
        n += len(links)
    return per_link_us(time.perf_counter() - start, n)


def bench_canonicalize() -> float:
    urls = [f"https://Shop.Test:443/p/{i}/./x?b=2&a=1&jsessionid=z#frag" for i in range(20_000)]
    start = time.perf_counter()
    for url in urls:
        canonicalize(url)
    return per_link_us(time.perf_counter() - start, len(urls))


def main() -> None:
    print(f"links per page              {len(page_links(1))}")
    print(f"resolve, uncached           {bench_uncached():6.2f} us/link  (target < 15)")
    print(f"resolve, cached             {bench_cached():6.2f} us/link  (target < 1.5)")
    print(f"resolve, crawl mix          {bench_crawl_mix():6.2f} us/link")
    print(f"canonicalize                {bench_canonicalize():6.2f} us/url")


if __name__ == "__main__":
    main()
