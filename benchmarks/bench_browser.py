"""Browser fetcher throughput: one pool at 2, 4 and 8 contexts on the demo shop's JS pages,
against the HTTP fetcher on their static twins.

    .venv/bin/python benchmarks/bench_browser.py [--pages 300] [--contexts 2,4,8]
        [--executable /usr/bin/chromium] [--http-concurrency 8] [--http-pages 3000] [--delay 0]

Starts the demo shop (2,000 products) in a subprocess, then for each run starts a worker
process (this file with ``--worker``) that fetches the same page list, parses every page the
way the demo spider does (``extract_product`` and the spider's link CSS on crawlfleet's
``Response``; the browser runs read the rendered DOM) and reports its timings. The harness
samples the memory and CPU time of the worker's whole process tree (worker, Playwright's driver,
every Chromium process) from /proc every 0.1 s.

The page list alternates listing pages and product pages: ``/js/category/SLUG?page=N`` and
``/js/product/SKU?delay=D`` for the browser (``wait_for="[data-ready]"``: the listing's or the
article's script has run, and the price is in), ``/category/SLUG?page=N`` and
``/product/SKU`` for HTTP (the list repeated up to ``--http-pages``). ``--delay`` is the JS
product page's price delay in ms (0 by default: a fixed wait measures nothing about the
fetcher). Both kinds of run must extract the same records. Prints a table and the ratio of
HTTP pages/s to each browser run's.

Then the share of browser fetches ``fetcher = "auto"`` saves on a mixed crawl (``--auto-products``
products, 0 to skip): ``crawlfleet crawl --workers 2`` of a spider that crawls the static shop
and its JS twin (``/`` and ``/js/``, every record of both), twice: a first crawl that learns
which page types need the browser, and a ``--fresh`` second one that starts from what the first
learnt. Browser fetches are the WARC's rendered-DOM resource records; "everything in the
browser" is one browser fetch per page crawled. Saved = 1 - browser fetches / pages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
SEEDS = frozenset({"127.0.0.1"})
MiB = 1024 * 1024


# -- the worker side ---------------------------------------------------------------------------


async def fetch_all(
    kind: str, urls: list[str], concurrency: int, executable: str
) -> dict[str, Any]:
    from pydantic import ValidationError

    from crawlfleet.demo.spider import LINK_CSS, Product, extract_product
    from crawlfleet.fetch import FetchSettings, HttpClient
    from crawlfleet.response import Response

    counts = {"pages": 0, "records": 0, "links": 0}

    def parse(response: Response) -> None:
        counts["pages"] += 1
        counts["links"] += sum(1 for _ in response.follow_all(LINK_CSS))
        record = extract_product(response)
        if record is not None:
            try:
                Product.model_validate(record)
            except ValidationError:
                return
            counts["records"] += 1

    queue = list(reversed(urls))
    stats: dict[str, Any] = {}
    if kind == "browser":
        from crawlfleet.fetch.browser import BrowserFetcher, BrowserSettings

        settings = BrowserSettings(
            contexts=concurrency, executable=executable, private_ok_hosts=SEEDS
        )
        async with BrowserFetcher(settings) as browser:

            async def one_browser() -> None:
                while queue:
                    r = await browser.render(queue.pop(), wait_for="[data-ready]")
                    html = r.rendered_html.encode()
                    parse(Response(r.url, r.status, r.header_map, html, encoding="utf-8"))

            started = time.monotonic()
            await asyncio.gather(*(one_browser() for _ in range(concurrency)))
            seconds = time.monotonic() - started
            s = browser.pool.stats
            stats = {
                "launches": s.launches,
                "restarts": dict(s.restarts),
                "contexts_opened": s.contexts_opened,
                "contexts_limit": s.contexts_limit,
                "pool_peak_anon": s.peak_anon,
                "admission_waits": s.admission_waits,
            }
    else:
        async with HttpClient(FetchSettings(private_ok_hosts=SEEDS)) as http:

            async def one_http() -> None:
                while queue:
                    r = await http.fetch(queue.pop())
                    parse(Response(r.url, r.status, r.header_map, r.body))

            started = time.monotonic()
            await asyncio.gather(*(one_http() for _ in range(concurrency)))
            seconds = time.monotonic() - started
    return {**counts, "seconds": seconds, "stats": stats}


def worker_main(args: argparse.Namespace) -> int:
    urls = [line.strip() for line in sys.stdin if line.strip()]
    result = asyncio.run(fetch_all(args.worker, urls, args.concurrency, args.executable))
    print(json.dumps(result), flush=True)
    return 0


# -- the harness -------------------------------------------------------------------------------


@dataclass
class Run:
    name: str
    concurrency: int
    pages: int = 0
    records: int = 0
    links: int = 0
    seconds: float = 0.0
    peak_rss: int = 0
    peak_anon: int = 0
    cpu: float = 0.0
    stats: dict[str, Any] | None = None

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0


class TreeSampler(threading.Thread):
    """Peak summed memory (VmRSS, and RssAnon+RssShmem) and total CPU time of a process tree,
    polled from /proc."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.peak_rss = self.peak_anon = 0
        self.cpu: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        from crawlfleet.fetch.browser import procs

        while not self.stop.is_set():
            tree = procs.descendants(self.root)
            mems = [m for m in map(procs.memory_of, (p.pid for p in tree)) if m is not None]
            self.peak_rss = max(self.peak_rss, sum(m.rss for m in mems))
            self.peak_anon = max(self.peak_anon, sum(m.anon for m in mems))
            for p in tree:
                self.cpu[(p.pid << 32) | (p.start & 0xFFFFFFFF)] = p.cpu
            self.stop.wait(0.1)


def start_shop(products: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crawlfleet.demo.server",
            "--port",
            "0",
            "--products",
            str(products),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        raise SystemExit(f"the demo shop did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def page_lists(base: str, products: int, pages: int, delay: int) -> tuple[list[str], list[str]]:
    """The JS pages and their static twins, listing and product pages alternating."""
    from crawlfleet.demo.catalog import Catalog

    catalog = Catalog(n_products=products)
    listings = [
        (c.slug, n) for c in catalog.categories for n in range(1, catalog.page_count(c.slug) + 1)
    ]
    js: list[str] = []
    static: list[str] = []
    for i in range(pages):
        if i % 2 == 0:
            slug, n = listings[(i // 2) % len(listings)]
            js.append(f"{base}/js/category/{slug}?page={n}")
            static.append(f"{base}/category/{slug}?page={n}")
        else:
            sku = catalog.products[(i // 2) % len(catalog.products)].sku
            js.append(f"{base}/js/product/{sku}?delay={delay}")
            static.append(f"{base}/product/{sku}")
    return js, static


def run_worker(kind: str, name: str, urls: list[str], concurrency: int, exe: str) -> Run:
    argv = [sys.executable, __file__, "--worker", kind, "--concurrency", str(concurrency)]
    argv += ["--executable", exe]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    out, _ = proc.communicate("\n".join(urls), timeout=1800)
    sampler.stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed with exit code {proc.returncode}")
    data = json.loads(out)
    return Run(
        name=name,
        concurrency=concurrency,
        pages=data["pages"],
        records=data["records"],
        links=data["links"],
        seconds=data["seconds"],
        peak_rss=sampler.peak_rss,
        peak_anon=sampler.peak_anon,
        cpu=sum(sampler.cpu.values()),
        stats=data["stats"] or None,
    )


def print_table(runs: list[Run], http: Run) -> None:
    print()
    print(f"{'run':<12} {'pages':>6} {'s':>7} {'pages/s':>8} {'peak RSS':>10} {'peak anon':>10}"
          f" {'CPU s':>7} {'records':>8} {'HTTP / this':>11}")  # fmt: skip
    for r in [*runs, http]:
        ratio = http.pages_per_s / r.pages_per_s if r.pages_per_s else 0.0
        print(
            f"{r.name:<12} {r.pages:>6} {r.seconds:>7.1f} {r.pages_per_s:>8.1f}"
            f" {r.peak_rss / MiB:>6.0f} MiB {r.peak_anon / MiB:>6.0f} MiB {r.cpu:>7.1f}"
            f" {r.records:>8} {ratio:>10.1f}x"
        )
    for r in runs:
        print(f"  {r.name}: {r.stats}")


# -- auto on a mixed crawl ---------------------------------------------------------------------

AUTO_SPIDER = """
from urllib.parse import urlsplit

from crawlfleet import Request
from crawlfleet.demo.spider import DemoShop, LINK_CSS, Product, extract_product


class Kinded(Product):
    kind: str


class Shop(DemoShop):
    start_urls = [{base!r} + "/", {base!r} + "/js/"]
    fetcher = "auto"
    item = Kinded
    item_key = ("sku", "kind")
    domain_concurrency = 8
    wait_for = (
        "article.product[data-ready], #listing-root[data-ready],"
        " main:not(:has(#listing-root, #product-root))"
    )

    def parse(self, response):
        for request in response.follow_all(LINK_CSS + ", ul.listing a, nav.pager a"):
            path = urlsplit(request.url).path
            if path.startswith("/js/product/"):  # the price at once: no delay to wait out
                yield Request(request.url.partition("#")[0] + "?delay=0")
            elif not path.startswith(("/js/scroll/", "/js/stuck/", "/js/stall")):
                yield request
        record = extract_product(response)
        if record is not None:
            record["kind"] = "js" if urlsplit(response.url).path.startswith("/js/") else "static"
            yield record
"""


@dataclass
class AutoRun:
    name: str
    pages: int  # distinct pages crawled: each one browser fetch if everything went there
    fetches: int  # HTTP and browser fetches (responses archived)
    browser: int  # browser fetches (rendered DOMs archived)
    records: int
    seconds: float

    @property
    def saved(self) -> float:
        return 1 - self.browser / self.pages if self.pages else 0.0


def auto_runs(products: int) -> list[AutoRun]:
    """Two ``auto`` crawls of the mixed shop (learning, then remembering)."""
    from crawlfleet.demo.catalog import Catalog

    expected = 2 * len(Catalog(n_products=products).expected_records())
    shop, base = start_shop(products)
    runs = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-auto-") as tmp:
            work = Path(tmp)
            (work / "shop.py").write_text(AUTO_SPIDER.format(base=base))
            for name, extra in (("auto, 1st", []), ("auto, 2nd", ["--fresh"])):
                print(f"{name} crawl: {products} products, static and JS ...", flush=True)
                argv = [sys.executable, "-m", "crawlfleet", "crawl", "shop.py", "--workers", "2"]
                out = f"{len(runs)}.jsonl"
                started = time.monotonic()
                done = subprocess.run(
                    [*argv, *extra, "-o", out], cwd=work, capture_output=True, text=True
                )
                seconds = time.monotonic() - started
                if done.returncode != 0:
                    raise SystemExit(f"{name} failed: {done.stderr[-2000:]}")
                records = sum(1 for line in (work / out).read_text().splitlines() if line)
                warc = work / ".crawlfleet" / "warc"
                uris, fetches, browser = _warc_counts(warc)
                for old in warc.glob("*.warc.gz"):  # the next crawl counts its own
                    old.unlink()
                runs.append(AutoRun(name, len(uris), fetches, browser, records, seconds))
    finally:
        shop.terminate()
        shop.wait()
    for r in runs:
        if r.records != expected:
            raise SystemExit(f"{r.name}: {r.records} records, expected {expected}")
    return runs


def _warc_counts(directory: Path) -> tuple[set[str], int, int]:
    from warcio.archiveiterator import ArchiveIterator

    uris: set[str] = set()
    fetches = browser = 0
    for path in directory.glob("*.warc.gz"):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type in ("response", "revisit"):
                    fetches += 1
                    uris.add(record.rec_headers.get_header("WARC-Target-URI"))
                elif record.rec_type == "resource":
                    browser += 1
    return uris, fetches, browser


def print_auto(runs: list[AutoRun]) -> None:
    print()
    print(f"{'run':<12} {'pages':>6} {'fetches':>8} {'browser':>8} {'records':>8} {'s':>6}"
          f" {'browser fetches saved':>22}")  # fmt: skip
    for r in runs:
        print(
            f"{r.name:<12} {r.pages:>6} {r.fetches:>8} {r.browser:>8} {r.records:>8}"
            f" {r.seconds:>6.1f} {r.saved:>21.0%}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pages", type=int, default=300)
    p.add_argument("--products", type=int, default=2000)
    p.add_argument("--contexts", default="2,4,8")
    p.add_argument("--executable", default="/usr/bin/chromium")
    p.add_argument("--http-concurrency", type=int, default=8)
    p.add_argument("--http-pages", type=int, default=3000, help="at least this many HTTP fetches")
    p.add_argument("--delay", type=int, default=0, help="JS product pages' price delay (ms)")
    p.add_argument("--auto-products", type=int, default=200, help="mixed auto crawl (0: none)")
    p.add_argument("--worker", choices=("browser", "http"), help=argparse.SUPPRESS)
    p.add_argument("--concurrency", type=int, default=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main(args)

    shop, base = start_shop(args.products)
    try:
        js, static = page_lists(base, args.products, args.pages, args.delay)
        runs = []
        for n in (int(x) for x in args.contexts.split(",")):
            print(f"browser, {n} contexts: {len(js)} pages ...", flush=True)
            runs.append(run_worker("browser", f"browser-{n}", js, n, args.executable))
        # HTTP is ~100x faster: the same list several times over, for a run long enough to time.
        repeat = max(1, args.http_pages // len(static))
        print(f"http, concurrency {args.http_concurrency}: {len(static)} pages x {repeat} ...")
        http = run_worker("http", "http", static * repeat, args.http_concurrency, args.executable)
    finally:
        shop.terminate()
        shop.wait()
    print_table(runs, http)
    autos = auto_runs(args.auto_products) if args.auto_products else []
    if autos:
        print_auto(autos)
    per_pass = (http.records // repeat, http.pages // repeat)
    bad = [r.name for r in runs if (r.records, r.pages) != per_pass]
    if bad:
        print(f"records differ from the HTTP run's in: {', '.join(bad)}")
    OUT.mkdir(exist_ok=True)
    out = OUT / f"browser-{time.strftime('%Y%m%d-%H%M%S')}.json"
    payload = {
        "args": vars(args),
        "runs": [asdict(r) for r in [*runs, http]],
        "auto": [asdict(r) | {"saved": r.saved} for r in autos],
    }
    out.write_text(json.dumps(payload, indent=2))
    print(f"wrote {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
