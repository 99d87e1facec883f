"""The scheduler on the shapes real sites have: many workers on few slots, page chains, noise.

    .venv/bin/python benchmarks/bench_scheduler.py [--runs a,b,c,d] [--scrapy] [--queue pg]

(a) catalogue: the demo shop (aiohttp, ~1,100 pages, 1,000 products), the spider's default
    politeness (``domain_concurrency = 8``), ``--workers 1, 2, 4``: w2/w1 and w4/w1 by wall time
    and by crawl time (first to last request the server saw). Target: never below 1.0.
(b) chain: a 50-page pager (each page linked only from the one before, 5 ms a fetch): overhead
    per hop = crawl time / hops - the fetch itself. Target: <= 10 ms (SQLite), <= 20 ms (PG).
(c) faults: the demo shop with 5% 503s, 2% cut connections and 2% 3-second pages (a retry always
    works), against the same crawl clean: throughput ratio. Target: >= 0.8, every record.
(d) rate limit: the demo shop answering 429 (Retry-After: 1) past 40 requests/s per address:
    the pace the crawl settles at and its share of 429s. Target: [0.7 N, N], <= 1% 429.

``--scrapy`` runs Scrapy (2.x, same concurrency, ``scrapy_shop.py``) on (a), (b) and (c) too.
Each crawl runs as its own process in a fresh temp directory, against a fresh server.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PG_SERVER = os.environ.get("CRAWLFLEET_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")

SHOP_SPIDER = """
from crawlfleet.demo.spider import DemoShop


class Shop(DemoShop):
    name = "shop"
    start_urls = [{start!r}]
    domain_concurrency = {concurrency}
"""

CHAIN_SPIDER = """
from crawlfleet import Spider


class Chain(Spider):
    name = "chain"
    start_urls = [{start!r}]

    def parse(self, response):
        yield from response.follow_all("a.next")
        yield {{"page": response.url, "item": response.css(".item::text").get()}}
"""

SCRAPY_CHAIN = """
import scrapy


class Chain(scrapy.Spider):
    name = "chain"
    start_urls = [{start!r}]
    custom_settings = {{"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False,
                        "ROBOTSTXT_OBEY": True}}

    def parse(self, response):
        yield from response.follow_all(css="a.next", callback=self.parse)
        yield {{"page": response.url, "item": response.css(".item::text").get()}}
"""


@contextmanager
def server(argv: list[str]) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip().removeprefix("listening on ")
    finally:
        proc.terminate()
        proc.wait(10)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def crawl(source: str, workdir: Path, workers: int = 1, queue: str | None = None) -> float:
    """Run ``crawlfleet crawl`` of the spider ``source``; returns wall seconds."""
    spider = workdir / "spider.py"
    spider.write_text(source)
    argv = [sys.executable, "-m", "crawlfleet", "crawl", str(spider), "--workers", str(workers)]
    argv += ["-o", "out.jsonl", *(["--queue", queue] if queue else [])]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if proc.returncode:
        raise RuntimeError(f"crawl failed: {proc.stderr[-2000:]}")
    return wall


def scrapy(spider: Path, workdir: Path, env: dict[str, str]) -> float:
    argv = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-O", "out.jsonl"]
    started = time.perf_counter()
    proc = subprocess.run(
        argv, cwd=workdir, capture_output=True, text=True, timeout=1800, env=os.environ | env
    )
    if proc.returncode:
        raise RuntimeError(f"scrapy failed: {proc.stderr[-2000:]}")
    return time.perf_counter() - started


def records(workdir: Path) -> int:
    out = workdir / "out.jsonl"
    return sum(1 for line in out.read_text().splitlines() if line.strip()) if out.exists() else 0


def shop_crawl_time(base: str) -> tuple[int, float]:
    """Requests the shop answered and seconds from its first to its last request."""
    stats = get_json(base + "/__admin/stats")
    span = (stats["last_at"] - stats["first_at"]) if stats["requests"] else 0.0
    return stats["requests"], span


def pg_queue(name: str) -> str:
    return f"{PG_SERVER}?schema=bench_sched_{os.getpid()}_{name}"


def shop_run(label: str, shop_args: list[str], run: Any, want: int | None = None) -> dict[str, Any]:
    """Serve the demo shop with ``shop_args``, call ``run(base_url, workdir) -> wall seconds``,
    and return the run's figures as the shop counted them."""
    with (
        server(["-m", "crawlfleet.demo.server", *shop_args]) as base,
        tempfile.TemporaryDirectory() as tmp,
    ):
        wall = run(base, Path(tmp))
        pages, active = shop_crawl_time(base)
        got = records(Path(tmp))
    row = {"run": label, "wall_s": wall, "crawl_s": active, "pages": pages}
    row["records"] = f"{got}/{want}" if want is not None else got
    print(json.dumps(row), flush=True)
    return row


def _crawlfleet(concurrency: int, workers: int, queue: str | None) -> Any:
    def run(base: str, workdir: Path) -> float:
        source = SHOP_SPIDER.format(start=base + "/", concurrency=concurrency)
        return crawl(source, workdir, workers, queue)

    return run


def _scrapy(concurrency: int) -> Any:
    def run(base: str, workdir: Path) -> float:
        env = {"BENCH_SITE_URL": base + "/", "BENCH_CONCURRENCY": str(concurrency)}
        return scrapy(HERE / "scrapy_shop.py", workdir, env)

    return run


def catalogue(runs: list[dict[str, Any]], with_scrapy: bool, queue: str | None) -> None:
    from crawlfleet.demo.catalog import Catalog

    want = len(Catalog(1000).expected_records())
    shop = ["--products", "1000"]
    for workers in (1, 2, 4):
        q = pg_queue(f"a{workers}") if queue else None
        label = f"(a) catalogue w{workers}"
        runs.append(shop_run(label, shop, _crawlfleet(8, workers, q), want))
    if with_scrapy:
        runs.append(shop_run("(a) catalogue scrapy", shop, _scrapy(8), want))


def chain(runs: list[dict[str, Any]], with_scrapy: bool, queue: str | None) -> None:
    hops, delay = 50, 0.005
    kinds = ["sqlite", *(["pg"] if queue else []), *(["scrapy"] if with_scrapy else [])]
    for kind in kinds:
        argv = [str(HERE / "chain_site.py"), "--length", str(hops), "--delay", str(delay)]
        with server(argv) as base, tempfile.TemporaryDirectory() as tmp:
            start = base + "/chain/1"
            if kind == "scrapy":
                spider = Path(tmp) / "chain_scrapy.py"
                spider.write_text(SCRAPY_CHAIN.format(start=start))
                wall = scrapy(spider, Path(tmp), {})
            else:
                q = pg_queue("chain") if kind == "pg" else None
                wall = crawl(CHAIN_SPIDER.format(start=start), Path(tmp), 1, q)
            times = [t for t, path in get_json(base + "/stats") if path.startswith("/chain/")]
            span = max(times) - min(times)
            per_hop = span / (len(times) - 1)
            runs.append(
                {
                    "run": f"(b) chain {kind}",
                    "wall_s": wall,
                    "crawl_s": span,
                    "pages": len(times),
                    "hop_ms": per_hop * 1000,
                    "overhead_ms": (per_hop - delay) * 1000,
                }
            )
            print(json.dumps(runs[-1]), flush=True)


FAULTS = ["--transient-503", "0.05", "--cut", "0.02", "--slow", "0.02", "--slow-delay", "3"]


def faults(runs: list[dict[str, Any]], with_scrapy: bool, queue: str | None) -> None:
    from crawlfleet.demo.catalog import Catalog

    want = len(Catalog(1000).expected_records())
    for label, extra in (("clean", []), ("faults", FAULTS)):
        shop = ["--products", "1000", *extra]
        q = pg_queue(label) if queue else None
        runs.append(shop_run(f"(c) {label} crawlfleet", shop, _crawlfleet(32, 1, q), want))
        if with_scrapy:
            runs.append(shop_run(f"(c) {label} scrapy", shop, _scrapy(32), want))


def rate_limit(runs: list[dict[str, Any]], with_scrapy: bool, queue: str | None) -> None:
    limit = 40
    shop = ["-m", "crawlfleet.demo.server", "--products", "1000", "--rate-limit", str(limit)]
    with server(shop) as base, tempfile.TemporaryDirectory() as tmp:
        source = SHOP_SPIDER.format(start=base + "/", concurrency=32)
        wall = crawl(source, Path(tmp), 1, pg_queue("rate") if queue else None)
        stats = get_json(base + "/__admin/stats")
        per_second = [n for per in stats["per_second"].values() for n in per.values()]
        steady = per_second[2:-1] or per_second
        too_many = stats["statuses"].get("429", 0)
        runs.append(
            {
                "run": f"(d) rate limit {limit}/s",
                "wall_s": wall,
                "pages": stats["requests"],
                "rate_per_s": sum(steady) / len(steady),
                "max_per_s": max(per_second),
                "share_429": too_many / stats["requests"],
                "records": records(Path(tmp)),
            }
        )
        print(json.dumps(runs[-1]), flush=True)


SCENARIOS = {"a": catalogue, "b": chain, "c": faults, "d": rate_limit}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default="a,b,c,d")
    p.add_argument("--scrapy", action="store_true", help="Scrapy on (a), (b) and (c) too")
    p.add_argument("--queue", choices=("sqlite", "pg"), default="sqlite")
    args = p.parse_args()
    runs: list[dict[str, Any]] = []
    for name in args.runs.split(","):
        SCENARIOS[name](runs, args.scrapy, args.queue if args.queue == "pg" else None)
    print()
    for r in runs:
        cells = (f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items())
        print("  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
