"""The fleet at a glance, read from the store: what ``serve`` (its pages, JSON API and
``/metrics``) and ``status`` show.

:func:`read_overview` asks the store (the :class:`~crawlfleet.frontier.ports.Insights` port)
for every number once; :func:`build_overview` derives the picture from those rows, pure, with
the time passed in: per job (counts, dead letters by reason, what its spider produced and the
share that failed validation), per job and domain (backlog, age of the oldest ready request),
per domain (in flight, pacing, recent block rate), per lane, route and pool (breaker state,
recent success and latency), per worker process (alive, kinds, pages/s, memory), the fleet's
summed counters (:func:`crawlfleet.metrics.merge`) and the alerts that fire
(:mod:`crawlfleet.alerts`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from crawlfleet.data.profile import RunProfile
from crawlfleet.frontier.outbox import OutboxCount
from crawlfleet.frontier.ports import (
    DomainQueue,
    FleetCounts,
    Insights,
    LaneRow,
    RouteRow,
    WorkerStats,
)
from crawlfleet.model import KINDS, JobState, JobStats
from crawlfleet.monitor.alerts import Alert, AlertRules, evaluate
from crawlfleet.monitor.metrics import FETCHED, SUCCESS, Samples, merge, total
from crawlfleet.policy.health import Breaker, PoolHealth, RouteStats, pool_health

__all__ = [
    "DomainView",
    "JobView",
    "Overview",
    "QueueView",
    "RouteView",
    "WorkerView",
    "build_overview",
    "read_overview",
]

#: most lanes read per overview (the most recently served)
LANE_LIMIT: Final = 2000
#: seconds without a report after which a worker no longer counts as alive ([control] alive_after)
ALIVE_AFTER: Final = 30.0
#: seconds a worker that fell silent without saying it stopped stays listed as stale (and fires
#: ``worker_stale``) before it counts as gone: a frozen or cut-off worker is back within this,
#: a killed one is forgotten after it
STALE_FOR: Final = 3600.0
DEFAULT_RULES: Final = AlertRules()


@dataclass(frozen=True, slots=True)
class JobView:
    stats: JobStats
    dead_by_reason: Mapping[str, int]
    #: what the job's spider produced, by the workers' counters (all processes ever reported)
    records_made: float = 0.0
    quarantined_made: float = 0.0
    pages: float = 0.0
    blocked_pages: float = 0.0

    @property
    def name(self) -> str:
        return self.stats.job

    @property
    def validation_failure_ratio(self) -> float | None:
        """Quarantined among the records produced (None before any)."""
        made = self.records_made + self.quarantined_made
        return self.quarantined_made / made if made else None


@dataclass(frozen=True, slots=True)
class QueueView:
    job: str
    domain: str
    ready: int
    waiting: int
    leased: int
    oldest_age: float | None

    @property
    def backlog(self) -> int:
        return self.ready + self.waiting


@dataclass(frozen=True, slots=True)
class DomainView:
    domain: str
    ready: int = 0
    waiting: int = 0
    leased: int = 0
    oldest_age: float | None = None
    in_flight: int = 0
    max_in_flight: int = 0
    delay: float = 0.0  # the slowest lane's gap between request starts now
    lanes: int = 0
    tier: int = 0
    recent_attempts: float = 0.0
    block_ratio: float = 0.0
    pages: float = 0.0  # fetched pages, by the workers' counters
    blocked_pages: float = 0.0
    #: pages fetched per rung of the ladder (fetcher kind: http, impersonate, browser), and
    #: of those the blocked ones: a domain behind a bot wall shows its blocks on http
    rungs: dict[str, float] = field(default_factory=dict)
    rung_blocks: dict[str, float] = field(default_factory=dict)

    def rungs_line(self) -> str:
        """``http 3 (3 blocked) · impersonate 120``: the rungs that fetched pages."""
        parts = []
        for kind in KINDS:
            pages = self.rungs.get(kind, 0.0)
            if pages:
                blocked = self.rung_blocks.get(kind, 0.0)
                shown = f" ({blocked:,.0f} blocked)" if blocked else ""
                parts.append(f"{kind} {pages:,.0f}{shown}")
        return " · ".join(parts)

    @property
    def backlog(self) -> int:
        return self.ready + self.waiting


@dataclass(frozen=True, slots=True)
class RouteView:
    id: str
    pool: str
    tier: int
    state: str  # healthy, open, probing
    open_until: float
    proxy: str  # the proxy URL with its password masked ("" when this process does not know it)
    lanes: int = 0
    recent_attempts: float = 0.0
    success_ratio: float | None = None
    latency: float | None = None


@dataclass(frozen=True, slots=True)
class WorkerView:
    """One worker process as its last report shows it. ``state``: ``alive`` (reported within
    ``alive_after``), ``stale`` (silent longer, never said it stopped: frozen, cut off from
    the store, or killed; for up to :data:`STALE_FOR`), ``stopped`` (said so as it exited) or
    ``gone`` (stale past :data:`STALE_FOR`, or started again under its id). ``silent``:
    seconds since its last report."""

    stats: WorkerStats
    alive: bool
    gauges: Mapping[str, float]
    pages: float
    ok: float
    state: str = "alive"
    silent: float = 0.0

    @property
    def pages_per_second(self) -> float:
        return self.gauge("pages_per_second")

    @property
    def in_flight(self) -> int:
        return int(self.gauge("in_flight"))

    @property
    def memory(self) -> int | None:
        return int(self.gauges["memory"]) if "memory" in self.gauges else None

    @property
    def success_ratio(self) -> float | None:
        return self.ok / self.pages if self.pages else None

    def gauge(self, name: str) -> float:
        return float(self.gauges.get(name, 0.0))


@dataclass(frozen=True)
class Overview:
    at: float
    jobs: list[JobView]
    queues: list[QueueView]  # biggest backlog first
    domains: list[DomainView]  # busiest first
    lanes: list[LaneRow]
    routes: list[RouteView]  # out of order (open, probing) first
    pools: dict[str, PoolHealth]
    workers: list[WorkerView]  # alive first
    counts: FleetCounts
    samples: Samples
    alerts: list[Alert] = field(default_factory=list)
    #: each job's newest run profile (its latest check, or final) and the alerts fired in it
    quality: dict[str, tuple[RunProfile, list[dict[str, object]]]] = field(default_factory=dict)
    outbox: list[OutboxCount] = field(default_factory=list)

    @property
    def workers_alive(self) -> int:
        return sum(w.alive for w in self.workers)

    @property
    def workers_stale(self) -> list[WorkerView]:
        """The workers that fell silent without stopping (see :class:`WorkerView`)."""
        return [w for w in self.workers if w.state == "stale"]

    @property
    def pages_per_second(self) -> float:
        return sum(w.pages_per_second for w in self.workers if w.alive)

    def pages(self, outcomes: tuple[str, ...] = FETCHED) -> float:
        return total(self.samples, "crawlfleet_pages_total", outcome=outcomes)

    @property
    def success_ratio(self) -> float | None:
        fetched = self.pages()
        return self.pages(SUCCESS) / fetched if fetched else None

    @property
    def validation_failure_ratio(self) -> float | None:
        bad = sum(j.quarantined_made for j in self.jobs)
        made = bad + sum(j.records_made for j in self.jobs)
        return bad / made if made else None

    @property
    def block_ratio(self) -> float | None:
        """Blocked among the recent attempts of every domain (None: no recent attempts)."""
        recent = sum(d.recent_attempts for d in self.domains)
        return (
            sum(d.block_ratio * d.recent_attempts for d in self.domains) / recent
            if recent
            else None
        )

    @property
    def backlog(self) -> int:
        return sum(j.stats.queued + j.stats.waiting for j in self.jobs)

    @property
    def oldest_age(self) -> float:
        return max((j.stats.oldest_queued_age for j in self.jobs), default=0.0)


async def read_overview(
    store: Insights,
    now: float,
    *,
    rules: AlertRules = DEFAULT_RULES,
    alive_after: float = ALIVE_AFTER,
    proxies: Mapping[str, str] | None = None,
) -> Overview:
    """Everything the dashboard shows, from the store, as of ``now`` (the store's clock).
    ``proxies`` maps route ids to their masked proxy URLs (from this process's settings)."""
    stats, reasons = [], []
    quality = {}
    for job in await store.list_jobs():
        stats.append(await store.stats(job.name))
        reasons.append((await store.job_activity(job.name)).dead_by_reason)
        for row in await store.profiles(job.name, limit=1):
            saved = json.loads(row.profile)
            quality[job.name] = (RunProfile.from_json(saved), list(saved.get("alerts") or []))
    ov = build_overview(
        now,
        stats,
        reasons,
        queue=await store.queue_by_domain(),
        lanes=await store.lane_rows(LANE_LIMIT),
        routes=await store.route_rows(),
        counts=await store.fleet_counts(),
        workers=await store.worker_stats(),
        rules=rules,
        alive_after=alive_after,
        proxies=proxies or {},
    )
    return Overview(**{**ov.__dict__, "quality": quality, "outbox": await store.outbox_counts()})


def build_overview(
    now: float,
    stats: Sequence[JobStats],
    dead_by_reason: Sequence[Mapping[str, int]],
    *,
    queue: Sequence[DomainQueue],
    lanes: Sequence[LaneRow],
    routes: Sequence[RouteRow],
    counts: FleetCounts,
    workers: Sequence[WorkerStats],
    rules: AlertRules = DEFAULT_RULES,
    alive_after: float = ALIVE_AFTER,
    proxies: Mapping[str, str] | None = None,
) -> Overview:
    """The overview from the store's rows (see :func:`read_overview`); pure."""
    samples = merge(w.counters for w in workers)
    jobs = [_job(s, reasons, samples) for s, reasons in zip(stats, dead_by_reason, strict=True)]
    queues = sorted(
        (
            QueueView(q.job, q.domain, q.ready, q.waiting, q.leased, _age(now, q.oldest_ready_at))
            for q in queue
        ),
        key=lambda q: (-q.backlog, q.job, q.domain),
    )
    route_views = _routes(now, routes, lanes, proxies or {})
    ov = Overview(
        at=now,
        jobs=jobs,
        queues=queues,
        domains=_domains(now, queues, lanes, samples),
        lanes=list(lanes),
        routes=route_views,
        pools=_pools(now, routes),
        workers=_workers(now, workers, alive_after),
        counts=counts,
        samples=samples,
    )
    running = {j.name for j in jobs if j.stats.state is JobState.RUNNING}
    ready = sum(j.stats.queued for j in jobs if j.name in running)
    alerts = evaluate(
        rules,
        oldest=[(f"{q.job}/{q.domain}", q.oldest_age) for q in queues if q.oldest_age],
        blocks=[(d.domain, d.block_ratio, d.recent_attempts) for d in ov.domains],
        validation=[
            (j.name, j.validation_failure_ratio, j.records_made + j.quarantined_made)
            for j in jobs
            if j.validation_failure_ratio is not None
        ],
        ready=ready,
        workers_alive=ov.workers_alive,
        local_faults=[w.stats.worker for w in ov.workers if w.alive and w.gauge("local_fault")],
        raw_store_down=[w.stats.worker for w in ov.workers if w.gauge("raw_store_down")],
        stale=[(w.stats.worker, w.silent) for w in ov.workers_stale],
        alive_after=alive_after,
    )
    return Overview(**{**ov.__dict__, "alerts": alerts})


def _age(now: float, since: float | None) -> float | None:
    return None if since is None else max(0.0, now - since)


def _job(s: JobStats, reasons: Mapping[str, int], samples: Samples) -> JobView:
    return JobView(
        s,
        dict(reasons),
        records_made=total(samples, "crawlfleet_records_total", job=s.job),
        quarantined_made=total(samples, "crawlfleet_quarantined_total", job=s.job),
        pages=total(samples, "crawlfleet_pages_total", job=s.job, outcome=FETCHED),
        blocked_pages=total(samples, "crawlfleet_pages_total", job=s.job, outcome="blocked"),
    )


def _health(lane: LaneRow) -> RouteStats:
    try:
        saved = json.loads(lane.health) if lane.health and lane.health != "{}" else None
    except ValueError:
        saved = None
    return RouteStats.from_json(saved) if saved else RouteStats()


def _domains(
    now: float, queues: Sequence[QueueView], lanes: Sequence[LaneRow], samples: Samples
) -> list[DomainView]:
    acc: dict[str, dict[str, float]] = {}
    for q in queues:
        d = acc.setdefault(q.domain, {})
        for key, value in (("ready", q.ready), ("waiting", q.waiting), ("leased", q.leased)):
            d[key] = d.get(key, 0) + value
        if q.oldest_age is not None:
            d["oldest_age"] = max(d.get("oldest_age", 0.0), q.oldest_age)
    for lane in lanes:
        d = acc.setdefault(lane.domain, {})
        health = _health(lane)
        recent = health.attempts(now)
        raw = health.successes + health.blocks + health.errors
        d["lanes"] = d.get("lanes", 0) + 1
        d["in_flight"] = lane.domain_in_flight
        d["max_in_flight"] = lane.domain_max_in_flight
        d["tier"] = lane.domain_tier
        d["delay"] = max(d.get("delay", 0.0), lane.delay)
        d["recent_attempts"] = d.get("recent_attempts", 0.0) + recent
        d["recent_blocks"] = d.get("recent_blocks", 0.0) + (
            health.blocks * recent / raw if raw else 0.0
        )
    views = []
    rungs, rung_blocks = _per_kind(samples)
    for domain, d in acc.items():
        recent = d.get("recent_attempts", 0.0)
        views.append(
            DomainView(
                domain,
                ready=int(d.get("ready", 0)),
                waiting=int(d.get("waiting", 0)),
                leased=int(d.get("leased", 0)),
                oldest_age=d.get("oldest_age"),
                in_flight=int(d.get("in_flight", 0)),
                max_in_flight=int(d.get("max_in_flight", 0)),
                delay=d.get("delay", 0.0),
                lanes=int(d.get("lanes", 0)),
                tier=int(d.get("tier", 0)),
                recent_attempts=recent,
                block_ratio=d.get("recent_blocks", 0.0) / recent if recent else 0.0,
                pages=total(samples, "crawlfleet_pages_total", domain=domain, outcome=FETCHED),
                blocked_pages=total(
                    samples, "crawlfleet_pages_total", domain=domain, outcome="blocked"
                ),
                rungs=rungs.get(domain, {}),
                rung_blocks=rung_blocks.get(domain, {}),
            )
        )
    return sorted(views, key=lambda v: (-(v.backlog + v.in_flight), -v.pages, v.domain))


def _per_kind(samples: Samples) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Each domain's fetched pages per fetcher kind, and its blocked ones: one pass over the
    samples (``total`` per domain and kind would read them all again for each)."""
    fetched: dict[str, dict[str, float]] = {}
    blocked: dict[str, dict[str, float]] = {}
    for (name, labels), value in samples.items():
        if name != "crawlfleet_pages_total" or not value:
            continue
        d = dict(labels)
        domain, kind, outcome = d.get("domain"), d.get("kind"), d.get("outcome")
        if domain is None or kind not in KINDS or outcome not in FETCHED:
            continue
        per = fetched.setdefault(domain, {})
        per[kind] = per.get(kind, 0.0) + value
        if outcome == "blocked":
            per = blocked.setdefault(domain, {})
            per[kind] = per.get(kind, 0.0) + value
    return fetched, blocked


def _breaker(row: RouteRow) -> Breaker:
    try:
        saved = json.loads(row.breaker) if row.breaker and row.breaker != "{}" else None
    except ValueError:
        saved = None
    return Breaker.from_json(saved) if saved else Breaker()


def _routes(
    now: float, routes: Sequence[RouteRow], lanes: Sequence[LaneRow], proxies: Mapping[str, str]
) -> list[RouteView]:
    by_route: dict[str, list[RouteStats]] = {}
    for lane in lanes:
        by_route.setdefault(lane.route, []).append(_health(lane))
    views = []
    for r in routes:
        healths = by_route.get(r.id, [])
        attempts = sum(h.attempts(now) for h in healths)
        raw = sum(h.successes + h.blocks + h.errors for h in healths)
        responses = sum(h.responses for h in healths)
        views.append(
            RouteView(
                r.id,
                r.pool,
                r.tier,
                _breaker(r).status(now),
                r.open_until,
                proxies.get(r.id, "direct" if r.id == "direct" else ""),
                lanes=len(healths),
                recent_attempts=attempts,
                success_ratio=sum(h.successes for h in healths) / raw if raw else None,
                latency=sum(h.latency * h.responses for h in healths) / responses
                if responses
                else None,
            )
        )
    order = {"open": 0, "probing": 1, "healthy": 2}
    return sorted(views, key=lambda v: (order[v.state], v.pool, v.id))


def _pools(now: float, routes: Sequence[RouteRow]) -> dict[str, PoolHealth]:
    by_pool: dict[str, list[Breaker]] = {}
    for r in routes:
        by_pool.setdefault(r.pool, []).append(_breaker(r))
    return {pool: pool_health(breakers, now) for pool, breakers in sorted(by_pool.items())}


#: how :func:`_workers` orders the states: the ones to look at first
_STATE_ORDER: Final = {"alive": 0, "stale": 1, "stopped": 2, "gone": 3}


def _workers(now: float, rows: Sequence[WorkerStats], alive_after: float) -> list[WorkerView]:
    newest: dict[str, float] = {}  # a worker id's latest start: an older row of it is gone
    for w in rows:
        newest[w.worker] = max(newest.get(w.worker, w.started_at), w.started_at)
    views = []
    for w in rows:
        try:
            gauges = {k: float(v) for k, v in json.loads(w.gauges or "{}").items()}
        except (ValueError, TypeError, AttributeError):
            gauges = {}
        samples = merge([w.counters])
        silent = max(0.0, now - w.last_seen)
        state = worker_state(
            silent,
            alive_after=alive_after,
            stopped=bool(gauges.get("stopped")),
            restarted=w.started_at < newest[w.worker],
        )
        views.append(
            WorkerView(
                w,
                state == "alive",
                gauges,
                pages=total(samples, "crawlfleet_pages_total", outcome=FETCHED),
                ok=total(samples, "crawlfleet_pages_total", outcome=SUCCESS),
                state=state,
                silent=silent,
            )
        )
    return sorted(views, key=lambda v: (_STATE_ORDER[v.state], -v.stats.last_seen, v.stats.worker))


def worker_state(silent: float, *, alive_after: float, stopped: bool, restarted: bool) -> str:
    """A worker's state from its last report: ``silent`` seconds ago, whether it said it
    stopped, whether its id started again since (see :class:`WorkerView`)."""
    if stopped:
        return "stopped"
    if restarted or silent > STALE_FOR:
        return "gone"
    return "alive" if silent <= alive_after else "stale"
