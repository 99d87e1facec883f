"""One event stream: what happened to each attempt, for whoever observes the worker.

The attempt pipeline emits one :class:`AttemptEvent` per attempt once its verdict is known; the
worker's loops emit :class:`LeasesLost` (fenced reports, expired leases) and :class:`Leased`.
Observers are plain callables: metrics (:meth:`crawlfleet.metrics.WorkerMetrics.observe`) is
one, route health and sessions are others, tests collect events in a list::

    events = EventBus()
    seen: list[Event] = []
    events.subscribe(seen.append)

No metric or health call sits inside a pipeline step: they all hang off this stream. An observer
that raises is logged and kept; it never breaks the crawl.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from crawlfleet.model import DeadReason, Outcome

__all__ = ["AttemptEvent", "Event", "EventBus", "Leased", "LeasesLost", "Observer"]

log = logging.getLogger("crawlfleet.events")


@dataclass(frozen=True, slots=True)
class AttemptEvent:
    """One attempt at a leased request, as it ended.

    ``outcome`` is None when the request was given back unfetched (its job cannot run here, or
    robots.txt's Crawl-delay came late); ``dead_reason`` is set when it was given up, ``retry``
    when it comes back later. ``gone`` marks a final answer (404, 410, ...): done, not data.
    """

    job: str
    domain: str
    fetcher: str
    outcome: Outcome | None
    route: str | None = None
    status: int | None = None
    error_kind: str | None = None
    latency: float | None = None
    nbytes: int = 0
    records: int = 0
    quarantined: int = 0
    traps: int = 0
    robots_dropped: int = 0
    links_dropped: int = 0
    refused: int = 0  # Requests the spider yielded that the crawl cannot use (dropped alone)
    duplicate: bool = False
    gone: bool = False
    retry: bool = False
    dead_reason: DeadReason | None = None
    attempts: int = 1
    block_reason: str | None = None
    #: an ``auto`` page type moved to this fetcher here ("browser", or back to "http")
    escalated: str | None = None


@dataclass(frozen=True, slots=True)
class Leased:
    """The worker took ``count`` leases from the store."""

    count: int


@dataclass(frozen=True, slots=True)
class LeasesLost:
    """``count`` leases turned out to be lost (expired and taken over): ``reported`` when the
    store refused their reports, else found by a heartbeat."""

    count: int
    reported: bool


Event = AttemptEvent | Leased | LeasesLost
Observer = Callable[[Event], None]


class EventBus:
    """Hands every event to every observer, in subscription order."""

    def __init__(self, *observers: Observer) -> None:
        self._observers: list[Observer] = list(observers)

    def subscribe(self, observer: Observer) -> None:
        self._observers.append(observer)

    def emit(self, event: Event) -> None:
        for observer in self._observers:
            try:
                observer(event)
            except Exception:  # an observer's bug must not stop a crawl
                log.exception("event observer %r failed", observer)
