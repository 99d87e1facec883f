"""What both backends share to apply the pacing policy inside ``complete`` and ``fail``.

The store reads the lane rows of a batch (a lane is the unit of pacing: today a domain), folds
every item's outcome into its lane's :class:`~crawlfleet.policy.pacing.PacingState` with
:func:`~crawlfleet.policy.pacing.update` (the same pure function on every backend), and writes the
rows back in the same transaction. The lease reads ``delay``, ``concurrency``, ``blocked_until``
and the robots floor from columns; the rest of the state is one JSON document, so the policy's
state can change without a schema migration. Column order here is the order of the
``pace_read`` / ``pace_write`` queries of both SQL files.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from crawlfleet.frontier.ports import DomainState
from crawlfleet.model import Completion, Failure
from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.escalation import EscalationState, Move
from crawlfleet.policy.escalation import update as escalate
from crawlfleet.policy.health import (
    DEFAULT_HEALTH,
    Breaker,
    BreakerState,
    HealthConfig,
    RouteStats,
    Signal,
    breaker_signal,
)
from crawlfleet.policy.pacing import PacingConfig, PacingState, initial, update

__all__ = ["Event", "apply", "event_of_completion", "event_of_failure", "state_from_row"]

#: columns of ``pace_read`` after ``domain`` and ``route``: the limits, in-flight count and next
#: start, then the pacing columns the lease reads, then the rest of the pacing state as one JSON
#: document
READ_COLUMNS = (
    "max_in_flight",
    "min_delay",
    "in_flight",
    "next_at",
    "delay",
    "concurrency",
    "blocked_until",
    "delay_floor",
    "pacing",
)
#: PacingState fields kept in columns of their own (the lease reads them); the others travel in
#: the ``pacing`` JSON document, so the policy can change its state without a schema migration
_COLUMN_FIELDS = ("delay", "concurrency", "blocked_until", "floor")
_STATE_FIELDS = frozenset(f.name for f in fields(PacingState))
#: the fields the JSON document holds, in the dataclass's order
_DOCUMENT_ORDER = tuple(f.name for f in fields(PacingState) if f.name not in _COLUMN_FIELDS)
_DOCUMENT_FIELDS = frozenset(_DOCUMENT_ORDER)
_ESCALATION_FIELDS = frozenset(f.name for f in fields(EscalationState))


@dataclass(frozen=True, slots=True)
class Event:
    """One item of a batch as the pacing policy sees it (``outcome`` None: nothing to learn),
    with what it says of its route (``signal``: a :class:`~crawlfleet.policy.health.Signal`
    value, or None) for the route's breaker and the lane's health."""

    outcome: Outcome | None
    status: int | None
    latency: float | None
    retry_after: float | None
    started: float | None
    signal: str | None = None


def event_of_completion(c: Completion) -> Event:
    return Event(Outcome.OK, c.status, c.elapsed or None, None, c.started_at, Signal.SUCCESS)


def event_of_failure(f: Failure) -> Event:
    signal = f.route_signal
    if signal is None and f.outcome is Outcome.BLOCKED:
        signal = Signal.BLOCK
    return Event(f.outcome, f.status, f.latency, f.retry_after, f.started_at, signal)


def fold_breaker(
    document: str, events: Iterable[Event], now: float, config: HealthConfig = DEFAULT_HEALTH
) -> tuple[str, float]:
    """A route's breaker (its stored JSON) after the batch's attempts through it; returns the
    new JSON and until when the route is out (``open_until``: 0 when closed). A breaker whose
    cool-down is over takes the first result as its probe (half-open). A 429 is left to the
    lane's pacing (:func:`~crawlfleet.policy.health.breaker_signal`)."""
    saved = json.loads(document) if document and document != "{}" else None
    breaker = Breaker.from_json(saved) if saved else Breaker()
    for e in events:
        signal = breaker_signal(Signal(e.signal) if e.signal else None, e.status)
        if signal is None:
            continue
        if breaker.state is BreakerState.OPEN and now >= breaker.open_until:
            breaker = breaker.admit(now, config) or breaker
        breaker = breaker.record(signal, now, config)
    open_until = breaker.open_until if breaker.state is not BreakerState.CLOSED else 0.0
    return json.dumps(breaker.to_json(), separators=(",", ":")), open_until


def health_config(config: PacingConfig) -> HealthConfig:
    """Route health as ``[pacing]`` sets it (the breaker's cool-down)."""
    return HealthConfig(cooldown=config.breaker_cooldown, cooldown_cap=config.breaker_cooldown_cap)


def fold_health(document: str, events: Iterable[Event], now: float) -> str:
    """A lane's health (its route's record on its domain, stored JSON) after the batch."""
    saved = json.loads(document) if document and document != "{}" else None
    stats = RouteStats.from_json(saved) if saved else RouteStats()
    for e in events:
        signal = e.signal
        if signal is None:  # no word on the route, but for its health this attempt failed
            signal = Signal.ERROR if e.outcome is not Outcome.OK else Signal.SUCCESS
        stats = stats.record(Signal(signal), now, e.latency)
    return json.dumps(stats.to_json(), separators=(",", ":"))


def fold_escalation(
    document: str,
    tiers: Sequence[int],
    results: Iterable[tuple[int, bool]],
    now: float,
    *,
    current: int,
) -> tuple[str, int, list[Move]]:
    """A domain's tier after the batch's attempts (``(tier, blocked)`` each): the stored JSON,
    the tier to crawl it on, and the moves made (up after blocks, or a probe down).
    ``current`` is the tier the domain is crawled on now."""
    saved = json.loads(document) if document and document != "{}" else {}
    state = EscalationState(**{k: v for k, v in saved.items() if k in _ESCALATION_FIELDS})
    if state.tier != current:
        state = EscalationState(tier=current, since=now, updated_at=now)
    moves: list[Move] = []
    for tier, blocked in results:
        state, move = escalate(state, tiers, now=now, blocked=blocked, tier=tier)
        if move is not None:
            moves.append(move)
    return json.dumps(asdict(state), separators=(",", ":")), state.tier, moves


def state_from_row(row: Sequence[Any], config: PacingConfig | None = None) -> DomainState:
    """A ``pace_read`` row (``domain``, ``route``, then :data:`READ_COLUMNS`) as a lane's state.

    Fields the JSON document lacks (a row written by another version) start as a new lane's;
    keys the policy no longer knows are ignored.
    """
    domain, route, max_in_flight, min_delay, in_flight, next_at = row[:6]
    delay, concurrency, blocked_until, floor, document = row[6:11]
    saved = json.loads(document) if document else {}
    if saved.keys() != _DOCUMENT_FIELDS:  # written by another version: a new lane's, then its
        base = initial(config or PacingConfig())
        saved = {f: getattr(base, f) for f in _DOCUMENT_FIELDS} | {
            k: v for k, v in saved.items() if k in _DOCUMENT_FIELDS
        }
    # every field at once: the store reads the lanes of every report (replace() costs twice)
    pacing = PacingState(
        **saved, delay=delay, concurrency=concurrency, blocked_until=blocked_until, floor=floor
    )
    return DomainState(domain, max_in_flight, min_delay, in_flight, next_at, pacing, route)


def write_values(state: PacingState) -> tuple[Any, ...]:
    """The pacing columns ``pace_write`` sets, in its order: the lease's, then the document."""
    rest = {k: getattr(state, k) for k in _DOCUMENT_ORDER}  # asdict() deep-copies: 3x slower
    document = json.dumps(rest, separators=(",", ":"))
    return (state.delay, state.concurrency, state.blocked_until, document)


@functools.lru_cache(maxsize=1024)
def _lane_config(config: PacingConfig, min_delay: float, max_in_flight: int) -> PacingConfig:
    """``config`` with a lane's limits (built once per limits: a PacingConfig checks its fields
    when it is made, and the store applies one to every lane of every report)."""
    return replace(config, min_delay=min_delay, max_concurrency=max_in_flight)


def apply(
    domain: DomainState, config: PacingConfig, now: float, events: Iterable[Event]
) -> PacingState:
    """The domain's pacing after the batch's events, in order; limits come from the row."""
    config = _lane_config(config, domain.min_delay, domain.max_in_flight)
    state = domain.pacing
    for e in events:
        # a proxy that refused or is unreachable says nothing about the site: its breaker
        # takes the route out, and the lane's pace stays what the site taught it
        if e.outcome is None or e.signal == Signal.REFUSED:
            continue
        state = update(
            state,
            config,
            now=now,
            outcome=e.outcome,
            status=e.status,
            latency=e.latency,
            retry_after=e.retry_after,
            started=e.started,
        )
    return state


def crawl_floor(config: PacingConfig, seconds: float | None) -> float:
    """The delay floor a robots.txt ``Crawl-delay`` sets (capped; 0 when there is none)."""
    if seconds is None or seconds <= 0:
        return 0.0
    return min(float(seconds), config.crawl_delay_cap)
