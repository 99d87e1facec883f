"""Records no store can take as they are, every backend: one bad record is quarantined with its
reason, the rest of the batch is written and every page is completed."""

from __future__ import annotations

from typing import Any

from tests.contract.test_frontier import TTL, job, urls

from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import Completion, QuarantineRow, RecordRow


def rec(key: Any, **data: Any) -> RecordRow:
    return RecordRow(key, data, "http://a.test/", 1.0)


async def test_complete__unstorable_records_are_quarantined_alone_and_every_page_done(
    frontier: Frontier,
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(4))
    leases = await frontier.lease("A", 4, TTL)
    assert len(leases) == 4
    bad = {
        "surrogate": rec("s", name="caf\udce9"),  # a header byte 0xE9 read with surrogateescape
        "nan": rec("n", price=float("nan")),
        "nul": rec("z", name="a\x00b"),
        "key": rec("caf\udce9", name="x"),
    }
    done = [
        Completion(leases[0].ref, 200, records=[rec("good-1", name="one"), bad["surrogate"]]),
        Completion(leases[1].ref, 200, records=[bad["nan"], rec("good-2", name="two")]),
        Completion(leases[2].ref, 200, records=[bad["nul"], bad["key"]]),
        Completion(
            leases[3].ref,
            200,
            records=[rec("good-3", name="three")],
            quarantined=[QuarantineRow({"x": "caf\udce9", "y": float("inf")}, [], "u", 1.0)],
        ),
    ]
    settled = await frontier.report("A", done)
    assert settled.completed == {lease.id for lease in leases}
    stored = {r.key: dict(r.data) async for r in frontier.iter_records("j")}
    assert stored == {
        "good-1": {"name": "one"},
        "good-2": {"name": "two"},
        "good-3": {"name": "three"},
    }
    quarantine = [q async for q in frontier.iter_quarantine("j")]
    reasons = sorted(q.errors[0]["msg"].split(":")[0] for q in quarantine if q.errors)
    assert reasons == ["lone_surrogate", "non_finite_number", "nul_character", "unstorable_text"]
    assert all(q.errors[0]["type"] == "store_refused" for q in quarantine if q.errors)
    repaired = next(q for q in quarantine if not q.errors)
    assert repaired.data == {"x": "caf\ufffd", "y": None}, "a quarantine row is always written"
    assert (await frontier.stats("j")).done == 4


async def test_complete__a_row_the_database_refuses_is_quarantined_and_the_batch_goes_in(
    frontier: Frontier,
) -> None:
    # a key no column takes (an integer past 64 bits): refused by the database driver itself,
    # past every check made before the write
    await job(frontier)
    await frontier.enqueue("j", urls(2))
    a, b = await frontier.lease("A", 2, TTL)
    done = [
        Completion(a.ref, 200, records=[rec(2**70, name="huge key"), rec("ok-a", name="a")]),
        Completion(b.ref, 200, records=[rec("ok-b", name="b")]),
    ]
    settled = await frontier.report("A", done)
    assert settled.completed == {a.id, b.id}
    assert {r.key async for r in frontier.iter_records("j")} == {"ok-a", "ok-b"}
    (refused,) = [q async for q in frontier.iter_quarantine("j")]
    assert refused.data == {"name": "huge key"}
    assert refused.errors[0]["type"] == "store_refused"
