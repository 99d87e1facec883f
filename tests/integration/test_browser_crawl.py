"""Browser crawls end to end, with the real Chromium: the same records from JavaScript pages as
from their static twins, ``auto`` escalating only the pages that need it (and remembering it),
and a mixed fleet where each request goes to a worker of its kind."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from tests.integration.helpers import demo_shop, read_jsonl, run, shop_stats
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

PRODUCTS = 30

SPIDER = """
from urllib.parse import urlsplit

from crawlfleet.demo.spider import DemoShop, LINK_CSS, Product, extract_product


class Kinded(Product):
    kind: str  # "js" for a record read off a JavaScript page, "static" otherwise


class Shop(DemoShop):
    start_urls = {starts!r}
    fetcher = {fetcher!r}
    item = Kinded
    item_key = ("sku", "kind")
    domain_concurrency = 8
    # the JS pages are ready once their scripts mark them; a page without them, at once
    wait_for = (
        "article.product[data-ready], #listing-root[data-ready],"
        " main:not(:has(#listing-root, #product-root))"
    )
    scope = {scope!r}  # the path every followed link starts with

    def parse(self, response):
        for request in response.follow_all(LINK_CSS + ", ul.listing a, nav.pager a"):
            if urlsplit(request.url).path.startswith(self.scope):
                yield request
        record = extract_product(response)
        if record is not None:
            record["kind"] = "js" if urlsplit(response.url).path.startswith("/js/") else "static"
            yield record
"""


def _spider(path: Path, base: str, fetcher: str, starts: list[str], scope: str = "/") -> Path:
    text = SPIDER.format(starts=[base + s for s in starts], fetcher=fetcher, scope=scope)
    path.write_text(text)
    return path


def _expected(kinds: tuple[str, ...]) -> set[tuple[str, str]]:
    return {(r["sku"], k) for r in Catalog(PRODUCTS).expected_records() for k in kinds}


def test_browser__javascript_pages_give_the_records_of_their_static_twins(
    tmp_path: Path,
) -> None:
    with demo_shop("--products", str(PRODUCTS)) as base:
        spider = _spider(tmp_path / "shop.py", base, "browser", ["/js/"], scope="/js/")
        result = run(["crawl", str(spider), "-o", "out.jsonl"], tmp_path, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
    got = {(r["sku"], r["kind"]) for r in read_jsonl(tmp_path / "out.jsonl")}
    assert got == _expected(("js",))


def test_auto__escalates_only_the_javascript_page_types_and_remembers_them(
    tmp_path: Path,
) -> None:
    with demo_shop("--products", str(PRODUCTS)) as base:
        spider = _spider(tmp_path / "shop.py", base, "auto", ["/", "/js/"])
        first = run(["crawl", str(spider), "-o", "out.jsonl"], tmp_path, timeout=300)
        assert first.returncode == 0, first.stderr[-3000:]
        got = {(r["sku"], r["kind"]) for r in read_jsonl(tmp_path / "out.jsonl")}
        assert got == _expected(("js", "static")), "every record, from both kinds of pages"
        db = tmp_path / ".crawlfleet" / "queue.db"
        import sqlite3

        with sqlite3.connect(db) as conn:
            types = dict(conn.execute("SELECT pattern, fetcher FROM page_types").fetchall())
        assert types and all("/js/" in p for p, f in types.items() if f == "browser")
        assert not any("/js/" not in p for p, f in types.items() if f == "browser")
        rendered = _warc_kinds(tmp_path / ".crawlfleet" / "warc")
        assert rendered["resource"] > 0, "the rendered DOM is archived beside its response"
        # a second crawl of the same job starts from what the first learnt: JS pages go straight
        # to the browser, without a first try over HTTP
        before = shop_stats(base)["paths"]
        second = run(["crawl", str(spider), "--fresh", "-o", "again.jsonl"], tmp_path, timeout=300)
        assert second.returncode == 0, second.stderr[-3000:]
        with sqlite3.connect(db) as conn:
            remembered = conn.execute("SELECT count(*) FROM page_types").fetchone()[0]
        after = shop_stats(base)["paths"]
    assert remembered >= len(types)
    js_products = [p for p in after if p.startswith("/js/product/")]
    tries = Counter({p: after[p] - before.get(p, 0) for p in js_products})
    first_tries = sum(before.get(p, 0) for p in js_products)
    # the first crawl fetched every JS product, some over HTTP and again in the browser (those
    # judged before the workers reloaded the decision), the rest straight in the browser
    assert all(before.get(p, 0) >= 1 for p in js_products)
    assert first_tries > len(js_products), "some JS pages were tried over HTTP first"
    # the second crawl: once each, in the browser, bar the odd probe back over HTTP
    assert max(tries.values()) <= 2 and sum(tries.values()) <= len(js_products) + 3
    assert sum(tries.values()) < first_tries


def test_mixed_fleet__each_request_goes_to_a_worker_of_its_kind(tmp_path: Path) -> None:
    with demo_shop("--products", str(PRODUCTS)) as base:
        spider = _spider(tmp_path / "shop.py", base, "http", ["/"])
        # the static shop over HTTP, and the JS pages in a browser: one job, both kinds
        text = spider.read_text().replace(
            "    def parse(self, response):",
            "    def start_requests(self):\n"
            "        from crawlfleet import Request\n"
            f"        yield Request({base + '/'!r}, priority=1)\n"
            f"        yield Request({base + '/js/'!r}, priority=1, fetcher='browser')\n\n"
            "    def parse(self, response):\n"
            "        if '/js/' in response.url:\n"
            "            for req in response.follow_all(LINK_CSS + ', ul.listing a'):\n"
            "                if '/js/' in req.url:\n"
            "                    req.fetcher = 'browser'\n"
            "                    yield req\n"
            "            record = extract_product(response)\n"
            "            if record is not None:\n"
            "                record['kind'] = 'js'\n"
            "                yield record\n"
            "            return",
        )
        spider.write_text(text)
        assert run(["submit", str(spider)], tmp_path).returncode == 0
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "crawlfleet",
                    "worker",
                    "--kind",
                    kind,
                    "--worker-id",
                    f"w-{kind}",
                    "--exit-when-finished",
                ],
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for kind in ("http", "browser")
        ]
        for w in workers:
            _, err = w.communicate(timeout=300)
            assert w.returncode == 0, err[-3000:]
        assert run(["export", "-o", "out.jsonl"], tmp_path).returncode == 0
    got = {(r["sku"], r["kind"]) for r in read_jsonl(tmp_path / "out.jsonl")}
    assert got == _expected(("js", "static"))
    by_worker = {}
    for path in (tmp_path / ".crawlfleet" / "warc").glob("*.warc.gz"):
        kind = "browser" if "w-browser" in path.name else "http"
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "response":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    by_worker.setdefault(kind, set()).add("/js/" in uri)
    assert by_worker == {"http": {False}, "browser": {True}}


def _warc_kinds(directory: Path) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for path in directory.glob("*.warc.gz"):
        with path.open("rb") as fh:
            kinds.update(r.rec_type for r in ArchiveIterator(fh))
    return kinds
