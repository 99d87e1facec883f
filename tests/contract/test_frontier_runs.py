"""Runs, validators, change status and schedules: the recurring-crawl contract, written once and
run against every backend (see tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.conftest import FakeClock

from crawlfleet.errors import StoreError
from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import (
    Completion,
    DomainLimits,
    Failure,
    JobSpec,
    Lease,
    NewRequest,
    QuarantineRow,
    RecordRow,
    RunKind,
    RunState,
    Schedule,
    Visit,
)
from crawlfleet.policy.revisit import PageVisit, is_due
from crawlfleet.urls import canonicalize, fingerprint, host_of

TTL = 30.0
WIDE = DomainLimits(100, 0.0)


def req(url: str, **kw: Any) -> NewRequest:
    canon = canonicalize(url)
    return NewRequest(canon, fingerprint(canon), host_of(canon), **kw)


async def job(f: Frontier, name: str = "j", **kw: Any) -> None:
    await f.submit_job(JobSpec(name=name, spider="s.py", default_limits=WIDE, **kw))


def rec(key: str, url: str, **data: Any) -> RecordRow:
    return RecordRow(key, {"key": key, **data}, url, 1.0)


async def lease_all(f: Frontier) -> dict[str, Lease]:
    leases = await f.lease("w", 1000, TTL)
    return {lease.url.rsplit("/", 1)[-1]: lease for lease in leases}


async def crawl(
    f: Frontier,
    pages: dict[str, list[RecordRow] | int],
    *,
    page: dict[str, Any] | None = None,
) -> dict[str, Lease]:
    """Lease every ready request and complete each with the records ``pages`` gives its last
    path segment (an int: that status, nothing else; missing: no records)."""
    leases = await lease_all(f)
    done = []
    for name, lease in leases.items():
        out = pages.get(name, [])
        if isinstance(out, int):
            if out == 304:
                done.append(
                    Completion(lease.ref, 304, carry=True, visit=Visit.NOT_MODIFIED, page=page)
                )
            else:
                done.append(Completion(lease.ref, out, visit=Visit.CHANGED))
        else:
            done.append(Completion(lease.ref, 200, records=out, page=page, nbytes=100))
    assert await f.complete(done) == {lease.id for lease in leases.values()}
    return leases


async def statuses(f: Frontier, job_name: str = "j") -> dict[str, str]:
    out = {}
    async for record, status, _ in f.iter_all_records(job_name):
        out[record.key] = status
    return out


async def changes(f: Frontier, since: int | None = None) -> dict[str, dict[str, Any] | None]:
    out = {}
    async for record, change in f.iter_changes("j", since):
        out[record.key] = change.columns()
    return out


async def test_a_job_starts_with_run_one_and_it_finishes_with_the_job(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    run = await frontier.current_run("j")
    assert run is not None and (run.run, run.kind, run.state) == (
        1,
        RunKind.FIRST,
        RunState.RUNNING,
    )
    await frontier.enqueue("j", [req("http://a.test/1"), req("http://a.test/2")])
    await crawl(frontier, {"1": [rec("a", "http://a.test/1")]})
    live = await frontier.current_run("j")
    assert live is not None and live.counters.pages == 2 and live.counters.records_new == 1
    assert await frontier.finish_runs() != []
    assert await frontier.finish_runs() == []  # a run ends once
    (first,) = await frontier.runs("j")
    assert first.state is RunState.FINISHED and first.finished_at == clock.now
    assert (first.counters.pages, first.counters.bytes, first.counters.records_new) == (2, 200, 1)


async def test_an_unfinished_run_does_not_end_and_a_recrawl_is_refused(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/1")])
    assert await frontier.finish_runs() == []
    with pytest.raises(StoreError, match="run 1 of job j is not finished"):
        await frontier.start_run("j")
    leases = await lease_all(frontier)
    with pytest.raises(StoreError, match="not finished"):  # leased: still going
        await frontier.start_run("j")
    await frontier.fail([Failure(leases["1"].ref, "boom", retry_at=2e6)])
    assert await frontier.finish_runs() == []  # a retry waiting is work left


async def test_a_recrawl_revisits_every_known_page_with_what_the_job_kept_of_it(
    frontier: Frontier,
) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/1"), req("http://a.test/2")])
    validators = {"etag": '"v1"', "last_modified": "Tue, 14 Nov 2023 22:13:20 GMT"}
    await crawl(frontier, {}, page=validators)
    run = await frontier.start_run("j")
    assert (run.run, run.kind, run.state) == (2, RunKind.RECRAWL, RunState.RUNNING)
    assert (await frontier.runs("j"))[1].state is RunState.FINISHED  # run 1 ended first
    leases = await lease_all(frontier)
    assert set(leases) == {"1", "2"}
    assert all(lease.page == validators for lease in leases.values())
    assert all(lease.attempts == 1 for lease in leases.values())  # attempts start afresh


async def test_a_304_carries_its_records_over_unchanged(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/1"), req("http://a.test/2")])
    await crawl(
        frontier,
        {"1": [rec("a", "http://a.test/1", price=1)], "2": [rec("b", "http://a.test/2", price=2)]},
    )
    await frontier.start_run("j")
    await crawl(frontier, {"1": 304, "2": [rec("b", "http://a.test/2", price=3)]})
    assert await statuses(frontier) == {"a": "unchanged", "b": "changed"}
    (run,) = await frontier.finish_runs()
    c = run.counters
    assert (c.pages, c.not_modified, c.records_unchanged, c.records_changed) == (2, 1, 1, 1)
    assert await statuses(frontier) == {"a": "unchanged", "b": "changed"}  # a 304 removes none


async def test_change_status_across_runs_and_removal(frontier: Frontier) -> None:
    await job(frontier, record_history=2)
    names = ["1", "2", "3", "4"]
    await frontier.enqueue("j", [req(f"http://a.test/{n}") for n in names])
    await crawl(
        frontier,
        {
            "1": [rec("a", "http://a.test/1", price=1)],
            "2": [rec("b", "http://a.test/2", price=2), rec("c", "http://a.test/2", price=3)],
            "3": [rec("d", "http://a.test/3", price=4)],
            "4": [rec("e", "http://a.test/4", price=5)],
        },
    )
    assert await statuses(frontier) == dict.fromkeys("abcde", "new")
    await frontier.start_run("j")
    await crawl(
        frontier,
        {
            "1": [rec("a", "http://a.test/1", price=1)],  # the same
            "2": [rec("b", "http://a.test/2", price=9)],  # b changed, c no longer yielded
            "3": 404,  # d's page gone
            "4": [rec("e", "http://a.test/4", price=5), rec("f", "http://a.test/4", price=6)],
        },
    )
    await frontier.finish_runs()
    assert await statuses(frontier) == {
        "a": "unchanged",
        "b": "changed",
        "c": "removed",
        "d": "removed",
        "e": "unchanged",
        "f": "new",
    }
    assert await changes(frontier) == {
        "b": {
            "key": "b",
            "price": 9,
            "_change": "changed",
            "_changed_fields": ["price"],
            "_previous": {"price": 2},
        },
        "c": {
            "key": "c",
            "price": 3,
            "_change": "removed",
            "_changed_fields": None,
            "_previous": None,
        },
        "d": {
            "key": "d",
            "price": 4,
            "_change": "removed",
            "_changed_fields": None,
            "_previous": None,
        },
        "f": {"key": "f", "price": 6, "_change": "new", "_changed_fields": None, "_previous": None},
    }
    (run,) = await frontier.runs("j", limit=1)
    c = run.counters
    assert (c.records_new, c.records_changed, c.records_unchanged, c.records_removed) == (
        1,
        1,
        2,
        2,
    )
    assert (c.pages, c.gone) == (4, 1)
    # plain reads show the current records; a removed one keeps its last values
    keys = [r.key async for r in frontier.iter_records("j")]
    assert keys == ["a", "b", "e", "f"]
    assert (await frontier.stats("j")).records == 4
    # run 3: c comes back (new again), b changes back to what it was before run 2
    await frontier.start_run("j")
    await crawl(
        frontier,
        {
            "1": [rec("a", "http://a.test/1", price=1)],
            "2": [rec("b", "http://a.test/2", price=2), rec("c", "http://a.test/2", price=3)],
            "4": [rec("e", "http://a.test/4", price=5), rec("f", "http://a.test/4", price=6)],
        },
    )
    await frontier.finish_runs()
    assert (await statuses(frontier))["c"] == "new"
    assert (await changes(frontier))["b"]["_previous"] == {"price": 9}  # type: ignore[index]
    # since run 2: b is what it was before run 2 (no change: the versions kept say so), c was
    # removed and came back (new again), d was removed, f is new
    assert set(await changes(frontier, since=2)) == {"c", "d", "f"}


async def test_a_record_written_twice_in_a_run_compares_with_the_last_run(
    frontier: Frontier,
) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/1"), req("http://a.test/2")])
    await crawl(frontier, {"1": [rec("a", "http://a.test/1", price=1)]})
    await frontier.start_run("j")
    leases = await lease_all(frontier)
    # the listing changes the price, the detail page puts it back: unchanged against run 1
    for name, price in (("1", 5), ("2", 1)):
        done = Completion(leases[name].ref, 200, records=[rec("a", leases[name].url, price=price)])
        await frontier.complete([done])
    assert await statuses(frontier) == {"a": "unchanged"}


async def test_record_history_keeps_older_versions_for_since(frontier: Frontier) -> None:
    await job(frontier, record_history=3)
    await frontier.enqueue("j", [req("http://a.test/1")])
    await crawl(frontier, {"1": [rec("a", "http://a.test/1", price=1)]})
    for price in (2, 3, 4):
        await frontier.start_run("j")
        await crawl(frontier, {"1": [rec("a", "http://a.test/1", price=price)]})
    await frontier.finish_runs()
    assert (await changes(frontier))["a"]["_previous"] == {"price": 3}  # type: ignore[index]
    assert (await changes(frontier, since=2))["a"]["_previous"] == {"price": 1}  # type: ignore[index]
    assert (await changes(frontier, since=3))["a"]["_previous"] == {"price": 2}  # type: ignore[index]


async def test_fresh_keeps_the_old_records_until_its_run_finished(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req(f"http://a.test/{n}") for n in range(1, 5)])
    await crawl(frontier, {str(n): [rec(f"k{n}", f"http://a.test/{n}", v=n)] for n in range(1, 5)})
    run = await frontier.start_run("j", RunKind.FRESH)
    assert (run.run, run.kind) == (2, RunKind.FRESH)
    assert (await frontier.stats("j")).done == 0  # the requests and their history went
    assert len([r async for r in frontier.iter_records("j")]) == 4  # the records did not
    await frontier.enqueue("j", [req("http://a.test/1"), req("http://a.test/2")])
    leases = await lease_all(frontier)
    await frontier.complete(
        [Completion(leases["1"].ref, 200, records=[rec("k1", leases["1"].url, v=10)])]
    )
    # stopped half way: every old record is still there, k1 already updated
    assert {r.key: r.data["v"] async for r in frontier.iter_records("j")} == {
        "k1": 10,
        "k2": 2,
        "k3": 3,
        "k4": 4,
    }
    await frontier.complete(
        [Completion(leases["2"].ref, 200, records=[rec("k2", leases["2"].url, v=2)])]
    )
    (ended,) = await frontier.finish_runs()
    assert ended.kind is RunKind.FRESH and ended.counters.records_new == 2
    assert await statuses(frontier) == {"k1": "new", "k2": "new"}  # replaced; history anew


async def test_fresh_refuses_while_leased_and_abandons_an_unfinished_run(
    frontier: Frontier,
) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/1"), req("http://a.test/2")])
    (held,) = await frontier.lease("w", 1, TTL)
    with pytest.raises(StoreError, match="leased"):
        await frontier.start_run("j", RunKind.FRESH)
    assert await frontier.release([held.ref])
    await frontier.start_run("j", RunKind.FRESH)
    old, new = (await frontier.runs("j"))[::-1]
    assert (old.state, new.state) == (RunState.ABANDONED, RunState.RUNNING)


async def test_quarantine_is_counted_per_run(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/1")])
    leases = await lease_all(frontier)
    bad = QuarantineRow({"x": 1}, [{"msg": "bad"}], leases["1"].url, 1.0)
    await frontier.complete([Completion(leases["1"].ref, 200, quarantined=[bad])])
    (run,) = await frontier.finish_runs()
    assert run.counters.quarantined == 1


async def test_adaptive_revisit_requeues_what_is_due_seeds_and_hubs(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/seed")])  # depth 0: a seed
    leases = await lease_all(frontier)
    seed = leases["seed"]
    found = [req(f"http://a.test/{n}", depth=1, found_by=seed.id) for n in ("due", "later", "hub")]
    await frontier.complete(
        [Completion(seed.ref, 200, discovered=found, revisit=3_600.0, visit=Visit.NEW)]
    )
    leases = await lease_all(frontier)
    hub_found = [req("http://a.test/new", depth=2, found_by=leases["hub"].id)]
    await frontier.complete(
        [
            Completion(leases["due"].ref, 200, revisit=60.0),
            Completion(leases["later"].ref, 200, revisit=86_400.0),
            Completion(leases["hub"].ref, 200, revisit=86_400.0, discovered=hub_found),
        ]
    )
    leases = await lease_all(frontier)
    await frontier.complete([Completion(leases["new"].ref, 200, revisit=86_400.0)])
    clock.advance(120.0)
    await frontier.start_run("j")
    # due: its interval passed; seed: always; hub: its links were new in run 1 (so was the
    # seed's); later and new: not yet
    assert set(await lease_all(frontier)) == {"seed", "due", "hub"}
    # the SQL is the policy's rule
    assert is_due(PageVisit(due_at=clock.now + 1), clock.now) == (False, "not yet")


async def test_a_sitemap_lastmod_that_moved_pulls_a_page_into_the_run(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    t0 = 1_700_000_000.0
    await frontier.enqueue("j", [req("http://a.test/sitemap.xml")])
    sm = (await lease_all(frontier))["sitemap.xml"]
    listed = [
        req(f"http://a.test/{n}", depth=1, listed=True, lastmod=t0, found_by=sm.id)
        for n in ("p1", "p2")
    ]
    await frontier.complete([Completion(sm.ref, 200, discovered=listed)])
    leases = await lease_all(frontier)
    await frontier.complete([Completion(x.ref, 200, revisit=86_400.0) for x in leases.values()])
    await frontier.complete([])
    clock.advance(60.0)
    await frontier.start_run("j")
    sm = (await lease_all(frontier))["sitemap.xml"]  # a seed: always revisited
    again = [
        req("http://a.test/p1", depth=1, listed=True, lastmod=t0 + 10, found_by=sm.id),
        req("http://a.test/p2", depth=1, listed=True, lastmod=t0, found_by=sm.id),
    ]
    assert await frontier.complete([Completion(sm.ref, 200, discovered=again)])
    assert set(await lease_all(frontier)) == {"p1"}  # p2's lastmod did not move


async def test_listed_pages_draw_on_no_url_pattern_budget(frontier: Frontier) -> None:
    await job(frontier, pattern_budget=3)
    plain = [req(f"http://a.test/item/{n}") for n in range(5)]
    listed = [req(f"http://a.test/product/{n}", listed=True) for n in range(5)]
    assert await frontier.enqueue("j", plain + listed) == 10
    stats = await frontier.stats("j")
    assert (stats.queued, stats.traps) == (8, 2)


async def test_schedules_start_each_due_run_once(frontier: Frontier, clock: FakeClock) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/1")])
    start = clock.now
    await frontier.save_schedule(
        Schedule("j", "s.py", 3_600.0, None, "UTC", start, "skip", start + 3_600.0)
    )
    assert await frontier.start_due_runs() == []  # not due yet
    clock.advance(3_600.0)
    ((_, started),) = await frontier.start_due_runs()
    assert started is None  # run 1 still going: skipped
    (listed,) = await frontier.schedules()
    assert (
        listed.next_at == start + 7_200.0 and listed.last_note == "skipped: run 1 was still going"
    )
    await crawl(frontier, {})
    clock.advance(3_600.0)
    due = await frontier.start_due_runs()
    assert [(s.job, r.run if r else None) for s, r in due] == [("j", 2)]
    assert await frontier.start_due_runs() == []  # once
    (run,) = await frontier.runs("j", limit=1)
    assert (run.run, run.schedule) == (2, "j")
    (listed,) = await frontier.schedules()
    assert (listed.last_run, listed.next_at, listed.last_note) == (
        2,
        start + 10_800.0,
        "started run 2",
    )
    assert await frontier.remove_schedule("j")
    assert not await frontier.remove_schedule("j")
    assert await frontier.schedules() == []


async def test_a_queued_schedule_starts_when_the_last_run_finished(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", [req("http://a.test/1")])
    start = clock.now
    await frontier.save_schedule(
        Schedule("j", "s.py", 3_600.0, None, "UTC", start, "queue", start + 60.0)
    )
    clock.advance(60.0)
    ((_, started),) = await frontier.start_due_runs()
    assert started is None and (await frontier.schedules())[0].queued
    await crawl(frontier, {})
    clock.advance(1.0)  # long before the next due time: the queued run starts now
    ((_, started),) = await frontier.start_due_runs()
    assert started is not None and started.run == 2
    assert not (await frontier.schedules())[0].queued


async def test_a_schedule_of_a_missing_job_notes_it(frontier: Frontier, clock: FakeClock) -> None:
    await frontier.save_schedule(
        Schedule("ghost", "s.py", 3_600.0, None, "UTC", clock.now, "skip", clock.now)
    )
    ((_, started),) = await frontier.start_due_runs()
    assert started is None
    assert "not in the store" in ((await frontier.schedules())[0].last_note or "")
