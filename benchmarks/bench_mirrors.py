"""One shop on many hosts: every page parsed, every record kept, duplicates archived once.

    .venv/bin/python benchmarks/bench_mirrors.py [--hosts 20] [--products 100]
        [--runs sqlite-1,sqlite-2,pg-1,pg-2]

The demo shop is served on ``--hosts`` loopback addresses (127.0.0.1, 127.0.0.2, ...) at once:
the same pages, byte for byte, under different host names, as mirrors and sites that share
templates are. The spider records the host with each product (``item_key = ("host", "sku")``),
so every host must give every valid product: ``hosts x valid products`` records. For each run it
prints the pages the server answered, the records exported, how many requests the store counted
as duplicate content, the size of the WARC files written, wall time and pages/s.
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
from pathlib import Path
from typing import Any

from crawlfleet.demo.catalog import Catalog

PG_SERVER = os.environ.get("CRAWLFLEET_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")

SPIDER = """
from urllib.parse import urlsplit

from crawlfleet.demo.spider import LINK_CSS, DemoShop, Product, extract_product


class HostProduct(Product):
    host: str


class Mirrors(DemoShop):
    name = "mirrors"
    start_urls = {start_urls!r}
    item = HostProduct
    item_key = ("host", "sku")
    domain_concurrency = 8

    def parse(self, response):
        yield from response.follow_all(LINK_CSS)
        record = extract_product(response)
        if record is not None:
            record["host"] = urlsplit(response.url).hostname
            yield record
"""


def start_shop(hosts: int, products: int) -> tuple[subprocess.Popen[str], list[str]]:
    addresses = [f"127.0.0.{i}" for i in range(1, hosts + 1)]
    argv = [sys.executable, "-m", "crawlfleet.demo.server", "--products", str(products)]
    for address in addresses:
        argv += ["--host", address]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    urls = [proc.stdout.readline().strip().removeprefix("listening on ") for _ in addresses]
    return proc, urls


def shop_requests(base: str) -> int:
    with urllib.request.urlopen(base + "/__admin/stats", timeout=10) as resp:
        return int(json.loads(resp.read())["requests"])


def reset_stats(base: str) -> None:
    req = urllib.request.Request(base + "/__admin/reset-stats", data=b"{}", method="POST")
    with urllib.request.urlopen(req, timeout=10):
        pass


def run_one(
    name: str, urls: list[str], expected: int, workdir: Path, src: str | None
) -> dict[str, Any]:
    backend, workers = name.split("-")
    spider = workdir / "mirrors.py"
    spider.write_text(SPIDER.format(start_urls=[u + "/" for u in urls]))
    argv = [sys.executable, "-m", "crawlfleet", "crawl", str(spider), "--workers", workers]
    argv += ["-o", "out.jsonl"]
    schema = f"bench_mirrors_{os.getpid()}_{name.replace('-', '_')}"
    queue = f"{PG_SERVER}?schema={schema}" if backend == "pg" else None
    if queue:
        argv += ["--queue", queue]
    reset_stats(urls[0])
    env = dict(os.environ, PYTHONPATH=src) if src else None
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=900, env=env)
    wall = time.perf_counter() - started
    pages = shop_requests(urls[0])
    out = workdir / "out.jsonl"
    records = sum(1 for line in out.read_text().splitlines() if line.strip()) if out.exists() else 0
    status_argv = [sys.executable, "-m", "crawlfleet", "status", "--json"]
    status_argv += ["--queue", queue] if queue else []
    status = subprocess.run(status_argv, cwd=workdir, capture_output=True, text=True, env=env)
    duplicates = None
    if status.returncode == 0 and status.stdout.strip():
        duplicates = json.loads(status.stdout)[0].get("duplicates")
    warc = sum(p.stat().st_size for p in (workdir / ".crawlfleet" / "warc").glob("*.warc.gz*"))
    if queue:
        import psycopg

        with psycopg.connect(PG_SERVER, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return {
        "run": name,
        "exit": proc.returncode,
        "pages": pages,
        "records": records,
        "expected": expected,
        "duplicates": duplicates,
        "warc_mb": warc / 2**20,
        "wall_s": wall,
        "pages_per_s": pages / wall if wall else 0.0,
        "stderr": proc.stderr.strip().splitlines()[-3:] if proc.returncode else [],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=20)
    p.add_argument("--products", type=int, default=100)
    p.add_argument("--runs", default="sqlite-1,sqlite-2,pg-1,pg-2")
    p.add_argument(
        "--src", help="run the crawler from this source tree (a checkout's src/: before/after)"
    )
    args = p.parse_args()
    catalog = Catalog(args.products)
    expected = args.hosts * len(catalog.expected_records())
    proc, urls = start_shop(args.hosts, args.products)
    rows = []
    try:
        for name in args.runs.split(","):
            with tempfile.TemporaryDirectory(prefix="bench-mirrors-") as tmp:
                rows.append(run_one(name, urls, expected, Path(tmp), args.src))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"\n{args.hosts} hosts x {args.products} products: {expected} records expected")
    print(f"{'run':10} {'pages':>7} {'records':>8} {'dups':>6} {'WARC MB':>8} {'wall s':>7} p/s")
    for r in rows:
        print(
            f"{r['run']:10} {r['pages']:7d} {r['records']:8d} {r['duplicates']!s:>6} "
            f"{r['warc_mb']:8.1f} {r['wall_s']:7.1f} {r['pages_per_s']:.0f}"
        )
    return 0 if all(r["records"] == expected and r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
