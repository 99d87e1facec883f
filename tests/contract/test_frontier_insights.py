"""The store methods the commands read and steer with, on every backend: following a job's
records as they are stored, a job's activity (lease holders, dead letters by reason, when it
last finished), removing a job for a fresh start, the schema version, and opening without
creating."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import FakeClock
from tests.contract.test_frontier import TTL, job, urls

from crawlfleet.errors import StoreError, UsageError
from crawlfleet.frontier import open_frontier
from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import Completion, DeadReason, Failure, RecordRow


def rec(key: str, **data: object) -> RecordRow:
    return RecordRow(key, {"key": key, **data}, f"http://a.test/{key}", 1.0)


async def complete_with(frontier: Frontier, records: list[RecordRow]) -> None:
    (lease,) = await frontier.lease("w", 1, TTL)
    assert await frontier.complete([Completion(lease.ref, 200, records=records)])


async def test_records_since__follows_records_in_update_order_and_sees_updates(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(3))
    await complete_with(frontier, [rec("b"), rec("a")])
    first = await frontier.records_since("j")
    assert [(t, r.key) for t, r in first] == [(clock.now, "a"), (clock.now, "b")]
    assert first[0][1].data == {"key": "a"}

    cursor = (first[-1][0], first[-1][1].key)
    assert await frontier.records_since("j", cursor) == []
    clock.advance(5)
    await complete_with(frontier, [rec("a", v=2), rec("c")])
    later = await frontier.records_since("j", cursor)
    assert [(r.key, r.data.get("v")) for _, r in later] == [("a", 2), ("c", None)]
    assert all(t == clock.now for t, _ in later)

    # paging: a limit, then from the last pair
    page = await frontier.records_since("j", (0.0, ""), limit=2)
    rest = await frontier.records_since("j", (page[-1][0], page[-1][1].key), limit=2)
    assert [r.key for _, r in page + rest] == ["b", "a", "c"]
    # a None key skips every record of that time: where a reader that saw nothing yet starts
    assert [r.key for _, r in await frontier.records_since("j", (later[0][0], None))] == []
    assert len(await frontier.records_since("j", (later[0][0] - 1, None))) == 2


async def test_job_activity__holders_dead_reasons_and_times(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(6))
    assert (await frontier.job_activity("j")).finished_at is None
    leases = await frontier.lease("A", 3, TTL)
    clock.advance(1)
    b_leases = await frontier.lease("B", 2, TTL)
    activity = await frontier.job_activity("j")
    assert [(h.worker, h.leases) for h in activity.holders] == [("A", 3), ("B", 2)]
    assert activity.holders[0].expires_at == pytest.approx(clock.now - 1 + TTL)
    assert activity.holders[1].expires_at == pytest.approx(clock.now + TTL)
    assert activity.records_updated_at is None

    clock.advance(1)
    await frontier.complete([Completion(leases[0].ref, 200, records=[rec("x")])])
    await frontier.fail(
        [
            Failure(leases[1].ref, "boom", dead_reason=DeadReason.PARSE_ERROR),
            Failure(leases[2].ref, "boom", dead_reason=DeadReason.PARSE_ERROR),
            Failure(b_leases[0].ref, "HTTP 403", dead_reason=DeadReason.HTTP_4XX),
        ]
    )
    activity = await frontier.job_activity("j")
    assert dict(activity.dead_by_reason) == {"parse_error": 2, "http_4xx": 1}
    assert activity.finished_at == pytest.approx(clock.now)
    assert activity.records_updated_at == pytest.approx(clock.now)
    assert [(h.worker, h.leases) for h in activity.holders] == [("B", 1)]
    with pytest.raises(StoreError, match="no job named 'nope'"):
        await frontier.job_activity("nope")


async def test_delete_job__removes_the_job_and_everything_of_it_and_refuses_while_leased(
    frontier: Frontier,
) -> None:
    await job(frontier, "gone")
    await job(frontier, "kept")
    await frontier.enqueue("gone", urls(4))
    await frontier.enqueue("kept", urls(2))
    (lease,) = await frontier.lease("w", 1, TTL, jobs=["gone"])
    with pytest.raises(StoreError, match="1 requests leased"):
        await frontier.delete_job("gone")
    await frontier.fail([Failure(lease.ref, "boom", dead_reason=DeadReason.PARSE_ERROR)])
    (lease,) = await frontier.lease("w", 1, TTL, jobs=["gone"])
    await frontier.complete([Completion(lease.ref, 200, records=[rec("r")])])
    await frontier.save_sessions("gone", [("direct", "s1", '{"id": "s1"}', False)])
    assert await frontier.load_sessions("gone", "direct") == ['{"id": "s1"}']

    assert await frontier.delete_job("gone") == 4
    assert await frontier.get_job("gone") is None
    assert [j.name for j in await frontier.list_jobs()] == ["kept"]
    assert await frontier.dead_letters("gone") == []
    assert await frontier.delete_job("gone") == 0
    # the same name starts from nothing; the other job is untouched
    await job(frontier, "gone")
    assert await frontier.enqueue("gone", urls(4)) == 4
    stats = await frontier.stats("gone")
    assert (stats.queued, stats.done, stats.dead, stats.records) == (4, 0, 0, 0)
    assert await frontier.load_sessions("gone", "direct") == []
    assert (await frontier.stats("kept")).queued == 2


async def test_upgrade__returns_the_schema_version_and_is_safe_to_repeat(
    frontier: Frontier,
) -> None:
    version = await frontier.upgrade()
    assert version >= 6
    assert await frontier.upgrade() == version


async def test_open_without_create__a_missing_sqlite_store_is_a_one_line_error(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere" / "queue.db"
    store = open_frontier(f"sqlite:///{missing}", create=False)
    with pytest.raises(UsageError, match=f"no queue store at {missing}"):
        await store.open()
    assert not missing.parent.exists(), "a read-only open created the store's directory"


async def test_open_without_create__a_missing_postgres_schema_is_a_one_line_error() -> None:
    from tests.conftest import PG_DSN

    store = open_frontier(f"{PG_DSN}?schema=never_created_here", create=False)
    with pytest.raises(UsageError, match=r"no queue store in .* schema never_created_here"):
        await store.open()
    import psycopg

    with psycopg.connect(PG_DSN) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = 'never_created_here'"
        ).fetchone()
    assert found is None, "a read-only open created the schema"
