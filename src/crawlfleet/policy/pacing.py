"""Adaptive per-domain (or per domain and route) pacing: how fast and how wide to crawl a host.

The rule is AIMD, as in TCP: slow down multiplicatively at the first sign of pressure (429, 503,
blocks, latency rising), recover additively while the host is healthy. As in TCP, one slow-down
per round trip: the responses to requests that started before the last slow-down were already
answered by it, so a burst of 429s halves the pace once, not fifty times.

A 429 (the host's own word that it gets too many requests) also teaches a ceiling: the rate of
healthy responses just before it (a decaying count, ``ok_rate``) is about what the host accepts,
so recovery stops at ``limit_fraction`` of that rate until ``limit_hold`` seconds pass without
another push-back. Without it a host that allows N requests a second would be pushed over N
again at every recovery.

A host that fails every request (no response, or 5xx) is closed as a whole for an exponentially
growing time (a host circuit) and reopened one request at a time, so dead hosts do not eat
attempts. Pure: the store keeps a :class:`PacingState` per domain and applies :func:`update` to
it after every attempt, with the clock passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from crawlfleet.policy.classify import Outcome

__all__ = ["PacingConfig", "PacingState", "initial", "update"]


@dataclass(frozen=True, slots=True)
class PacingState:
    """Where a domain's pacing stands.

    ``delay``: least seconds between request starts. ``concurrency``: most requests in flight.
    ``ewma_latency``: smoothed response time (None before the first response).
    ``blocked_until``: no request starts before this epoch time (Retry-After, host circuit).
    ``errors_in_row``: transport failures (no response at all) since the last response.
    ``ok_in_row``: healthy responses since the last step up in concurrency or slow-down.
    ``floor``: the least ``delay`` this domain allows (robots.txt Crawl-delay, capped).
    ``slowed_at``: when the domain last slowed down on push-back or tripped its circuit.
    ``limit_delay``: the least ``delay`` learned from push-back (0: none), held for
    ``limit_hold`` seconds after ``slowed_at``.
    ``ok_rate`` / ``rate_at``: healthy responses per second (decaying), as of ``rate_at``.
    ``trips``: host circuit openings since the last response that was not a 5xx.
    """

    delay: float
    concurrency: int
    ewma_latency: float | None
    blocked_until: float
    errors_in_row: int
    ok_in_row: int = 0
    floor: float = 0.0
    slowed_at: float = 0.0
    limit_delay: float = 0.0
    ok_rate: float = 0.0
    rate_at: float = 0.0
    trips: int = 0


@dataclass(frozen=True)
class PacingConfig:
    """Bounds and rates of adaptation; the defaults suit most sites."""

    min_delay: float = 0.0
    max_delay: float = 60.0
    max_concurrency: int = 8
    min_concurrency: int = 1
    crawl_delay_cap: float = 30.0
    # Slow-down on 429/503/blocks: delay = max(delay, slowdown_floor) * slowdown_factor.
    slowdown_floor: float = 0.25
    slowdown_factor: float = 2.0
    # Rising latency (above latency_ratio x EWMA): a gentler slow-down, from latency_floor.
    latency_ratio: float = 2.0
    latency_factor: float = 1.25
    latency_floor: float = 0.1
    # Responses faster than this never count as rising latency: at millisecond scale a 2x jump
    # is noise (a GC pause, a busy loop), not a host struggling.
    latency_min: float = 0.25
    ewma_alpha: float = 0.2
    # Recovery: delay x recover_factor per healthy response, concurrency +1 every recover_every.
    recover_factor: float = 0.9
    recover_every: int = 10
    # A delay this close to the floor snaps to it (x0.9 would otherwise never reach 0).
    snap: float = 0.01
    retry_after_cap: float = 3600.0
    # Host circuit: after circuit_threshold failures in a row (no response, or 5xx) the host is
    # closed for circuit_base seconds, doubling with each further opening, up to circuit_cap,
    # and reopened with one request in flight.
    circuit_threshold: int = 5
    circuit_base: float = 30.0
    circuit_cap: float = 3600.0
    # The ceiling a push-back teaches: limit_fraction of the healthy-response rate before it
    # (measured over about rate_window seconds), held limit_hold seconds after the last one.
    limit_fraction: float = 0.5
    limit_hold: float = 600.0
    rate_window: float = 1.0


def initial(config: PacingConfig, crawl_delay: float | None = None) -> PacingState:
    """Pacing for a domain not seen before. A robots.txt ``Crawl-delay`` (capped at
    ``crawl_delay_cap``) becomes the domain's delay floor and starts it at one request at a time.
    """
    floor = config.min_delay
    concurrency = config.max_concurrency
    if crawl_delay is not None and crawl_delay > 0:
        floor = max(floor, min(crawl_delay, config.crawl_delay_cap))
        concurrency = config.min_concurrency
    return PacingState(floor, concurrency, None, 0.0, 0, 0, floor)


def _least_delay(state: PacingState, config: PacingConfig) -> float:
    return max(config.min_delay, state.floor, state.limit_delay)


def _clamp_delay(delay: float, state: PacingState, config: PacingConfig) -> float:
    floor = _least_delay(state, config)
    return min(max(delay, floor), max(config.max_delay, floor))


def _decayed_rate(state: PacingState, config: PacingConfig, now: float) -> float:
    if state.ok_rate <= 0.0:
        return 0.0
    return state.ok_rate * math.exp(-max(0.0, now - state.rate_at) / config.rate_window)


def _slow_down(state: PacingState, config: PacingConfig, now: float, learn: bool) -> PacingState:
    accepted = _decayed_rate(state, config, now)
    limit = state.limit_delay
    if learn and accepted > 0.0:  # 503s and block pages say "not now", not "slower than this"
        limit = max(limit, 1.0 / (accepted * config.limit_fraction))
    state = replace(state, limit_delay=min(limit, config.max_delay), slowed_at=now)
    delay = _clamp_delay(
        max(state.delay, config.slowdown_floor) * config.slowdown_factor, state, config
    )
    return replace(
        state,
        delay=delay,
        concurrency=max(config.min_concurrency, state.concurrency // 2),
        ok_in_row=0,
        # never answered at once: nothing starts before one new delay has passed
        blocked_until=max(state.blocked_until, now + delay),
    )


def _host_failure(
    state: PacingState, config: PacingConfig, now: float, started: float
) -> PacingState:
    """No response, or a 5xx: one more failure in a row; enough of them open the circuit."""
    errors = state.errors_in_row + 1
    state = replace(state, errors_in_row=errors, ok_in_row=0)
    if errors < config.circuit_threshold or started < state.slowed_at:
        return state  # not yet, or a request sent before the circuit last opened
    exponent = min(state.trips, 62)
    pause = min(config.circuit_cap, config.circuit_base * math.ldexp(1.0, exponent))
    return replace(
        state,
        blocked_until=max(state.blocked_until, now + pause),
        slowed_at=now,
        trips=state.trips + 1,
        concurrency=config.min_concurrency,  # reopen with one probe at a time
    )


def _with_latency(state: PacingState, config: PacingConfig, latency: float | None) -> PacingState:
    if latency is None:
        return state
    old = state.ewma_latency
    ewma = latency if old is None else config.ewma_alpha * latency + (1 - config.ewma_alpha) * old
    return replace(state, ewma_latency=ewma)


def update(
    state: PacingState,
    config: PacingConfig,
    *,
    now: float,
    outcome: Outcome,
    status: int | None,
    latency: float | None,
    retry_after: float | None,
    started: float | None = None,
) -> PacingState:
    """The domain's pacing after one attempt.

    ``status`` is None when no response arrived (timeout, connection error); ``latency`` is the
    response time in seconds, when there was one; ``retry_after`` the parsed Retry-After in
    seconds (it closes the domain until ``now + retry_after``, capped). ``started`` is when the
    request was sent (default ``now``): push-back and failures of requests sent before the last
    slow-down or circuit opening were already answered by it and do not compound.
    """
    started = now if started is None else started
    if retry_after is not None:
        until = now + min(max(retry_after, 0.0), config.retry_after_cap)
        state = replace(state, blocked_until=max(state.blocked_until, until))
    if status is None:
        if outcome is Outcome.RETRYABLE_ERROR:
            return _host_failure(state, config, now, started)
        return state  # no response and nothing to learn (robots, trap, refused address)
    if outcome is Outcome.OK and status < 500:
        return _healthy(state, config, now, latency)
    # A response arrived: the host is alive, though a 5xx says it is not well.
    state = _with_latency(state, config, latency)
    if status >= 500:
        state = _host_failure(state, config, now, started)
    else:
        state = replace(state, errors_in_row=0, trips=0)
    if outcome is Outcome.BLOCKED or status in (429, 503):
        if started < state.slowed_at:
            return replace(state, ok_in_row=0)  # already slowed down for this one
        return _slow_down(state, config, now, learn=status == 429)
    if outcome is Outcome.RETRYABLE_ERROR:  # 500, 502, 504: not healthy, not push-back either
        return replace(state, ok_in_row=0)
    return state  # a 404 says nothing about the host's load


def _healthy(
    state: PacingState, config: PacingConfig, now: float, latency: float | None
) -> PacingState:
    """:func:`update` for a healthy response, the common case: the latency average moves, the
    host counts as alive, the healthy rate grows; then either a gentle slow-down (latency rose
    past ``latency_ratio`` times its average) or a step of recovery: the push-back ceiling lifts
    after ``limit_hold``, the delay shrinks by ``recover_factor`` toward its floor, and every
    ``recover_every`` healthy responses allow one more request in flight. Built in one step:
    the store folds every completed request through here."""
    before = state.ewma_latency
    ewma = before
    if latency is not None:
        ewma = (
            latency
            if before is None
            else (config.ewma_alpha * latency + (1 - config.ewma_alpha) * before)
        )
    ok_rate = _decayed_rate(state, config, now) + 1.0 / config.rate_window
    rate_at = max(now, state.rate_at)
    if (
        latency is not None
        and before is not None
        and latency > max(config.latency_ratio * before, config.latency_min)
    ):
        delay = max(state.delay, config.latency_floor) * config.latency_factor
        return replace(
            state,
            delay=_clamp_delay(delay, state, config),
            ewma_latency=ewma,
            errors_in_row=0,
            trips=0,
            ok_rate=ok_rate,
            rate_at=rate_at,
            ok_in_row=0,
        )
    limit_delay = state.limit_delay
    if limit_delay and now - state.slowed_at >= config.limit_hold:
        limit_delay = 0.0  # no push-back for long: the ceiling lifts
    floor = max(config.min_delay, state.floor, limit_delay)
    delay = state.delay * config.recover_factor
    if delay < floor + config.snap:
        delay = floor
    ok_in_row = state.ok_in_row + 1
    concurrency = state.concurrency
    if ok_in_row >= config.recover_every:
        concurrency = min(config.max_concurrency, concurrency + 1)
        ok_in_row = 0
    return replace(
        state,
        delay=min(max(delay, floor), max(config.max_delay, floor)),
        concurrency=concurrency,
        ewma_latency=ewma,
        errors_in_row=0,
        trips=0,
        ok_rate=ok_rate,
        rate_at=rate_at,
        ok_in_row=ok_in_row,
        limit_delay=limit_delay,
    )
