"""Browser crawls end to end, with the real Chromium: the same records from JavaScript pages as
from their static twins, ``auto`` escalating only the pages that need it (and remembering it),
and a mixed fleet where each request goes to a worker of its kind."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from tests.integration.helpers import CRAWLFLEET, demo_shop, read_jsonl, run, shop_stats, wait_for
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.demo.catalog import Catalog
from crawlfleet.fetch.browser import procs
from crawlfleet.policy.fetchers import PROBE_EVERY

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # each test runs whole crawls

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


def test_auto_without_chromium__the_crawl_ends_with_the_browser_workers_error(
    tmp_path: Path,
) -> None:
    # the HTTP worker would wait for ever for the pages judged to need the browser: the
    # browser worker that cannot start ends the crawl with its reason instead
    (tmp_path / "crawlfleet.toml").write_text('[browser]\nexecutable = "/nonexistent/chromium"\n')
    with demo_shop("--products", "5") as base:
        spider = _spider(tmp_path / "shop.py", base, "auto", ["/js/"], scope="/js/")
        result = run(["crawl", str(spider), "--browser-workers", "1"], tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "no Chromium at /nonexistent/chromium" in result.stderr
    assert "the crawl cannot finish" in result.stderr
    assert "Unclosed client session" not in result.stderr


def test_auto__escalates_only_the_javascript_page_types_and_remembers_them(
    tmp_path: Path,
) -> None:
    with demo_shop("--products", str(PRODUCTS)) as base:
        spider = _spider(tmp_path / "shop.py", base, "auto", ["/", "/js/"])
        # one HTTP worker, and one of its own for the browser pages
        first = run(
            ["crawl", str(spider), "--browser-workers", "1", "-o", "out.jsonl"],
            tmp_path,
            timeout=300,
        )
        assert first.returncode == 0, first.stderr[-3000:]
        by_worker = _warc_kinds_by_worker(tmp_path / ".crawlfleet" / "warc")
        assert len(by_worker) == 2, by_worker
        assert sorted(kinds["resource"] > 0 for kinds in by_worker.values()) == [False, True]
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
    # the second crawl: once each, in the browser, bar the probes (one request in PROBE_EVERY
    # probes back to HTTP, one in PROBE_EVERY, on another byte, probes the rung below: about
    # one page in eight, twice the share kept as the bound)
    probes = 2 * len(js_products) * 2 // PROBE_EVERY
    assert max(tries.values()) <= 2 and sum(tries.values()) <= len(js_products) + probes
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


def _warc_kinds_by_worker(directory: Path) -> dict[str, Counter[str]]:
    """WARC record types per worker (its files are JOB-WORKER_ID-TIME-SEQ.warc.gz)."""
    found: dict[str, Counter[str]] = {}
    for path in directory.glob("*.warc.gz"):
        worker = path.name.rsplit("-", 2)[0]
        with path.open("rb") as fh:
            found.setdefault(worker, Counter()).update(r.rec_type for r in ArchiveIterator(fh))
    return found


def _warc_kinds(directory: Path) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for path in directory.glob("*.warc.gz"):
        with path.open("rb") as fh:
            kinds.update(r.rec_type for r in ArchiveIterator(fh))
    return kinds


# -- a browser worker's memory over a thousand pages -------------------------------------------

MEMORY_SPIDER = """
from urllib.parse import urlsplit

from crawlfleet import Request
from crawlfleet.demo.spider import DemoShop, LINK_CSS, extract_product


class Shop(DemoShop):
    start_urls = [{start!r}]
    fetcher = "browser"
    domain_concurrency = 16
    wait_for = (  # the JS pages are ready once their scripts mark them; the home page at once
        "article.product[data-ready], #listing-root[data-ready],"
        " main:not(:has(#listing-root, #product-root))"
    )

    def parse(self, response):
        for request in response.follow_all(LINK_CSS):
            path = urlsplit(request.url).path
            if path.startswith("/js/product/"):  # the price at once: no delay to wait out
                yield Request(request.url.partition("#")[0] + "?delay=0")
            elif path.startswith("/js/category/"):
                yield request
        record = extract_product(response)
        if record is not None:
            yield record
"""
MEMORY_PRODUCTS = 380  # with its listings and the home page, 400 JS pages
BUDGET = 1024 * 1024 * 1024  # [browser] memory_budget: Chromium's processes (RssAnon + RssShmem)
WORKER_SHARE = 320 * 1024 * 1024  # the worker itself and Playwright's driver, on top of it


class TreeSampler(threading.Thread):
    """Every 0.5 s, the memory of a worker's whole process tree (worker, driver, Chromium),
    summed, and of the Chromium processes in it."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.stop = root, threading.Event()
        self.tree: list[int] = []
        self.chromium: list[int] = []
        self.browsers: set[int] = set()  # every Chromium process seen
        self.cpu: dict[tuple[int, int], float] = {}  # CPU seconds of each process seen

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())

    def run(self) -> None:
        while not self.stop.is_set():
            tree = chromium = 0
            for p in procs.descendants(self.root):
                self.cpu[p.pid, p.start] = p.cpu
                mem = procs.memory_of(p.pid)
                if mem is None:
                    continue
                tree += mem.anon
                if is_chromium(p.pid):
                    chromium += mem.anon
                    self.browsers.add(p.pid)
            self.tree.append(tree)
            self.chromium.append(chromium)
            self.stop.wait(0.5)


def is_chromium(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            program = f.read().split(b"\0", 1)[0].split(b" ", 1)[0]
    except OSError:
        return False
    return program.endswith(b"/chromium")


def chromium_of(worker: int) -> list[int]:
    """The Chromium processes below ``worker`` (its browser and every child of it)."""
    return [p.pid for p in procs.descendants(worker) if is_chromium(p.pid)]


def browser_worker(tmp_path: Path, base: str, *, stderr: int) -> subprocess.Popen[str]:
    """Submit the JS shop's spider at ``base`` and start one ``crawlfleet worker --kind
    browser --exit-when-finished`` on it (its standard error as ``stderr`` says, as text)."""
    spider = tmp_path / "shop.py"
    spider.write_text(MEMORY_SPIDER.format(start=base + "/js/"))
    assert run(["submit", str(spider)], tmp_path).returncode == 0
    return subprocess.Popen(
        [*CRAWLFLEET, "worker", "--kind", "browser", "--exit-when-finished"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
    )


@pytest.mark.timeout(960)
def test_a_browser_worker_keeps_its_memory_under_the_budget_over_400_pages(
    tmp_path: Path,
) -> None:
    catalog = Catalog(MEMORY_PRODUCTS)
    pages = 1 + MEMORY_PRODUCTS + sum(catalog.page_count(c.slug) for c in catalog.categories)
    assert pages >= 400
    (tmp_path / "crawlfleet.toml").write_text(
        "[worker]\nconcurrency = 8\n\n"
        f"[browser]\ncontexts = 4\npages_per_context = 50\nmemory_budget = {BUDGET}\n"
    )
    with demo_shop("--products", str(MEMORY_PRODUCTS)) as base:
        worker = browser_worker(tmp_path, base, stderr=subprocess.PIPE)
        sampler = TreeSampler(worker.pid)
        sampler.start()
        started = time.monotonic()
        try:
            _, err = worker.communicate(timeout=900)
        finally:
            sampler.stop.set()
            sampler.join()
            worker.kill()
        seconds = time.monotonic() - started
        assert worker.returncode == 0, err[-3000:]
        hits = shop_stats(base)["paths"]
    fetched = sum(n for path, n in hits.items() if path.startswith("/js/"))
    assert fetched >= pages, (fetched, pages)
    assert run(["export", "-o", "out.jsonl"], tmp_path).returncode == 0
    got = {r["sku"] for r in read_jsonl(tmp_path / "out.jsonl")}
    assert got == {r["sku"] for r in catalog.expected_records()}
    # sampled all along: the browser's processes stay near their budget (a restart waits for
    # the pages in flight), and the worker's whole tree under the budget plus its own share
    assert len(sampler.tree) >= 20 and sampler.browsers
    peak_chromium, peak_tree = max(sampler.chromium), max(sampler.tree)
    figures = (
        f"{fetched} pages in {seconds:.0f} s ({sampler.cpu_seconds:.0f} CPU s); peak memory:"
        f" Chromium {peak_chromium >> 20} MiB, worker tree {peak_tree >> 20} MiB"
    )
    assert peak_chromium < BUDGET * 1.15, figures
    assert peak_tree < BUDGET + WORKER_SHARE, figures
    # and nothing of its Chromium is left once the worker has exited
    assert [p for p in sampler.browsers if procs.read_proc(p)] == []
    assert [p for p, marker in procs.tagged() if marker.startswith(f"{worker.pid}:")] == []
    print(figures)


def test_kill_9_of_a_browser_worker_mid_crawl_leaves_no_chromium(tmp_path: Path) -> None:
    with demo_shop("--products", str(PRODUCTS)) as base:
        worker = browser_worker(tmp_path, base, stderr=subprocess.DEVNULL)
        try:

            def crawling() -> bool:
                hits = shop_stats(base)["paths"]
                return sum(n for path, n in hits.items() if path.startswith("/js/")) >= 3

            wait_for(crawling, 120, "the worker's first pages")
            browsers = chromium_of(worker.pid)
            assert len(browsers) >= 3  # the browser, its zygotes, renderers, utilities
            worker.kill()  # SIGKILL: no cleanup of its own; its driver and browser see the pipe go
            worker.wait()
            deadline = time.monotonic() + 10
            while any(map(procs.read_proc, browsers)) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert [p for p in browsers if procs.read_proc(p)] == []
        finally:
            worker.kill()
            worker.wait()
