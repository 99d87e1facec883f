"""Every metric crawlfleet exports, defined in one place. Labels stay bounded: no URL labels.

Where the numbers come from:

* :class:`WorkerMetrics` — one worker's counters and gauges, an observer of its event stream
  (:class:`crawlfleet.events.EventBus`): nothing in the attempt pipeline counts anything itself.
  A worker serves them on its own ``/metrics`` (``worker --metrics-port``) and reports them to
  the store every few seconds (:meth:`WorkerMetrics.snapshot`, a row per worker process).
* :class:`FleetCollector` — ``serve``'s ``/metrics``: the sums of every worker process's last
  report (:func:`merge`), under the same names and labels as a worker's, and the numbers only
  the store knows (:func:`store_families`): requests by state, backlog and age of the oldest
  queued request per job and domain, leases held and expired, dead letters, records stored,
  validation failure and block rates, retry depth, lane, route and pool health, tier moves,
  workers alive, throughput, alerts.

Labels: ``job`` (a worker's first :data:`JOB_CAP` jobs, then ``other``), ``domain`` (its first
:data:`DOMAIN_CAP`; on serve the busiest :data:`DOMAIN_CAP`, the rest summed as ``other``),
``route`` and ``pool`` (:data:`ROUTE_CAP` likewise), ``kind`` (http, browser), ``outcome``
(:class:`crawlfleet.model.Outcome`), ``reason`` (:class:`crawlfleet.model.DeadReason`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from crawlfleet.events import AttemptEvent, Event, Leased, LeasesLost
from crawlfleet.model import KINDS, Outcome

if TYPE_CHECKING:
    from crawlfleet.overview import Overview

__all__ = [
    "DOMAIN_CAP",
    "OTHER",
    "FleetCollector",
    "LabelCap",
    "Samples",
    "WorkerMetrics",
    "merge",
    "store_families",
    "total",
]

JOB_CAP: Final = 20
DOMAIN_CAP: Final = 50
ROUTE_CAP: Final = 50
OTHER: Final = "other"
#: outcomes of a page the worker fetched (robots and trap verdicts are not fetches)
FETCHED: Final = ("ok", "gone", "blocked", "retryable_error", "permanent_error")
SUCCESS: Final = ("ok", "gone")
LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
ATTEMPT_BUCKETS: Final = (1, 2, 3, 4, 5, 6, 8, 10)

#: merged counter samples: ``(sample name, sorted label pairs) -> value``
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class LabelCap:
    """The first ``cap`` distinct values keep their name; later ones are counted as ``other``
    (a counter's series must not change labels, so the first seen win, not the biggest)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._kept: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._kept:
            return value
        if len(self._kept) < self.cap:
            self._kept.add(value)
            return value
        return OTHER


class WorkerMetrics:
    """One worker's metrics, in a registry of its own (several workers may share a process in
    tests); :meth:`observe` is its :class:`~crawlfleet.events.Observer`."""

    def __init__(
        self, *, jobs: int = JOB_CAP, domains: int = DOMAIN_CAP, routes: int = ROUTE_CAP
    ) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.job, self.domain, self.route = LabelCap(jobs), LabelCap(domains), LabelCap(routes)
        page = ["job", "domain", "kind"]
        self.pages = Counter("crawlfleet_pages", "Pages by outcome", [*page, "outcome"], registry=r)
        self.bytes = Counter("crawlfleet_response_bytes", "Decoded bytes", page, registry=r)
        self.fetch_duration = Histogram(
            "crawlfleet_fetch_duration_seconds",
            "Time from request sent to body read",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.route_pages = Counter(
            "crawlfleet_route_pages", "Pages by route and outcome", ["route", "outcome"], registry=r
        )
        job = ["job"]
        self.records = Counter("crawlfleet_records", "Valid records produced", job, registry=r)
        self.quarantined = Counter(
            "crawlfleet_quarantined", "Records that failed validation", job, registry=r
        )
        self.retries = Counter("crawlfleet_retries", "Attempts to retry later", job, registry=r)
        self.dead = Counter("crawlfleet_dead", "Requests given up", ["job", "reason"], registry=r)
        self.gone = Counter("crawlfleet_gone", "Final answers (404, 410...)", job, registry=r)
        self.duplicates = Counter(
            "crawlfleet_duplicate_content",
            "Pages whose bytes were archived before",
            job,
            registry=r,
        )
        self.escalations = Counter(
            "crawlfleet_escalations", "Page types moved to a fetcher", ["job", "kind"], registry=r
        )
        self.traps = Counter("crawlfleet_traps", "Links refused by trap guards", job, registry=r)
        self.robots_filtered = Counter(
            "crawlfleet_robots_filtered", "Links dropped as robots-disallowed", job, registry=r
        )
        self.request_attempts = Histogram(
            "crawlfleet_request_attempts",
            "Attempts a request took, observed when it finished here",
            job,
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.leased = Counter("crawlfleet_leased", "Requests leased", registry=r)
        self.leases_lost = Counter(
            "crawlfleet_leases_lost", "Leases lost (expired, taken over)", ["how"], registry=r
        )
        self.in_flight = Gauge("crawlfleet_in_flight", "Attempts in flight", registry=r)
        self.leases_held = Gauge("crawlfleet_leases_held", "Leases held", registry=r)
        self.memory = Gauge("crawlfleet_worker_memory_bytes", "Worker process RSS", registry=r)
        self.browser_memory = Gauge(
            "crawlfleet_browser_memory_bytes", "Browser memory", ["measure"], registry=r
        )
        r.register(_SuccessRatio(self))
        #: the worker's browser pool's stats (``PoolStats``), when it runs one
        self.browser: Callable[[], Any] = lambda: None

    def observe(self, event: Event) -> None:
        """Fold one event into the metrics (an :class:`~crawlfleet.events.Observer`)."""
        if isinstance(event, AttemptEvent):
            self._attempt(event)
        elif isinstance(event, Leased):
            self.leased.inc(event.count)
        elif isinstance(event, LeasesLost):
            self.leases_lost.labels("reported" if event.reported else "heartbeat").inc(event.count)

    def _attempt(self, e: AttemptEvent) -> None:
        if e.outcome is None:
            return  # given back unfetched: nothing happened to count
        job, domain = self.job(e.job), self.domain(e.domain)
        outcome = e.outcome.value
        self.pages.labels(job, domain, e.fetcher, outcome).inc()
        self.route_pages.labels(self.route(e.route or "direct"), outcome).inc()
        if e.latency is not None:
            self.fetch_duration.labels(e.fetcher).observe(e.latency)
        self.bytes.labels(job, domain, e.fetcher).inc(e.nbytes)
        for counter, n in (
            (self.records, e.records),
            (self.quarantined, e.quarantined),
            (self.traps, e.traps),
            (self.robots_filtered, e.robots_dropped),
            (self.duplicates, int(e.duplicate)),
            (self.gone, int(e.gone)),
            (self.retries, int(e.retry)),
        ):
            if n:
                counter.labels(job).inc(n)
        if e.dead_reason is not None:
            self.dead.labels(job, e.dead_reason.value).inc()
        if e.escalated is not None:
            self.escalations.labels(job, e.escalated).inc()
        if not e.retry and e.outcome not in (Outcome.ROBOTS, Outcome.TRAP):
            self.request_attempts.labels(job).observe(e.attempts)

    def sample_gauges(self, *, in_flight: int, leases_held: int) -> dict[str, float]:
        """Set the gauges from the worker's state now; returns them (for the report)."""
        self.in_flight.set(in_flight)
        self.leases_held.set(leases_held)
        gauges: dict[str, float] = {"in_flight": in_flight, "leases_held": leases_held}
        rss = process_rss()
        if rss is not None:
            self.memory.set(rss)
            gauges["memory"] = rss
        stats = self.browser()
        mem = getattr(stats, "memory", None)
        if mem is not None:
            self.browser_memory.labels("rss").set(mem.rss)
            self.browser_memory.labels("anon").set(mem.anon)
            gauges["browser_rss"], gauges["browser_anon"] = mem.rss, mem.anon
        return gauges

    def snapshot(self) -> str:
        """The counters and histograms as JSON, ``{sample name: [[labels, value], ...]}``, for
        the store (:func:`merge` adds snapshots up). Gauges are reported on their own."""
        out: dict[str, list[list[Any]]] = {}
        for family in self.registry.collect():
            if family.type not in ("counter", "histogram"):
                continue
            for s in family.samples:
                if not s.name.endswith("_created"):
                    out.setdefault(s.name, []).append([s.labels, s.value])
        return json.dumps(out, separators=(",", ":"))

    def pages_total(self) -> float:
        return float(sum(s.value for s in _samples(self.registry, "crawlfleet_pages_total")))


class _SuccessRatio(Collector):
    """``crawlfleet_worker_success_ratio{kind}``: OK and gone pages among the pages fetched."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        pages: Samples = {}
        for s in next(iter(self.metrics.pages.collect())).samples:
            if s.name == "crawlfleet_pages_total":
                pages[(s.name, tuple(sorted(s.labels.items())))] = s.value
        yield success_family(pages)


def success_family(samples: Samples) -> Metric:
    g = GaugeMetricFamily(
        "crawlfleet_worker_success_ratio",
        "Share of fetched pages that were OK or a final answer, by fetcher kind",
        labels=["kind"],
    )
    by_kind: dict[str, list[float]] = {}
    for (name, labels), value in samples.items():
        if name != "crawlfleet_pages_total":
            continue
        d = dict(labels)
        if d.get("outcome") in FETCHED:
            counts = by_kind.setdefault(d.get("kind", ""), [0.0, 0.0])
            counts[0] += value if d["outcome"] in SUCCESS else 0.0
            counts[1] += value
    for kind, (ok, fetched) in sorted(by_kind.items()):
        if fetched:
            g.add_metric([kind], ok / fetched)
    return g


def _samples(registry: CollectorRegistry, name: str) -> Iterator[Any]:
    for family in registry.collect():
        yield from (s for s in family.samples if s.name == name)


def process_rss() -> int | None:
    """This process's resident memory in bytes (None where /proc is missing)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


# -- the fleet: reports added up ---------------------------------------------------------------


def merge(snapshots: Iterable[str], domains: int = DOMAIN_CAP) -> Samples:
    """Add up worker snapshots (JSON of :meth:`WorkerMetrics.snapshot`); a ``domain`` label
    past the ``domains`` busiest (by pages) is summed as ``other``."""
    out: Samples = {}
    for text in snapshots:
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            continue  # a torn or foreign row must not break the dashboard
        for name, rows in data.items():
            for labels, value in rows:
                key = (name, tuple(sorted(labels.items())))
                out[key] = out.get(key, 0.0) + float(value)
    return _cap_domains(out, domains)


def _cap_domains(samples: Samples, cap: int) -> Samples:
    pages: dict[str, float] = {}
    for (name, labels), value in samples.items():
        domain = dict(labels).get("domain")
        if name == "crawlfleet_pages_total" and domain is not None:
            pages[domain] = pages.get(domain, 0.0) + value
    if len(pages) <= cap:
        return samples
    kept = set(sorted(pages, key=lambda d: (-pages[d], d))[:cap])
    out: Samples = {}
    for (name, labels), value in samples.items():
        fixed = tuple((k, OTHER if k == "domain" and v not in kept else v) for k, v in labels)
        out[(name, fixed)] = out.get((name, fixed), 0.0) + value
    return out


def total(samples: Samples, name: str, **match: str | tuple[str, ...]) -> float:
    """The sum of the ``name`` samples whose labels match (a tuple: any of its values)."""
    got = 0.0
    for (sample, labels), value in samples.items():
        if sample != name:
            continue
        d = dict(labels)
        if all(d.get(k) in (v if isinstance(v, tuple) else (v,)) for k, v in match.items()):
            got += value
    return got


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


def _rules() -> tuple[str, ...]:
    from crawlfleet.alerts import RULES

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
