"""What both backends share to apply the pacing policy inside ``complete`` and ``fail``.

The store reads the domain rows of a batch, folds every item's outcome into its domain's
:class:`~crawlfleet.policy.pacing.PacingState` with :func:`~crawlfleet.policy.pacing.update` (the
same pure function on every backend), and writes the rows back in the same transaction. Column
order here is the order of the ``pace_read`` / ``pace_write`` queries of both SQL files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from crawlfleet.frontier.base import Completion, DomainState, Failure
from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.pacing import PacingConfig, PacingState, update

__all__ = ["Event", "apply", "event_of_completion", "event_of_failure", "state_from_row"]

#: columns of ``pace_read`` after ``domain``: limits, then the pacing state
READ_COLUMNS = (
    "max_in_flight",
    "min_delay",
    "in_flight",
    "next_at",
    "delay",
    "concurrency",
    "ewma_latency",
    "blocked_until",
    "errors_in_row",
    "ok_in_row",
    "delay_floor",
    "slowed_at",
    "limit_delay",
    "ok_rate",
    "rate_at",
    "trips",
)


@dataclass(frozen=True, slots=True)
class Event:
    """One item of a batch as the pacing policy sees it (``outcome`` None: nothing to learn)."""

    outcome: Outcome | None
    status: int | None
    latency: float | None
    retry_after: float | None
    started: float | None


def event_of_completion(c: Completion) -> Event:
    return Event(Outcome.OK, c.status, c.elapsed or None, None, c.started_at)


def event_of_failure(f: Failure) -> Event:
    try:
        outcome: Outcome | None = Outcome(f.outcome)
    except ValueError:
        outcome = None
    return Event(outcome, f.status, f.latency, f.retry_after, f.started_at)


def state_from_row(row: Sequence[Any]) -> DomainState:
    """A ``pace_read`` row (``domain`` first, then :data:`READ_COLUMNS`) as a DomainState."""
    (domain, max_in_flight, min_delay, in_flight, next_at, delay, concurrency, ewma) = row[:8]
    blocked_until, errors, ok, floor, slowed_at, limit, ok_rate, rate_at, trips = row[8:]
    pacing = PacingState(
        delay=delay,
        concurrency=concurrency,
        ewma_latency=ewma,
        blocked_until=blocked_until,
        errors_in_row=errors,
        ok_in_row=ok,
        floor=floor,
        slowed_at=slowed_at,
        limit_delay=limit,
        ok_rate=ok_rate,
        rate_at=rate_at,
        trips=trips,
    )
    return DomainState(domain, max_in_flight, min_delay, in_flight, next_at, pacing)


def write_values(state: PacingState) -> tuple[Any, ...]:
    """The pacing columns ``pace_write`` sets, in its order."""
    return (
        state.delay,
        state.concurrency,
        state.ewma_latency,
        state.blocked_until,
        state.errors_in_row,
        state.ok_in_row,
        state.slowed_at,
        state.limit_delay,
        state.ok_rate,
        state.rate_at,
        state.trips,
    )


def apply(
    domain: DomainState, config: PacingConfig, now: float, events: Iterable[Event]
) -> PacingState:
    """The domain's pacing after the batch's events, in order; limits come from the row."""
    config = replace(config, min_delay=domain.min_delay, max_concurrency=domain.max_in_flight)
    state = domain.pacing
    for e in events:
        if e.outcome is None:
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
