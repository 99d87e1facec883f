"""The frontier contract, written once and run against every backend (see tests/conftest.py)."""

from __future__ import annotations

import asyncio

import pytest
from tests.conftest import FakeClock

from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import (
    Completion,
    DeadReason,
    DomainLimits,
    Failure,
    JobSpec,
    JobState,
    NewRequest,
    QuarantineRow,
    RecordRow,
)
from crawlfleet.urls import canonicalize, fingerprint, host_of

TTL = 30.0


def req(url: str, priority: int = 0, **kw: object) -> NewRequest:
    canon = canonicalize(url)
    return NewRequest(canon, fingerprint(canon), host_of(canon), priority=priority, **kw)  # type: ignore[arg-type]


def urls(n: int, host: str = "a.test") -> list[NewRequest]:
    return [req(f"http://{host}/p/{i}") for i in range(n)]


WIDE = DomainLimits(100, 0.0)


async def job(f: Frontier, name: str = "j", limits: DomainLimits = WIDE, **kw: object) -> None:
    await f.submit_job(JobSpec(name=name, spider="s.py", default_limits=limits, **kw))  # type: ignore[arg-type]


async def test_enqueue__is_idempotent_on_the_fingerprint(frontier: Frontier) -> None:
    await job(frontier)
    assert await frontier.enqueue("j", urls(10)) == 10
    assert await frontier.enqueue("j", urls(12)) == 2
    same = [req("HTTP://A.test:80/p/1#frag")]
    assert await frontier.enqueue("j", same) == 0
    assert (await frontier.stats("j")).queued == 12


async def test_enqueue__same_url_in_two_jobs_is_two_requests(frontier: Frontier) -> None:
    await job(frontier, "j1")
    await job(frontier, "j2")
    assert await frontier.enqueue("j1", urls(3)) == 3
    assert await frontier.enqueue("j2", urls(3)) == 3


async def test_enqueue__concurrent_producers_of_one_url_give_one_request(
    frontier: Frontier,
) -> None:
    await job(frontier)
    variants = [
        "http://a.test/x?b=2&a=1",
        "http://A.TEST/x?a=1&b=2#f",
        "http://a.test:80/x?a=1&b=2",
    ]
    added = await asyncio.gather(*(frontier.enqueue("j", [req(v)]) for v in variants * 4))
    assert sum(added) == 1


async def test_lease__hands_each_request_to_one_holder(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(50))
    a = await frontier.lease("A", 30, TTL)
    b = await frontier.lease("B", 30, TTL)
    assert len(a) == 30 and len(b) == 20
    assert not {x.id for x in a} & {x.id for x in b}
    assert await frontier.lease("C", 10, TTL) == []
    assert all(x.attempts == 1 for x in a + b)


async def test_lease__honours_priority_within_a_domain(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/low", 0), req("http://a.test/high", 5)])
    first = await frontier.lease("A", 1, TTL)
    assert first[0].url == "http://a.test/high"


async def test_complete__with_current_token_is_accepted(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(1))
    (lease,) = await frontier.lease("A", 1, TTL)
    rec = RecordRow("k1", {"v": 1}, lease.url, 1.0, "f.warc.gz", "<urn:uuid:1>")
    assert await frontier.complete([Completion(lease.ref, 200, records=[rec])]) == {lease.id}
    stats = await frontier.stats("j")
    assert (stats.done, stats.records, stats.leased) == (1, 1, 0)
    assert await frontier.is_finished("j")


async def test_complete__by_a_holder_whose_lease_was_taken_over_is_refused(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(1))
    (old,) = await frontier.lease("A", 1, TTL)
    clock.advance(TTL + 1)  # A is paused past its lease
    (new,) = await frontier.lease("B", 1, TTL)
    assert new.id == old.id and new.token != old.token and new.attempts == 2
    zombie = Completion(old.ref, 200, records=[RecordRow("z", {"who": "A"}, old.url, 1.0)])
    assert await frontier.complete([zombie]) == set()
    assert await frontier.fail([Failure(old.ref, "late")]) == set()
    assert await frontier.heartbeat([old.ref], TTL) == set()
    assert await frontier.complete(
        [Completion(new.ref, 200, records=[RecordRow("b", {"who": "B"}, new.url, 1.0)])]
    ) == {new.id}
    records = [r async for r in frontier.iter_records("j")]
    assert [r.data for r in records] == [{"who": "B"}]


async def test_heartbeat__keeps_a_slow_fetch_from_being_re_leased(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(1))
    (lease,) = await frontier.lease("A", 1, TTL)
    for _ in range(5):
        clock.advance(TTL * 0.6)
        assert await frontier.heartbeat([lease.ref], TTL) == {lease.id}
        assert await frontier.lease("B", 1, TTL) == []
    assert await frontier.complete([Completion(lease.ref, 200)]) == {lease.id}


async def test_expired_lease__is_queued_again_with_its_attempt_counted(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(3))
    await frontier.lease("A", 3, TTL)
    clock.advance(TTL + 1)
    assert await frontier.rescue_expired() == 3
    stats = await frontier.stats("j")
    assert (stats.queued, stats.leased) == (3, 0)
    again = await frontier.lease("B", 3, TTL)
    assert sorted(x.attempts for x in again) == [2, 2, 2]


async def test_expired_lease__on_the_last_attempt_is_dead_worker_lost(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, max_attempts=2)
    await frontier.enqueue("j", urls(1))
    for _ in range(2):
        assert len(await frontier.lease("A", 1, TTL)) == 1
        clock.advance(TTL + 1)
    assert await frontier.lease("A", 1, TTL) == []
    (dead,) = await frontier.dead_letters("j")
    assert dead.reason == DeadReason.WORKER_LOST and dead.attempts == 2
    assert await frontier.is_finished("j")


async def test_fail__retry_is_not_leased_before_its_time(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(1))
    (lease,) = await frontier.lease("A", 1, TTL)
    failure = Failure(lease.ref, "503 Service Unavailable", retry_at=clock.now + 60, status=503)
    assert await frontier.fail([failure]) == {lease.id}
    stats = await frontier.stats("j")
    assert (stats.queued, stats.waiting, stats.leased) == (0, 1, 0)
    assert not await frontier.is_finished("j"), "a request waiting for a retry is unfinished work"
    assert await frontier.lease("A", 1, TTL) == []
    clock.advance(61)
    (again,) = await frontier.lease("A", 1, TTL)
    assert again.attempts == 2


async def test_fail__dead_is_listed_shown_and_replayable(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(2))
    a, b = await frontier.lease("A", 2, TTL)
    await frontier.fail(
        [
            Failure(
                a.ref,
                "404 Not Found",
                dead_reason=DeadReason.HTTP_4XX,
                status=404,
                outcome="permanent_error",
            ),
            Failure(b.ref, "robots.txt disallows", dead_reason=DeadReason.ROBOTS, outcome="robots"),
        ]
    )
    assert {d.reason for d in await frontier.dead_letters("j")} == {
        DeadReason.HTTP_4XX,
        DeadReason.ROBOTS,
    }
    (only,) = await frontier.dead_letters("j", DeadReason.HTTP_4XX)
    shown = await frontier.dead_letter(only.id)
    assert shown is not None and shown.url == a.url
    assert [(h.n, h.status, h.outcome) for h in shown.history] == [(1, 404, "permanent_error")]
    assert (await frontier.stats("j")).dead == 2
    assert await frontier.replay_dead(reason=DeadReason.HTTP_4XX) == 1
    (again,) = await frontier.lease("A", 5, TTL)
    assert again.url == a.url and again.attempts == 1


async def test_release__returns_work_without_counting_an_attempt(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(2))
    leases = await frontier.lease("A", 2, TTL)
    assert await frontier.release([x.ref for x in leases]) == {x.id for x in leases}
    again = await frontier.lease("B", 2, TTL)
    assert [x.attempts for x in again] == [1, 1]


async def test_lease__respects_the_domain_in_flight_limit_across_holders(
    frontier: Frontier,
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=2))
    await frontier.enqueue("j", urls(10))
    a = await frontier.lease("A", 10, TTL)
    assert len(a) == 2
    assert await frontier.lease("B", 10, TTL) == []
    await frontier.complete([Completion(a[0].ref, 200)])
    assert len(await frontier.lease("B", 10, TTL)) == 1


async def test_lease__expired_leases_free_their_domain_slots(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=1))
    await frontier.enqueue("j", urls(2))
    assert len(await frontier.lease("A", 5, TTL)) == 1  # A dies holding it
    clock.advance(TTL + 1)
    assert len(await frontier.lease("B", 5, TTL)) == 1, "recovery must not deadlock on the limit"


async def test_lease__paces_a_rate_limited_domain(frontier: Frontier, clock: FakeClock) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=100, min_delay=0.5))
    await frontier.enqueue("j", urls(20))
    first = await frontier.lease("A", 20, TTL)
    starts = [x.start_at - clock.now for x in first]
    assert starts == pytest.approx([0.5 * i for i in range(len(first))])
    assert 1 <= len(first) <= 5
    second = await frontier.lease("B", 20, TTL)
    if second:
        assert min(x.start_at for x in second) >= max(x.start_at for x in first) + 0.5 - 1e-9
    clock.advance(10)
    later = await frontier.lease("B", 20, TTL)
    assert later and min(x.start_at for x in later) >= clock.now


async def test_lease__one_big_domain_does_not_starve_small_ones(frontier: Frontier) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=8))
    await frontier.enqueue("j", urls(1000, "big.test"))
    for i in range(10):
        await frontier.enqueue("j", urls(5, f"small{i}.test"))
    leased = await frontier.lease("A", 60, TTL)
    domains = {x.domain for x in leased}
    assert len(domains) == 11
    assert sum(x.domain == "big.test" for x in leased) <= 8


async def test_lease__skips_paused_jobs_until_resumed(frontier: Frontier) -> None:
    await job(frontier, "run")
    await job(frontier, "hold")
    await frontier.enqueue("run", urls(2, "r.test"))
    await frontier.enqueue("hold", urls(2, "h.test"))
    await frontier.set_job_state("hold", JobState.PAUSED)
    assert {x.job for x in await frontier.lease("A", 10, TTL)} == {"run"}
    await frontier.set_job_state("hold", JobState.RUNNING)
    assert {x.job for x in await frontier.lease("A", 10, TTL)} == {"hold"}


async def test_lease__only_for_the_jobs_named(frontier: Frontier) -> None:
    await job(frontier, "one")
    await job(frontier, "two")
    await frontier.enqueue("one", urls(2, "one.test"))
    await frontier.enqueue("two", urls(2, "two.test"))
    assert {x.job for x in await frontier.lease("A", 10, TTL, jobs=["two"])} == {"two"}


async def test_complete__writes_records_quarantine_and_links_in_one_step(
    frontier: Frontier,
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(1))
    (lease,) = await frontier.lease("A", 1, TTL)
    done = Completion(
        lease.ref,
        200,
        records=[
            RecordRow(
                "sku-1", {"sku": "sku-1", "price": 2.5}, lease.url, 5.0, "a.warc.gz", "<urn:uuid:x>"
            )
        ],
        quarantined=[
            QuarantineRow({"sku": "sku-2"}, [{"loc": ["price"], "msg": "missing"}], lease.url, 5.0)
        ],
        discovered=[req("http://a.test/new/1"), req("http://a.test/new/2"), req(lease.url)],
        content_hash=b"h" * 16,
    )
    assert await frontier.complete([done]) == {lease.id}
    stats = await frontier.stats("j")
    assert (stats.records, stats.quarantined, stats.queued, stats.done) == (1, 1, 2, 1)
    (rec,) = [r async for r in frontier.iter_records("j")]
    assert (rec.key, rec.data["price"], rec.warc_record_id) == ("sku-1", 2.5, "<urn:uuid:x>")
    (q,) = [r async for r in frontier.iter_quarantine("j")]
    assert q.errors[0]["msg"] == "missing"


async def test_records__a_refetch_updates_never_duplicates(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(2))
    a, b = await frontier.lease("A", 2, TTL)
    await frontier.complete(
        [Completion(a.ref, 200, records=[RecordRow("k", {"v": 1}, a.url, 1.0)])]
    )
    await frontier.complete(
        [Completion(b.ref, 200, records=[RecordRow("k", {"v": 2}, b.url, 2.0)])]
    )
    assert [r.data for r in [r async for r in frontier.iter_records("j")]] == [{"v": 2}]


async def test_stats__count_retries_and_age(frontier: Frontier, clock: FakeClock) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(3))
    clock.advance(7)
    leases = await frontier.lease("A", 3, TTL)
    await frontier.fail([Failure(leases[0].ref, "timeout", retry_at=clock.now)])
    stats = await frontier.stats("j")
    assert stats.queued == 1 and stats.oldest_queued_age == pytest.approx(7)
    (again,) = await frontier.lease("A", 3, TTL)
    await frontier.complete([Completion(again.ref, 200)])
    stats = await frontier.stats("j")
    assert (stats.retried, stats.retry_depth_sum, stats.done, stats.leased) == (1, 1, 1, 2)


async def test_set_domain_limits__changes_an_existing_domain(frontier: Frontier) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=1))
    await frontier.enqueue("j", urls(5))
    await frontier.set_domain_limits("a.test", DomainLimits(max_in_flight=3))
    assert len(await frontier.lease("A", 10, TTL)) == 3


async def test_lease__active_workers_share_a_domains_slots(frontier: Frontier) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=10))
    await frontier.enqueue("j", urls(40))
    first = await frontier.lease("A", 10, TTL)
    assert len(first) == 10, "a worker alone may take every slot"
    assert await frontier.lease("B", 10, TTL) == []  # B is now seen, but no slot is free
    await frontier.complete([Completion(x.ref, 200) for x in first[:5]])
    assert await frontier.lease("A", 10, TTL) == [], "A already holds its half"
    assert len(await frontier.lease("B", 10, TTL)) == 5


async def test_lease__every_column_of_a_request_comes_back_as_enqueued(frontier: Frontier) -> None:
    # the batch travels as one parameter (PostgreSQL: a JSON array): bytes that are not UTF-8,
    # text beyond ASCII and JSON's own escapes come back byte for byte
    await job(frontier)
    body = bytes(range(256))
    meta = {"name": 'Zoë ☕ "quoted" \\ back\\slash', "n": [1, 2.5, None], "nested": {"a": True}}
    headers = {"X-Note": "naïve ☃", "Cookie": "a=b; c=d"}
    canon = canonicalize("http://a.test/p/é?q=ü")
    full = NewRequest(
        canon,
        fingerprint(canon, "PUT", body),
        "a.test",
        priority=7,
        depth=3,
        callback="parse_item",
        meta=meta,
        method="PUT",
        body=body,
        fetcher="browser",
        max_attempts=9,
        headers=headers,
    )
    assert await frontier.enqueue("j", [full]) == 1
    (lease,) = await frontier.lease("A", 10, TTL, kinds=("http", "browser"))
    got = (lease.url, lease.priority, lease.depth, lease.callback, dict(lease.meta), lease.method)
    assert got == (canon, 7, 3, "parse_item", meta, "PUT")
    assert (lease.body, lease.fetcher, lease.max_attempts, lease.headers) == (
        body,
        "browser",
        9,
        headers,
    )


# paced: a delay under the store's lease horizon (0.2 s), so both come in one lease
@pytest.mark.parametrize("delay", [0.0, 0.1], ids=["unpaced", "paced"])
async def test_lease__a_request_comes_back_with_its_method_body_and_headers(
    frontier: Frontier, delay: float
) -> None:
    await job(frontier, limits=DomainLimits(100, delay))
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept-Encoding": "gzip"}
    canon = canonicalize("http://a.test/login")
    form = NewRequest(
        canon,
        fingerprint(canon, "POST", b"user=ann&csrf=t0k3n"),
        "a.test",
        method="POST",
        body=b"user=ann&csrf=t0k3n",
        headers=headers,
        meta={"cookiejar": "s1"},
    )
    assert await frontier.enqueue("j", [form, req("http://a.test/plain")]) == 2
    leases = await frontier.lease("A", 10, TTL)  # paced: the second one a slot later
    assert len(leases) == 2
    by_url = {lease.url: lease for lease in leases}
    login = by_url[canon]
    assert (login.method, login.body, login.headers) == ("POST", b"user=ann&csrf=t0k3n", headers)
    assert login.meta == {"cookiejar": "s1"}
    assert "ann" not in repr(login) and "gzip" not in repr(login)
    plain = by_url[canonicalize("http://a.test/plain")]
    assert (plain.method, plain.body, plain.headers) == ("GET", None, None)
