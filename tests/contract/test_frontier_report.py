"""``report`` (complete + fail + lease in one transaction) and ``wait_for_work``, every backend.

These are what let a slot be used again as soon as its request is finished, and a link a page
discovers be fetched at once: no timer between the hops of a chain of pages.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from tests.conftest import FakeClock
from tests.contract.test_frontier import TTL, job, req, urls

from crawlfleet.frontier.common import fair_share
from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import Completion, DomainLimits, Failure
from crawlfleet.policy.classify import Outcome

ONE = DomainLimits(max_in_flight=1)


async def test_report__the_slot_a_page_frees_and_the_link_it_found_are_leased_at_once(
    frontier: Frontier,
) -> None:
    await job(frontier, limits=ONE)
    await frontier.enqueue("j", [req("http://a.test/1")])
    (first,) = await frontier.lease("A", 5, TTL)
    assert await frontier.lease("A", 5, TTL) == []  # the domain's one slot is taken
    done = Completion(first.ref, 200, discovered=[req("http://a.test/2", depth=1)])
    settled = await frontier.report("A", [done], lease=5, ttl=TTL)
    assert settled.completed == {first.id} and settled.failed == set()
    assert [x.url for x in settled.leases] == ["http://a.test/2"]
    assert settled.leases[0].depth == 1
    assert await frontier.lease("B", 5, TTL) == [], "the lane's one slot went to the report"


async def test_report__fails_and_completes_together_and_fences_each_item(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(4))
    (a,) = await frontier.lease("A", 1, TTL)
    clock.advance(TTL + 1)
    retaken = await frontier.lease("B", 1, TTL)  # A's lease of the first request expired
    assert [x.id for x in retaken] == [a.id]
    b, c = await frontier.lease("A", 2, TTL)
    settled = await frontier.report(
        "A",
        [Completion(a.ref, 200), Completion(b.ref, 200)],
        [Failure(c.ref, "HTTP 500", retry_at=clock() + 60, status=500, outcome="retryable_error")],
        lease=10,
        ttl=TTL,
    )
    assert settled.completed == {b.id}, "the lost lease was fenced, the live one accepted"
    assert settled.failed == {c.id}
    left = {r.url for r in urls(4)} - {a.url, b.url, c.url}
    assert [x.url for x in settled.leases] == sorted(left)
    stats = await frontier.stats("j")
    assert (stats.done, stats.waiting, stats.leased) == (1, 1, 2)


async def test_report__without_a_lease_asked_hands_out_none(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(3))
    (first,) = await frontier.lease("A", 1, TTL)
    settled = await frontier.report("A", [Completion(first.ref, 200)])
    assert (settled.completed, settled.leases) == ({first.id}, [])
    empty = await frontier.report("A")
    assert (empty.completed, empty.failed, empty.leases) == (set(), set(), [])


async def test_report__lease_only_for_the_jobs_named(frontier: Frontier) -> None:
    await job(frontier, "j")
    await job(frontier, "k")
    await frontier.enqueue("j", urls(2, "a.test"))
    await frontier.enqueue("k", urls(2, "b.test"))
    (first,) = await frontier.lease("A", 1, TTL, jobs=["j"])
    settled = await frontier.report("A", [Completion(first.ref, 200)], lease=5, jobs=["k"])
    assert {x.job for x in settled.leases} == {"k"}


async def _second_view(frontier: Frontier, clock: FakeClock) -> Frontier:
    """Another process's view of the same store (a second connection, as another worker has)."""
    from crawlfleet.frontier.postgres import PostgresFrontier
    from crawlfleet.frontier.sqlite import SQLiteFrontier

    if isinstance(frontier, SQLiteFrontier):
        other: Frontier = SQLiteFrontier(frontier.path, clock=clock)
    else:
        assert isinstance(frontier, PostgresFrontier)
        other = PostgresFrontier(frontier.dsn, clock=clock, max_size=2)
    await other.open()
    return other


async def test_wait_for_work__wakes_when_another_worker_adds_work(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    other = await _second_view(frontier, clock)
    try:
        assert await other.wait_for_work(0.05) is False  # nothing happened: times out
        started = time.monotonic()
        waiting = asyncio.ensure_future(other.wait_for_work(10))
        await asyncio.sleep(0.1)  # the waiter is listening/polling by now
        await frontier.enqueue("j", urls(1))
        assert await waiting is True
        assert time.monotonic() - started < 2.0, "the wake-up came late"
        (lease,) = await other.lease("B", 5, TTL)

        # a completion that frees a slot wakes a waiter too
        waiting = asyncio.ensure_future(frontier.wait_for_work(10))
        await asyncio.sleep(0.1)
        await other.report("B", [Completion(lease.ref, 200)])
        assert await waiting is True
    finally:
        await other.close()


async def test_wait_for_work__a_lease_alone_wakes_nobody(
    frontier: Frontier, clock: FakeClock
) -> None:
    """Idle workers that find nothing must not wake each other (a storm of empty leases)."""
    await job(frontier)
    other = await _second_view(frontier, clock)
    try:
        await other.wait_for_work(0.05)  # whatever came before is taken
        waiting = asyncio.ensure_future(other.wait_for_work(0.5))
        await asyncio.sleep(0.05)
        assert await frontier.lease("A", 5, TTL) == []
        assert await frontier.report("A", lease=5) is not None
        assert await waiting is False
    finally:
        await other.close()


async def test_report__a_retryable_failure_frees_its_slot_for_the_next_request(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=ONE)
    await frontier.enqueue("j", urls(2))
    (first,) = await frontier.lease("A", 5, TTL)
    failure = Failure(
        first.ref, "timeout", retry_at=clock() + 30, outcome=Outcome.RETRYABLE_ERROR.value
    )
    settled = await frontier.report("A", failed=[failure], lease=5, ttl=TTL)
    assert settled.failed == {first.id}
    assert [x.url for x in settled.leases] == [r.url for r in urls(2) if r.url != first.url]


@pytest.mark.parametrize(("limit", "sharers"), [(1, 2), (2, 3), (5, 2), (8, 3), (8, 1)])
async def test_fair_share__both_backends_hand_out_what_fair_share_says(
    frontier: Frontier, limit: int, sharers: int
) -> None:
    """The share rule is Python on SQLite and SQL on PostgreSQL: both must equal fair_share."""
    await job(frontier, "j", limits=DomainLimits(max_in_flight=limit))
    await job(frontier, "k")
    await frontier.enqueue("j", urls(20, "a.test"))
    await frontier.enqueue("k", urls(sharers, "b.test"))
    for n in range(1, sharers):  # other workers leasing lately (of another job)
        assert len(await frontier.lease(f"W{n}", 1, TTL, jobs=["k"])) == 1
    got = await frontier.lease("A", 100, TTL, jobs=["j"])
    assert len(got) == min(limit, fair_share(limit, sharers, 0))
    again = await frontier.lease("A", 100, TTL, jobs=["j"])
    assert len(again) == max(0, min(limit - len(got), fair_share(limit, sharers, len(got))))


async def test_lease__a_worker_gets_only_requests_of_its_fetcher_kinds(
    frontier: Frontier,
) -> None:
    await job(frontier)
    await frontier.enqueue(
        "j",
        [
            req("http://a.test/plain"),
            req("http://a.test/auto", fetcher="auto"),
            req("http://a.test/js", fetcher="browser"),
            req("http://a.test/default", fetcher="http"),
        ],
    )
    http = await frontier.lease("H", 10, TTL, kinds=["http"])
    assert sorted(x.url.rsplit("/", 1)[1] for x in http) == ["auto", "default", "plain"]
    settled = await frontier.report("H", [Completion(http[0].ref, 200)], lease=10, kinds=["http"])
    assert settled.leases == []
    browser = await frontier.lease("B", 10, TTL, kinds=["browser"])
    assert [x.url for x in browser] == ["http://a.test/js"]
    assert browser[0].fetcher == "browser"


async def test_lease__a_request_sent_up_the_ladder_goes_to_a_worker_of_its_rung(
    frontier: Frontier,
) -> None:
    await job(frontier)
    await frontier.enqueue(
        "j",
        [
            req("http://a.test/walled", fetcher="auto"),
            req("http://a.test/i", fetcher="impersonate"),
        ],
    )
    assert [x.url for x in await frontier.lease("I", 10, TTL, kinds=["impersonate"])] == [
        "http://a.test/i"
    ]
    (walled,) = await frontier.lease("H", 10, TTL, kinds=["http"])
    climbed = Failure(
        walled.ref, "blocked on http", retry_at=0.0, count_attempt=False,
        refetch_with="impersonate", page_type=("", "impersonate"),
    )  # fmt: skip
    await frontier.report("H", failed=[climbed])
    assert await frontier.lease("H", 10, TTL, kinds=["http", "browser"]) == []
    (again,) = await frontier.lease("I", 10, TTL, kinds=["impersonate"])
    assert (again.url, again.fetcher, again.attempts) == ("http://a.test/walled", "impersonate", 1)
    assert (await frontier.page_types("j"))[("a.test", "")] == "impersonate"


@pytest.mark.parametrize("verb", ["report", "fail"])
async def test_fail__the_links_a_page_sent_on_came_with_are_queued_at_once(
    frontier: Frontier, verb: str
) -> None:
    # an auto page sent to the browser (or waiting for its type's judgement there) carries the
    # links its raw body had: they are queued now, the page itself is fetched again
    await job(frontier, limits=ONE)
    await frontier.enqueue("j", [req("http://a.test/list")])
    (listing,) = await frontier.lease("H", 5, TTL)
    links = [req("http://a.test/p/1", depth=1), req("http://a.test/list", depth=1)]
    sent = Failure(
        listing.ref, "needs the browser", retry_at=0.0, count_attempt=False,
        refetch_with="browser", discovered=links, outcome=Outcome.OK, status=200, latency=0.01,
    )  # fmt: skip
    if verb == "report":
        settled = await frontier.report("H", failed=[sent], lease=5, ttl=TTL, kinds=["http"])
        assert settled.failed == {listing.id}
        # the slot the page freed goes to its link in the same transaction
        assert [(x.url, x.depth) for x in settled.leases] == [("http://a.test/p/1", 1)]
    else:
        assert await frontier.fail([sent]) == {listing.id}
        (product,) = await frontier.lease("H", 5, TTL, kinds=["http"])
        assert (product.url, product.depth) == ("http://a.test/p/1", 1)
    assert await frontier.lease("B", 5, TTL, kinds=["browser"]) == [], "the one slot is taken"
    stats = await frontier.stats("j")
    # the page waits for the browser; its own link was no second request
    assert (stats.queued + stats.waiting, stats.leased, stats.dead) == (1, 1, 0)


async def test_stats__final_answers_are_done_and_counted_gone(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(3))
    a, b, c = await frontier.lease("A", 3, TTL)
    await frontier.report(
        "A", [Completion(a.ref, 404), Completion(b.ref, 410), Completion(c.ref, 200)]
    )
    stats = await frontier.stats("j")
    assert (stats.done, stats.gone, stats.dead) == (3, 2, 0)
    assert await frontier.dead_letters("j") == []
