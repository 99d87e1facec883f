"""Adaptive per-domain (or per domain and route) pacing: how fast and how wide to crawl a host.

The rule is AIMD, as in TCP: slow down multiplicatively at the first sign of pressure (429, 503,
blocks, latency rising), recover additively while the host is healthy. A host that fails every
request is closed as a whole for an exponentially growing time (a host circuit), so dead hosts do
not eat attempts. Pure: the store keeps a :class:`PacingState` per domain and applies
:func:`update` to it after every attempt, with the clock passed in.
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
    """

    delay: float
    concurrency: int
    ewma_latency: float | None
    blocked_until: float
    errors_in_row: int
    ok_in_row: int = 0
    floor: float = 0.0


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
    ewma_alpha: float = 0.2
    # Recovery: delay x recover_factor per healthy response, concurrency +1 every recover_every.
    recover_factor: float = 0.9
    recover_every: int = 10
    # A delay this close to the floor snaps to it (x0.9 would otherwise never reach 0).
    snap: float = 0.01
    retry_after_cap: float = 3600.0
    # Host circuit: after circuit_threshold transport failures in a row the host is closed for
    # circuit_base seconds, doubling with each further failure, up to circuit_cap.
    circuit_threshold: int = 5
    circuit_base: float = 30.0
    circuit_cap: float = 3600.0


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


def _clamp_delay(delay: float, state: PacingState, config: PacingConfig) -> float:
    floor = max(config.min_delay, state.floor)
    return min(max(delay, floor), max(config.max_delay, floor))


def _slow_down(state: PacingState, config: PacingConfig) -> PacingState:
    delay = max(state.delay, config.slowdown_floor) * config.slowdown_factor
    return replace(
        state,
        delay=_clamp_delay(delay, state, config),
        concurrency=max(config.min_concurrency, state.concurrency // 2),
        ok_in_row=0,
    )


def _latency_slow_down(state: PacingState, config: PacingConfig) -> PacingState:
    delay = max(state.delay, config.latency_floor) * config.latency_factor
    return replace(state, delay=_clamp_delay(delay, state, config), ok_in_row=0)


def _recover(state: PacingState, config: PacingConfig) -> PacingState:
    floor = max(config.min_delay, state.floor)
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
        delay=_clamp_delay(delay, state, config),
        concurrency=concurrency,
        ok_in_row=ok_in_row,
    )


def _transport_failure(state: PacingState, config: PacingConfig, now: float) -> PacingState:
    errors = state.errors_in_row + 1
    blocked_until = state.blocked_until
    if errors >= config.circuit_threshold:
        exponent = min(errors - config.circuit_threshold, 62)
        pause = min(config.circuit_cap, config.circuit_base * math.ldexp(1.0, exponent))
        blocked_until = max(blocked_until, now + pause)
    return replace(state, errors_in_row=errors, ok_in_row=0, blocked_until=blocked_until)


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
) -> PacingState:
    """The domain's pacing after one attempt.

    ``status`` is None when no response arrived (timeout, connection error); ``latency`` is the
    response time in seconds, when there was one; ``retry_after`` the parsed Retry-After in
    seconds (it closes the domain until ``now + retry_after``, capped).
    """
    if retry_after is not None:
        until = now + min(max(retry_after, 0.0), config.retry_after_cap)
        state = replace(state, blocked_until=max(state.blocked_until, until))
    if status is None:
        if outcome is Outcome.RETRYABLE_ERROR:
            return _transport_failure(state, config, now)
        return state  # no response and nothing to learn (robots, trap, refused address)
    # A response arrived: the host is alive.
    before = state.ewma_latency
    state = _with_latency(replace(state, errors_in_row=0), config, latency)
    if outcome is Outcome.BLOCKED or status in (429, 503):
        return _slow_down(state, config)
    if outcome is Outcome.RETRYABLE_ERROR:  # 500, 502, 504: not healthy, not pushback either
        return replace(state, ok_in_row=0)
    if outcome is not Outcome.OK:  # a 404 says nothing about the host's load
        return state
    if latency is not None and before is not None and latency > config.latency_ratio * before:
        return _latency_slow_down(state, config)
    return _recover(state, config)
