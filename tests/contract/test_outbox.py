"""The outbox and the run profiles, on every backend: events written once by key, deliveries
leased one holder at a time (fenced, taken over when their holder dies, dead after their
tries, replayable), profiles checked by one process at a time and made final once with their
events, the store's field counts equal to the profile's definition, and the records sinks'
progress moved once per batch."""

from __future__ import annotations

import asyncio

import pytest
from tests.conftest import FakeClock
from tests.contract.test_frontier import TTL, job, urls

from crawlfleet.data.profile import field_stats
from crawlfleet.frontier.outbox import DeliveryResult, OutboxEvent
from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import Completion, QuarantineRow, RecordRow


def event(key: str, *dests: str, tries: int = 3) -> OutboxEvent:
    return OutboxEvent(key, "alert", f'{{"k":"{key}"}}', dests or ("a", "b"), "j", 1, tries)


async def test_emit__writes_each_event_once_with_a_delivery_per_destination(
    frontier: Frontier,
) -> None:
    assert await frontier.emit([event("e1"), event("e2", "a")]) == 2
    assert await frontier.emit([event("e1"), event("e3", "b")]) == 1
    counts = {c.destination: c.queued for c in await frontier.outbox_counts()}
    assert counts == {"a": 2, "b": 2}
    rows = await frontier.outbox_events()
    assert [(e.key, e.body) for e in rows] == [
        ("e3", '{"k":"e3"}'),
        ("e2", '{"k":"e2"}'),
        ("e1", '{"k":"e1"}'),
    ]


async def test_lease__one_holder_at_a_time_only_known_destinations(
    frontier: Frontier, clock: FakeClock
) -> None:
    await frontier.emit([event(f"e{i}") for i in range(5)])
    assert await frontier.lease_deliveries("w1", ["nowhere"], 10, TTL) == []
    first = await frontier.lease_deliveries("w1", ["a"], 3, TTL)
    second = await frontier.lease_deliveries("w2", ["a"], 10, TTL)
    assert len(first) == 3 and len(second) == 2
    assert not {d.id for d in first} & {d.id for d in second}
    assert [d.key for d in first + second] == [f"e{i}" for i in range(5)]
    assert all(d.destination == "a" and d.attempts == 1 and d.body for d in first)
    assert await frontier.lease_deliveries("w3", ["a"], 10, TTL) == []


async def test_lease__many_deliverers_at_once_share_without_overlap(frontier: Frontier) -> None:
    await frontier.emit([event(f"e{i:03}", "a") for i in range(60)])
    got = await asyncio.gather(
        *(frontier.lease_deliveries(f"w{n}", ["a"], 7, TTL) for n in range(6))
    )
    ids = [d.id for batch in got for d in batch]
    assert len(ids) == len(set(ids)) == 42


async def test_settle__done_retry_and_fencing_of_a_holder_taken_over(
    frontier: Frontier, clock: FakeClock
) -> None:
    await frontier.emit([event("e1", "a"), event("e2", "a")])
    d1, d2 = await frontier.lease_deliveries("w1", ["a"], 10, TTL)
    ok = DeliveryResult(d1.id, d1.token, ok=True, status=200)
    later = DeliveryResult(
        d2.id, d2.token, ok=False, retry_at=clock.now + 30, status=503, error="HTTP 503"
    )
    assert await frontier.settle_deliveries([ok, later]) == {d1.id, d2.id}
    assert await frontier.lease_deliveries("w1", ["a"], 10, TTL) == []  # e2 waits its retry
    (count,) = await frontier.outbox_counts()
    assert (count.queued, count.done, count.last_error) == (1, 1, "HTTP 503")
    assert count.oldest_queued_at == clock.now
    clock.advance(31)
    (again,) = await frontier.lease_deliveries("w2", ["a"], 10, TTL)
    assert (again.key, again.attempts) == ("e2", 2)

    # w2 dies: its lease expires and w3 takes the delivery over; w2's late answer is refused
    clock.advance(TTL + 1)
    (taken,) = await frontier.lease_deliveries("w3", ["a"], 10, TTL)
    assert (taken.id, taken.attempts) == (again.id, 3)
    assert taken.token != again.token
    assert (
        await frontier.settle_deliveries([DeliveryResult(again.id, again.token, ok=True)]) == set()
    )
    assert await frontier.settle_deliveries([DeliveryResult(taken.id, taken.token, ok=True)]) == {
        taken.id
    }
    (count,) = await frontier.outbox_counts()
    assert (count.queued, count.leased, count.done, count.dead) == (0, 0, 2, 0)
    assert count.last_error is None  # delivered: nothing to tell


async def test_dead_after_its_tries_also_when_holders_keep_dying_and_replay(
    frontier: Frontier, clock: FakeClock
) -> None:
    await frontier.emit([event("e1", "a", tries=2), event("e2", "a", tries=2)])
    d1, _d2 = await frontier.lease_deliveries("w", ["a"], 10, TTL)
    await frontier.settle_deliveries(
        [DeliveryResult(d1.id, d1.token, ok=False, retry_at=None, status=500, error="HTTP 500")]
    )
    clock.advance(TTL + 1)  # d2's holder died: its second and last try ...
    (d2b,) = await frontier.lease_deliveries("w", ["a"], 10, TTL)
    assert d2b.attempts == 2
    clock.advance(TTL + 1)  # ... died too: dead, not leased a third time
    assert await frontier.lease_deliveries("w", ["a"], 10, TTL) == []
    dead = await frontier.dead_deliveries()
    assert sorted((d.key, d.attempts) for d in dead) == [("e1", 1), ("e2", 2)]
    assert any("died" in (d.error or "") for d in dead)
    (count,) = await frontier.outbox_counts()
    assert count.dead == 2

    assert await frontier.replay_deliveries(ids=[d1.id]) == 1
    (again,) = await frontier.lease_deliveries("w", ["a"], 10, TTL)
    assert (again.key, again.attempts) == ("e1", 1)
    assert await frontier.replay_deliveries("a") == 1


async def test_prune__forgets_old_deliveries_and_their_events(
    frontier: Frontier, clock: FakeClock
) -> None:
    await frontier.emit([event("old", "a"), event("busy", "a", "b")])
    leased = await frontier.lease_deliveries("w", ["a"], 10, TTL)
    await frontier.settle_deliveries([DeliveryResult(d.id, d.token, ok=True) for d in leased])
    clock.advance(100)
    await frontier.emit([event("new", "a")])
    assert await frontier.prune_outbox(clock.now - 50) == 2
    # "busy" still has a delivery waiting for b: the event stays
    assert [e.key for e in await frontier.outbox_events()] == ["new", "busy"]


# -- run profiles ---------------------------------------------------------------------------


async def test_claim_check__one_process_per_interval_never_after_final(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    got = await asyncio.gather(*(frontier.claim_check("j", 1, 60.0) for _ in range(5)))
    assert sorted(got) == [False, False, False, False, True]
    clock.advance(30)
    assert not await frontier.claim_check("j", 1, 60.0)
    clock.advance(31)
    assert await frontier.claim_check("j", 1, 60.0)
    assert await frontier.save_profile("j", 1, '{"n":1}')
    assert await frontier.save_profile("j", 1, '{"n":2}', final=True)
    clock.advance(100)
    assert not await frontier.claim_check("j", 1, 60.0)
    assert not await frontier.save_profile("j", 1, '{"n":3}')
    (row,) = await frontier.profiles("j")
    assert (row.run, row.profile, row.final) == (1, '{"n":2}', True)


async def test_save_profile__final_once_with_its_events(frontier: Frontier) -> None:
    await job(frontier)
    results = await asyncio.gather(
        *(
            frontier.save_profile(
                "j", 1, f'{{"by":{n}}}', final=True, events=[event(f"run-finished-{n}", "a")]
            )
            for n in range(4)
        )
    )
    assert sorted(results) == [False, False, False, True]
    winner = results.index(True)
    assert [e.key for e in await frontier.outbox_events()] == [f"run-finished-{winner}"]
    assert (await frontier.profiles("j"))[0].profile == f'{{"by":{winner}}}'
    # a check's events go with its profile too
    assert await frontier.save_profile("j", 2, "{}", events=[event("x", "a")]) is False
    await frontier.claim_check("j", 2, 1.0)
    assert await frontier.save_profile("j", 2, "{}", events=[event("x", "a")])
    assert [p.run for p in await frontier.profiles("j")] == [2, 1]


RECORDS = [
    {"sku": "a", "price": 3, "rating": None, "tags": ["x"], "note": "  "},
    {"sku": "b", "price": 1.5, "rating": "", "tags": [], "note": "\t\n"},
    {"sku": "c", "price": 2, "rating": 4.5, "meta": {}},
    {"sku": "d", "price": "n/a", "rating": 4.5, "meta": {"a": 1}, "on": False},
    {"sku": "e", "price": 7, "rating": "5 stars", "tags": ["y", "z"], "note": "hi"},
    {"sku": "f", "price": -1e3, "big": 12345678901, "sku2": "a", "on": True},
]


async def test_profile_counts__the_stores_sql_is_the_profiles_definition(
    frontier: Frontier,
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(1))
    (lease,) = await frontier.lease("w", 1, TTL)
    rows = [
        RecordRow(r["sku"], r, f"http://a.test/{r['sku']}", 1.0, "f.warc", f"<urn:{r['sku']}>")
        for r in RECORDS
    ]
    quarantined = [
        QuarantineRow(
            {"sku": 1}, [{"type": "string_type", "loc": ["sku"]}], "http://a.test/q", 1.0
        ),
        QuarantineRow({}, [{"type": "missing", "loc": ["sku"]}], "http://a.test/q", 1.0),
        QuarantineRow({}, [{"type": "missing", "loc": ["price"]}], "http://a.test/q", 1.0),
    ]
    await frontier.complete([Completion(lease.ref, 200, records=rows, quarantined=quarantined)])
    records, quar, reasons, stats = await frontier.profile_counts("j", 1)
    assert (records, quar) == (6, 3)
    assert reasons == {"string_type": 1, "missing": 2}
    expected = field_stats(RECORDS)
    assert set(stats) == set(expected)
    for name in expected:
        assert stats[name] == pytest.approx(expected[name]) or stats[name] == expected[name], name

    missing = await frontier.records_missing("j", 1, "rating", limit=10)
    assert [r.key for r in missing] == ["a", "b", "f"]
    assert missing[0].url == "http://a.test/a" and missing[0].warc_record_id == "<urn:a>"
    assert [r.key for r in await frontier.records_missing("j", 1, "note")] == [
        "a",
        "b",
        "c",
        "d",
        "f",
    ]
    assert [r.key for r in await frontier.records_missing("j", 1, "sku", limit=2)] == []
    assert [r.key for r in await frontier.records_missing("j", 1, "tags", 2)] == ["b", "c"]


async def test_profile_median_of_an_even_and_an_odd_count(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(2))
    for values in ([4, 1, 3, 2], [10]):
        (lease,) = await frontier.lease("w", 1, TTL)
        rows = [
            RecordRow(f"k{v}", {"n": v, "m": v if values[0] == 10 else None}, "http://a.test/", 1.0)
            for v in values
        ]
        await frontier.complete([Completion(lease.ref, 200, records=rows)])
    _, _, _, stats = await frontier.profile_counts("j", 1)
    assert (stats["n"].minimum, stats["n"].median, stats["n"].maximum) == (1.0, 3.0, 10.0)
    assert (stats["m"].numbers, stats["m"].median) == (1, 10.0)


async def test_advance_sink__each_batch_once(frontier: Frontier) -> None:
    await job(frontier)
    assert await frontier.sink_state("j", 1, "s") == ("", 0, False)
    batch = OutboxEvent("changes:j:1:s:1", "changes", "{}", ("s",), "j", 1)
    got = await asyncio.gather(
        *(
            frontier.advance_sink("j", 1, "s", batches=0, after="k9", done=False, event=batch)
            for _ in range(3)
        )
    )
    assert sorted(got) == [False, False, True]
    assert await frontier.sink_state("j", 1, "s") == ("k9", 1, False)
    assert not await frontier.advance_sink("j", 1, "s", batches=0, after="k1", done=True)
    assert await frontier.advance_sink("j", 1, "s", batches=1, after="k9", done=True)
    assert await frontier.sink_state("j", 1, "s") == ("k9", 1, True)
    assert not await frontier.advance_sink("j", 1, "s", batches=1, after="k9", done=True)
    assert [e.key for e in await frontier.outbox_events(kind="changes")] == ["changes:j:1:s:1"]
