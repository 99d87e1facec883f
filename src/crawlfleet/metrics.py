"""Every metric crawlfleet exports, defined in one place. Labels stay bounded: no URL labels.

Metrics are an observer of the worker's event stream (:func:`observe`, subscribed to
:class:`crawlfleet.events.EventBus`): nothing in the attempt pipeline counts anything itself.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from crawlfleet.events import AttemptEvent, Event, Leased, LeasesLost

REGISTRY = CollectorRegistry(auto_describe=True)

LEASED = Counter("crawlfleet_leased", "Requests leased by this worker", registry=REGISTRY)
FETCHES = Counter("crawlfleet_fetches", "Fetch outcomes", ["outcome"], registry=REGISTRY)
FETCH_DURATION = Histogram(
    "crawlfleet_fetch_duration_seconds",
    "Time from request sent to body read",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
BYTES = Counter("crawlfleet_response_bytes", "Decoded response bytes", registry=REGISTRY)
RECORDS = Counter("crawlfleet_records", "Valid records produced", registry=REGISTRY)
QUARANTINED = Counter("crawlfleet_quarantined", "Records that failed validation", registry=REGISTRY)
RETRIES = Counter("crawlfleet_retries", "Attempts scheduled for a retry", registry=REGISTRY)
DEAD = Counter("crawlfleet_dead", "Requests given up", ["reason"], registry=REGISTRY)
GONE = Counter("crawlfleet_gone", "Final answers (404, 410, ...): done, no data", registry=REGISTRY)
DUPLICATES = Counter(
    "crawlfleet_duplicate_content", "Pages whose bytes were archived before", registry=REGISTRY
)
ESCALATIONS = Counter(
    "crawlfleet_escalations",
    "Page types of auto spiders moved to a fetcher",
    ["fetcher"],
    registry=REGISTRY,
)
TRAPS = Counter("crawlfleet_traps", "Links refused by trap guards", registry=REGISTRY)
FENCED = Counter(
    "crawlfleet_fenced", "Reports refused because the lease was lost", registry=REGISTRY
)
ROBOTS_FILTERED = Counter(
    "crawlfleet_robots_filtered", "Discovered links dropped as robots-disallowed", registry=REGISTRY
)


def observe(event: Event) -> None:
    """Fold one event into the metrics (an :class:`~crawlfleet.events.Observer`)."""
    if isinstance(event, AttemptEvent):
        _attempt(event)
    elif isinstance(event, Leased):
        LEASED.inc(event.count)
    elif isinstance(event, LeasesLost):
        FENCED.inc(event.count)


def _attempt(e: AttemptEvent) -> None:
    if e.outcome is None:
        return  # given back unfetched: nothing happened to count
    FETCHES.labels(e.outcome.value).inc()
    if e.latency is not None:
        FETCH_DURATION.observe(e.latency)
    BYTES.inc(e.nbytes)
    RECORDS.inc(e.records)
    QUARANTINED.inc(e.quarantined)
    TRAPS.inc(e.traps)
    ROBOTS_FILTERED.inc(e.robots_dropped)
    if e.duplicate:
        DUPLICATES.inc()
    if e.gone:
        GONE.inc()
    if e.retry:
        RETRIES.inc()
    if e.dead_reason is not None:
        DEAD.labels(e.dead_reason.value).inc()
    if e.escalated is not None:
        ESCALATIONS.labels(e.escalated).inc()
