"""The impersonating fetcher against the HTTP fetcher, and ``auto`` behind a bot wall.

Two parts, on the benchmark shop (``make_site.py``) served by nginx over HTTPS (HTTP/2 and
HTTP/1.1 by ALPN) with a certificate of a private CA made here and trusted through
``SSL_CERT_FILE``:

* ``fetch``: the same product pages fetched once each, ``--concurrency`` in flight, by the HTTP
  fetcher (aiohttp, HTTP/1.1) and by the impersonating one (curl_cffi as Chrome, HTTP/2), each
  in a process of its own: pages/s and the process's CPU per page. Alternated ``--rounds``
  times, medians reported.
* ``crawl``: ``crawlfleet crawl benchmarks/shop_spider.py -w 1`` end to end (WARC and records on),
  ``http`` and ``auto`` on the open shop against ``auto`` behind the ClientHello gate
  (``gate_server.py``: browser-like hellos reach nginx, others get a 403 challenge): wall time,
  CPU of the crawl's process tree, records checked against the catalog, and the pages per rung
  that ``crawlfleet status`` shows.

    .venv/bin/pip install -e '.[test,bench]'   # cryptography; nginx, chromium from Debian
    .venv/bin/python benchmarks/bench_impersonate.py                  # both parts
    .venv/bin/python benchmarks/bench_impersonate.py --parts fetch --pages 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

from bench_crawl import OUT, check_records  # noqa: E402
from make_site import ensure_site  # noqa: E402
from nginx import start_nginx  # noqa: E402
from tests.tls import make_ca  # noqa: E402

from crawlfleet.demo.catalog import Catalog  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- fetch: one fetcher, in a process of its own ------------------------------------------------


async def _fetch_all(kind: str, urls: list[str], ca_file: str, concurrency: int) -> dict[str, Any]:
    from crawlfleet.fetch.http import FetchSettings, HttpClient
    from crawlfleet.fetch.impersonate import ImpersonateClient

    settings = FetchSettings(
        private_ok_hosts=frozenset({"localhost", "127.0.0.1"}),
        ca_file=ca_file,
        concurrency=concurrency,
    )
    client: Any = HttpClient(settings) if kind == "http" else ImpersonateClient(settings)
    versions: set[str] = set()
    async with client:
        queue = list(reversed(urls))
        warm = queue[-concurrency:]  # connections (and TLS sessions) up before the clock starts
        await asyncio.gather(*(client.fetch(u) for u in warm))
        del queue[-concurrency:]
        done = 0

        async def worker() -> None:
            nonlocal done
            while queue:
                result = await client.fetch(queue.pop())
                assert result.status == 200, result
                versions.add(result.http_version)
                done += 1

        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "kind": kind,
        "pages": done,
        "pages_per_s": done / wall,
        "cpu_ms_per_page": 1000 * cpu / done,
        "http_version": sorted(versions),
    }


def fetch_one(args: argparse.Namespace) -> int:
    urls = Path(args.urls).read_text().split()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(json.dumps(asyncio.run(_fetch_all(args.fetch_one, urls, args.ca, args.concurrency))))
    return 0


def part_fetch(args: argparse.Namespace, site: Path, ca: Any, work: Path) -> dict[str, Any]:
    base, stop = start_nginx(site, tls=(ca.cert_file, ca.key_file), http2=True)
    base = base.replace("127.0.0.1", "localhost")
    products = sorted((site / "product").glob("*.html"))[: args.pages]
    urls = work / "urls.txt"
    urls.write_text("\n".join(f"{base}/product/{p.stem}" for p in products))
    runs: dict[str, list[dict[str, Any]]] = {"http": [], "impersonate": []}
    try:
        for _ in range(args.rounds):
            for kind in runs:
                argv = [sys.executable, __file__, "--fetch-one", kind, "--urls", str(urls)]
                argv += ["--ca", str(ca.ca_file), "--concurrency", str(args.concurrency)]
                out = subprocess.run(argv, capture_output=True, text=True, check=True)
                runs[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"  {kind}: {runs[kind][-1]}", flush=True)
    finally:
        stop()
    summary = {}
    for kind, rs in runs.items():
        summary[kind] = {
            "pages_per_s": statistics.median(r["pages_per_s"] for r in rs),
            "cpu_ms_per_page": statistics.median(r["cpu_ms_per_page"] for r in rs),
            "http_version": rs[0]["http_version"],
        }
    ratio = summary["impersonate"]["pages_per_s"] / summary["http"]["pages_per_s"]
    print(f"\nfetch ({len(products)} product pages of {site.name}, {args.concurrency} in flight):")
    for kind, s in summary.items():
        print(
            f"  {kind:12} {s['pages_per_s']:8.0f} pages/s  {s['cpu_ms_per_page']:.3f} ms CPU/page"
            f"  {','.join(s['http_version'])}"
        )
    print(f"  impersonate / http pages/s: {ratio:.2f} (target >= 0.7)")
    return {"runs": runs, "summary": summary, "ratio": ratio}


# -- crawl: http on the open shop, auto behind the gate -----------------------------------------


def _crawl(base: str, fetcher: str, ca: Any, work: Path, timeout: float) -> dict[str, Any]:
    work.mkdir(parents=True)
    env = os.environ | {
        "BENCH_SITE_URL": base + "/",
        "SSL_CERT_FILE": str(ca.ca_file),
        "PYTHONUNBUFFERED": "1",
    }
    argv = [sys.executable, "-m", "crawlfleet", "crawl", str(HERE / "shop_spider.py"), "-w", "1"]
    argv += ["-o", "out.jsonl", "-q", "-s", f"fetcher={fetcher}"]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    status = subprocess.run(
        [sys.executable, "-m", "crawlfleet", "status"], cwd=work, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    line = next(
        (ln for ln in status.stdout.splitlines() if ln.strip().startswith("localhost:")), ""
    )
    rungs = line.split(" · by ", 1)[1] if " · by " in line else ""
    return {
        "fetcher": fetcher,
        "exit": done.returncode,
        "stderr": done.stderr[-2000:] if done.returncode else "",
        "wall_s": wall,
        "cpu_s": cpu,
        "rungs": rungs,
        "browser_pages": int(m[1].replace(",", ""))
        if (m := re.search(r"browser ([\d,]+)", rungs))
        else 0,
    }


def _browser_pages(rungs: str) -> int:
    found = re.search(r"browser ([\d,]+)", rungs)
    return int(found[1].replace(",", "")) if found else 0


def part_crawl(args: argparse.Namespace, site: Path, ca: Any, work: Path) -> dict[str, Any]:
    expected = Catalog(n_products=args.products).expected_records()
    base, stop = start_nginx(site, tls=(ca.cert_file, ca.key_file), http2=True)
    port = base.rsplit(":", 1)[1]
    gate = subprocess.Popen(
        [sys.executable, str(HERE / "gate_server.py"), "--site", f"127.0.0.1:{port}",
         "--cert", str(ca.cert_file), "--key", str(ca.key_file)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    results = []
    try:
        assert gate.stdout is not None
        gate_port = gate.stdout.readline().split()[1]
        runs = [("open", f"https://localhost:{port}", "http"),
                ("open", f"https://localhost:{port}", "auto"),
                ("gated", f"https://localhost:{gate_port}", "auto")]  # fmt: skip
        for name, url, fetcher in runs:
            print(f"  crawling {name} with {fetcher} ...", flush=True)
            r = _crawl(url, fetcher, ca, work / f"{name}-{fetcher}", args.timeout)
            r["name"] = name
            out = work / f"{name}-{fetcher}" / "out.jsonl"
            r["records"], r["check"] = check_records(out, expected)
            results.append(r)
    finally:
        gate.terminate()
        gate_out, _ = gate.communicate(timeout=30)
        stop()
    print(f"\ncrawl ({site.name}, {len(expected)} valid products, -w 1):")
    for r in results:
        print(
            f"  {r['name']:6} {r['fetcher']:5} wall {r['wall_s']:6.1f}s  CPU {r['cpu_s']:6.1f}s  "
            f"records {r['records']} ({r['check']})  pages by rung: {r['rungs'] or '-'}"
            + (f"\n    exit {r['exit']}: {r['stderr']}" if r["exit"] else "")
        )
    gated, open_http, open_auto = results[-1], results[0], results[1]
    ratio = gated["wall_s"] / open_http["wall_s"]
    print(f"  gated auto / open http wall time: {ratio:.2f} (target <= 2)")
    print(f"  gated auto / open auto wall time: {gated['wall_s'] / open_auto['wall_s']:.2f}")
    print(f"  gate: {gate_out.strip()}")
    return {"runs": results, "ratio": ratio, "gate": gate_out.strip()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="fetch,crawl")
    parser.add_argument("--products", type=int, default=5000)
    parser.add_argument("--pages", type=int, default=3000, help="product pages fetched (fetch)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per crawl")
    parser.add_argument("--fetch-one", help=argparse.SUPPRESS)
    parser.add_argument("--urls", help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fetch_one:
        return fetch_one(args)
    site = OUT / f"site-{args.products}"
    info = ensure_site(site, args.products)
    work = Path(tempfile.mkdtemp(prefix="bench-impersonate-"))
    ca = make_ca(work / "ca")
    print(
        f"site: {site} ({info['pages']} pages); {os.cpu_count()} CPUs; work in {work}", flush=True
    )
    report: dict[str, Any] = {}
    if "fetch" in args.parts:
        report["fetch"] = part_fetch(args, site, ca, work)
    if "crawl" in args.parts:
        report["crawl"] = part_crawl(args, site, ca, work)
    out = OUT / f"impersonate-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
