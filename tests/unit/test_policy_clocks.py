"""Every pure policy that takes a clock, under extreme clocks: gaps of zero, of a nanosecond and
of thirty years, a clock that steps back, counts at their bounds. Outputs stay finite and in
their bounds, and no call raises.

This is the shape of the stall that a lane idle for five minutes caused: the pacing controller
doubled its window once per ``recover_every`` of idle time (``2.0 ** 1200`` overflows) and the
store refused every completion of the lane after it.
"""

from __future__ import annotations

import math
from dataclasses import astuple

from hypothesis import given, settings
from hypothesis import strategies as st

from crawlfleet.policy import escalation, retry, revisit, schedule
from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.health import DEFAULT_HEALTH, Breaker, BreakerState, RouteStats, Signal
from crawlfleet.policy.pacing import PacingConfig, initial, update

T0 = 1_700_000_000.0

#: the gaps between two events: none, a nanosecond, ordinary ones, idle for minutes, hours,
#: years, and a clock that steps back (NTP, a VM resumed, another worker's clock behind)
GAPS = st.one_of(
    st.sampled_from([0.0, 1e-9, 0.01, 1.0, 200.0, 300.0, 3_600.0, 86_400.0, 1e9, -1.0, -1e6]),
    st.floats(min_value=-1e6, max_value=1e9, allow_nan=False),
)

EVENTS = st.sampled_from(
    [
        (Outcome.OK, 200, 0.05, None),
        (Outcome.OK, 200, 1e-9, None),
        (Outcome.OK, 200, 1e6, None),
        (Outcome.OK, 404, 0.01, None),
        (Outcome.BLOCKED, 429, 0.1, 3600.0),
        (Outcome.BLOCKED, 429, 0.1, 1e12),
        (Outcome.BLOCKED, 200, 0.2, None),
        (Outcome.RETRYABLE_ERROR, 503, 0.1, 5.0),
        (Outcome.RETRYABLE_ERROR, 500, 0.1, None),
        (Outcome.RETRYABLE_ERROR, None, None, None),
        (Outcome.ROBOTS, None, None, 60.0),
        (Outcome.PERMANENT_ERROR, 404, 0.01, None),
    ]
)


def _finite(values: tuple[object, ...]) -> bool:
    return all(not isinstance(v, float) or math.isfinite(v) for v in values)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.tuples(GAPS, EVENTS, st.floats(0.0, 10.0)), min_size=1, max_size=40),
    crawl_delay=st.sampled_from([None, 0.0, 1.0, 1e9]),
)
def test_pacing__any_clock_keeps_the_lane_finite_and_in_bounds(
    steps: list[tuple[float, tuple[Outcome, int | None, float | None, float | None], float]],
    crawl_delay: float | None,
) -> None:
    config = PacingConfig(max_concurrency=16)
    state = initial(config, crawl_delay)
    now = latest = T0
    for gap, (outcome, status, latency, retry_after), took in steps:
        now += gap
        latest = max(latest, now)
        state = update(
            state,
            config,
            now=now,
            outcome=outcome,
            status=status,
            latency=latency,
            retry_after=retry_after,
            started=now - took,
        )
        assert _finite(astuple(state)), state
        assert config.min_concurrency <= state.concurrency <= config.max_concurrency
        assert 0.0 <= state.delay <= max(config.max_delay, state.floor)
        hold = max(config.retry_after_cap, config.circuit_cap) + config.max_delay
        assert state.blocked_until <= latest + hold
        assert 0.0 <= state.share <= 1.0


def test_pacing__a_lane_idle_for_five_minutes_takes_its_next_answer() -> None:
    """The stall itself: answers, 300 s of silence, an answer (it raised OverflowError)."""
    config = PacingConfig()
    state = initial(config)
    for i in range(5):
        state = update(
            state, config, now=T0 + i, outcome=Outcome.OK, status=200, latency=0.05,
            retry_after=None,
        )  # fmt: skip
    for idle in (200.0, 300.0, 86_400.0 * 365 * 30):
        later = update(
            state, config, now=T0 + 5 + idle, outcome=Outcome.OK, status=200, latency=0.05,
            retry_after=None,
        )  # fmt: skip
        assert later.concurrency == config.max_concurrency
        assert _finite(astuple(later))


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.tuples(GAPS, st.sampled_from(list(Signal)), st.one_of(st.none(), st.floats(0, 1e6))),
        min_size=1,
        max_size=60,
    )
)
def test_route_health__any_clock_keeps_stats_and_breakers_finite(
    steps: list[tuple[float, Signal, float | None]],
) -> None:
    stats, breaker, now = RouteStats(), Breaker(), T0
    for gap, signal, latency in steps:
        now += gap
        stats = stats.record(signal, now, latency)
        admitted = breaker.admit(now)
        breaker = (admitted or breaker).record(signal, now)
        assert _finite(astuple(stats)) and _finite(astuple(breaker))
        assert 0.0 <= stats.success_rate() <= 1.0
        assert 0.0 <= stats.block_rate() <= 1.0
        assert 0.0 <= stats.score(1.0) <= 1.0
        assert stats.attempts(now) >= 0.0
        assert breaker.open_until <= max(now, breaker.updated_at) + 3600.0
        assert breaker.status(now) in {"healthy", "open", "probing"}


def test_breaker__ten_thousand_failed_probes_cool_down_at_the_cap() -> None:
    probing = Breaker(state=BreakerState.HALF_OPEN, failed_probes=10_000, probe_started=T0)
    opened = probing.record(Signal.ERROR, T0 + 1)
    assert opened.state is BreakerState.OPEN
    assert opened.open_until == T0 + 1 + DEFAULT_HEALTH.cooldown_cap


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.tuples(GAPS, st.booleans(), st.sampled_from([0, 1, 2])), max_size=60),
    probes=st.sampled_from([0, 1, 63, 64, 10_000]),
)
def test_escalation__any_clock_moves_between_known_tiers(
    steps: list[tuple[float, bool, int]], probes: int
) -> None:
    state, now = escalation.EscalationState(probes=probes), T0
    for gap, blocked, tier in steps:
        now += gap
        state, move = escalation.update(state, [0, 1, 2], now=now, blocked=blocked, tier=tier)
        assert _finite(astuple(state))
        assert state.tier in (0, 1, 2)
        assert state.blocks <= state.attempts + 1e-9
        if move is not None:
            assert move.to_tier != move.from_tier


@given(
    attempts=st.integers(-5, 10**9),
    rand=st.floats(0.0, 1.0, exclude_max=True),
    now=st.floats(-1e9, 1e12, allow_nan=False),
    retry_after=st.one_of(st.none(), st.floats(0.0, 1e15)),
)
def test_retry__any_attempt_count_and_clock_gives_a_bounded_wait(
    attempts: int, rand: float, now: float, retry_after: float | None
) -> None:
    wait = retry.backoff(attempts, rand=rand)
    assert 0.0 < wait <= 600.0
    decision = retry.decide(
        outcome=Outcome.RETRYABLE_ERROR,
        attempts=max(attempts, 1),
        max_attempts=10**9 + 1,
        now=now,
        rand=rand,
        retry_after=retry_after,
    )
    assert decision.retry_at is not None
    assert math.isfinite(decision.retry_at)
    assert now + 2.0 <= decision.retry_at <= now + 3600.0 + 1e-6 * abs(now)


@given(value=st.one_of(st.text(max_size=40), st.sampled_from(["9" * 400, "1e400", "-1"])))
def test_retry_after__any_header_parses_to_none_or_a_finite_wait(value: str) -> None:
    wait = retry.parse_retry_after(value, T0)
    assert wait is None or (math.isfinite(wait) and wait >= 0.0)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.tuples(GAPS, st.sampled_from(list(revisit.Change))), max_size=40),
    seed=st.booleans(),
    hub=st.booleans(),
)
def test_revisit__any_clock_keeps_intervals_in_the_rule_and_due_times_finite(
    steps: list[tuple[float, revisit.Change]], seed: bool, hub: bool
) -> None:
    rule = revisit.RevisitRule(60.0, 86_400.0)
    now, interval = T0, None
    for gap, change in steps:
        now += gap
        interval = revisit.next_interval(rule, interval, change)
        assert rule.min <= interval <= rule.max
        due = revisit.due_at(now, interval)
        assert math.isfinite(due) and now <= due <= now + rule.max
        visit = revisit.PageVisit(due_at=due, seed=seed, hub=hub)
        assert revisit.is_due(visit, due)[0] and (
            revisit.is_due(visit, now)[0] is (seed or hub or interval == 0)
        )


@settings(max_examples=100, deadline=None)
@given(
    after=st.one_of(
        st.floats(-1e9, 4e9, allow_nan=False),
        st.sampled_from([math.inf, -math.inf, math.nan, 0.0, -1.0]),
    ),
    which=st.sampled_from(["every", "cron"]),
)
def test_schedule__the_next_run_is_always_after_and_finite(after: float, which: str) -> None:
    timing = (
        schedule.parse_timing(every="6h", anchor=T0)
        if which == "every"
        else schedule.parse_timing(cron="0 6 * * *", tz="Europe/Paris")
    )
    due = schedule.next_due(timing, after)
    assert math.isfinite(due)
    if math.isfinite(after) and after >= 0:
        assert after < due <= max(after, T0) + 86_400.0 + 3_600.0
