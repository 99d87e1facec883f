"""The outbox's rows as objects, and what both backends share of it and of the run profiles.

An :class:`OutboxEvent` is written once (its ``key`` is unique in the store: the
``Idempotency-Key`` every destination is sent) with one delivery per destination it goes to;
a :class:`Delivery` is leased like a request (a fencing token, an expiry) and settled with a
:class:`DeliveryResult`. See ``sql/sqlite.sql`` (migration 0030) for the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from crawlfleet.data.profile import FieldStats

__all__ = [
    "DeadDelivery",
    "Delivery",
    "DeliveryResult",
    "EventRow",
    "OutboxCount",
    "OutboxEvent",
    "field_stats_from_rows",
]

#: states of a delivery
QUEUED: Final = "queued"
LEASED: Final = "leased"
DONE: Final = "done"
DEAD: Final = "dead"


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """An event to deliver: its idempotency ``key``, ``kind`` (alert, run_finished, changes),
    the JSON ``body`` sent as it is, the ``destinations`` (ids) it goes to, and how many tries
    each delivery gets before it is dead."""

    key: str
    kind: str
    body: str
    destinations: tuple[str, ...]
    job: str | None = None
    run: int | None = None
    max_attempts: int = 20


@dataclass(frozen=True, slots=True)
class Delivery:
    """A leased delivery of an event to one destination (``attempts`` counts this one)."""

    id: int
    token: int
    destination: str
    attempts: int
    max_attempts: int
    key: str
    kind: str
    body: str
    job: str | None = None
    run: int | None = None


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """How a delivery went: ``ok``, or not and tried again at ``retry_at`` (None: dead)."""

    id: int
    token: int
    ok: bool
    retry_at: float | None = None
    status: int | None = None  # the receiver's HTTP status, when it answered
    error: str | None = None

    @property
    def state(self) -> str:
        if self.ok:
            return DONE
        return QUEUED if self.retry_at is not None else DEAD


@dataclass(frozen=True, slots=True)
class OutboxCount:
    """One destination's deliveries by state, when its oldest waiting one was written (None:
    none waits) and its newest error."""

    destination: str
    queued: int
    leased: int
    done: int
    dead: int
    oldest_queued_at: float | None
    last_error: str | None

    @property
    def pending(self) -> int:
        return self.queued + self.leased


@dataclass(frozen=True, slots=True)
class DeadDelivery:
    id: int
    destination: str
    key: str
    kind: str
    job: str | None
    run: int | None
    attempts: int
    status: int | None
    error: str | None
    died_at: float | None


@dataclass(frozen=True, slots=True)
class EventRow:
    key: str
    kind: str
    job: str | None
    run: int | None
    body: str
    created_at: float


def field_stats_from_rows(rows: Sequence[Sequence[Any]]) -> dict[str, FieldStats]:
    """``profile_fields`` rows (key, present, filled, texts, distinct, numbers, min, max,
    median or NULL) as :class:`FieldStats`, by name."""
    out = {}
    for key, present, filled, texts, distinct, numbers, lo, hi, median in rows:
        out[key] = FieldStats(
            key,
            int(present or 0),
            int(filled or 0),
            int(texts or 0),
            int(distinct or 0),
            int(numbers or 0),
            None if lo is None else float(lo),
            None if median is None else float(median),
            None if hi is None else float(hi),
        )
    return out
