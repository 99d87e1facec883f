"""Route health and breakers on a fake clock: tables of attempt sequences and what follows."""

from __future__ import annotations

import json

import pytest
from tests.conftest import FakeClock

from crawlfleet.policy.health import (
    Breaker,
    BreakerState,
    HealthConfig,
    PoolHealth,
    RouteStats,
    Signal,
    breaker_signal,
    pool_health,
    rank_routes,
)

S, B, E, R = Signal.SUCCESS, Signal.BLOCK, Signal.ERROR, Signal.REFUSED
CONFIG = HealthConfig()


def run(signals: list[Signal], clock: FakeClock, step: float = 0.1) -> Breaker:
    breaker = Breaker()
    for signal in signals:
        clock.advance(step)
        admitted = breaker.admit(clock.now)
        assert admitted is not None, f"not admitted before {signal}"
        breaker = admitted.record(signal, clock.now)
    return breaker


@pytest.mark.parametrize(
    ("signal", "status", "told"),
    [
        (B, 429, None),  # the site limits the lane's rate: its pacing answers, the route works
        (B, 200, B),  # a block page: the route's address or identity is burned
        (B, 403, B),
        (E, 429, E),  # the proxy's own failure
        (R, None, R),
        (S, 200, S),
        (None, 503, None),  # no word on the route (the site's noise)
    ],
)
def test_what_the_breaker_is_told(
    signal: Signal | None, status: int | None, told: Signal | None
) -> None:
    assert breaker_signal(signal, status) is told


@pytest.mark.parametrize(
    ("signals", "state"),
    [
        ([], BreakerState.CLOSED),
        ([E] * 4, BreakerState.CLOSED),
        ([E] * 5, BreakerState.OPEN),  # failures in a row
        ([B] * 5, BreakerState.OPEN),  # a route that only gets captchas
        ([E, B, E, B, E], BreakerState.OPEN),
        ([E] * 4 + [S], BreakerState.CLOSED),
        ([R, R], BreakerState.OPEN),  # refused: out at once
        ([R, S, R], BreakerState.CLOSED),
        ([E, E, E, R], BreakerState.CLOSED),
        ([S, E] * 6, BreakerState.OPEN),  # half the recent attempts fail
        ([S, S, E] * 6, BreakerState.CLOSED),  # a third do
        ([S] * 40 + [E, E, E, E, S] * 2, BreakerState.CLOSED),
    ],
)
def test_breaker_opens_on_repeated_failures(
    signals: list[Signal], state: BreakerState, clock: FakeClock
) -> None:
    assert run(signals, clock).state is state


def test_refused_proxy_is_out_within_seconds_and_probed_after_the_cooldown(
    clock: FakeClock,
) -> None:
    breaker = run([S, S, R, R], clock)
    opened_at = clock.now
    assert breaker.state is BreakerState.OPEN
    assert breaker.status(clock.now) == "open"
    assert breaker.admit(clock.now + CONFIG.cooldown - 0.01) is None
    clock.now = opened_at + CONFIG.cooldown
    assert breaker.status(clock.now) == "probing"
    probe = breaker.admit(clock.now)
    assert probe is not None and probe.state is BreakerState.HALF_OPEN
    assert probe.admit(clock.now + 1) is None  # one probe at a time
    closed = probe.record(S, clock.now + 1)
    assert closed.state is BreakerState.CLOSED
    assert (closed.streak, closed.failed_probes, closed.failures) == (0, 0, 0.0)


def test_failed_probes_back_off_up_to_the_cap(clock: FakeClock) -> None:
    breaker = run([E] * 5, clock)
    cooldowns = []
    for _ in range(10):
        cooldowns.append(round(breaker.open_until - clock.now, 6))
        clock.now = breaker.open_until
        probe = breaker.admit(clock.now)
        assert probe is not None
        breaker = probe.record(R, clock.now)
        assert breaker.state is BreakerState.OPEN
    assert cooldowns == [30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]


def test_a_lost_probe_lets_another_go_after_the_probe_timeout(clock: FakeClock) -> None:
    breaker = run([E] * 5, clock)
    probe = breaker.admit(breaker.open_until)
    assert probe is not None
    assert probe.admit(breaker.open_until + CONFIG.probe_timeout - 1) is None
    again = probe.admit(breaker.open_until + CONFIG.probe_timeout)
    assert again is not None and again.state is BreakerState.HALF_OPEN


def test_results_arriving_while_open_do_not_close_it(clock: FakeClock) -> None:
    breaker = run([E] * 5, clock)
    late = breaker.record(S, clock.now + 1).record(S, clock.now + 2)
    assert late.state is BreakerState.OPEN
    assert late.open_until == breaker.open_until


def test_old_failures_fade(clock: FakeClock) -> None:
    breaker = run([S, E, S, E, S, E, S, E], clock)  # 4 of 8 failed: not 5 yet
    assert breaker.state is BreakerState.CLOSED
    clock.advance(10 * CONFIG.window)  # ten half-lives later
    breaker = breaker.record(E, clock.now)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.failures == pytest.approx(1.0, abs=0.01)


def test_route_stats_rates_latency_and_decay(clock: FakeClock) -> None:
    stats = RouteStats()
    assert (stats.success_rate(), stats.block_rate(), stats.attempts(clock.now)) == (1.0, 0.0, 0)
    for signal, latency in [(S, 0.2), (S, 0.4), (B, 0.6), (E, None)]:
        stats = stats.record(signal, clock.now, latency)
    assert stats.success_rate() == pytest.approx(3 / 5)  # one optimistic success as a prior
    assert stats.block_rate() == pytest.approx(1 / 4)
    assert stats.latency == pytest.approx(0.4)
    clock.advance(CONFIG.window)
    assert stats.attempts(clock.now) == pytest.approx(2.0)  # one half-life
    stats = stats.record(S, clock.now, 1.4)
    # the new response weighs as much as the two older (halved) ones together
    assert stats.latency == pytest.approx((0.4 * 1.5 + 1.4) / 2.5)


def test_score_and_ranking(clock: FakeClock) -> None:
    def stats(signals: list[Signal], latency: float) -> RouteStats:
        s = RouteStats()
        for signal in signals:
            s = s.record(signal, clock.now, latency)
        return s

    fast_good = stats([S] * 9, 0.1)
    slow_good = stats([S] * 9, 1.0)
    fast_blocked = stats([S, B, B, B, B, B, B, B, B], 0.1)
    new = RouteStats()
    assert fast_good.score(1.0) == pytest.approx(0.7 + 0.3 * 0.9)
    assert slow_good.score(1.0) == pytest.approx(0.7)
    assert new.score(1.0) == 1.0
    ranked = rank_routes({"blocked": fast_blocked, "slow": slow_good, "fast": fast_good})
    assert [r for r, _ in ranked] == ["fast", "slow", "blocked"]
    assert rank_routes({"new": new, "fast": fast_good})[0][0] == "new"  # new routes get tried
    assert rank_routes({}) == []


def test_pool_health_counts_each_state(clock: FakeClock) -> None:
    opened = run([R, R], clock)
    probing = opened.admit(opened.open_until)
    assert probing is not None
    summary = pool_health([Breaker(), Breaker(), opened, probing], clock.now)
    assert summary == PoolHealth(healthy=2, open=1, probing=1)
    assert summary.to_json() == {"healthy": 2, "open": 1, "probing": 1, "total": 4}
    later = pool_health([opened], opened.open_until)  # cool-down over: next request probes
    assert later == PoolHealth(probing=1)


def test_states_round_trip_through_json(clock: FakeClock) -> None:
    breaker = run([E] * 5, clock)
    stats = RouteStats().record(S, clock.now, 0.25)
    for state in (breaker, stats, Breaker(), RouteStats()):
        data = json.loads(json.dumps(state.to_json()))
        assert all(isinstance(v, str | int | float | bool | None) for v in data.values())
        assert type(state).from_json(data) == state
    assert breaker.to_json()["state"] == "open"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bogus": 1}, "unknown keys"),
        ({"state": "ajar"}, "ajar"),
        ({"streak": "3"}, "does not fit"),
        ({"streak": True}, "does not fit"),
        ({"failures": [1]}, "not a scalar"),
    ],
)
def test_from_json_refuses_rows_it_does_not_understand(
    change: dict[str, object], message: str
) -> None:
    data = {**Breaker().to_json(), **change}
    with pytest.raises(ValueError, match=message):
        Breaker.from_json(data)  # type: ignore[arg-type]
    missing = Breaker().to_json()
    del missing["streak"]
    with pytest.raises(ValueError, match="missing keys"):
        Breaker.from_json(missing)
