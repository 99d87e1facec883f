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

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from crawlfleet.frontier.ports import DomainState
from crawlfleet.model import Completion, Failure
from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.pacing import PacingConfig, PacingState, initial, update

__all__ = ["Event", "apply", "event_of_completion", "event_of_failure", "state_from_row"]

#: columns of ``pace_read`` after ``domain``: the limits, in-flight count and next start, then
#: the pacing columns the lease reads, then the rest of the pacing state as one JSON document
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
    return Event(f.outcome, f.status, f.latency, f.retry_after, f.started_at)


def state_from_row(row: Sequence[Any], config: PacingConfig | None = None) -> DomainState:
    """A ``pace_read`` row (``domain`` first, then :data:`READ_COLUMNS`) as a DomainState.

    Fields the JSON document lacks (a row written by another version) start as a new lane's;
    keys the policy no longer knows are ignored.
    """
    domain, max_in_flight, min_delay, in_flight, next_at = row[:5]
    delay, concurrency, blocked_until, floor, document = row[5:10]
    saved = json.loads(document) if document else {}
    known = {k: v for k, v in saved.items() if k in _STATE_FIELDS}
    base = initial(config or PacingConfig())
    pacing = replace(
        base,
        **known,
        delay=delay,
        concurrency=concurrency,
        blocked_until=blocked_until,
        floor=floor,
    )
    return DomainState(domain, max_in_flight, min_delay, in_flight, next_at, pacing)


def write_values(state: PacingState) -> tuple[Any, ...]:
    """The pacing columns ``pace_write`` sets, in its order: the lease's, then the document."""
    rest = {k: v for k, v in asdict(state).items() if k not in _COLUMN_FIELDS}
    document = json.dumps(rest, separators=(",", ":"))
    return (state.delay, state.concurrency, state.blocked_until, document)


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
