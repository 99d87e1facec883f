"""The pacing controller's rules, one table at a time, on a fake clock."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields, replace

import pytest

from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.pacing import PacingConfig, PacingState, initial, update

CONFIG = PacingConfig(max_concurrency=32)
T0 = 1_000.0


@dataclass(frozen=True)
class Event:
    """One attempt's result, reported ``dt`` seconds after the previous one; its request was
    sent ``latency`` (or 10 ms) before the report."""

    outcome: Outcome = Outcome.OK
    status: int | None = 200
    latency: float | None = 0.01
    retry_after: float | None = None
    dt: float = 0.01


OK = Event()
E429 = Event(Outcome.BLOCKED, 429)
E503 = Event(Outcome.RETRYABLE_ERROR, 503)
BLOCK_PAGE = Event(Outcome.BLOCKED, 200)
CUT = Event(Outcome.RETRYABLE_ERROR, None, None)
E500 = Event(Outcome.RETRYABLE_ERROR, 500)
E404 = Event(Outcome.PERMANENT_ERROR, 404)
GONE = Event(Outcome.OK, 404, latency=0.001)  # a final answer as the store reports it: done


def run(
    events: list[Event],
    state: PacingState | None = None,
    config: PacingConfig = CONFIG,
    now: float | None = None,
) -> tuple[PacingState, float]:
    """Apply events on a fake clock (from ``now``, or from the last healthy answer ``state``
    saw); returns the final state and the clock."""
    state = state or initial(config)
    now = now if now is not None else state.rate_at or T0
    for event in events:
        now += event.dt
        state = step(state, event, now, config=config)
    return state, now


def step(
    state: PacingState,
    event: Event,
    now: float,
    started: float | None = None,
    config: PacingConfig = CONFIG,
) -> PacingState:
    sent = now - (event.latency or 0.01) if started is None else started
    return update(
        state,
        config,
        now=now,
        outcome=event.outcome,
        status=event.status,
        latency=event.latency,
        retry_after=event.retry_after,
        started=sent,
    )


def healthy(seconds: float, per_second: int = 100) -> list[Event]:
    return [Event(dt=1.0 / per_second)] * int(seconds * per_second)


def warmed() -> tuple[PacingState, float]:
    """Five seconds of 100 healthy responses a second: full width (4 doubled every 0.25 s)."""
    return run(healthy(5))


# -- a fresh lane ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("crawl_delay", "delay", "concurrency"),
    [(None, 0.0, 4), (0.0, 0.0, 4), (5.0, 5.0, 1), (120.0, 30.0, 1)],
)
def test_initial(crawl_delay: float | None, delay: float, concurrency: int) -> None:
    state = initial(CONFIG, crawl_delay)
    assert (state.delay, state.concurrency, state.floor) == (delay, concurrency, delay)
    assert (state.ewma_latency, state.blocked_until, state.errors_in_row) == (None, 0.0, 0)


def test_initial__never_wider_than_the_lanes_limit() -> None:
    assert initial(PacingConfig(max_concurrency=1)).concurrency == 1


def test_every_field_is_a_json_scalar() -> None:
    state, _ = run([*healthy(1), E429, *healthy(2), E503, CUT, E404, BLOCK_PAGE])
    doc = json.loads(json.dumps(asdict(state)))
    assert PacingState(**doc) == state
    assert all(isinstance(v, int | float | bool | type(None)) for v in doc.values())
    assert len(doc) == len(fields(PacingState))


@pytest.mark.parametrize(
    "changes",
    [
        {"limit_fraction": 0.0},
        {"pushback_share": 1.0},
        {"recover_factor": 1.0},
        {"rate_window": 0.0},
        {"min_concurrency": 0},
        {"min_concurrency": 9, "max_concurrency": 8},
        {"probe": -0.1},
        {"latency_ratio": 1.0},
    ],
)
def test_config__values_out_of_range_are_refused(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        PacingConfig(**changes)  # type: ignore[arg-type]


# -- noise is not push-back --------------------------------------------------------------------


@pytest.mark.parametrize("fault", [E503, CUT, BLOCK_PAGE, Event(Outcome.RETRYABLE_ERROR, 502)])
def test_a_lone_fault_changes_neither_pace_nor_width(fault: Event) -> None:
    warm, _ = warmed()
    assert warm.concurrency == 32
    state, _ = run([fault], warm)
    assert (state.delay, state.concurrency) == (warm.delay, 32)
    assert state.blocked_until == warm.blocked_until


def test_a_lone_503_with_retry_after_holds_its_request_not_the_lane() -> None:
    warm, _ = warmed()
    state, _ = run([Event(Outcome.RETRYABLE_ERROR, 503, retry_after=30.0)], warm)
    assert state.blocked_until == warm.blocked_until


@pytest.mark.parametrize("every", [10, 14, 20])
def test_random_faults_at_a_few_percent_never_slow_the_lane(every: int) -> None:
    """One fault in ``every`` responses (10%, 7%, 5%), for thousands of responses."""
    faults = [E503, CUT, BLOCK_PAGE]
    events = [faults[i // every % 3] if i % every == 0 else OK for i in range(1, 5000)]
    state, _ = run([*healthy(5), *events])
    assert (state.delay, state.concurrency) == (0.0, 32)


def rule(event: Event, n: int) -> list[Event]:
    """``n`` of ``event``, a 404 after every four (the host answers: no circuit opening)."""
    out: list[Event] = []
    for i in range(n):
        out += [event, E404] if i % 4 == 3 else [event]
    return out


@pytest.mark.parametrize(
    ("pushbacks", "slowed"),
    [(7, False), (8, True)],  # the share passes 25% (EWMA over 25 responses) at the 8th
)
def test_push_back_as_the_rule_slows_down_once(pushbacks: int, slowed: bool) -> None:
    warm, _ = warmed()  # 100 healthy responses a second
    state, now = run([BLOCK_PAGE] * pushbacks, warm)
    if not slowed:
        assert (state.delay, state.concurrency) == (0.0, 32)
        return
    accepted = 100 * math.exp(-pushbacks * 0.01)  # the healthy rate, decayed since
    assert state.delay == pytest.approx(2.0 / accepted, rel=0.05), "twice the healthy spacing"
    assert state.concurrency == 24, "narrowed by a quarter, not halved"
    assert state.blocked_until == pytest.approx(now + state.delay)


def test_push_back_to_requests_sent_before_the_slow_down_does_not_count_again() -> None:
    warm, now = warmed()
    state = warm
    for _ in range(40):  # forty blocks reported together, all sent before the first slow-down
        state = step(state, BLOCK_PAGE, now + 0.01, started=now - 0.05)
    once, _ = run([BLOCK_PAGE] * 8, warm)
    assert (state.delay, state.concurrency) == (pytest.approx(once.delay, rel=0.1), 24)


@pytest.mark.parametrize(
    "event", [E429, E503, Event(Outcome.RETRYABLE_ERROR, 504), BLOCK_PAGE, CUT]
)
def test_what_counts_as_push_back(event: Event) -> None:
    warm, _ = warmed()
    state, _ = run(rule(event, 12), warm)
    assert state.delay > 0.0 and state.trips == 0


@pytest.mark.parametrize("event", [E404, GONE, E500, Event(Outcome.RETRYABLE_ERROR, 408)])
def test_what_does_not(event: Event) -> None:
    warm, _ = warmed()
    state, _ = run([event] * 4, warm)  # four: the host circuit opens at five 5xx in a row
    assert (state.delay, state.concurrency) == (0.0, 32)


def test_retry_after_holds_the_lane_once_push_back_is_the_rule() -> None:
    warm, _ = warmed()
    state, now = run(rule(Event(Outcome.RETRYABLE_ERROR, 503, retry_after=30.0), 8), warm)
    assert state.trips == 0
    assert state.blocked_until == pytest.approx(now - 0.01 + 30.0)  # the 404 came after


# -- 429: a hard signal, a ceiling -------------------------------------------------------------


@pytest.mark.parametrize(
    ("retry_after", "blocked_for"),
    [(120.0, 120.0), (1.0, 1.0), (10.0**7, 3600.0)],
)
def test_a_429_holds_the_lane_for_its_retry_after(retry_after: float, blocked_for: float) -> None:
    warm, _ = warmed()
    state, now = run([Event(Outcome.BLOCKED, 429, retry_after=retry_after)], warm)
    assert state.blocked_until == pytest.approx(now + blocked_for)


def test_a_429_without_retry_after_still_holds_the_lane() -> None:
    state, now = run([E429])
    assert state.delay > 0
    assert state.blocked_until == pytest.approx(now + state.delay)


@pytest.mark.parametrize(("ok_per_second", "resume"), [(20, 17.0), (50, 42.5), (8, 6.8)])
def test_a_429_teaches_the_rate_just_before_it_and_resumes_under_it(
    ok_per_second: int, resume: float
) -> None:
    """Healthy at some rate, then a 429: the ceiling is that rate, the lane goes on at
    ``limit_fraction`` (85%) of it; the width is the rate's business, it stays."""
    warm, _ = run(healthy(5, ok_per_second))
    assert warm.ok_rate == pytest.approx(ok_per_second, rel=0.1)
    state, _ = run([Event(Outcome.BLOCKED, 429, dt=0.001)], warm)
    assert 1 / state.limit_delay == pytest.approx(ok_per_second, rel=0.1)
    assert 1 / state.delay == pytest.approx(resume, rel=0.1)
    assert state.concurrency == warm.concurrency


SLOW_PAGE = Event(latency=3.0)


def noisy(seconds: float, per_second: int) -> list[Event]:
    """The noisy shop of the routes benchmark: per hundred answers five 503s, two cut
    connections and two pages that take 3 s, the rest healthy."""
    mix = [E503] * 5 + [CUT] * 2 + [SLOW_PAGE] * 2 + [OK] * 91
    spread = [mix[(i * 37) % 100] for i in range(100)]  # the faults apart, not in a row
    n = int(seconds * per_second)
    return [replace(spread[i % 100], dt=1.0 / per_second) for i in range(n)]


@pytest.mark.parametrize(
    ("events", "slowdowns"),
    [
        ([E503], 0),  # a 503 among successes is noise
        ([CUT], 0),  # so is a cut connection
        ([SLOW_PAGE], 0),  # and a slow page
        ([Event(Outcome.RETRYABLE_ERROR, 503, retry_after=5.0)], 0),  # even with Retry-After
        ([E503, CUT, E503], 0),  # a few together
        ([E429], 1),  # a 429 is push-back at once
        ([Event(Outcome.BLOCKED, 429, retry_after=2.0)], 1),
    ],
)
def test_noise_among_successes_is_not_push_back_a_429_is(
    events: list[Event], slowdowns: int
) -> None:
    """Thirty seconds of the noisy shop at 30 answers a second, then ``events``."""
    warm, _ = run(noisy(30, 30))
    assert (warm.slowdowns, warm.delay, warm.concurrency) == (0, 0.0, 32), "noise: full pace"
    state, _ = run(events, warm)
    assert state.slowdowns == slowdowns
    assert (state.delay > 0) == bool(slowdowns)
    assert state.concurrency == 32, "noise narrows nothing, a 429 is about the rate"


def test_a_429_after_noise_teaches_what_the_host_took_noise_included() -> None:
    """At 30 a second with 9% noise a limiter counted 30 requests a second, not the 27
    healthy answers: the ceiling counts every request sent but the 429s."""
    warm, _ = run(noisy(10, 30))
    state, _ = run([Event(Outcome.BLOCKED, 429, dt=0.001)], warm)
    assert 1 / state.limit_delay == pytest.approx(30, rel=0.07)


@pytest.mark.parametrize("seconds", [0.3, 0.5, 0.8])
def test_a_young_lane_s_first_429_teaches_what_the_host_took_in_its_window(
    seconds: float,
) -> None:
    """A lane that ran ``seconds`` (less than the one-second window) at 40 a second, then a
    429: a limiter of N a second took N; the healthy answers' rate, decaying over the window,
    had counted each by its age (about 0.6 to 0.9 of them)."""
    ran, _ = run(healthy(seconds, 40))
    took = int(seconds * 40)
    state, _ = run([Event(Outcome.BLOCKED, 429, dt=0.001)], ran)
    assert ran.ok_rate < 0.92 * took, "what the ceiling was learnt from before"
    assert 1 / state.limit_delay == pytest.approx(took, rel=0.08)


def test_a_burst_of_429s_slows_down_once() -> None:
    warm, now = run(healthy(5, 40))
    state = warm
    for _ in range(30):
        state = step(state, E429, now + 0.01, started=now - 0.02)
    assert 1 / state.delay == pytest.approx(34, rel=0.05)
    later = step(state, E429, state.slowed_at + 1, started=state.slowed_at + 0.5)
    assert later.delay > state.delay, "a 429 sent after the slow-down took effect counts"


def test_one_429_at_most_halves_the_ceiling() -> None:
    warm, _ = run(healthy(5, 40))
    state, now = run([Event(Outcome.BLOCKED, 429, retry_after=1.0)], warm)
    ceiling = state.limit_delay
    # no healthy response for a while: the healthy rate is near zero, the ceiling halves
    again = step(state, E429, now + 20, started=now + 19)
    assert again.limit_delay == pytest.approx(2 * ceiling)


def test_no_healthy_rate_no_ceiling() -> None:
    state, _ = run([E429])
    assert state.limit_delay == 0.0
    assert state.delay == pytest.approx(CONFIG.slowdown_floor * CONFIG.slowdown_factor)


def test_only_a_429_teaches_a_ceiling() -> None:
    for pushback in (E503, BLOCK_PAGE, CUT):
        state, _ = run([*healthy(5), *rule(pushback, 9)])
        assert state.delay > 0 and state.limit_delay == 0.0


def test_after_a_429_the_lane_probes_upward_slowly_in_time_and_in_requests() -> None:
    warm, _ = run(healthy(5, 40))
    state, _ = run([Event(Outcome.BLOCKED, 429, retry_after=1.0)], warm)
    resume = state.delay
    after_a_minute, _ = run(healthy(60, 10), state, now=state.slowed_at)  # 600 responses
    rate = resume / after_a_minute.delay
    assert rate == pytest.approx(math.exp(min(60 * 0.02, 600 * 0.0004)), rel=0.02)
    many_quickly, _ = run(healthy(1, 600), state, now=state.slowed_at)  # 600 in one second
    assert resume / many_quickly.delay == pytest.approx(math.exp(0.02), rel=0.01)


def test_the_ceiling_is_forgotten_after_limit_hold_without_a_429() -> None:
    config = PacingConfig(max_concurrency=32, limit_hold=60.0)
    warm, _ = run(healthy(5, 40), config=config)
    state, _ = run([Event(Outcome.BLOCKED, 429, retry_after=1.0)], warm, config=config)
    assert state.limit_delay > 0
    later, _ = run([Event(dt=1.0)] * 100, state, config=config)
    assert (later.limit_delay, later.delay) == (0.0, 0.0)


# -- recovery per unit of time -----------------------------------------------------------------


def pushed(delay_at_least: float) -> tuple[PacingState, float]:
    """A lane slowed down by a wall of block pages to at least ``delay_at_least``."""
    state, now = warmed()
    while state.delay < delay_at_least:
        now = max(now, state.blocked_until) + 0.01
        state = step(state, BLOCK_PAGE, now)
    return state, now


def test_recovery_is_per_second_not_per_response() -> None:
    state, _ = pushed(0.5)
    start = state.slowed_at + 0.01
    few_slow, _ = run([Event(dt=0.5)] * 2, state, now=start)  # 2 responses in a second
    many_fast, _ = run([Event(dt=0.001)] * 100, state, now=start)  # 100 in a tenth
    assert few_slow.delay == pytest.approx(state.delay * 0.5, rel=0.05)
    assert many_fast.delay == pytest.approx(state.delay * 0.5**0.1, rel=0.05)


def test_a_hold_is_no_healthy_time() -> None:
    state, _ = pushed(0.5)
    first, _ = run([OK], state, now=state.slowed_at)
    assert first.delay == pytest.approx(state.delay, rel=0.02)


@pytest.mark.parametrize("delay", [1.0, 20.0, 60.0])
def test_a_lane_at_any_delay_is_back_at_full_pace_one_delay_after_push_back_stops(
    delay: float,
) -> None:
    """Healthy answers again, one per delay: the time since counts; after ``d + log2(d /
    snap)`` seconds at most the pace is back to the floor and the width to its maximum."""
    state, _ = pushed(delay)
    now = state.slowed_at
    bound = now + state.delay + math.log(state.delay / CONFIG.snap, 2) + 5 * CONFIG.recover_every
    while now < bound and (state.delay > 0.0 or state.concurrency < 32):
        now += max(state.delay, 0.01)
        state = step(state, OK, now)
    assert (state.delay, state.concurrency) == (0.0, 32)


@pytest.mark.parametrize("seconds", [0.25, 0.5, 0.75, 1.0, 2.0])
def test_the_window_doubles_every_recover_every_seconds(seconds: float) -> None:
    state, _ = run([OK, *healthy(seconds)])  # the first answer starts the clock
    expected = min(32.0, CONFIG.start_concurrency * 2.0 ** (seconds / CONFIG.recover_every))
    assert state.window == pytest.approx(expected, rel=0.02)
    assert state.concurrency == round(expected)


def test_recovery_stops_at_crawl_delay_and_widens_fully() -> None:
    state, _ = run([*healthy(1), *[BLOCK_PAGE] * 8], initial(CONFIG, crawl_delay=3.0))
    state, _ = run([Event(dt=3.0)] * 40, state)
    assert state.delay == 3.0
    assert state.concurrency == 32  # robots asked for a delay, not a width


def test_min_delay_is_a_floor() -> None:
    config = PacingConfig(min_delay=1.5)
    state, _ = run([Event(dt=1.5)] * 5, config=config)
    assert state.delay == 1.5


# -- latency against the lane's own baseline ---------------------------------------------------


def test_a_quick_404_is_no_latency_sample() -> None:
    warm, _ = warmed()
    state, _ = run([GONE] * 50, warm)
    assert (state.base_latency, state.ewma_latency) == (warm.base_latency, warm.ewma_latency)


def test_latency_keeps_its_typical_value_through_slow_pages() -> None:
    """One page in fifty takes 3 s: the running median does not move, nothing slows."""
    events = [Event(latency=3.0) if i % 50 == 0 else Event(latency=0.01) for i in range(2000)]
    state, _ = run(events)
    assert state.ewma_latency == pytest.approx(0.01, rel=0.15)
    assert state.base_latency == 0.01
    assert (state.delay, state.concurrency) == (0.0, 32)


@pytest.mark.parametrize(
    ("latency", "slower"),
    [
        (0.012, False),  # 1.2x its baseline: noise
        (0.05, True),  # 5x, and 100/s x 40 ms = 4 requests waiting: load
        (0.05 + 1e-9, True),
    ],
)
def test_latency_rising_with_load_slows_the_rate_gently(latency: float, slower: bool) -> None:
    warm, _ = warmed()  # 100 responses a second at 10 ms
    state, _ = run([Event(latency=latency)] * 30, warm)
    if not slower:
        assert state.delay == 0.0
        return
    assert 0.0 < state.delay <= 1.5 / 100, "just under the rate delivered, not a collapse"
    assert state.concurrency == 32, "latency paces the rate; the width is for slow pages"


def test_latency_at_a_low_rate_is_no_load() -> None:
    """Vegas: 2 responses a second 40 ms slower than usual is 0.08 requests waiting."""
    warm, _ = run([Event(dt=0.5)] * 20)
    state, _ = run([Event(latency=0.05, dt=0.5)] * 30, warm)
    assert state.delay == 0.0


def test_a_baseline_probe_measures_the_unloaded_latency_again() -> None:
    """While latency steers the pace, every ``probe_every`` seconds the lane pauses for one
    typical latency once the requests already leased have started; the next request ran alone
    and its latency is the baseline from then on (the lowest one seen is, otherwise)."""
    state, now = warmed()  # the baseline (10 ms) came with the first answers, at T0
    loaded = Event(latency=0.05)
    while not state.probe_from:
        now += 0.01
        state = step(state, loaded, now)
    assert now == pytest.approx(T0 + CONFIG.probe_every, abs=0.02)
    assert state.probe_from > now and state.blocked_until == state.probe_from
    alone = step(state, Event(latency=0.03), state.probe_from + 0.03, started=state.probe_from)
    assert alone.base_latency == 0.03 and alone.probe_from == 0.0
    later, _ = run([loaded] * 500, alone)
    assert later.probe_from == 0.0, "not again before probe_every"
    lower, _ = run([Event(latency=0.02)], later)
    assert lower.base_latency == 0.02


# -- the host circuit --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failures", "blocked_for"),
    [(4, None), (5, 30.0), (6, 60.0), (7, 120.0), (12, 3600.0), (40, 3600.0)],
)
def test_host_circuit(failures: int, blocked_for: float | None) -> None:
    now, state = T0, initial(CONFIG)
    for _ in range(failures):  # each one sent after the circuit last reopened
        now = max(now, state.blocked_until) + 1.0
        state = step(state, CUT, now)
    assert state.errors_in_row == failures
    if blocked_for is None:
        assert state.blocked_until <= now
    else:
        assert state.blocked_until == pytest.approx(now + blocked_for)
        assert state.concurrency == CONFIG.min_concurrency, "reopened one probe at a time"


def test_a_response_below_500_resets_the_circuit_count() -> None:
    state, _ = run([CUT] * 4 + [E404] + [CUT] * 4)
    assert state.errors_in_row == 4
    assert state.trips == 0


@pytest.mark.parametrize("failure", [E500, E503, CUT])
def test_a_5xx_storm_opens_the_circuit_like_no_response(failure: Event) -> None:
    state, now = run([failure] * 5)
    assert state.trips == 1
    assert state.blocked_until >= now + CONFIG.circuit_base - 1


def test_a_burst_of_failures_opens_the_circuit_once() -> None:
    state = initial(CONFIG)
    now = T0 + 1
    for _ in range(30):
        state = step(state, CUT, now, started=now - 0.1)
    assert state.trips == 1
    assert state.blocked_until == pytest.approx(now + CONFIG.circuit_base)
    probe = state.blocked_until + 0.01
    state = step(state, CUT, probe + 1, started=probe)
    assert state.blocked_until == pytest.approx(probe + 1 + 2 * CONFIG.circuit_base)
    state = step(state, OK, probe + 100, started=probe + 99)
    assert (state.errors_in_row, state.trips) == (0, 0)


# -- what says nothing about the host ----------------------------------------------------------


@pytest.mark.parametrize("outcome", [Outcome.ROBOTS, Outcome.TRAP, Outcome.PERMANENT_ERROR])
def test_attempts_without_response_or_fault_change_nothing(outcome: Outcome) -> None:
    start, _ = run([*healthy(1), E429])
    state, _ = run([Event(outcome, None, None)], start)
    assert state == start


def test_a_postponed_host_is_held_for_its_retry_after() -> None:
    """The worker reports a host whose robots.txt is unreachable as a robots outcome with no
    status and a Retry-After: the lane is held, nothing else changes."""
    start, _ = run(healthy(1))
    state, now = run([Event(Outcome.ROBOTS, None, None, retry_after=60.0)], start)
    assert state.blocked_until == pytest.approx(now + 60.0)
    assert (state.delay, state.concurrency) == (start.delay, start.concurrency)


def test_slowdowns__counted_per_decision_kept_through_answers_noise_counts_none() -> None:
    noisy, _ = run(([OK] * 19 + [E503]) * 20)  # 5% push-back: noise
    assert noisy.slowdowns == 0
    limited, now = run([OK] * 50 + [E429])
    assert limited.slowdowns == 1
    later, now = run([OK] * 200, limited, now=now + 5)  # healthy answers keep the count
    assert later.slowdowns == 1
    pushed, _ = run([OK, E503] * 20, later, now=now)  # push-back become the rule
    assert pushed.slowdowns >= 2
