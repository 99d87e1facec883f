from __future__ import annotations

from dataclasses import dataclass

import pytest

from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.pacing import PacingConfig, PacingState, initial, update

CONFIG = PacingConfig()
T0 = 1_000.0


@dataclass(frozen=True)
class Event:
    """One attempt's result, ``dt`` seconds after the previous one."""

    outcome: Outcome = Outcome.OK
    status: int | None = 200
    latency: float | None = 0.2
    retry_after: float | None = None
    dt: float = 1.0


OK = Event()
E429 = Event(Outcome.BLOCKED, 429)
E503 = Event(Outcome.RETRYABLE_ERROR, 503)
BLOCK_PAGE = Event(Outcome.BLOCKED, 200)
CONNECT_ERROR = Event(Outcome.RETRYABLE_ERROR, None, None)
E500 = Event(Outcome.RETRYABLE_ERROR, 500)
E404 = Event(Outcome.PERMANENT_ERROR, 404)


def run(
    events: list[Event], state: PacingState | None = None, config: PacingConfig = CONFIG
) -> tuple[PacingState, float]:
    """Apply events on a fake clock; returns the final state and the clock."""
    now = T0
    state = state or initial(config)
    for event in events:
        now += event.dt
        state = update(
            state,
            config,
            now=now,
            outcome=event.outcome,
            status=event.status,
            latency=event.latency,
            retry_after=event.retry_after,
        )
    return state, now


@pytest.mark.parametrize(
    ("crawl_delay", "delay", "concurrency"),
    [(None, 0.0, 8), (0.0, 0.0, 8), (5.0, 5.0, 1), (120.0, 30.0, 1)],
)
def test_initial(crawl_delay: float | None, delay: float, concurrency: int) -> None:
    state = initial(CONFIG, crawl_delay)
    assert (state.delay, state.concurrency, state.floor) == (delay, concurrency, delay)
    assert (state.ewma_latency, state.blocked_until, state.errors_in_row) == (None, 0.0, 0)


@pytest.mark.parametrize(
    ("events", "delay", "concurrency"),
    [
        ([E429], 0.5, 4),  # from the 0.25 s floor, doubled; concurrency halved
        ([E429, E429], 1.0, 2),
        ([E503, E503, E503], 2.0, 1),
        ([BLOCK_PAGE], 0.5, 4),
        ([E429] * 4, 4.0, 1),  # concurrency never below min
        ([E429] * 20, 60.0, 1),  # delay capped at max_delay
        ([E500], 0.0, 8),  # a plain 5xx is no push-back
        ([E404] * 3, 0.0, 8),
    ],
)
def test_slow_down(events: list[Event], delay: float, concurrency: int) -> None:
    state, _ = run(events)
    assert state.delay == pytest.approx(delay)
    assert state.concurrency == concurrency


@pytest.mark.parametrize(
    ("events", "delay", "concurrency"),
    [
        ([E429, OK], 0.45, 4),  # x0.9 per healthy response
        ([E429] + [OK] * 9, 0.5 * 0.9**9, 4),
        ([E429] + [OK] * 10, 0.5 * 0.9**10, 5),  # +1 every 10 healthy responses
        ([E429] + [OK] * 30, 0.5 * 0.9**30, 7),
        ([E429] + [OK] * 40, 0.0, 8),  # close to the floor: snapped to it
        ([E429] + [OK] * 200, 0.0, 8),  # never above max
        ([E429] + [OK] * 9 + [E500] + [OK] * 9, 0.5 * 0.9**18, 4),  # a 500 restarts the count
        ([E429] + [OK] * 9 + [E404] + [OK], 0.5 * 0.9**10, 5),  # a 404 does not
    ],
)
def test_recovery_is_slow(events: list[Event], delay: float, concurrency: int) -> None:
    state, _ = run(events)
    assert state.delay == pytest.approx(delay)
    assert state.concurrency == concurrency


def test_recovery_stops_at_crawl_delay() -> None:
    state, _ = run([E429] + [OK] * 100, initial(CONFIG, crawl_delay=3.0))
    assert state.delay == 3.0
    assert state.concurrency == CONFIG.max_concurrency  # robots asked for a delay, not a width


def test_min_delay_is_a_floor() -> None:
    config = PacingConfig(min_delay=1.5)
    state, _ = run([OK] * 5, config=config)
    assert state.delay == 1.5


@pytest.mark.parametrize(
    ("latencies", "delay"),
    [
        ([0.2, 0.2, 0.2], 0.0),
        ([0.2, 0.3, 0.35], 0.0),  # noise
        ([0.2, 0.5], 0.125),  # > 2x EWMA: gentle slow-down from the 0.1 s floor (x1.25)
        ([0.2, 0.5, 1.5], 0.15625),
    ],
)
def test_rising_latency_slows_down_gently(latencies: list[float], delay: float) -> None:
    state, _ = run([Event(latency=x) for x in latencies])
    assert state.delay == pytest.approx(delay)
    assert state.concurrency == CONFIG.max_concurrency


@pytest.mark.parametrize("latencies", [[0.002, 0.009], [0.01, 0.2], [0.05, 0.24]])
def test_millisecond_latency_noise_is_not_rising_latency(latencies: list[float]) -> None:
    state, _ = run([Event(latency=x) for x in latencies])
    assert state.delay == 0.0


def test_ewma_latency() -> None:
    state, _ = run([Event(latency=1.0), Event(latency=2.0)])
    assert state.ewma_latency == pytest.approx(0.2 * 2.0 + 0.8 * 1.0)
    state, _ = run([CONNECT_ERROR], state)
    assert state.ewma_latency == pytest.approx(1.2)


@pytest.mark.parametrize(
    ("events", "blocked_for"),
    [
        ([Event(Outcome.BLOCKED, 429, retry_after=120.0)], 120.0),
        ([Event(Outcome.RETRYABLE_ERROR, 503, retry_after=30.0)], 30.0),
        ([Event(Outcome.BLOCKED, 429, retry_after=10**7)], 3600.0),  # capped
        # a later, shorter Retry-After does not shorten the pause
        ([Event(Outcome.BLOCKED, 429, retry_after=100.0), Event(retry_after=1.0, dt=10)], 90.0),
    ],
)
def test_retry_after_blocks_the_domain(events: list[Event], blocked_for: float) -> None:
    state, now = run(events)
    assert state.blocked_until == pytest.approx(now + blocked_for)


@pytest.mark.parametrize(
    ("failures", "blocked_for"),
    [(4, None), (5, 30.0), (6, 60.0), (7, 120.0), (12, 3600.0), (40, 3600.0)],
)
def test_host_circuit(failures: int, blocked_for: float | None) -> None:
    state, now = run([CONNECT_ERROR] * failures)
    assert state.errors_in_row == failures
    if blocked_for is None:
        assert state.blocked_until == 0.0
    else:
        assert state.blocked_until == pytest.approx(now + blocked_for)


def test_a_response_below_500_closes_the_circuit_count() -> None:
    state, _ = run([CONNECT_ERROR] * 4 + [E404] + [CONNECT_ERROR] * 4)
    assert state.errors_in_row == 4
    assert state.blocked_until == 0.0


@pytest.mark.parametrize(("failures", "blocked_for"), [(4, None), (5, 30.0), (6, 60.0)])
def test_host_circuit__a_5xx_storm_counts_like_no_response(
    failures: int, blocked_for: float | None
) -> None:
    state, now = run([E500] * failures)
    if blocked_for is None:
        assert state.blocked_until == 0.0
    else:
        assert state.blocked_until == pytest.approx(now + blocked_for)
        assert state.concurrency == CONFIG.min_concurrency, "reopened one probe at a time"


@pytest.mark.parametrize("outcome", [Outcome.ROBOTS, Outcome.TRAP, Outcome.PERMANENT_ERROR])
def test_attempts_without_response_or_fault_change_nothing(outcome: Outcome) -> None:
    start, _ = run([E429])
    state, _ = run([Event(outcome, None, None)], start)
    assert state == start


def step(state: PacingState, event: Event, now: float, started: float | None = None) -> PacingState:
    return update(
        state,
        CONFIG,
        now=now,
        outcome=event.outcome,
        status=event.status,
        latency=event.latency,
        retry_after=event.retry_after,
        started=started,
    )


def test_a_burst_of_429s_slows_down_once() -> None:
    """Forty 429s reported together answer requests all sent before the first slow-down."""
    state = initial(CONFIG)
    now = T0 + 1
    for _ in range(40):
        state = step(state, E429, now, started=now - 0.05)
    assert (state.delay, state.concurrency) == (pytest.approx(0.5), 4)
    later = step(state, E429, now + 2, started=now + 1)  # sent after it: slows down again
    assert (later.delay, later.concurrency) == (pytest.approx(1.0), 2)


def test_a_burst_of_failures_opens_the_circuit_once() -> None:
    state = initial(CONFIG)
    now = T0 + 1
    for _ in range(30):
        state = step(state, CONNECT_ERROR, now, started=now - 0.1)
    assert state.trips == 1
    assert state.blocked_until == pytest.approx(now + CONFIG.circuit_base)
    probe = state.blocked_until + 0.01
    state = step(state, CONNECT_ERROR, probe + 1, started=probe)
    assert state.blocked_until == pytest.approx(probe + 1 + 2 * CONFIG.circuit_base)
    state = step(state, OK, probe + 100, started=probe + 99)
    assert (state.errors_in_row, state.trips) == (0, 0)


def test_a_429_without_retry_after_still_holds_the_domain() -> None:
    state = step(initial(CONFIG), E429, T0)
    assert state.blocked_until == pytest.approx(T0 + state.delay)
    assert state.delay > 0


@pytest.mark.parametrize(("ok_per_second", "ceiling"), [(20, 10.0), (50, 25.0), (8, 4.0)])
def test_push_back_teaches_a_ceiling_recovery_stays_under(
    ok_per_second: int, ceiling: float
) -> None:
    """Healthy at some rate, then a 429: recovery stops at half the rate that was accepted."""
    state = initial(CONFIG)
    now = T0
    for _ in range(ok_per_second * 5):  # five seconds of steady healthy responses
        now += 1.0 / ok_per_second
        state = step(state, OK, now)
    assert state.ok_rate == pytest.approx(ok_per_second, rel=0.1)
    state = step(state, E429, now + 0.01)
    assert 1.0 / state.limit_delay == pytest.approx(ceiling, rel=0.1)
    for _ in range(500):
        now += 0.05
        state = step(state, OK, now)
    assert state.delay == pytest.approx(state.limit_delay)
    assert now - state.slowed_at < CONFIG.limit_hold


def test_the_ceiling_lifts_after_limit_hold_without_push_back() -> None:
    config = PacingConfig(limit_hold=60.0)
    state = initial(config)
    now = T0
    for _ in range(50):
        now += 0.05
        state = update(
            state, config, now=now, outcome=Outcome.OK, status=200, latency=0.2, retry_after=None
        )
    state = update(
        state, config, now=now, outcome=Outcome.BLOCKED, status=429, latency=0.2, retry_after=1.0
    )
    assert state.limit_delay > 0
    for _ in range(100):
        now += 1.0
        state = update(
            state, config, now=now, outcome=Outcome.OK, status=200, latency=0.2, retry_after=None
        )
    assert (state.limit_delay, state.delay) == (0.0, 0.0)


def test_no_healthy_rate_no_ceiling() -> None:
    state, _ = run([E429])
    assert state.limit_delay == 0.0


def test_only_a_429_teaches_a_ceiling() -> None:
    healthy = [Event(dt=0.05)] * 40
    after_503, _ = run([*healthy, E503])
    after_block, _ = run([*healthy, BLOCK_PAGE])
    after_429, _ = run([*healthy, E429])
    assert after_503.limit_delay == after_block.limit_delay == 0.0
    assert after_429.limit_delay > 0.0
