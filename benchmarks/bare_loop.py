"""The reference crawler: the least a crawl of the benchmark shop can do, as one process.

    BENCH_SITE_URL=http://127.0.0.1:PORT/ python benchmarks/bare_loop.py -o out.jsonl

aiohttp (keep-alive pool, uvloop) fetches; selectolax (lexbor) parses; the demo spider's link CSS
picks the links; a set of hrefs already handled skips the site's repeated menu links before any
work, ``urljoin`` resolves the rest and a set of seen URLs (fragments dropped) dedupes them; the
same product fields are read and checked against the same pydantic model. No store, no WARC, no
politeness, no retries; robots.txt is read once and its rules applied to each new link (the same
pages as the others crawl). What is left is the work any crawler of this site must do, so
crawlfleet's pages/s as a share of this loop's (same run, same server) says what its guarantees
cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from urllib.parse import urldefrag, urljoin, urlsplit

import aiohttp
from protego import Protego
from pydantic import ValidationError
from selectolax.lexbor import LexborHTMLParser

from crawlfleet.demo.spider import LINK_CSS, Product, parse_price

CONCURRENCY = 64


def extract(tree: LexborHTMLParser) -> dict[str, object] | None:
    """``crawlfleet.demo.spider.extract_product`` on selectolax directly."""
    article = tree.css_first("article.product")
    if article is None:
        return None

    def text(css: str) -> str | None:
        node = article.css_first(css)
        return node.text(deep=False) if node is not None else None

    stock = article.css_first(".stock")
    return {
        "sku": text(".sku"),
        "name": text("h1"),
        "price": parse_price(text(".price")),
        "category": article.attributes.get("data-category"),
        "in_stock": stock is not None and stock.attributes.get("data-available") == "true",
    }


async def crawl(start: str, out_path: str) -> int:
    host = urlsplit(start).hostname
    seen = {start}
    handled: set[str] = set()  # root-relative and absolute hrefs resolve the same on any page
    queue: asyncio.Queue[str] = asyncio.Queue()
    queue.put_nowait(start)
    records = 0
    with open(out_path, "w") as out:
        connector = aiohttp.TCPConnector(limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.get(urljoin(start, "/robots.txt")) as resp:
                robots = Protego.parse(await resp.text())

            async def worker() -> None:
                nonlocal records
                while True:
                    url = await queue.get()
                    try:
                        async with session.get(url) as resp:
                            body = await resp.read()
                        tree = LexborHTMLParser(body)
                        for node in tree.css(LINK_CSS):
                            href = node.attributes.get("href")
                            if not href or href in handled:
                                continue
                            if href.startswith(("/", "http:", "https:")):
                                handled.add(href)
                            link = urldefrag(urljoin(url, href))[0]
                            if link in seen or urlsplit(link).hostname != host:
                                continue
                            seen.add(link)
                            if robots.can_fetch(link, "crawlfleet"):
                                queue.put_nowait(link)
                        record = extract(tree)
                        if record is not None:
                            try:
                                Product.model_validate(record)
                            except ValidationError:
                                pass
                            else:
                                out.write(json.dumps(record) + "\n")
                                records += 1
                    finally:
                        queue.task_done()

            workers = [asyncio.create_task(worker()) for _ in range(CONCURRENCY)]
            await queue.join()
            for w in workers:
                w.cancel()
    return records


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", default="out.jsonl")
    args = p.parse_args()
    start = os.environ["BENCH_SITE_URL"].rstrip("/") + "/"
    import uvloop

    uvloop.run(crawl(start, args.output))


if __name__ == "__main__":
    main()
