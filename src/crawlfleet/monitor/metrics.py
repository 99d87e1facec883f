"""Every metric crawlfleet exports, defined in one place. Labels stay bounded: no URL labels.

Where the numbers come from:

* :class:`WorkerMetrics` — one worker's counters and gauges, an observer of its event stream
  (:class:`crawlfleet.events.EventBus`): nothing in the attempt pipeline counts anything itself.
  A worker serves them on its own ``/metrics`` (``worker --metrics-port``) and reports them to
  the store every few seconds (:meth:`WorkerMetrics.snapshot`, a row per worker process).
* :func:`merge` — the sums of every worker process's last report, under the same names and
  labels as a worker's: what ``serve``'s ``/metrics`` shows (:mod:`crawlfleet.fleet_metrics`,
  with the numbers only the store knows).

Labels: ``job`` (a worker's first :data:`JOB_CAP` jobs, then ``other``), ``domain`` (its first
:data:`DOMAIN_CAP`; on serve the busiest :data:`DOMAIN_CAP`, the rest summed as ``other``),
``route`` and ``pool`` (:data:`ROUTE_CAP` likewise), ``kind`` (http, browser), ``outcome``
(:class:`crawlfleet.model.Outcome`), ``reason`` (:class:`crawlfleet.model.DeadReason`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from crawlfleet.events import AttemptEvent, Event, Leased, LeasesLost
from crawlfleet.model import Outcome

__all__ = [
    "DOMAIN_CAP",
    "OTHER",
    "LabelCap",
    "Samples",
    "WorkerMetrics",
    "merge",
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
        self.links_dropped = Counter(
            "crawlfleet_links_dropped", "Links over a page's max_links_per_page", job, registry=r
        )
        self.refused = Counter(
            "crawlfleet_requests_refused",
            "Requests a spider yielded that the crawl cannot use (bad URL, unknown callback)",
            job,
            registry=r,
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
        self.local_fault = Gauge(
            "crawlfleet_worker_local_fault",
            "1 while the worker stopped leasing for a local fault (disk full, out of files, its "
            "raw store away)",
            registry=r,
        )
        self.raw_store_down = Gauge(
            "crawlfleet_worker_raw_store_down",
            "1 while the worker stopped leasing because its raw store (object store) is away",
            registry=r,
        )
        self.memory = Gauge("crawlfleet_worker_memory_bytes", "Worker process RSS", registry=r)
        self.browser_memory = Gauge(
            "crawlfleet_browser_memory_bytes", "Browser memory", ["measure"], registry=r
        )
        r.register(_SuccessRatio(self))
        #: the worker's browser pool's stats (``PoolStats``), when it runs one
        self.browser: Callable[[], Any] = lambda: None
        #: labelled children by (metric, labels): bounded as the labels are (see LabelCap)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def observe(self, event: Event) -> None:
        """Fold one event into the metrics (an :class:`~crawlfleet.events.Observer`)."""
        if isinstance(event, AttemptEvent):
            self._attempt(event)
        elif isinstance(event, Leased):
            self.leased.inc(event.count)
        elif isinstance(event, LeasesLost):
            self.leases_lost.labels("reported" if event.reported else "heartbeat").inc(event.count)

    def _of(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, remembered: prometheus_client checks and locks on every
        ``labels`` call, and an attempt touches up to a dozen children."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _attempt(self, e: AttemptEvent) -> None:
        if e.outcome is None:
            return  # given back unfetched: nothing happened to count
        of = self._of
        job, domain = self.job(e.job), self.domain(e.domain)
        outcome = e.outcome.value
        of(self.pages, job, domain, e.fetcher, outcome).inc()
        of(self.route_pages, self.route(e.route or "direct"), outcome).inc()
        if e.latency is not None:
            of(self.fetch_duration, e.fetcher).observe(e.latency)
        of(self.bytes, job, domain, e.fetcher).inc(e.nbytes)
        for counter, n in (
            (self.records, e.records),
            (self.quarantined, e.quarantined),
            (self.traps, e.traps),
            (self.robots_filtered, e.robots_dropped),
            (self.links_dropped, e.links_dropped),
            (self.refused, e.refused),
            (self.duplicates, int(e.duplicate)),
            (self.gone, int(e.gone)),
            (self.retries, int(e.retry)),
        ):
            if n:
                of(counter, job).inc(n)
        if e.dead_reason is not None:
            of(self.dead, job, e.dead_reason.value).inc()
        if e.escalated is not None:
            of(self.escalations, job, e.escalated).inc()
        if not e.retry and e.outcome not in (Outcome.ROBOTS, Outcome.TRAP):
            of(self.request_attempts, job).observe(e.attempts)

    def sample_gauges(
        self,
        *,
        in_flight: int,
        leases_held: int,
        local_fault: bool = False,
        raw_store_down: bool = False,
    ) -> dict[str, float]:
        """Set the gauges from the worker's state now; returns them (for the report).
        ``raw_store_down``: the local fault is the raw store's (away), not the machine's."""
        self.in_flight.set(in_flight)
        self.leases_held.set(leases_held)
        self.local_fault.set(int(local_fault))
        self.raw_store_down.set(int(raw_store_down))
        gauges: dict[str, float] = {"in_flight": in_flight, "leases_held": leases_held}
        if local_fault:
            gauges["local_fault"] = 1
        if raw_store_down:
            gauges["raw_store_down"] = 1
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
