"""Routes: pages/s through 1, 2, 4 and 8 proxies on the rate-limited demo shop, and what a proxy
hop costs on the clean shop.

    .venv/bin/python benchmarks/bench_routes.py [--routes 1,2,4,8] [--pages-per-route 50]
                                                [--clean-products 1000] [--skip-hop]

Needs Debian's tinyproxy (``scripts/test`` installs it). Each tinyproxy leaves from its own
loopback address (127.0.0.2, ...), so the shop, limiting every client address to ``--limit``
requests per sliding second (429 beyond, captchas for one that keeps pushing), sees one client
per route.

1. **Routes**: for N routes, a pool of N tinyproxies with ``rate = --rate`` (what the pool
   declares safe per route), ``N * --pages-per-route`` products, one ``crawlfleet crawl`` (its
   default workers). ``plan --json`` is asked first (its prediction); measured is the shop's bulk
   rate: requests between its 10th and 90th percentile arrivals over that time (the start, while
   the crawl discovers its first pages, and the tail are left out), as the routes test measures.
   Also the wall time's pages/s, 429s and captchas, and whether every record came once.
2. **Proxy hop**: the shop without limits, ``crawl --workers 1``, direct and through one
   tinyproxy (no rate or concurrency cap on the route): pages/s over the wall time and over the
   shop's active time, and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.integration.helpers import demo_shop, read_jsonl, shop_stats  # noqa: E402
from tests.proxies import proxy_fleet  # noqa: E402

from crawlfleet.demo.catalog import Catalog  # noqa: E402

SPIDER = """
from crawlfleet.demo.spider import DemoShop


class Shop(DemoShop):
    start_urls = [{start!r}]
    domain_concurrency = 64
"""


def _pool(proxies: list[str], rate: float | None, pacing: str = "") -> str:
    cap = f"rate = {rate}\n" if rate else ""
    knobs = "".join(f"{kv.strip()}\n" for kv in pacing.split(",") if kv.strip())
    return (
        (f"[pacing]\n{knobs}\n" if knobs else "")
        + '[[routes.pool]]\nname = "direct"\nenabled = false\n\n'
        f'[[routes.pool]]\nname = "dc"\nproxies = {json.dumps(proxies)}\n{cap}'
    )


def _crawlfleet(
    args: list[str], cwd: Path, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    # the crawl runs in its own directory: a relative PYTHONPATH (src:.) made absolute, or
    # the crawl would import whatever crawlfleet is installed, not the tree being measured
    path = os.pathsep.join(
        str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    )
    return subprocess.run(
        [sys.executable, "-m", "crawlfleet", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path} if path else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def bulk_rate(stats: dict[str, Any]) -> float:
    """Requests/s between the shop's 10th and 90th percentile arrivals."""
    arrivals = sorted(t for t, _ in stats["timeline"])
    low, high = arrivals[len(arrivals) // 10], arrivals[len(arrivals) * 9 // 10]
    return (len(arrivals) * 8 // 10) / (high - low) if high > low else 0.0


def crawl(
    work: Path, base: str, config: str | None, *extra: str, sample: float = 0.0
) -> dict[str, Any]:
    """One crawl of the shop at ``base`` in ``work``; its figures (with ``sample``, every lane's
    pacing read from the store every ``sample`` seconds)."""
    work.mkdir(parents=True)
    if config is not None:
        (work / "crawlfleet.toml").write_text(config)
    (work / "shop.py").write_text(SPIDER.format(start=base + "/"))
    predicted = None
    if config is not None:
        plan = _crawlfleet(["plan", "shop.py", "--json"], work)
        if plan.returncode == 0:
            predicted = json.loads(plan.stdout)["pages_per_s"]
    queue = extra[extra.index("--queue") + 1] if "--queue" in extra else None
    store = queue or f"sqlite:///{work / '.crawlfleet' / 'queue.db'}"
    watch = LaneWatch(store, urlsplit(base).hostname or "", sample)
    started = time.perf_counter()
    cpu_before = _children_cpu()
    with watch:
        result = _crawlfleet(["crawl", "shop.py", "-o", "out.jsonl", *extra], work)
    wall = time.perf_counter() - started
    cpu = _children_cpu() - cpu_before  # the crawl's processes (the shop and proxies run on)
    if result.returncode != 0:
        raise SystemExit(f"crawl failed in {work}:\n{result.stderr[-3000:]}")
    stats = shop_stats(base)
    active = (stats["last_at"] or 0) - (stats["first_at"] or 0)
    return {
        "requests": stats["requests"],
        "wall_s": wall,
        "pages_per_s_wall": stats["requests"] / wall,
        "pages_per_s_active": stats["requests"] / active if active > 0 else 0.0,
        "pages_per_s_bulk": bulk_rate(stats),
        "predicted": predicted,
        "too_many": stats["statuses"].get("429", 0),
        "limited": {a: c["rate_limited"] for a, c in stats.get("per_client", {}).items()},
        "captchas": stats["faults"].get("captcha_wall", 0),
        "records": read_jsonl(work / "out.jsonl"),
        "clients": per_client(stats),
        "cpu_s": cpu,
        "lanes": watch.summary(),
        "trace": watch.trace,
        "backlog": watch.backlog,
        "watch_errors": sorted(watch.errors),
        "timeline": stats["timeline"],
        "per_second": stats.get("per_second", {}),
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def per_client(stats: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per client address (one per route): requests, the busiest second, and the requests a
    second over the seconds it was busy at all (its first to its last second)."""
    out = {}
    for client, seconds in stats.get("per_second", {}).items():
        counts = {int(k): v for k, v in seconds.items()}
        span = max(counts) - min(counts) + 1 if counts else 1
        total = sum(counts.values())
        out[client] = {"requests": total, "peak": max(counts.values(), default=0),
                       "rate": total / span}  # fmt: skip
    return out


def _trace_row(t: float, wall: float, lane: Any) -> dict[str, Any]:
    p = lane.pacing
    return {"t": round(t, 2), "route": lane.route or "direct", "delay": p.delay,
            "width": p.concurrency, "in_flight": lane.in_flight,
            "held": round(max(0.0, p.blocked_until - wall), 2), "limit_delay": p.limit_delay,
            "typical": p.ewma_latency, "base": p.base_latency, "share": round(p.share, 3),
            "slowdowns": p.slowdowns}  # fmt: skip


class LaneWatch:
    """Reads every lane's pacing from the store every ``every`` seconds (0: never) while a crawl
    runs, through the store's own port (``lanes``), in a thread with its own event loop."""

    def __init__(self, queue: str, domain: str, every: float) -> None:
        self.queue, self.domain, self.every = queue, domain, every
        self.samples: list[tuple[float, Any]] = []  # (seconds, DomainState)
        self.trace: list[dict[str, Any]] = []  # the same, as JSON rows
        self.errors: set[str] = set()
        self.backlog: list[tuple[float, int, int]] = []  # (seconds, ready, waiting for a retry)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LaneWatch:
        if self.every > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        asyncio.run(self._watch())

    async def _watch(self) -> None:
        from crawlfleet.frontier import open_frontier

        started = time.monotonic()
        store = None
        while not self._stop.is_set():
            await asyncio.sleep(self.every)
            try:
                if store is None:
                    store = open_frontier(self.queue, create=False)
                    await store.open()
                t, wall = time.monotonic() - started, time.time()
                lanes = await store.lanes(self.domain)
                self.samples.extend((t, lane) for lane in lanes)
                self.trace.extend(_trace_row(t, wall, lane) for lane in lanes)
                queues = [q for q in await store.queue_by_domain() if q.domain == self.domain]
                self.backlog.append((round(t, 2), sum(q.ready for q in queues),
                                   sum(q.waiting for q in queues)))  # fmt: skip
            except Exception as exc:  # not there yet (the crawl creates the store): the next look
                self.errors.add(repr(exc)[:200])
                store = None
        if store is not None:
            await store.close()

    def summary(self) -> dict[str, dict[str, float]]:
        """Per route: the medians over the samples of its pace (requests a second its delay
        allows), width, requests in flight, and typical and unloaded latency (ms)."""
        by: dict[str, list[Any]] = {}
        for _, lane in self.samples:
            by.setdefault(lane.route or "direct", []).append(lane)
        out = {}
        for route, lanes in sorted(by.items()):
            p = [lane.pacing for lane in lanes]
            out[route] = {
                "pace": statistics.median(1 / x.delay if x.delay > 0 else float("inf") for x in p),
                "width": statistics.median(x.concurrency for x in p),
                "in_flight": statistics.median(lane.in_flight for lane in lanes),
                "typical_ms": 1000 * statistics.median(x.ewma_latency or 0 for x in p),
                "base_ms": 1000 * statistics.median(x.base_latency or 0 for x in p),
                "limit": statistics.median(1 / x.limit_delay if x.limit_delay else 0 for x in p),
                "samples": len(lanes),
            }
        return out


NOISE = ("--transient-503", "0.05", "--cut", "0.02", "--slow", "0.02")


def routes_runs(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    counts = [int(n) for n in args.routes.split(",")]
    rows = []
    extra = ("--queue", args.queue) if args.queue else ()
    with proxy_fleet(tmp / "proxies", http=max(counts), socks=0) as fleet:
        for n in counts:
            products = n * args.pages_per_route
            shop = ["--products", str(products), "--rate-limit", str(args.limit)]
            if args.noise:
                shop += [*NOISE, "--slow-delay", str(args.slow_delay)]
            with demo_shop(*shop, "--captcha-after", "20") as base:
                config = _pool([p.url for p in fleet.http[:n]], args.rate or None, args.pacing)
                queue = _schema(args.queue, n) if args.queue else None
                more = ("--queue", queue) if queue else extra
                try:
                    row = crawl(tmp / f"routes-{n}", base, config, *more, sample=args.sample)
                finally:
                    if queue:
                        _drop_schema(queue)
            want = {r["sku"] for r in Catalog(products).expected_records()}
            skus = [r["sku"] for r in row.pop("records")]
            row.update(routes=n, complete=len(skus) == len(set(skus)) and set(skus) == want)
            row["allowed"] = n * args.limit
            rows.append(row)
            print(_route_line(row), flush=True)
            _print_lanes(row)
    return rows


def _schema(server: str, n: int) -> str:
    sep = "&" if "?" in server else "?"
    return f"{server}{sep}schema=bench_routes_{os.getpid()}_{n}"


def _drop_schema(queue: str) -> None:
    import psycopg

    server, _, schema = queue.rpartition("schema=")
    with psycopg.connect(server.rstrip("?&"), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _print_lanes(row: dict[str, Any]) -> None:
    """Each route's address at the shop and its lane's pacing (medians over the samples)."""
    share = row["pages_per_s_bulk"] / row["allowed"] if row["allowed"] else 0.0
    print(f"       {share:.0%} of the {row['allowed']} requests/s the shop allows the routes")
    if row["requests"]:
        print(f"       429s: {row['too_many'] / row['requests']:.1%} of the requests")
    busy = row["cpu_s"] / row["wall_s"] if row["wall_s"] else 0.0
    per = 1000 * row["cpu_s"] / max(1, row["requests"])
    print(f"       the crawl's processes: {busy:.2f} cores busy, {per:.2f} ms of CPU a request")
    for client, c in sorted(row["clients"].items()):
        print(
            f"       {client:<12} {c['requests']:>6.0f} requests, {c['rate']:5.1f}/s, "
            f"busiest second {c['peak']:.0f}, {row['limited'].get(client, 0)} 429s"
        )
    for route, lane in row["lanes"].items():
        print(
            f"       lane {route:<10} pace {lane['pace']:7.1f}/s  width {lane['width']:4.0f}  "
            f"in flight {lane['in_flight']:4.0f}  latency {lane['typical_ms']:6.1f} ms "
            f"(unloaded {lane['base_ms']:5.1f})  learnt limit {lane['limit']:5.1f}/s"
        )


def _route_line(r: dict[str, Any]) -> str:
    predicted = f"{r['predicted']:.2f}" if r["predicted"] is not None else "-"
    off = (
        f"{(r['predicted'] - r['pages_per_s_bulk']) / r['pages_per_s_bulk']:+.0%}"
        if r["predicted"] and r["pages_per_s_bulk"]
        else "-"
    )
    return (
        f"{r['routes']:>6} {r['requests']:>8} {r['pages_per_s_bulk']:>8.2f} {predicted:>9} "
        f"{off:>6} {r['pages_per_s_wall']:>7.2f} {r['too_many']:>5} {r['captchas']:>8} "
        f"{'yes' if r['complete'] else 'NO':>8}"
    )


def hop_runs(args: argparse.Namespace, tmp: Path) -> dict[str, dict[str, Any]]:
    out = {}
    with proxy_fleet(tmp / "hop-proxy", http=1, socks=0) as fleet:
        for name, config in (("direct", None), ("tinyproxy", _pool([fleet.http[0].url], None))):
            with demo_shop("--products", str(args.clean_products)) as base:
                row = crawl(tmp / f"hop-{name}", base, config, "--workers", "1")
            row.pop("records")
            out[name] = row
            print(
                f"{name:>10} {row['requests']:>8} {row['pages_per_s_wall']:>9.1f} "
                f"{row['pages_per_s_active']:>11.1f} {row['wall_s']:>7.1f}",
                flush=True,
            )
    direct, proxied = out["direct"], out["tinyproxy"]
    print(
        f"through one tinyproxy: {proxied['pages_per_s_active'] / direct['pages_per_s_active']:.0%}"
        f" of direct pages/s (active), "
        f"{proxied['pages_per_s_wall'] / direct['pages_per_s_wall']:.0%} (wall)"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--routes", default="1,2,4,8", help="route counts to run (default 1,2,4,8)")
    p.add_argument("--pages-per-route", type=int, default=50, metavar="N")
    p.add_argument("--limit", type=int, default=5, help="shop: requests per address per second")
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="pool: requests/s per route (0: none declared; default 4.0 on the default shop's "
        "5/s, none with another --limit: the lanes find the shop's limit themselves)",
    )
    p.add_argument(
        "--noise",
        action="store_true",
        help="the shop's faults on: 5%% 503s, 2%% cut connections, 2%% slow pages",
    )
    p.add_argument("--slow-delay", type=float, default=3.0, help="seconds a slow page takes")
    p.add_argument("--queue", help="a PostgreSQL server for the routes runs (a schema each)")
    p.add_argument(
        "--sample", type=float, default=1.0, help="seconds between reads of the lanes' pacing"
    )
    p.add_argument(
        "--pacing", default="", help="[pacing] settings for the routes runs: 'key = value, ...'"
    )
    p.add_argument("--clean-products", type=int, default=1000, metavar="N")
    p.add_argument("--skip-hop", action="store_true", help="only the routes runs")
    p.add_argument("--skip-routes", action="store_true", help="only the proxy hop runs")
    args = p.parse_args(argv)
    if args.rate is None:
        args.rate = 4.0 if args.limit == 5 else 0.0
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-routes-") as tmp:
        if not args.skip_routes:
            print(
                f"rate-limited shop ({args.limit} req/s per address), pool rate {args.rate}/s "
                f"per route, {args.pages_per_route} products per route"
            )
            print(
                f"{'routes':>6} {'requests':>8} {'pages/s':>8} {'predicted':>9} {'off':>6} "
                f"{'wall/s':>7} {'429s':>5} {'captchas':>8} {'complete':>8}"
            )
            rows = routes_runs(args, Path(tmp))
            results["routes"] = rows
            by = {r["routes"]: r["pages_per_s_bulk"] for r in rows}
            if by.get(1):
                print("speed-up over one route: " + ", ".join(
                    f"{n}: {v / by[1]:.1f}x" for n, v in sorted(by.items())
                ))  # fmt: skip
        if not args.skip_hop:
            print(f"\nclean shop ({args.clean_products} products), one worker")
            print(f"{'':>10} {'requests':>8} {'pages/s':>9} {'active p/s':>11} {'wall s':>7}")
            results["hop"] = hop_runs(args, Path(tmp))
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    path = out / f"routes-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
