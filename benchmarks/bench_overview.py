"""What watching a big store costs: ``serve``'s ``/metrics`` scrape and ``/api/overview`` call,
and ``read_overview`` under them, on a store of ``--n`` requests (100,000 by default).

Run: ``.venv/bin/python benchmarks/bench_overview.py [--n 100000] [--backends sqlite,postgres]``
(PostgreSQL from ``CRAWLFLEET_BENCH_PG``, default ``postgresql://postgres@127.0.0.1:5432/test``;
the benchmark works in its own database, dropped at the end).

The store is filled through the frontier's own verbs: ``--n`` requests over 200 domains, 90%
leased and completed (a record each, one in fifty quarantined), a tenth of the rest failed
once (history rows), the rest queued; four worker processes' reports of real counters. Each
figure is the median of ``--repeat`` calls; the overview cache of ``serve`` is bypassed (every
call reads the store, as the first call of each second does) but for the last figure.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from aiohttp import ClientSession, web

from crawlfleet.config import Settings
from crawlfleet.control.app import make_app
from crawlfleet.control.security import Guard
from crawlfleet.control.state import ControlState
from crawlfleet.events import AttemptEvent
from crawlfleet.frontier.ports import Frontier, WorkerStats
from crawlfleet.model import (
    Completion,
    DomainLimits,
    Failure,
    JobSpec,
    NewRequest,
    Outcome,
    QuarantineRow,
    RecordRow,
)
from crawlfleet.monitor.metrics import WorkerMetrics
from crawlfleet.monitor.overview import read_overview
from crawlfleet.policy.pacing import PacingConfig

PG_SERVER = os.environ.get("CRAWLFLEET_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
DOMAINS = 200
BATCH = 1_000


def requests(n: int) -> list[NewRequest]:
    out = []
    for i in range(n):
        url = f"http://d{i % DOMAINS}.test/p/{i}"
        out.append(
            NewRequest(
                url, hashlib.blake2b(url.encode(), digest_size=16).digest(), f"d{i % DOMAINS}.test"
            )
        )
    return out


async def fill(store: Frontier, n: int) -> None:
    limits = DomainLimits(max_in_flight=1_000_000, min_delay=0.0)
    await store.submit_job(JobSpec(name="big", spider="s.py", default_limits=limits))
    reqs = requests(n)
    for i in range(0, n, BATCH):
        await store.enqueue("big", reqs[i : i + BATCH])
    done = 0
    while done < int(n * 0.9):
        leases = await store.lease("filler", min(BATCH, int(n * 0.9) - done), 600)
        if not leases:
            break
        completions = []
        for k, lease in enumerate(leases):
            key = str(lease.id)
            if (done + k) % 50:
                completions.append(
                    Completion(lease.ref, 200, records=[RecordRow(key, {"k": key}, lease.url, 1.0)])
                )
            else:
                q = QuarantineRow({"k": key}, [{"msg": "bad"}], lease.url, 1.0)
                completions.append(Completion(lease.ref, 200, quarantined=[q]))
        await store.complete(completions)
        done += len(leases)
    leases = await store.lease("filler", n // 100, 600)
    await store.fail(
        [
            Failure(x.ref, "503", retry_at=time.time() - 1, outcome=Outcome.RETRYABLE_ERROR)
            for x in leases
        ]
    )
    for w in range(4):
        m = WorkerMetrics()
        for i in range(2000):
            d = f"d{i % DOMAINS}.test"
            m.observe(
                AttemptEvent("big", d, "http", Outcome.OK, latency=0.05, nbytes=40_000, records=1)
            )
        row = WorkerStats(
            f"w{w}", 1.0, "http", "bench", w, time.time(), m.snapshot(), '{"pages_per_second": 50}'
        )
        await store.save_worker_stats(row)


async def timed(repeat: int, call: object) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        await call()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times)


async def measure(store: Frontier, repeat: int) -> dict[str, float]:
    settings = Settings()
    state = ControlState(store, settings, refresh=0.0)  # every call reads the store
    guard = Guard.make("127.0.0.1", 0, "")
    app = make_app(state, guard, sample_every=3600)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    guard.port = port
    base = f"http://127.0.0.1:{port}"
    out = {}
    try:
        out["read_overview"] = await timed(repeat, lambda: read_overview(store, time.time()))
        async with ClientSession() as http:

            async def fetch(path: str) -> None:
                async with http.get(base + path) as resp:
                    assert resp.status == 200, resp.status
                    await resp.read()

            out["GET /metrics"] = await timed(repeat, lambda: fetch("/metrics"))
            out["GET /api/overview"] = await timed(repeat, lambda: fetch("/api/overview"))
            async with http.get(base + "/metrics") as resp:
                out["/metrics bytes"] = len(await resp.read())
            state.refresh = 3600.0  # serve's usual case: the overview of this second, cached
            out["GET /metrics (cached)"] = await timed(repeat, lambda: fetch("/metrics"))
    finally:
        await runner.cleanup()
    return out


async def run_backend(backend: str, n: int, repeat: int) -> dict[str, float]:
    pacing = PacingConfig(start_concurrency=1 << 20)
    if backend == "sqlite":
        from crawlfleet.frontier.sqlite import SQLiteFrontier

        tmp = Path(tempfile.mkdtemp(prefix="bench-overview-"))
        store: Frontier = SQLiteFrontier(tmp / "queue.db", pacing=pacing)
        await store.open()
        try:
            t = time.perf_counter()
            await fill(store, n)
            print(
                f"  sqlite: filled {n:,} requests in {time.perf_counter() - t:.1f}s",
                file=sys.stderr,
            )
            return await measure(store, repeat)
        finally:
            await store.close()
    import psycopg

    from crawlfleet.frontier.postgres import PostgresFrontier

    name = f"bench_overview_{secrets.token_hex(4)}"
    with psycopg.connect(PG_SERVER, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        store = PostgresFrontier(
            urlunsplit(urlsplit(PG_SERVER)._replace(path=f"/{name}")), pacing=pacing
        )
        await store.open()
        try:
            t = time.perf_counter()
            await fill(store, n)
            print(
                f"  postgres: filled {n:,} requests in {time.perf_counter() - t:.1f}s",
                file=sys.stderr,
            )
            return await measure(store, repeat)
        finally:
            await store.close()
    finally:
        with psycopg.connect(PG_SERVER, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--backends", default="sqlite,postgres")
    args = p.parse_args()
    for backend in args.backends.split(","):
        figures = asyncio.run(run_backend(backend, args.n, args.repeat))
        shown = " · ".join(
            f"{k} {v:,.0f}" if k.endswith("bytes") else f"{k} {v * 1000:.1f} ms"
            for k, v in figures.items()
        )
        print(f"{backend} ({args.n:,} requests): {shown}")


if __name__ == "__main__":
    main()
