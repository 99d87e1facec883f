"""Route health: how well each route does per domain, and a circuit breaker per route.

Pure, with the clock passed in (``now``, epoch seconds); every state is a frozen dataclass of
JSON scalars (:func:`~crawlfleet.policy.state.to_json` / ``from_json``), so the store can keep
it fleet-wide and every worker sees the same picture.

* :class:`RouteStats`, one per (route, domain): successes, blocks, errors and latency over recent
  attempts. Counts decay with a half-life of ``window`` seconds, so old attempts fade instead of
  falling off a cliff. :meth:`RouteStats.score` ranks routes for a domain:
  ``0.7 * success + 0.3 * (1 - latency / latency_scale)``; a route with no history scores as a
  perfect one, so new routes get tried.
* :class:`Breaker`, one per route::

      closed --(failure_threshold failures in a row, or failures >= failure_ratio of recent
                attempts and >= failure_threshold of them; refused_threshold refusals in a row)-->
      open --(cooldown passed: one request admitted as a probe)--> half_open
      half_open --(probe succeeds)--> closed
      half_open --(probe fails)--> open again, cooldown x backoff per failed probe (up to a cap)

  Refusals (:attr:`Signal.REFUSED`) open it after ``refused_threshold`` in a row (2): the
  route is down, not slow, and should be out within seconds. A 429 is no failure of the route
  (:func:`breaker_signal`): the site asks its lane to go slower, and the lane's pacing does;
  taking the route out for every domain would idle it for a cool-down over a rate.

:func:`pool_health` counts a pool's routes as healthy, open or probing, for the dashboard and
``plan``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final, Self

from crawlfleet.policy.state import JsonScalar, from_json, to_json

__all__ = [
    "Breaker",
    "BreakerState",
    "HealthConfig",
    "PoolHealth",
    "RouteStats",
    "Signal",
    "breaker_signal",
    "pool_health",
    "rank_routes",
]


class Signal(StrEnum):
    """What one attempt says about the route it went through."""

    SUCCESS = "success"
    """A usable response (including an origin's own 4xx: the route delivered it)."""
    BLOCK = "block"
    """A block page or status (see ``policy.blocks``)."""
    ERROR = "error"
    """No usable response: timeout, cut connection, proxy error, 5xx through the route."""
    REFUSED = "refused"
    """The proxy refused the connection or could not be reached: the route is down."""


@dataclass(frozen=True, slots=True)
class HealthConfig:
    """Knobs of route health; times in seconds."""

    window: float = 60.0
    """Half-life of the counts behind success rates, block rates and the breaker's ratio."""
    failure_threshold: int = 5
    failure_ratio: float = 0.5
    refused_threshold: int = 2
    """Refusals in a row that open the breaker at once."""
    cooldown: float = 30.0
    """How long a breaker stays open before its first probe."""
    backoff: float = 2.0
    """Cool-down multiplier per failed probe."""
    cooldown_cap: float = 3600.0
    probe_timeout: float = 120.0
    """A probe not reported within this long is taken as lost; another one may go."""
    success_weight: float = 0.7
    """Weight of the success rate in the score; latency gets the rest."""


DEFAULT_HEALTH: Final = HealthConfig()

#: the status a site answers a client going too fast with: about the lane's rate, not the route
TOO_MANY_REQUESTS: Final = 429


def breaker_signal(signal: Signal | None, status: int | None) -> Signal | None:
    """What an attempt tells its route's breaker: its ``signal``, but nothing for a 429 (the
    site limits this client's rate on this domain; the lane's pacing slows down, the route
    works) and nothing when there is no signal."""
    if signal is Signal.BLOCK and status == TOO_MANY_REQUESTS:
        return None
    return signal


def _decay(now: float, then: float, config: HealthConfig) -> float:
    return 1.0 if now <= then else math.exp2(-(now - then) / config.window)


@dataclass(frozen=True, slots=True)
class RouteStats:
    """One route's recent record on one domain (decayed counts; latency is a decayed mean)."""

    updated_at: float = 0.0
    successes: float = 0.0
    blocks: float = 0.0
    errors: float = 0.0
    latency: float = 0.0
    """Mean seconds per response (successes and blocks), weighted like the counts."""
    responses: float = 0.0

    def record(
        self,
        signal: Signal,
        now: float,
        latency: float | None = None,
        config: HealthConfig = DEFAULT_HEALTH,
    ) -> RouteStats:
        """These stats after one more attempt (``latency``: seconds, for responses)."""
        k = _decay(now, self.updated_at, config)
        successes, blocks, errors = self.successes * k, self.blocks * k, self.errors * k
        responses, latency_mean = self.responses * k, self.latency
        if signal is Signal.SUCCESS:
            successes += 1
        elif signal is Signal.BLOCK:
            blocks += 1
        else:
            errors += 1
        if latency is not None and signal in (Signal.SUCCESS, Signal.BLOCK):
            responses += 1
            latency_mean += (latency - latency_mean) / responses
        return RouteStats(
            max(now, self.updated_at), successes, blocks, errors, latency_mean, responses
        )

    def attempts(self, now: float, config: HealthConfig = DEFAULT_HEALTH) -> float:
        """Recent attempts (decayed to ``now``)."""
        return (self.successes + self.blocks + self.errors) * _decay(now, self.updated_at, config)

    def success_rate(self) -> float:
        """Share of recent attempts that succeeded; 1.0 with no history (an optimistic prior of
        one success, so a new route is tried and an old one is judged on its record)."""
        return (self.successes + 1) / (self.successes + self.blocks + self.errors + 1)

    def block_rate(self) -> float:
        """Share of recent attempts that were blocked (0.0 with no history)."""
        total = self.successes + self.blocks + self.errors
        return self.blocks / total if total else 0.0

    def score(self, latency_scale: float, config: HealthConfig = DEFAULT_HEALTH) -> float:
        """``w * success_rate + (1 - w) * (1 - latency / latency_scale)``, in [0, 1]; the
        latency term is 1 for a route without responses or when ``latency_scale`` is 0."""
        latency = min(1.0, self.latency / latency_scale) if latency_scale > 0 else 0.0
        w = config.success_weight
        return w * self.success_rate() + (1 - w) * (1 - latency)

    def to_json(self) -> dict[str, JsonScalar]:
        return to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, JsonScalar]) -> Self:
        return from_json(cls, data)


def rank_routes(
    stats: Mapping[str, RouteStats], config: HealthConfig = DEFAULT_HEALTH
) -> list[tuple[str, float]]:
    """``(route_id, score)`` best first; latency is normalised by the slowest candidate.
    Ties keep the mapping's order (so a caller can rotate it for fairness)."""
    scale = max((s.latency for s in stats.values()), default=0.0)
    scored = [(route, s.score(scale, config)) for route, s in stats.items()]
    return sorted(scored, key=lambda pair: -pair[1])


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class Breaker:
    """One route's circuit breaker (see the module docstring for the state machine)."""

    state: BreakerState = BreakerState.CLOSED
    updated_at: float = 0.0
    failures: float = 0.0
    """Recent failures (errors and blocks), decayed like :class:`RouteStats`' counts."""
    attempts: float = 0.0
    streak: int = 0
    """Failures in a row."""
    refusals: int = 0
    """Refusals in a row."""
    open_until: float = 0.0
    failed_probes: int = 0
    probe_started: float = 0.0

    def admit(self, now: float, config: HealthConfig = DEFAULT_HEALTH) -> Breaker | None:
        """The breaker after letting one request through at ``now``, or None if it may not go.

        Closed: always (unchanged). Open: once the cool-down is over, as the one probe
        (half-open). Half-open: only if the probe in flight is older than ``probe_timeout``.
        """
        if self.state is BreakerState.CLOSED:
            return self
        if self.state is BreakerState.OPEN and now < self.open_until:
            return None
        if self.state is BreakerState.HALF_OPEN and now < self.probe_started + config.probe_timeout:
            return None
        return replace(self, state=BreakerState.HALF_OPEN, probe_started=now, updated_at=now)

    def record(self, signal: Signal, now: float, config: HealthConfig = DEFAULT_HEALTH) -> Breaker:
        """The breaker after an attempt through its route ended with ``signal``.

        Results that arrive while it is open (requests already in flight) only count.
        """
        k = _decay(now, self.updated_at, config)
        failed = signal is not Signal.SUCCESS
        counted = replace(
            self,
            updated_at=max(now, self.updated_at),
            attempts=self.attempts * k + 1,
            failures=self.failures * k + failed,
            streak=self.streak + 1 if failed else 0,
            refusals=self.refusals + 1 if signal is Signal.REFUSED else 0,
        )
        if self.state is BreakerState.OPEN:
            return counted
        if self.state is BreakerState.HALF_OPEN:
            if failed:
                return counted._opened(now, config, self.failed_probes + 1)
            return Breaker(updated_at=counted.updated_at, attempts=counted.attempts)
        return counted._opened(now, config, 0) if counted._tripped(config) else counted

    def _tripped(self, config: HealthConfig) -> bool:
        if self.streak >= config.failure_threshold or self.refusals >= config.refused_threshold:
            return True
        return (
            self.failures >= config.failure_threshold
            and self.failures >= config.failure_ratio * self.attempts
        )

    def _opened(self, now: float, config: HealthConfig, failed_probes: int) -> Breaker:
        growth = config.backoff ** min(failed_probes, 64)  # past that the cap has long won
        cooldown = min(config.cooldown_cap, config.cooldown * growth)
        return replace(
            self,
            state=BreakerState.OPEN,
            open_until=now + cooldown,
            failed_probes=failed_probes,
            probe_started=0.0,
        )

    def status(self, now: float) -> str:
        """``healthy`` (closed), ``open`` (cooling down) or ``probing`` (half-open, or open with
        the cool-down over: the next request is a probe)."""
        if self.state is BreakerState.CLOSED:
            return "healthy"
        if self.state is BreakerState.OPEN and now < self.open_until:
            return "open"
        return "probing"

    def to_json(self) -> dict[str, JsonScalar]:
        return to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, JsonScalar]) -> Self:
        return from_json(cls, data)


@dataclass(frozen=True, slots=True)
class PoolHealth:
    """How many of a pool's routes are healthy, open and probing."""

    healthy: int = 0
    open: int = 0
    probing: int = 0

    @property
    def total(self) -> int:
        return self.healthy + self.open + self.probing

    def to_json(self) -> dict[str, JsonScalar]:
        return {**to_json(self), "total": self.total}


def pool_health(breakers: Iterable[Breaker], now: float) -> PoolHealth:
    """Count ``breakers`` (one per route of a pool; a route without one is healthy: pass
    ``Breaker()``) by :meth:`Breaker.status`."""
    counts = {"healthy": 0, "open": 0, "probing": 0}
    for breaker in breakers:
        counts[breaker.status(now)] += 1
    return PoolHealth(**counts)
