"""``serve``'s ``/metrics``: the fleet's counters and the numbers only the store knows.

:class:`FleetCollector` gives the sums of every worker process's last report
(:func:`crawlfleet.metrics.merge`), under the same names and labels as a worker's, and
:func:`store_families`: requests by state, backlog and age of the oldest queued request per job
and domain, leases held and expired, dead letters, records stored, validation failure and block
rates, retry depth, lane, route and pool health, tier moves, workers alive, throughput, alerts.
Both read one :class:`~crawlfleet.overview.Overview` (the store read once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any, Final

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from crawlfleet.model import KINDS
from crawlfleet.monitor.metrics import DOMAIN_CAP, OTHER, ROUTE_CAP, WorkerMetrics, success_family
from crawlfleet.monitor.overview import Overview

__all__ = ["FleetCollector", "store_families"]


class FleetCollector(Collector):
    """``serve``'s ``/metrics``: the fleet's summed counters (types and help from
    :class:`WorkerMetrics`) and :func:`store_families` of the newest overview."""

    def __init__(self, overview: Callable[[], Overview | None], *, counters: bool = True) -> None:
        self.overview = overview
        self.counters = counters  # False: the store's numbers only (workers scraped on their own)
        self._template = _template()

    def collect(self) -> Iterator[Metric]:
        ov = self.overview()
        if ov is None:
            return
        if self.counters:
            yield from self._counters(ov)
        yield from store_families(ov)

    def _counters(self, ov: Overview) -> Iterator[Metric]:
        for name, doc, kind in self._template:
            family = Metric(name, doc, kind)
            mine = [
                (key, value) for key, value in ov.samples.items() if _belongs(key[0], name, kind)
            ]
            for (sample, labels), value in sorted(mine, key=lambda kv: _order(kv[0])):
                family.add_sample(sample, dict(labels), value)
            yield family
        yield success_family(ov.samples)


@cache
def _template() -> list[tuple[str, str, str]]:
    """Name, help and type of every counter and histogram a worker reports."""
    families = WorkerMetrics().registry.collect()
    return [
        (f.name, f.documentation, f.type) for f in families if f.type in ("counter", "histogram")
    ]


def _order(key: tuple[str, tuple[tuple[str, str], ...]]) -> tuple[Any, ...]:
    """Series by their labels, a histogram's buckets in increasing ``le`` (as the format asks)."""
    sample, labels = key
    rest = tuple((k, v) for k, v in labels if k != "le")
    le = dict(labels).get("le")
    return (rest, sample, float(le) if le is not None else 0.0)


def _belongs(sample: str, family: str, kind: str) -> bool:
    if kind == "counter":
        return sample == f"{family}_total"
    return sample in (f"{family}_bucket", f"{family}_sum", f"{family}_count")


def _gauge(name: str, doc: str, labels: list[str], rows: Iterable[tuple[Any, ...]]) -> Metric:
    g = GaugeMetricFamily(name, doc, labels=labels)
    for *values, value in rows:
        g.add_metric([str(v) for v in values], float(value))
    return g


def _counter(name: str, doc: str, labels: list[str], rows: Iterable[tuple[Any, ...]]) -> Metric:
    c = Metric(name, doc, "counter")
    for *values, value in rows:
        c.add_sample(f"{name}_total", dict(zip(labels, map(str, values), strict=True)), value)
    return c


def store_families(ov: Overview) -> Iterator[Metric]:
    """The numbers of the store (and of the workers' gauges), as of ``ov``."""
    jobs = ov.jobs
    states = ("queued", "waiting", "leased", "done", "dead")
    yield _gauge(
        "crawlfleet_requests",
        "Requests by state (queued: ready now; waiting: for a retry)",
        ["job", "state"],
        ((j.name, st, getattr(j.stats, st)) for j in jobs for st in states),
    )
    yield from _queue_families(ov)
    yield _gauge(
        "crawlfleet_leases_held",
        "Leases held now",
        ["job"],
        ((j.name, j.stats.leased) for j in jobs),
    )
    yield _counter(
        "crawlfleet_leases_expired",
        "Leases that expired and were rescued",
        [],
        [(ov.counts.attempts_by_outcome.get("lease_expired", 0),)],
    )
    yield _gauge(
        "crawlfleet_dead_letters",
        "Dead requests by reason",
        ["job", "reason"],
        ((j.name, reason, n) for j in jobs for reason, n in sorted(j.dead_by_reason.items())),
    )
    yield _gauge(
        "crawlfleet_records_stored", "Records in the store", ["job"],
        ((j.name, j.stats.records) for j in jobs),
    )  # fmt: skip
    yield _gauge(
        "crawlfleet_quarantine_stored", "Quarantined records in the store", ["job"],
        ((j.name, j.stats.quarantined) for j in jobs),
    )  # fmt: skip
    yield _gauge(
        "crawlfleet_validation_failure_ratio",
        "Share of the records a job's spider produced that failed validation",
        ["job"],
        (
            (j.name, j.validation_failure_ratio)
            for j in jobs
            if j.validation_failure_ratio is not None
        ),
    )
    yield from _retry_families(ov)
    yield from _route_families(ov)
    yield _counter(
        "crawlfleet_tier_moves",
        "Domains moved to another route tier (up: escalated after blocks)",
        ["direction"],
        [("up", ov.counts.tier_moves_up), ("down", ov.counts.tier_moves_down)],
    )
    yield from _worker_families(ov)
    firing = {rule: 0 for rule in _rules()}
    for alert in ov.alerts:
        firing[alert.rule] += 1
    yield _gauge(
        "crawlfleet_alerts", "Subjects each alert rule fires for", ["rule"], firing.items()
    )
    yield from quality_families(ov)


#: fields per job /metrics exports the coverage of (the model's own names: bounded)
COVERAGE_FIELDS = 50


def quality_families(ov: Overview) -> Iterator[Metric]:
    """Each job's newest run: its fields' coverage, its records, its quality alerts; and the
    outbox's deliveries per destination (an id, never a URL) and state."""
    quality = sorted(ov.quality.items())
    yield _gauge(
        "crawlfleet_field_coverage",
        "Share of the newest run's records where the field is filled",
        ["job", "field"],
        (
            (job, name, f.coverage)
            for job, (p, _) in quality
            for name, f in sorted(p.fields.items())[:COVERAGE_FIELDS]
        ),
    )
    yield _gauge(
        "crawlfleet_run_records",
        "Records of the newest profiled run",
        ["job"],
        ((job, p.records) for job, (p, _) in quality),
    )
    yield _gauge(
        "crawlfleet_quality_alerts",
        "Quality alerts fired in the newest profiled run",
        ["job"],
        ((job, len(alerts)) for job, (_, alerts) in quality),
    )
    yield _gauge(
        "crawlfleet_outbox_deliveries",
        "Deliveries of the outbox by destination and state",
        ["destination", "state"],
        (
            (c.destination, state, getattr(c, state))
            for c in ov.outbox
            for state in ("queued", "leased", "done", "dead")
        ),
    )


def _rules() -> tuple[str, ...]:
    from crawlfleet.monitor.alerts import RULES

    return RULES


def _queue_families(ov: Overview) -> Iterator[Metric]:
    backlog: dict[tuple[str, str], float] = {}
    oldest: dict[tuple[str, str], float] = {}
    for i, q in enumerate(ov.queues):  # biggest backlog first: the rest is each job's "other"
        key = (q.job, q.domain if i < DOMAIN_CAP else OTHER)
        backlog[key] = backlog.get(key, 0) + q.backlog
        if q.oldest_age is not None:
            oldest[key] = max(oldest.get(key, 0.0), q.oldest_age)
    yield _gauge(
        "crawlfleet_queue_backlog",
        "Requests queued (ready or waiting for a retry) per job and domain",
        ["job", "domain"],
        ((*key, n) for key, n in backlog.items()),
    )
    yield _gauge(
        "crawlfleet_queue_oldest_age_seconds",
        "Age of the oldest ready request per job and domain",
        ["job", "domain"],
        ((*key, age) for key, age in oldest.items()),
    )
    domains = ov.domains[:DOMAIN_CAP]
    yield _gauge(
        "crawlfleet_domain_in_flight", "Requests in flight per domain", ["domain"],
        ((d.domain, d.in_flight) for d in domains),
    )  # fmt: skip
    yield _gauge(
        "crawlfleet_domain_block_ratio",
        "Share of a domain's recent attempts (counts halved every minute) that were blocked",
        ["domain"],
        ((d.domain, d.block_ratio) for d in domains if d.recent_attempts > 0),
    )


def _retry_families(ov: Overview) -> Iterator[Metric]:
    yield _gauge(
        "crawlfleet_retry_depth_avg", "Retries per finished request", ["job"],
        ((j.name, j.stats.avg_retry_depth) for j in ov.jobs),
    )  # fmt: skip
    h = Metric("crawlfleet_retry_depth", "Retries finished requests took", "histogram")
    for j in ov.jobs:
        hist = {n - 1: c for n, c in j.stats.attempts_histogram.items()}
        seen = 0
        for le in (0, 1, 2, 3, 4, 6, 9):
            seen = sum(c for depth, c in hist.items() if depth <= le)
            h.add_sample("crawlfleet_retry_depth_bucket", {"job": j.name, "le": str(le)}, seen)
        count = sum(hist.values())
        h.add_sample("crawlfleet_retry_depth_bucket", {"job": j.name, "le": "+Inf"}, count)
        h.add_sample("crawlfleet_retry_depth_count", {"job": j.name}, count)
        h.add_sample("crawlfleet_retry_depth_sum", {"job": j.name}, j.stats.retry_depth_sum)
    yield h


def _route_families(ov: Overview) -> Iterator[Metric]:
    routes = ov.routes[:ROUTE_CAP]
    yield _gauge(
        "crawlfleet_route_state",
        "1 for a route's breaker state (healthy, open, probing)",
        ["pool", "route", "state"],
        ((r.pool, r.id, st, int(r.state == st)) for r in routes for st in _STATES),
    )
    yield _gauge(
        "crawlfleet_pool_routes",
        "A pool's routes by breaker state",
        ["pool", "state"],
        ((pool, st, getattr(h, st)) for pool, h in sorted(ov.pools.items()) for st in _STATES),
    )
    yield _gauge(
        "crawlfleet_route_success_ratio",
        "Share of a route's recent attempts that succeeded",
        ["pool", "route"],
        ((r.pool, r.id, r.success_ratio) for r in routes if r.success_ratio is not None),
    )
    yield _gauge(
        "crawlfleet_route_latency_seconds",
        "Mean recent response time through a route",
        ["pool", "route"],
        ((r.pool, r.id, r.latency) for r in routes if r.latency is not None),
    )


_STATES: Final = ("healthy", "open", "probing")


def _worker_families(ov: Overview) -> Iterator[Metric]:
    alive = [w for w in ov.workers if w.alive]
    kinds: dict[str, int] = dict.fromkeys(KINDS, 0)
    for w in alive:
        for kind in w.stats.kinds.split(","):
            kinds[kind] = kinds.get(kind, 0) + 1
    yield _gauge("crawlfleet_workers_alive", "Workers heard of lately", ["kind"], kinds.items())
    yield _gauge(
        "crawlfleet_pages_per_second",
        "Pages per second over the workers' last reports",
        [],
        [(sum(w.pages_per_second for w in alive),)],
    )
    yield _gauge(
        "crawlfleet_in_flight", "Attempts in flight", [], [(sum(w.in_flight for w in alive),)]
    )
    yield _gauge(
        "crawlfleet_worker_memory_bytes", "Resident memory of the live workers", [],
        [(sum(w.memory or 0 for w in alive),)],
    )  # fmt: skip
    yield _gauge(
        "crawlfleet_browser_memory_bytes",
        "Memory of the live workers' browsers (last samples)",
        ["measure"],
        [
            ("rss", sum(w.gauge("browser_rss") for w in alive)),
            ("anon", sum(w.gauge("browser_anon") for w in alive)),
        ],
    )
