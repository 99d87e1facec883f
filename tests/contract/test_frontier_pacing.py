"""The frontier contract, continued: adaptive pacing held in the store, the host circuit, robots
postponement, attempt history, trap rows and page budgets. Run against every backend."""

from __future__ import annotations

from collections import Counter

import pytest
from tests.conftest import FakeClock
from tests.contract.test_frontier import TTL, job, req, urls

from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import (
    BudgetHit,
    Completion,
    DeadReason,
    DomainLimits,
    Failure,
    JobSpec,
)
from crawlfleet.policy.pacing import PacingConfig

CONFIG = PacingConfig()


def e429(lease_ref: object, clock: FakeClock, retry_after: float | None = None) -> Failure:
    return Failure(
        lease_ref,  # type: ignore[arg-type]
        "HTTP 429",
        retry_at=clock.now + 5,
        status=429,
        outcome="blocked",
        latency=0.01,
        retry_after=retry_after,
        started_at=clock.now - 0.01,
    )


def no_response(lease_ref: object, clock: FakeClock) -> Failure:
    return Failure(
        lease_ref,  # type: ignore[arg-type]
        "connect: refused",
        retry_at=clock.now + 1,
        outcome="retryable_error",
        started_at=clock.now - 0.01,
    )


async def test_pacing__a_429_with_retry_after_holds_the_whole_domain(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=8))
    await frontier.enqueue("j", urls(20))
    first = await frontier.lease("A", 1, TTL)
    assert await frontier.fail([e429(first[0].ref, clock, retry_after=30)]) == {first[0].id}
    assert await frontier.lease("A", 20, TTL) == [], "a 429 is never answered at once"
    clock.advance(29)
    assert await frontier.lease("A", 20, TTL) == []
    clock.advance(2)
    again = await frontier.lease("A", 20, TTL)
    state = await frontier.domain_state("a.test")
    assert state is not None
    # no healthy rate to learn a ceiling from: one start every 0.5 s; a 429 is about the
    # rate, the width stays
    assert state.pacing.delay == pytest.approx(0.5) and state.pacing.concurrency == 8
    horizon = PacingConfig().lease_horizon
    assert len(again) == int(horizon / 0.5) + 1, "the start slots of the lease horizon"
    assert [x.start_at - clock.now for x in again] == pytest.approx(
        [0.5 * i for i in range(len(again))]
    )


async def test_pacing__a_429_without_retry_after_still_holds_the_domain(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(5))
    (lease,) = await frontier.lease("A", 1, TTL)
    await frontier.fail([e429(lease.ref, clock)])
    assert await frontier.lease("A", 5, TTL) == []
    clock.advance(0.6)
    assert await frontier.lease("A", 5, TTL)


async def test_pacing__a_burst_of_429s_reported_together_slows_down_once(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=32))
    await frontier.enqueue("j", urls(40))
    leases = await frontier.lease("A", 32, TTL)
    assert len(leases) == 32
    await frontier.fail([e429(x.ref, clock) for x in leases])
    state = await frontier.domain_state("a.test")
    assert state is not None
    assert (state.pacing.delay, state.pacing.concurrency) == (pytest.approx(0.5), 32)
    assert state.in_flight == 0


async def test_pacing__a_429_teaches_a_ceiling_at_the_accepted_rate(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=4))
    await frontier.enqueue("j", urls(200))
    for _ in range(40):  # two seconds at 20 healthy responses a second
        clock.advance(0.05)
        (lease,) = await frontier.lease("A", 1, TTL)
        await frontier.complete([Completion(lease.ref, 200, elapsed=0.01)])
    (lease,) = await frontier.lease("A", 1, TTL)
    await frontier.fail([e429(lease.ref, clock, retry_after=1)])
    state = await frontier.domain_state("a.test")
    assert state is not None
    assert 1 / state.pacing.limit_delay == pytest.approx(20, rel=0.15)
    resume = state.pacing.delay
    assert resume == pytest.approx(state.pacing.limit_delay / CONFIG.limit_fraction)
    clock.advance(2)
    for _ in range(60):  # healthy again: it probes upward slowly from the resume point
        leases = await frontier.lease("A", 4, TTL)
        clock.advance(1)
        await frontier.complete([Completion(x.ref, 200, elapsed=0.01) for x in leases])
    state = await frontier.domain_state("a.test")
    assert state is not None
    assert state.pacing.limit_delay > 0, "the ceiling holds"
    assert 0.8 * resume < state.pacing.delay < resume


async def test_pacing__healthy_responses_recover_speed_and_width(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=8))
    await frontier.enqueue("j", urls(100))
    (lease,) = await frontier.lease("A", 1, TTL)
    await frontier.fail([e429(lease.ref, clock)])
    for _ in range(60):
        clock.advance(1)
        got = await frontier.lease("A", 1, TTL)
        await frontier.complete([Completion(x.ref, 200, elapsed=0.01) for x in got])
    state = await frontier.domain_state("a.test")
    assert state is not None
    assert state.pacing.delay == 0.0 and state.pacing.concurrency >= 6


async def test_host_circuit__a_host_failing_every_request_is_closed_as_a_whole(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=8))
    await frontier.enqueue("j", urls(50))
    leases = await frontier.lease("A", 8, TTL)
    assert len(leases) == 8
    await frontier.fail([no_response(x.ref, clock) for x in leases])
    state = await frontier.domain_state("a.test")
    assert state is not None
    assert state.pacing.blocked_until == pytest.approx(clock.now + CONFIG.circuit_base)
    assert state.pacing.trips == 1, "one batch of failures opens the circuit once"
    clock.advance(CONFIG.circuit_base - 1)
    assert await frontier.lease("A", 8, TTL) == [], "closed: no URL is retried meanwhile"
    clock.advance(2)
    probe = await frontier.lease("A", 8, TTL)
    assert len(probe) == 1, "reopened with one probe"
    await frontier.fail([no_response(probe[0].ref, clock)])
    state = await frontier.domain_state("a.test")
    assert state is not None
    assert state.pacing.blocked_until == pytest.approx(clock.now + 2 * CONFIG.circuit_base)


async def test_host_circuit__a_5xx_storm_closes_it_too(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(10))
    leases = await frontier.lease("A", 5, TTL)
    fails = [
        Failure(x.ref, "HTTP 500", retry_at=clock.now + 1, status=500, outcome="retryable_error")
        for x in leases
    ]
    await frontier.fail(fails)
    clock.advance(2)
    assert await frontier.lease("A", 5, TTL) == []


async def test_crawl_delay__is_a_floor_on_the_domains_delay(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(10) + urls(3, "b.test"))
    await frontier.set_crawl_delay("a.test", 1.5)
    await frontier.set_crawl_delay("b.test", 10_000)  # capped
    leases = [x for x in await frontier.lease("A", 10, TTL) if x.domain == "a.test"]
    slots = int(PacingConfig().lease_horizon / 1.5) + 1  # those inside the lease horizon
    assert [x.start_at - clock.now for x in leases] == pytest.approx([0.0, 1.5][:slots])
    for _ in range(30):  # healthy responses never take it below the floor
        clock.advance(2)
        got = await frontier.lease("A", 10, TTL)
        await frontier.complete([Completion(x.ref, 200, elapsed=0.01) for x in got])
    a = await frontier.domain_state("a.test")
    b = await frontier.domain_state("b.test")
    assert a is not None and b is not None
    assert a.pacing.delay == 1.5 and a.pacing.floor == 1.5
    assert b.pacing.floor == CONFIG.crawl_delay_cap
    await frontier.set_crawl_delay("a.test", None)
    a = await frontier.domain_state("a.test")
    assert a is not None and a.pacing.floor == 0.0


async def test_concurrency__the_lease_uses_the_domains_current_cap(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=8))
    await frontier.enqueue("j", urls(40))
    leases = await frontier.lease("A", 8, TTL)
    block_pages = [
        Failure(
            x.ref,
            "HTTP 200 (block page)",
            retry_at=clock.now + 5,
            status=200,
            outcome="blocked",
            latency=0.01,
            started_at=clock.now - 0.01,
        )
        for x in leases
    ]
    await frontier.fail(block_pages)  # push-back as the rule: the width narrows by a quarter
    clock.advance(100)  # long enough that every pacing slot is due
    taken = []
    for _ in range(10):
        taken += await frontier.lease("A", 40, TTL)
        clock.advance(1)
    assert len(taken) == 6, "8 narrowed to 6 in flight at most"


async def test_robots_unreachable__retried_later_without_using_up_attempts(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, max_attempts=2)
    await frontier.enqueue("j", urls(1))
    for _ in range(5):  # a long robots.txt outage: many more postponements than attempts
        (lease,) = await frontier.lease("A", 1, TTL)
        assert lease.attempts == 1
        postpone = Failure(
            lease.ref,
            "robots.txt unreachable: HTTP 503",
            retry_at=clock.now + 60,
            outcome="robots",
            retry_after=60,
            count_attempt=False,
        )
        assert await frontier.fail([postpone]) == {lease.id}
        clock.advance(30)
        assert await frontier.lease("A", 1, TTL) == [], "the host is held while robots is down"
        clock.advance(31)
    (lease,) = await frontier.lease("A", 1, TTL)
    assert lease.attempts == 1
    await frontier.fail([Failure(lease.ref, "HTTP 500", dead_reason=DeadReason.TOO_MANY_RETRIES)])
    (dead,) = await frontier.dead_letters("j")
    shown = await frontier.dead_letter(dead.id)
    assert shown is not None
    assert [(h.n, h.outcome) for h in shown.history] == [(1, "robots")] * 5 + [(1, "error")]


async def test_robots_unreachable__the_hosts_waiting_are_named_in_stats(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(3) + urls(1, host="b.test"))
    why = "robots.txt unreachable (HTTP 503): host postponed"
    leases = await frontier.lease("A", 10, TTL)
    assert len(leases) == 4
    postponed = [lz for lz in leases if lz.domain == "a.test"][:2]
    await frontier.fail(
        [Failure(lz.ref, why, retry_at=clock.now + 60, outcome="robots", count_attempt=False)
         for lz in postponed]
    )  # fmt: skip
    other = next(lz for lz in leases if lz.domain == "b.test")
    await frontier.fail([Failure(other.ref, "HTTP 503", retry_at=clock.now + 60, status=503)])
    stats = await frontier.stats("j")
    assert stats.robots_waiting == {"a.test": (2, why)}  # not b.test: its own 503, retried


async def test_history__lease_expiries_are_attempts_in_dead_show(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, max_attempts=2)
    await frontier.enqueue("j", urls(1))
    (lease,) = await frontier.lease("A", 1, TTL)
    await frontier.fail([Failure(lease.ref, "HTTP 503", retry_at=clock.now, status=503)])
    await frontier.lease("A", 1, TTL)
    clock.advance(TTL + 1)
    await frontier.rescue_expired()
    (dead,) = await frontier.dead_letters("j", DeadReason.WORKER_LOST)
    shown = await frontier.dead_letter(dead.id)
    assert shown is not None
    assert [(h.n, h.outcome, h.status) for h in shown.history] == [
        (1, "error", 503),
        (2, "lease_expired", None),
    ]


async def test_traps__a_link_judged_a_trap_is_a_dead_row_never_leased(
    frontier: Frontier,
) -> None:
    await job(frontier)
    trap = req("http://a.test/x/x/x/x", trap="repeated_segments")
    assert await frontier.enqueue("j", [*urls(2), trap]) == 3
    assert await frontier.enqueue("j", [trap]) == 0, "one dead row per URL"
    leased = await frontier.lease("A", 10, TTL)
    assert trap.url not in {x.url for x in leased}
    stats = await frontier.stats("j")
    assert (stats.traps, dict(stats.traps_by_domain), stats.dead) == (1, {"a.test": 1}, 1)
    assert stats.retry_depth_sum == 0 and stats.attempts_histogram == {}
    (dead,) = await frontier.dead_letters("j", DeadReason.TRAP)
    shown = await frontier.dead_letter(dead.id)
    assert shown is not None and dead.url == trap.url
    assert [(h.n, h.outcome, h.error) for h in shown.history] == [
        (0, "trap", "trap: repeated_segments")
    ]
    assert await frontier.is_finished("j") is False  # the two real ones are still leased


async def test_traps__traps_found_on_a_page_are_written_with_its_completion(
    frontier: Frontier,
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(1))
    (lease,) = await frontier.lease("A", 1, TTL)
    found = [req("http://a.test/ok"), req("http://b.test/cal/9999", depth=50, trap="depth")]
    await frontier.complete([Completion(lease.ref, 200, discovered=found)])
    stats = await frontier.stats("j")
    assert (stats.queued, stats.traps, dict(stats.traps_by_domain)) == (1, 1, {"b.test": 1})


async def test_budgets__a_hosts_page_budget_holds_across_batches_and_producers(
    frontier: Frontier,
) -> None:
    await frontier.submit_job(
        JobSpec(name="j", spider="s.py", default_limits=DomainLimits(100), page_budget=5)
    )
    assert await frontier.enqueue("j", urls(3)) == 3
    assert await frontier.enqueue("j", urls(3)) == 0, "duplicates draw on no budget"
    assert await frontier.enqueue("j", urls(8) + urls(2, "b.test")) == 7
    (lease,) = await frontier.lease("A", 1, TTL)
    more = [req(f"http://a.test/more/{i}") for i in range(3)]
    await frontier.complete([Completion(lease.ref, 200, discovered=more)])
    stats = await frontier.stats("j")
    assert stats.queued + stats.leased + stats.done == 5 + 2
    assert dict(stats.traps_by_domain) == {"a.test": 6}
    reasons = {d.error for d in await frontier.dead_letters("j", DeadReason.TRAP)}
    assert reasons == {"trap: host_budget"}


async def test_budgets__hold_across_the_slices_of_a_bulk_enqueue(frontier: Frontier) -> None:
    # 25,000 seeds in one enqueue: PostgreSQL inserts them 10,000 at a time in one transaction
    await frontier.submit_job(
        JobSpec(name="j", spider="s.py", default_limits=DomainLimits(100), page_budget=20_000)
    )
    # the first 1,000 over it are dead(trap) rows, the other 4,000 only counted
    assert await frontier.enqueue("j", urls(25_000)) == 21_000
    stats = await frontier.stats("j")
    assert (stats.queued, stats.traps) == (20_000, 5_000)
    assert await frontier.enqueue("j", urls(25_000)) == 0, "duplicates draw on no budget"
    assert (await frontier.stats("j")).queued == 20_000


async def test_traps__only_a_sample_per_rule_is_stored_the_rest_counted(
    frontier: Frontier,
) -> None:
    # an endless generator of links: 3,000 over the URL-shape budget and 1,500 too deep make
    # 1,000 rows of each rule, and every one of them is counted
    await frontier.submit_job(
        JobSpec(name="j", spider="s.py", default_limits=DomainLimits(100), pattern_budget=10)
    )
    minted = [req(f"http://a.test/p/{i}") for i in range(3_010)]
    deep = [req(f"http://a.test/d{i}/x", depth=99, trap="depth") for i in range(1_500)]
    assert await frontier.enqueue("j", minted[:2_000] + deep[:700]) == 10 + 1_000 + 700
    assert await frontier.enqueue("j", minted[2_000:] + deep[700:]) == 300
    stats = await frontier.stats("j")
    assert (stats.queued, stats.traps, dict(stats.traps_by_domain)) == (
        10,
        4_500,
        {"a.test": 4_500},
    )
    dead = await frontier.dead_letters("j", DeadReason.TRAP, limit=5_000)
    assert (stats.dead, stats.trap_rows) == (2_000, 2_000), "the rows, none of them fetched"
    reasons = Counter(d.error for d in dead)
    assert reasons == {"trap: pattern_budget": 1_000, "trap: depth": 1_000}
    # the budget the crawl ran into, with every URL it left out (rows and counts); depth is
    # a guard, not a budget
    assert await frontier.budget_hits("j") == [BudgetHit("pattern_budget", "a.test/p/N", 3_000)]


async def test_budget_hits__by_host_and_by_shape__none_for_a_job_within_them(
    frontier: Frontier,
) -> None:
    await frontier.submit_job(
        JobSpec(
            name="j",
            spider="s.py",
            default_limits=DomainLimits(100),
            page_budget=5,
            pattern_budget=3,
        )
    )
    await frontier.submit_job(JobSpec(name="k", spider="s.py", default_limits=DomainLimits(100)))
    shaped = [req(f"http://a.test/p/{i}") for i in range(6)]
    spread = [req(f"http://b.test/{c}") for c in "uvwxyz"]
    await frontier.enqueue("j", shaped + spread)
    await frontier.enqueue("k", [req(f"http://a.test/p/{i}") for i in range(6)])
    assert await frontier.budget_hits("j") == [
        BudgetHit("pattern_budget", "a.test/p/N", 3),
        BudgetHit("host_budget", "b.test", 1),
    ]
    assert await frontier.budget_hits("k") == []


async def test_budgets__a_url_patterns_budget(frontier: Frontier) -> None:
    await frontier.submit_job(
        JobSpec(name="j", spider="s.py", default_limits=DomainLimits(100), pattern_budget=4)
    )
    months = [req(f"http://a.test/calendar/2024/{m:02d}") for m in range(1, 13)]
    other = [req("http://a.test/about"), req("http://a.test/product/7")]
    assert await frontier.enqueue("j", months[:3] + other) == 5
    assert await frontier.enqueue("j", months[3:]) == 9
    stats = await frontier.stats("j")
    assert stats.queued == 4 + 2 and stats.traps == 8
    (sample, *_) = await frontier.dead_letters("j", DeadReason.TRAP)
    assert sample.error == "trap: pattern_budget"


async def test_max_attempts__per_request_overrides_the_jobs(frontier: Frontier) -> None:
    await job(frontier, max_attempts=3)
    await frontier.enqueue("j", [req("http://a.test/one", max_attempts=1), req("http://a.test/x")])
    leases = {x.url: x for x in await frontier.lease("A", 2, TTL)}
    assert leases["http://a.test/one"].max_attempts == 1
    assert leases["http://a.test/x"].max_attempts == 3


async def test_stats__attempts_histogram_and_average_retry_depth(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(4))
    for _ in range(3):  # request by request: 1, 2 and 3 attempts; the fourth never finishes
        leases = sorted(await frontier.lease("A", 4, TTL), key=lambda x: x.url)
        done, *rest = leases
        await frontier.complete([Completion(done.ref, 200)])
        await frontier.fail([Failure(x.ref, "HTTP 503", retry_at=clock.now) for x in rest])
    stats = await frontier.stats("j")
    assert dict(stats.attempts_histogram) == {1: 1, 2: 1, 3: 1}
    assert stats.retry_depth_sum == 3
    assert stats.avg_retry_depth == pytest.approx(1.0)


async def test_robots_files__one_origins_file_shared_with_its_age(
    frontier: Frontier, clock: FakeClock
) -> None:
    assert await frontier.robots_file("http://a.test") is None
    await frontier.save_robots_file("http://a.test", "ok", "User-agent: *\nDisallow: /x\n")
    await frontier.save_robots_file("http://b.test:8080", "allow_all", "")
    clock.advance(30)
    assert await frontier.robots_file("http://a.test") == (
        "ok",
        "User-agent: *\nDisallow: /x\n",
        pytest.approx(30),
    )
    await frontier.save_robots_file("http://a.test", "allow_all", "")  # fetched again: replaced
    assert await frontier.robots_file("http://a.test") == ("allow_all", "", pytest.approx(0))
    assert await frontier.robots_file("http://b.test:8080") == ("allow_all", "", pytest.approx(30))
    assert await frontier.robots_file("http://b.test") is None, "an origin is scheme, host, port"


async def test_host_down__one_clock_for_the_fleet_restarted_after_a_quiet_window(
    frontier: Frontier, clock: FakeClock
) -> None:
    assert await frontier.host_down("http://a.test", 10) == (pytest.approx(0), 1)
    clock.advance(4)
    assert await frontier.host_down("http://a.test", 10) == (pytest.approx(4), 2), "another worker"
    assert await frontier.host_down("http://b.test", 10) == (pytest.approx(0), 1)
    clock.advance(8)
    assert await frontier.host_down("http://a.test", 10) == (pytest.approx(12), 3)
    clock.advance(11)  # not found down for longer than the window: counted again
    assert await frontier.host_down("http://a.test", 10) == (pytest.approx(0), 1)
    assert await frontier.host_down("http://b.test", 30) == (pytest.approx(19), 2)
