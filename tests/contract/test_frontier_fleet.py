"""The fleet's picture as the store gives it, on every backend: workers' reports, the backlog per
job and domain, lanes and routes with their health, counts of failed attempts and tier moves,
quarantined records by id (what ``serve`` and ``status`` read)."""

from __future__ import annotations

import json

from tests.conftest import FakeClock
from tests.contract.test_frontier import TTL, job, urls
from tests.contract.test_frontier_lanes import ROUTES, _failure

from crawlfleet.frontier.ports import Frontier, WorkerStats
from crawlfleet.model import Completion, DomainLimits, Failure, QuarantineRow, RoutePlan


async def test_worker_stats__one_row_per_process_updated_in_place(
    frontier: Frontier, clock: FakeClock
) -> None:
    first = WorkerStats("w1", 100.0, "http", "box", 11, clock(), '{"a":1}', '{"g":2}')
    await frontier.save_worker_stats(first)
    clock.advance(5)
    again = WorkerStats("w1", 100.0, "http,browser", "box", 11, clock(), '{"a":7}', "{}")
    await frontier.save_worker_stats(again)
    restarted = WorkerStats("w1", 200.0, "http", "box", 12, clock(), '{"a":1}', "{}")
    await frontier.save_worker_stats(restarted)
    rows = await frontier.worker_stats()
    assert rows == [again, restarted], "a restart of the same id keeps the old row"
    assert await frontier.worker_stats(since=clock() + 1) == []
    assert await frontier.worker_stats(since=clock()) == [again, restarted]


async def test_queue_by_domain__backlog_waiting_leased_and_oldest_ready_per_job_and_domain(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, "j1")
    await job(frontier, "j2")
    first_at = clock()
    await frontier.enqueue("j1", urls(4, "a.test"))
    clock.advance(10)
    await frontier.enqueue("j1", urls(2, "b.test"))
    await frontier.enqueue("j2", urls(3, "a.test"))
    assert await frontier.queue_by_domain() is not None
    leased = await frontier.lease("A", 1, TTL, jobs=["j2"])
    (lease,) = leased
    await frontier.fail([Failure(lease.ref, "503", retry_at=clock() + 60)])
    two = await frontier.lease("A", 2, TTL, jobs=["j1"])
    assert {x.domain for x in two} <= {"a.test", "b.test"}
    clock.advance(5)
    rows = {(q.job, q.domain): q for q in await frontier.queue_by_domain()}
    assert set(rows) == {("j1", "a.test"), ("j1", "b.test"), ("j2", "a.test")}
    j1a, j1b, j2a = rows["j1", "a.test"], rows["j1", "b.test"], rows["j2", "a.test"]
    assert j1a.ready + j1a.leased + j1b.ready + j1b.leased == 6
    assert j1a.leased + j1b.leased == 2
    assert (j2a.ready, j2a.waiting, j2a.leased) == (2, 1, 0)
    assert j2a.oldest_ready_at == first_at + 10
    if j1a.ready:
        assert j1a.oldest_ready_at == first_at
    # finished requests are not backlog
    await frontier.complete([Completion(x.ref, 200) for x in two])
    rest = await frontier.lease("A", 100, TTL, jobs=["j1"])
    await frontier.complete([Completion(x.ref, 200) for x in rest])
    assert {(q.job, q.domain) for q in await frontier.queue_by_domain()} == {("j2", "a.test")}


async def test_lanes_and_routes__pool_pacing_health_and_breakers(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=6), routes=ROUTES)
    await frontier.enqueue("j", urls(12))
    leases = await frontier.lease("A", 6, TTL)
    down = [x for x in leases if x.route == "dc/2"]
    refused = [
        _failure(x, clock, outcome="retryable_error", route_signal="refused", count_attempt=False)
        for x in down
    ]
    await frontier.fail(refused)  # type: ignore[arg-type]
    ok = [x for x in leases if x.route != "dc/2"]
    await frontier.complete([Completion(x.ref, 200, elapsed=0.05) for x in ok])
    lanes = {(lane.domain, lane.route): lane for lane in await frontier.lane_rows()}
    assert set(lanes) == {("a.test", f"dc/{n}") for n in range(3)}
    good = lanes["a.test", "dc/0"]
    assert (good.pool, good.in_flight, good.domain_max_in_flight) == ("dc", 0, 6)
    assert json.loads(good.health)["successes"] > 0
    assert json.loads(lanes["a.test", "dc/2"].health)["errors"] > 0
    assert len(await frontier.lane_rows(limit=2)) == 2
    routes = {r.id: r for r in await frontier.route_rows()}
    assert {"dc/0", "dc/1", "dc/2"} <= set(routes)
    assert routes["dc/2"].pool == "dc"
    assert json.loads(routes["dc/2"].breaker)["state"] == "open"
    assert routes["dc/2"].open_until > clock()
    assert routes["dc/0"].open_until == 0


async def test_fleet_counts__expired_leases_blocks_and_tier_moves(
    frontier: Frontier, clock: FakeClock
) -> None:
    routes = (RoutePlan("cheap/0", "cheap", tier=0), RoutePlan("dear/0", "dear", tier=1))
    await job(frontier, limits=DomainLimits(max_in_flight=20), routes=routes)
    await frontier.enqueue("j", urls(40))
    assert (await frontier.fleet_counts()).attempts_by_outcome == {}
    first = await frontier.lease("A", 12, TTL)
    await frontier.fail([_failure(x, clock, outcome="blocked", status=403) for x in first])  # type: ignore[misc]
    lost = await frontier.lease("B", 3, TTL)
    assert lost
    clock.advance(TTL + 1)
    await frontier.rescue_expired()
    counts = await frontier.fleet_counts()
    assert counts.attempts_by_outcome == {"blocked": 12, "lease_expired": len(lost)}
    assert (counts.tier_moves_up, counts.tier_moves_down) == (1, 0)
    assert (await frontier.stats("j")).blocked == 12


async def test_quarantine_items__newest_first_by_job_and_by_id(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, "j1")
    await job(frontier, "j2")
    await frontier.enqueue("j1", urls(2))
    await frontier.enqueue("j2", urls(1))
    bad = [{"loc": ["price"], "msg": "not a number"}]
    for name in ("j1", "j1", "j2"):
        (lease,) = await frontier.lease("A", 1, TTL, jobs=[name])
        row = QuarantineRow({"sku": lease.url}, bad, lease.url, clock(), "f.warc.gz", "<urn:x>")
        await frontier.complete([Completion(lease.ref, 200, quarantined=[row])])
    items = await frontier.quarantine_items()
    assert [i.job for i in items] == ["j2", "j1", "j1"]
    assert items[0].id > items[1].id > items[2].id
    assert [i.job for i in await frontier.quarantine_items("j1", limit=1)] == ["j1"]
    one = await frontier.quarantine_item(items[1].id)
    assert one is not None and one == items[1]
    assert one.row.errors == bad and one.row.warc_record_id == "<urn:x>"
    assert await frontier.quarantine_item(10_000) is None
