"""What only the PostgreSQL frontier has: versioned migrations, schemas, many leasers on many
connections at once (the contract suite in test_frontier.py covers the shared behaviour)."""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from tests.conftest import PG_TEST_DB, FakeClock

from crawlfleet.errors import ConfigError, StoreError
from crawlfleet.frontier import open_frontier
from crawlfleet.frontier.postgres import MIGRATIONS, SCHEMA_VERSION, PostgresFrontier
from crawlfleet.frontier.sqlite import SQLiteFrontier
from crawlfleet.model import (
    Completion,
    DomainLimits,
    JobSpec,
    Lease,
    NewRequest,
)
from crawlfleet.urls import canonicalize, fingerprint, host_of

TTL = 30.0


def req_urls(n: int, domains: int) -> list[NewRequest]:
    out = []
    for i in range(n):
        url = canonicalize(f"http://d{i % domains}.test/p/{i}")
        out.append(NewRequest(url, fingerprint(url), host_of(url)))
    return out


@pytest.fixture
def dsn() -> str:
    return PG_TEST_DB.fresh()


@pytest.fixture
async def pg(dsn: str, clock: FakeClock) -> AsyncIterator[PostgresFrontier]:
    store = PostgresFrontier(dsn, clock=clock, max_size=2)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def meta_rows(dsn: str, schema: str = "public") -> list[tuple[int, str]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(f'SELECT version, name FROM "{schema}".crawlfleet_meta ORDER BY 1')
        return [(r[0], r[1]) for r in rows]
    finally:
        await conn.close()


async def test_upgrade__records_the_schema_version(pg: PostgresFrontier, dsn: str) -> None:
    assert await pg.upgrade() == SCHEMA_VERSION
    assert await meta_rows(dsn) == [(v, name) for v, name, _ in MIGRATIONS]


async def test_upgrade__twice_is_a_no_op(pg: PostgresFrontier, dsn: str) -> None:
    before = await meta_rows(dsn)
    assert await pg.upgrade() == await pg.upgrade() == SCHEMA_VERSION
    assert await meta_rows(dsn) == before


async def test_upgrade__by_many_processes_at_once_migrates_once(dsn: str, clock: FakeClock) -> None:
    schema = f"fleet_{secrets.token_hex(3)}"
    stores = [PostgresFrontier(dsn, clock=clock, schema=schema, max_size=1) for _ in range(6)]
    try:
        await asyncio.gather(*(s.open() for s in stores))
        assert await meta_rows(dsn, schema) == [(v, name) for v, name, _ in MIGRATIONS]
        await stores[0].submit_job(JobSpec("j", "s.py"))
        assert await stores[-1].get_job("j") is not None
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_schema__keeps_two_fleets_apart(dsn: str, clock: FakeClock) -> None:
    a = PostgresFrontier(dsn, clock=clock, schema=f"a_{secrets.token_hex(3)}", max_size=1)
    b = PostgresFrontier(dsn, clock=clock, schema=f"b_{secrets.token_hex(3)}", max_size=1)
    async with a, b:
        await a.submit_job(JobSpec("only-in-a", "s.py"))
        assert await a.get_job("only-in-a") is not None
        assert await b.get_job("only-in-a") is None


async def test_concurrent_leasers__on_separate_connections_never_share_a_request(
    dsn: str, clock: FakeClock
) -> None:
    limits = DomainLimits(max_in_flight=5)
    seed = PostgresFrontier(dsn, clock=clock, max_size=1)
    async with seed:
        await seed.submit_job(JobSpec("j", "s.py", default_limits=limits))
        await seed.enqueue("j", req_urls(1200, domains=40))
    stores = [PostgresFrontier(dsn, clock=clock, max_size=1) for _ in range(6)]
    held: dict[int, Lease] = {}
    completed: list[int] = []

    async def worker(store: PostgresFrontier, name: str) -> None:
        for _ in range(400):
            leases = await store.lease(name, 37, TTL)
            if not leases:
                if await store.is_finished("j"):
                    return
                await asyncio.sleep(0)
                continue
            for x in leases:
                assert x.id not in held, "two live leases on one request"
                held[x.id] = x
            per_domain = Counter(x.domain for x in held.values())
            assert max(per_domain.values()) <= limits.max_in_flight
            await asyncio.sleep(0)
            for x in leases:  # the store frees their slots when complete commits
                del held[x.id]
            accepted = await store.complete([Completion(x.ref, 200) for x in leases])
            assert accepted == {x.id for x in leases}
            completed.extend(accepted)

    await asyncio.gather(*(s.open() for s in stores))
    try:
        await asyncio.gather(*(worker(s, f"w{i}") for i, s in enumerate(stores)))
        assert sorted(completed) == sorted(set(completed))
        assert len(completed) == 1200
        stats = await stores[0].stats("j")
        assert (stats.done, stats.leased, stats.queued) == (1200, 0, 0)
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_concurrent_leasers__share_one_domain_pacing(dsn: str, clock: FakeClock) -> None:
    seed = PostgresFrontier(dsn, clock=clock, max_size=1)
    async with seed:
        await seed.submit_job(JobSpec("j", "s.py", default_limits=DomainLimits(100, 0.25)))
        await seed.enqueue("j", req_urls(50, domains=1))
    stores = [PostgresFrontier(dsn, clock=clock, max_size=1) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        batches = await asyncio.gather(*(s.lease(f"w{i}", 50, TTL) for i, s in enumerate(stores)))
        starts = sorted(x.start_at for b in batches for x in b)
        assert starts, "somebody got the domain"
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        assert all(g >= 0.25 - 1e-9 for g in gaps), gaps
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_complete__by_a_fresh_worker_enqueues_links_with_the_job_defaults(
    dsn: str, clock: FakeClock
) -> None:
    submitter = PostgresFrontier(dsn, clock=clock, max_size=1)
    async with submitter:
        await submitter.submit_job(JobSpec("j", "s.py", default_limits=DomainLimits(3, 0.0)))
        await submitter.enqueue("j", req_urls(1, domains=1))
    worker = PostgresFrontier(dsn, clock=clock, max_size=1)  # knows nothing of the job yet
    async with worker:
        (lease,) = await worker.lease("w", 10, TTL)
        found = [
            *req_urls(10, domains=1)[1:],
            NewRequest("http://new.test/", fingerprint("http://new.test/"), "new.test"),
        ]
        assert await worker.complete([Completion(lease.ref, 200, discovered=found)]) == {lease.id}
        assert (await worker.stats("j")).queued == 10
        leased = await worker.lease("w", 20, TTL)
        assert sum(x.domain == "d0.test" for x in leased) == 3, "the job's in-flight default"


async def test_lease__passes_over_exhausted_domains_to_the_work_behind_them(
    pg: PostgresFrontier,
) -> None:
    await pg.submit_job(JobSpec("j", "s.py", default_limits=DomainLimits(1, 0.0)))
    await pg.enqueue("j", req_urls(150, domains=150))
    late = [canonicalize(f"http://late.test/{i}") for i in range(3)]
    await pg.enqueue("j", [NewRequest(u, fingerprint(u), "late.test") for u in late])
    first = await pg.lease("A", 500, TTL)
    assert len(first) == 151
    await pg.complete([Completion(x.ref, 200) for x in first])
    # every domain was just served; the 150 exhausted ones sort before late.test
    (again,) = await pg.lease("B", 5, TTL)
    assert again.domain == "late.test"


async def test_open__unreachable_server_is_a_store_error_without_the_password() -> None:
    store = PostgresFrontier("postgresql://crawler:hunter2@127.0.0.1:1/nowhere")
    with pytest.raises(StoreError) as info:
        await store.open()
    assert "hunter2" not in str(info.value)
    assert "[secure]" in str(info.value)
    assert "\n" not in str(info.value)
    assert "hunter2" not in repr(store)


def test_open_frontier__maps_queue_urls_to_backends(tmp_path: Path) -> None:
    rel = open_frontier("sqlite:///some/queue.db")
    assert isinstance(rel, SQLiteFrontier)
    assert rel.path == Path("some/queue.db")
    absolute = open_frontier(f"sqlite:///{tmp_path}/q.db")
    assert isinstance(absolute, SQLiteFrontier)
    assert absolute.path == tmp_path / "q.db"
    bare = open_frontier("queue.db")
    assert isinstance(bare, SQLiteFrontier)
    assert bare.path == Path("queue.db")
    pg = open_frontier("postgres://u:pw@db.internal:5432/crawl?schema=fleet")
    assert isinstance(pg, PostgresFrontier)
    assert pg.schema == "fleet"
    assert pg.dsn == "postgres://u:pw@db.internal:5432/crawl"
    assert isinstance(open_frontier("postgresql://db/crawl"), PostgresFrontier)


@pytest.mark.parametrize(
    "url", ["mysql://u:s3cret@db/x", "redis://:s3cret@host/0", "queue.txt", "sqlite://"]
)
def test_open_frontier__refuses_other_urls_without_printing_secrets(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_frontier(url)
    assert "s3cret" not in str(info.value)


async def _table_stats(dsn: str, schema: str) -> dict[str, tuple[float, bool]]:
    """Per table of ``schema``: (the planner's row estimate, vacuumed by hand at least once)."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT c.relname, c.reltuples, s.last_vacuum IS NOT NULL FROM pg_stat_user_tables s"
            " JOIN pg_class c ON c.oid = s.relid WHERE s.schemaname = $1",
            schema,
        )
        return {r[0]: (r[1], r[2]) for r in rows}
    finally:
        await conn.close()


async def test_maintain__analyzes_a_bulk_intake_and_vacuums_churn_autovacuum_leaves(
    dsn: str, clock: FakeClock
) -> None:
    # a store in its own schema (its own counters); autovacuum off for its requests, whatever
    # the server's setting: then only the store's upkeep removes their dead rows
    schema = f"upkeep_{secrets.token_hex(3)}"

    def store() -> PostgresFrontier:
        return PostgresFrontier(dsn, clock=clock, schema=schema, max_size=1)

    async with store() as a:
        await a.submit_job(JobSpec("j", "s.py", default_limits=DomainLimits(10_000, 0.0)))
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f'ALTER TABLE "{schema}".requests SET (autovacuum_enabled = false)')
        finally:
            await conn.close()
        await a.enqueue("j", req_urls(3_000, domains=3))
        assert (await _table_stats(dsn, schema))["requests"][0] < 0  # never analyzed
        # at once, as submit does after its seeds: the server's counters lag, the store knows
        assert "analyze requests" in await a.maintain()
        assert await a.maintain() == []  # at most once per UPKEEP_EVERY seconds
    assert (await _table_stats(dsn, schema))["requests"] == (3_000, False)

    # a connection's counters reach pg_stat when it closes: a store per step from here
    async with store() as b:
        while leases := await b.lease("w", 500, TTL):
            await b.complete([Completion(x.ref, 200) for x in leases])
    async with store() as c:
        holder = await asyncpg.connect(dsn)  # another process of the fleet at its upkeep
        try:
            key = f"crawlfleet upkeep {schema}"
            await holder.execute("SELECT pg_advisory_lock(hashtext($1))", key)
            assert await c.maintain() == []
        finally:
            await holder.close()
    async with store() as d:
        # 6,000 dead row versions (a lease and a completion each), autovacuum off: vacuumed
        assert "vacuum requests" in await d.maintain()
    assert (await _table_stats(dsn, schema))["requests"][1]
