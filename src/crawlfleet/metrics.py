"""Every metric crawlfleet exports, defined in one place. Labels stay bounded: no URL labels."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

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
TRAPS = Counter("crawlfleet_traps", "Links refused by trap guards", registry=REGISTRY)
FENCED = Counter(
    "crawlfleet_fenced", "Reports refused because the lease was lost", registry=REGISTRY
)
ROBOTS_FILTERED = Counter(
    "crawlfleet_robots_filtered", "Discovered links dropped as robots-disallowed", registry=REGISTRY
)
