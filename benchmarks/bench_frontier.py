"""Frontier throughput, both backends: batched enqueue, lease + complete with 1 and 8 processes;
and with ``--queued``, latency against the size of the queue.

Run: ``.venv/bin/python benchmarks/bench_frontier.py [--n 100000] [--backends sqlite,postgres]``
(PostgreSQL from ``CRAWLFLEET_BENCH_PG``, default ``postgresql://postgres@127.0.0.1:5432/test``;
the benchmark works in a schema of its own there, dropped at the end).

``--queued 10000,1000000``: for each size, a fresh store bulk-enqueued with that many requests
(batches of 10,000), then rounds of ``lease(100)``, ``complete`` of those 100 and ``enqueue`` of
100 new URLs: p50 and p99 milliseconds of each verb, the store's size on disk (SQLite: the file
and its WAL; PostgreSQL: the schema's tables, indexes and TOAST) and bytes per queued request,
and the query plans of the lease's pick, the completion and the enqueue at that size. The store's
upkeep runs after the bulk load (as ``submit`` runs it) and during the rounds (as a worker does).

``--churn SECONDS``: a queue of ``--n`` requests churned (lease 100, complete them, enqueue 100
new) for that long, with the store's upkeep and without it; every 10 s the store's size, bytes
per request row, dead row versions (PostgreSQL) and the verbs' p50: table bloat under churn.

Every figure is rows per second of wall time:

* enqueue new: ``enqueue`` of batches of 1,000 URLs never seen (each row is an insert);
* enqueue dup: the same batches again (every row is filtered by the unique key);
* lease+complete: ``lease(100)`` then ``complete`` of those 100, in a loop until the job is
  finished; the figure is requests through both verbs per second (each request is two row
  operations: one leased, one completed), by 1 process and by 8 processes at once.

URLs are spread over 1,000 domains whose in-flight limit (64) does not cap a batch, so the
figures measure the store, not politeness. Issue 3 targets: >= 50,000/s SQLite, >= 30,000/s
PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import multiprocessing as mp
import os
import secrets
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import (
    Completion,
    DomainLimits,
    JobSpec,
    NewRequest,
)

PG_SERVER = os.environ.get("CRAWLFLEET_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
DOMAINS = 1_000
ENQUEUE_BATCH = 1_000
LEASE_BATCH = 100
LIMITS = DomainLimits(max_in_flight=64, min_delay=0.0)
TTL = 300.0


@dataclass
class Target:
    backend: str
    url: str  # sqlite file path or PostgreSQL DSN

    def frontier(self, pool: int = 4) -> Frontier:
        if self.backend == "sqlite":
            from crawlfleet.frontier.sqlite import SQLiteFrontier

            return SQLiteFrontier(self.url)
        from crawlfleet.frontier import _split_schema
        from crawlfleet.frontier.postgres import PostgresFrontier

        dsn, schema = _split_schema(self.url)
        return PostgresFrontier(dsn, schema=schema, max_size=pool)


def requests(job: str, start: int, n: int, domains: int = DOMAINS) -> list[NewRequest]:
    out = []
    for i in range(start, start + n):
        domain = f"d{i % domains}.bench"
        url = f"http://{domain}/{job}/item/{i}"
        out.append(NewRequest(url, hashlib.blake2b(url.encode(), digest_size=16).digest(), domain))
    return out


async def enqueue_all(store: Frontier, job: str, n: int) -> float:
    batches = [requests(job, i, ENQUEUE_BATCH) for i in range(0, n, ENQUEUE_BATCH)]
    t0 = time.perf_counter()
    for batch in batches:
        await store.enqueue(job, batch)
    return time.perf_counter() - t0


async def drain(store: Frontier, job: str, worker: str) -> int:
    """Lease and complete until nothing is left; returns how many this worker completed."""
    done = 0
    idle = 0
    while True:
        leases = await store.lease(worker, LEASE_BATCH, TTL, jobs=[job])
        if not leases:
            if await store.is_finished(job) or idle > 200:
                return done
            idle += 1  # others hold the rest for now (or every free domain is locked)
            await asyncio.sleep(0.005)
            continue
        idle = 0
        accepted = await store.complete([Completion(x.ref, 200) for x in leases])
        done += len(accepted)


async def setup_job(target: Target, job: str, n: int) -> tuple[float, float]:
    """Submit ``job`` with ``n`` URLs; returns (seconds to enqueue them, seconds to re-enqueue)."""
    store = target.frontier()
    await store.open()
    try:
        await store.submit_job(JobSpec(job, "bench.py", default_limits=LIMITS))
        new = await enqueue_all(store, job, n)
        dup = await enqueue_all(store, job, n)
        return new, dup
    finally:
        await store.close()


async def drain_one(target: Target, job: str) -> tuple[int, float]:
    store = target.frontier()
    await store.open()
    try:
        t0 = time.perf_counter()
        done = await drain(store, job, "w0")
        return done, time.perf_counter() - t0
    finally:
        await store.close()


def _process(target: Target, job: str, worker: str, start: mp.Barrier, out: mp.Queue) -> None:  # type: ignore[type-arg]
    async def run() -> int:
        store = target.frontier(pool=2)
        await store.open()
        try:
            start.wait()
            return await drain(store, job, worker)
        finally:
            await store.close()

    out.put(asyncio.run(run()))


def drain_many(target: Target, job: str, processes: int) -> tuple[int, float]:
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(processes + 1)
    out: mp.Queue[int] = ctx.Queue()
    procs = [
        ctx.Process(target=_process, args=(target, job, f"w{i}", start, out))
        for i in range(processes)
    ]
    for p in procs:
        p.start()
    start.wait()
    t0 = time.perf_counter()
    done = sum(out.get() for _ in procs)
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join()
    return done, elapsed


def bench(target: Target, n: int, processes: int) -> dict[str, float]:
    new, dup = asyncio.run(setup_job(target, "one", n))
    done1, t1 = asyncio.run(drain_one(target, "one"))
    asyncio.run(setup_job(target, "many", n))
    done8, t8 = drain_many(target, "many", processes)
    assert done1 == n, (done1, n)
    assert done8 == n, (done8, n)
    return {
        "enqueue new (batch 1,000)": n / new,
        "enqueue dup (batch 1,000)": n / dup,
        "lease+complete, 1 process": done1 / t1,
        f"lease+complete, {processes} processes": done8 / t8,
    }


class PgDatabase:
    """A throwaway schema in the benchmark server's database (``?schema=`` of the DSN)."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.name = f"crawlfleet_bench_{secrets.token_hex(4)}"
        query = urlsplit(server).query
        self.dsn = urlunsplit(
            urlsplit(server)._replace(query=(query + "&" if query else "") + f"schema={self.name}")
        )

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(sql)

    def __enter__(self) -> str:
        return self.dsn

    def __exit__(self, *exc: object) -> None:
        self._admin(f'DROP SCHEMA IF EXISTS "{self.name}" CASCADE')


# -- latency against the size of the queue ------------------------------------------------------

BULK_BATCH = 10_000


def _ms(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return statistics.median(values) * 1000, p99 * 1000


async def latency(target: Target, queued: int, rounds: int, domains: int) -> dict[str, Any]:
    store = target.frontier()
    await store.open()
    try:
        # the slots of a domain never cap a batch here (one domain may hold the whole queue)
        limits = DomainLimits(max_in_flight=10 * LEASE_BATCH, min_delay=0.0)
        await store.submit_job(JobSpec("big", "bench.py", default_limits=limits))
        t0 = time.perf_counter()
        for start in range(0, queued, BULK_BATCH):
            n = min(BULK_BATCH, queued - start)
            await store.enqueue("big", requests("big", start, n, domains))
            if (start + n) % 1_000_000 == 0:  # progress of a long bulk load
                rate = (start + n) / (time.perf_counter() - t0)
                print(f"  {start + n:,} queued, {rate:,.0f} rows/s", file=sys.stderr, flush=True)
        bulk = time.perf_counter() - t0
        # what submit does after its seeds (and a worker at its start): statistics for the planner
        t0 = time.perf_counter()
        upkept = await store.maintain()
        upkeep = time.perf_counter() - t0
        times: dict[str, list[float]] = {"lease(100)": [], "complete(100)": [], "enqueue(100)": []}
        fresh, leased = queued, 0
        for _ in range(rounds):
            await store.maintain()  # as a worker's upkeep loop: at most every 10 s, untimed
            t = time.perf_counter()
            leases = await store.lease("w0", LEASE_BATCH, TTL, jobs=["big"])
            times["lease(100)"].append(time.perf_counter() - t)
            assert leases, "nothing leased"
            leased += len(leases)
            t = time.perf_counter()
            await store.complete([Completion(x.ref, 200) for x in leases])
            times["complete(100)"].append(time.perf_counter() - t)
            t = time.perf_counter()
            await store.enqueue("big", requests("big", fresh, LEASE_BATCH, domains))
            times["enqueue(100)"].append(time.perf_counter() - t)
            fresh += LEASE_BATCH
    finally:
        await store.close()
    size = store_size(target)
    # a lane starts at a few slots (adaptive pacing): with few domains a lease is short
    out: dict[str, Any] = {"bulk enqueue rows/s": queued / bulk, "leased per call": leased / rounds}
    out["upkeep after bulk s"] = upkeep
    print(f"  upkeep after the bulk: {', '.join(upkept) or 'nothing'}", file=sys.stderr)
    for verb, values in times.items():
        out[f"{verb} p50 ms"], out[f"{verb} p99 ms"] = _ms(values)
    out["store MB"] = size / 1e6
    out["bytes per request"] = size / fresh
    out["plans"] = plans(target)
    return out


async def churn(
    target: Target, queued: int, seconds: float, upkeep: bool, domains: int, every: float = 10.0
) -> list[dict[str, float]]:
    """A queue of ``queued`` requests churned for ``seconds``: rounds of ``lease(100)``,
    ``complete`` of those and ``enqueue`` of 100 new ones (so ``queued`` stay queued), the
    store's upkeep as a worker runs it (``upkeep``) or none. Every ``every`` seconds: the store's
    size, its bytes per request row, dead row versions (PostgreSQL) and the verbs' p50."""
    store = target.frontier()
    await store.open()
    windows: list[dict[str, float]] = []
    try:
        limits = DomainLimits(max_in_flight=10 * LEASE_BATCH, min_delay=0.0)
        await store.submit_job(JobSpec("churn", "bench.py", default_limits=limits))
        for start in range(0, queued, BULK_BATCH):
            n = min(BULK_BATCH, queued - start)
            await store.enqueue("churn", requests("churn", start, n, domains))
        fresh = queued
        t0 = time.perf_counter()
        window_start, lease_t, complete_t, rounds = t0, [], [], 0
        while (now := time.perf_counter()) - t0 < seconds:
            if upkeep:
                await store.maintain()
            t = time.perf_counter()
            leases = await store.lease("w0", LEASE_BATCH, TTL, jobs=["churn"])
            lease_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            await store.complete([Completion(x.ref, 200) for x in leases])
            complete_t.append(time.perf_counter() - t)
            await store.enqueue("churn", requests("churn", fresh, LEASE_BATCH, domains))
            fresh += LEASE_BATCH
            rounds += 1
            if now - window_start >= every:
                size = store_size(target)
                windows.append(
                    {
                        "t s": now - t0,
                        "rounds/s": rounds / (now - window_start),
                        "lease p50 ms": statistics.median(lease_t) * 1000,
                        "complete p50 ms": statistics.median(complete_t) * 1000,
                        "store MB": size / 1e6,
                        "bytes per request": size / fresh,
                        "dead rows": dead_rows(target),
                    }
                )
                cells = ", ".join(f"{k} {v:,.1f}" for k, v in windows[-1].items())
                print(f"  {target.backend} upkeep={upkeep}: {cells}", file=sys.stderr, flush=True)
                window_start, lease_t, complete_t, rounds = now, [], [], 0
    finally:
        await store.close()
    return windows


def dead_rows(target: Target) -> float:
    """Dead row versions in the store's tables (PostgreSQL's counters; SQLite has none)."""
    if target.backend == "sqlite":
        return 0.0
    import psycopg

    schema = target.url.rpartition("schema=")[2]
    with psycopg.connect(target.url.partition("?")[0], autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = %s",
            (schema,),
        ).fetchone()
    return float(row[0]) if row else 0.0


def run_churn(backend: str, queued: int, seconds: float, domains: int) -> None:
    for upkeep in (True, False):
        print(f"{backend}: churn of {queued:,} queued, upkeep {upkeep} ...", file=sys.stderr)
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                target = Target("sqlite", str(Path(tmp) / "queue.db"))
                windows = asyncio.run(churn(target, queued, seconds, upkeep, domains))
        else:
            with PgDatabase(PG_SERVER) as dsn:
                target = Target("postgres", dsn)
                windows = asyncio.run(churn(target, queued, seconds, upkeep, domains))
        for w in windows[:: max(1, len(windows) // 6)] + windows[-1:]:
            cells = " | ".join(f"{v:,.1f}" for v in w.values())
            print(f"| {backend} | {'upkeep' if upkeep else 'none'} | {cells} |", flush=True)
        if backend == "sqlite":
            break  # SQLite's maintain() does nothing: one run says it all


def store_size(target: Target) -> int:
    if target.backend == "sqlite":
        return sum(p.stat().st_size for p in Path(target.url).parent.glob("queue.db*"))
    import psycopg

    schema = target.url.rpartition("schema=")[2]
    with psycopg.connect(target.url.partition("?")[0], autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


_PICK = (
    "SELECT id FROM requests WHERE domain = 'd0.bench' AND state = 'queued' AND ready_at <= 1e12 "
    "AND job_id IN (1) AND (CASE WHEN fetcher = 'browser' THEN 'browser' ELSE 'http' END) "
    "IN ('http') ORDER BY priority DESC, id LIMIT 100"
)
_COMPLETE = "UPDATE requests SET state = 'done' WHERE id IN (5, 6, 7) AND state = 'leased'"
_NEW = "SELECT id, url, domain FROM requests WHERE id > 999000 AND state = 'queued' ORDER BY id"
_DUP = "SELECT id FROM requests WHERE job_id = 1 AND fingerprint = x'00'"


def plans(target: Target) -> dict[str, str]:
    """The query plans of the lease's pick of one domain, a completion, the read-back of the
    new rows of an enqueue and the unique-key probe of an insert, at the store's size."""
    queries = {"pick": _PICK, "complete": _COMPLETE, "new rows": _NEW, "dedup probe": _DUP}
    if target.backend == "sqlite":
        import sqlite3

        db = sqlite3.connect(target.url)
        try:
            return {
                name: "; ".join(str(r[3]) for r in db.execute("EXPLAIN QUERY PLAN " + q))
                for name, q in queries.items()
            }
        finally:
            db.close()
    import psycopg

    schema = target.url.rpartition("schema=")[2]
    out = {}
    with psycopg.connect(target.url.partition("?")[0]) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        # the completion as the store sends it (a join on unnest, not an IN list)
        from crawlfleet.frontier.sql import queries as sql_queries

        conn.execute("PREPARE complete AS " + sql_queries("postgres")["complete"])
        queries["complete"] = "EXECUTE complete(1e12, '{5,6,7}', '{1,1,1}', '{200,200,200}')"
        del queries["new rows"]  # PostgreSQL's enqueue has its new rows from RETURNING
        for name, q in queries.items():
            q = q.replace("x'00'", "'\\x00'::bytea").replace("IN (1)", "= ANY('{1}')")
            rows = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + q).fetchall()
            out[name] = "; ".join(r[0].strip() for r in rows if "Planning" not in r[0])
        conn.rollback()
    return out


def run_latency(backend: str, sizes: list[int], rounds: int, domains: int) -> None:
    for queued in sizes:
        print(f"{backend}: {queued:,} queued ...", file=sys.stderr, flush=True)
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                target = Target("sqlite", str(Path(tmp) / "queue.db"))
                result = asyncio.run(latency(target, queued, rounds, domains))
        else:
            with PgDatabase(PG_SERVER) as dsn:
                result = asyncio.run(latency(Target("postgres", dsn), queued, rounds, domains))
        found = result.pop("plans")
        cells = ", ".join(f"{k} {v:,.2f}" for k, v in result.items())
        print(f"| {backend} | {queued:,} | {cells} |", flush=True)
        for name, plan in found.items():
            print(f"    plan {name}: {plan}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="URLs per phase")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--queued", help="latency at these queue sizes instead (comma-separated: 10000,1000000)"
    )
    parser.add_argument("--rounds", type=int, default=300, help="lease/complete/enqueue rounds")
    parser.add_argument("--domains", type=int, default=DOMAINS, help="domains of --queued")
    parser.add_argument(
        "--churn",
        type=float,
        help="seconds of churn of a queue of --n requests, with the store's upkeep and without",
    )
    args = parser.parse_args()
    if args.churn:
        for backend in args.backends.split(","):
            run_churn(backend, args.n, args.churn, args.domains)
        return
    if args.queued:
        for backend in args.backends.split(","):
            sizes = [int(n) for n in args.queued.split(",")]
            run_latency(backend, sizes, args.rounds, args.domains)
        return
    results: dict[str, dict[str, float]] = {}
    for backend in args.backends.split(","):
        print(f"{backend}: {args.n:,} URLs per phase ...", file=sys.stderr, flush=True)
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                target = Target("sqlite", str(Path(tmp) / "queue.db"))
                results[backend] = bench(target, args.n, args.processes)
        else:
            with PgDatabase(PG_SERVER) as dsn:
                results[backend] = bench(Target("postgres", dsn), args.n, args.processes)
    print_table(results)


def print_table(results: dict[str, dict[str, float]]) -> None:
    backends = list(results)
    rows = list(next(iter(results.values())))
    width = max(len(r) for r in rows)
    print(f"| {'rows/s':<{width}} | " + " | ".join(f"{b:>10}" for b in backends) + " |")
    print(f"| {'-' * width} | " + " | ".join("-" * 10 for _ in backends) + " |")
    for row in rows:
        cells = " | ".join(f"{results[b][row]:>10,.0f}" for b in backends)
        print(f"| {row:<{width}} | {cells} |")


if __name__ == "__main__":
    main()
