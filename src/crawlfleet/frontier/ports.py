"""The store's ports: what callers need of a queue store, split by need.

* :class:`Queue` — the workers' verbs: ``enqueue / lease / heartbeat / complete / fail / release
  / report`` and ``wait_for_work``;
* :class:`Jobs` — jobs and their state (``submit``, ``pause``, ``resume``, ``cancel``), their
  runs (``start_run``, ``finish_runs``) and schedules (``save_schedule``, ``start_due_runs``);
* :class:`Pacing` — per-lane limits and pacing as the store holds them;
* :class:`Outbox` — what leaves the machine: events written once, their deliveries leased,
  settled, retried, dead, replayed (``crawlfleet.notify`` sends them);
* :class:`Quality` — each run's data profile: its checks while it goes, once final, and the
  records sinks' progress through a finished run;
* :class:`Insights` — read-only views for the commands, export and the dashboard: stats,
  records, quarantine, dead letters, and the fleet's picture (backlog per domain, lanes, routes,
  what the workers report).

:class:`Frontier` is all of them: each backend (SQLite, PostgreSQL) implements it, and
``crawlfleet.frontier.open_frontier`` picks one from a queue URL. Callers take the narrowest port
they need.


Rules every backend keeps (the contract suite in ``tests/contract`` checks each one):

* ``enqueue`` is idempotent on ``(job, fingerprint)``: the store's unique key is the final arbiter.
* ``lease`` hands out each queued request to one holder at a time, with a fresh fencing ``token``
  and an expiry; it counts an attempt. It honours per-domain limits held in the store (most requests
  in flight, least delay between request starts), so politeness holds across every worker.
* ``complete`` / ``fail`` / ``heartbeat`` / ``release`` act only when the token still matches; a
  holder whose lease expired and was taken over is refused (fencing) and nothing it sent is written.
* An expired lease goes back to ``queued`` (the attempt stays counted) or, when attempts are
  exhausted, to ``dead(worker_lost)``.
* A job is finished when none of its requests is queued (ready or waiting for a retry) or leased.
* Pacing is adaptive and held in the store: ``complete`` and ``fail`` apply
  :func:`crawlfleet.policy.pacing.update` to the domain of every item, in the same transaction
  (push-back slows the domain and teaches it a ceiling, ``Retry-After`` and the host circuit set
  ``blocked_until``); ``lease`` hands out at most the domain's current concurrency and spaces
  starts by its current delay, never below its robots.txt Crawl-delay (``set_crawl_delay``).
* Every failed attempt, lease expiry and trap is a row of the request's history (``dead_letter``).
  A failure with ``count_attempt=False`` (robots.txt unreachable: the host, not the request, is
  not ready) is retried later without using up an attempt. A failure's ``discovered`` links
  (found on a page fetched again elsewhere, e.g. in the browser) are enqueued as a completion's.
* The outbox: ``emit`` writes an event once by its key (a second ``emit`` of the key adds
  nothing) with one delivery per destination; ``lease_deliveries`` hands each delivery to one
  holder at a time (fencing token, expiry; an expired lease is taken over and counts its
  attempt, and one that used the last attempt is dead); ``settle_deliveries`` acts only while
  the token matches.
* Run profiles: ``claim_check`` lets one process at a time check a running run, every
  ``every`` seconds; ``save_profile(final=True)`` succeeds once per run, and writes the run's
  events in the same transaction (the one that loses the race writes nothing).
* Trap guards end as ``dead(trap)`` rows, never silent drops: links the worker found to be traps
  (``NewRequest.trap``), and new requests over the job's per-host or per-URL-pattern budget,
  counted in the store at enqueue time so the budgets hold across the whole fleet. A request a
  sitemap lists (``NewRequest.listed``) draws on no URL-pattern budget.
* Runs: a job's first run starts with the job; a run ends (``finish_runs``) once nothing of the
  job is queued or leased: the records its fetched pages no longer yield are marked removed,
  a ``fresh`` run's leftovers of earlier runs go, and its counters are kept. ``start_run``
  (``recrawl``) queues again the job's done requests that are due (``policy.revisit.is_due``);
  ``fresh`` drops the job's requests and their history, never its records before the run ended.
* Records carry their status in the run that last wrote them (``new``, ``changed``,
  ``unchanged``, ``removed``), compared with the version of the last run; a completion with
  ``carry`` (a 304) carries its page's records into the run, unchanged.
* Schedules: ``start_due_runs`` starts each due run once, however many processes call it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from crawlfleet.data.changes import ChangeRow
from crawlfleet.data.profile import FieldStats
from crawlfleet.frontier.outbox import (
    DeadDelivery,
    Delivery,
    DeliveryResult,
    EventRow,
    OutboxCount,
    OutboxEvent,
)
from crawlfleet.model import (
    KINDS,
    BudgetHit,
    Completion,
    DeadLetter,
    DeadReason,
    DomainLimits,
    Failure,
    Job,
    JobSpec,
    JobState,
    JobStats,
    Lease,
    LeaseRef,
    NewRequest,
    QuarantineRow,
    RecordRow,
    Run,
    RunKind,
    Schedule,
    Settled,
)
from crawlfleet.policy.pacing import PacingState

__all__ = [
    "DomainQueue",
    "DomainState",
    "FleetCounts",
    "Frontier",
    "Insights",
    "JobActivity",
    "Jobs",
    "LaneRow",
    "LaneState",
    "LeaseHolder",
    "Outbox",
    "Pacing",
    "ProfileRow",
    "Quality",
    "QuarantineItem",
    "Queue",
    "RecordCursor",
    "RouteRow",
    "WorkerStats",
]


@dataclass(frozen=True, slots=True)
class DomainState:
    """A lane's politeness as the store holds it: its limits (the narrower of its route's and
    its domain's), in-flight count, next start and adaptive pacing. A lane is a (domain, route)
    pair; a crawl without routes has one lane per domain, ``direct``."""

    domain: str
    max_in_flight: int
    min_delay: float
    in_flight: int
    next_at: float
    pacing: PacingState
    route: str = "direct"


LaneState = DomainState


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """A worker holding leases of a job: how many, and when the last of them expires."""

    worker: str
    leases: int
    expires_at: float


@dataclass(frozen=True, slots=True)
class JobActivity:
    """What a job did and holds, beyond its counts (:class:`~crawlfleet.model.JobStats`).

    ``finished_at``: when the last of its requests finished (done or dead; None if none did).
    ``dead_by_reason``: its dead requests by :class:`~crawlfleet.model.DeadReason` value.
    ``holders``: the workers holding its leases now (a hard exit leaves them until they expire).
    ``records_updated_at``: the newest record's update time (None: no record): where a reader
    of :meth:`Insights.records_since` starts to see only what comes next.
    """

    finished_at: float | None
    dead_by_reason: Mapping[str, int]
    holders: Sequence[LeaseHolder]
    records_updated_at: float | None


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """What one worker process reports (``save_worker_stats``), one row per process: its id and
    start time, the fetcher kinds it runs (``"http,browser"``), where it runs, when it last
    reported, and its counters and gauges as JSON (:meth:`crawlfleet.metrics.WorkerMetrics.
    snapshot`: the store keeps them as they come, the readers add them up)."""

    worker: str
    started_at: float
    kinds: str
    host: str
    pid: int
    last_seen: float
    counters: str = "{}"
    gauges: str = "{}"


@dataclass(frozen=True, slots=True)
class DomainQueue:
    """A job's unfinished requests on one domain: ready now, waiting for a retry, leased, and
    when the oldest ready one was queued (None: none is ready)."""

    job: str
    domain: str
    ready: int
    waiting: int
    leased: int
    oldest_ready_at: float | None


@dataclass(frozen=True, slots=True)
class LaneRow:
    """A lane as the dashboard shows it: its pacing now (in flight, width, delay, next start,
    hold), its route's pool and tier, its health (the JSON of a
    :class:`crawlfleet.policy.health.RouteStats`) and its domain's tier and caps."""

    domain: str
    route: str
    pool: str
    tier: int
    in_flight: int
    concurrency: int
    max_in_flight: int
    delay: float
    next_at: float
    blocked_until: float
    health: str
    domain_tier: int
    domain_in_flight: int
    domain_max_in_flight: int


@dataclass(frozen=True, slots=True)
class RouteRow:
    """A route the store knows, with its breaker (the JSON of a
    :class:`crawlfleet.policy.health.Breaker`; ``{}``: never tripped). Never a proxy URL."""

    id: str
    pool: str
    tier: int
    breaker: str
    open_until: float


@dataclass(frozen=True, slots=True)
class FleetCounts:
    """Counts over the whole store: failed attempts by outcome (``lease_expired``,
    ``blocked``, ``retryable_error``, ...) and route-tier moves up (escalations) and down."""

    attempts_by_outcome: Mapping[str, int]
    tier_moves_up: int
    tier_moves_down: int


@dataclass(frozen=True, slots=True)
class QuarantineItem:
    """A quarantined record with its id and job (for the dashboard and its raw snapshot)."""

    id: int
    job: str
    row: QuarantineRow


#: a position in a job's records ordered by (update time, key): after ``(t, key)``, or after
#: every record updated at ``t`` when the key is None
RecordCursor = tuple[float, str | None]


class Queue(Protocol):
    """The workers' verbs. Every method is batched: none takes one row where it could take many."""

    async def enqueue(self, job: str, requests: Sequence[NewRequest]) -> int:
        """Add requests not seen before in this job; returns how many were new."""
        ...

    async def lease(
        self,
        worker: str,
        limit: int,
        ttl: float,
        jobs: Sequence[str] | None = None,
        kinds: Sequence[str] = KINDS,
    ) -> list[Lease]:
        """Lease up to ``limit`` ready requests of running jobs (all, or those named) whose
        fetcher is of the ``kinds`` the worker runs (``auto`` and none count as ``http``)."""
        ...

    async def heartbeat(self, leases: Sequence[LeaseRef], ttl: float) -> set[int]:
        """Extend leases still held; returns their ids (missing ids were lost)."""
        ...

    async def complete(self, items: Sequence[Completion]) -> set[int]:
        """Finish leases with their records and discovered links; returns the accepted ids."""
        ...

    async def fail(self, items: Sequence[Failure]) -> set[int]:
        """Record failed attempts: retry later or dead; returns the accepted ids."""
        ...

    async def release(self, leases: Sequence[LeaseRef]) -> set[int]:
        """Give leases back untried (graceful stop): queued again, attempt not counted."""
        ...

    async def report(
        self,
        worker: str,
        done: Sequence[Completion] = (),
        failed: Sequence[Failure] = (),
        *,
        lease: int = 0,
        ttl: float = 60.0,
        jobs: Sequence[str] | None = None,
        kinds: Sequence[str] = KINDS,
    ) -> Settled:
        """``complete(done)``, ``fail(failed)`` and ``lease(worker, lease, ttl, jobs)`` in one
        transaction: the slots the finished requests free, and the links they discovered, can be
        leased again at once (no timer between the hops of a chain of pages)."""
        ...

    async def load_sessions(self, job: str, key: str) -> list[str]:
        """The JSON of the job's live sessions of ``key`` (see ``crawlfleet.routes.identities``)."""
        ...

    async def save_sessions(self, job: str, rows: Sequence[tuple[str, str, str, bool]]) -> None:
        """Upsert ``(key, session id, JSON, retired)`` rows; retired sessions are deleted."""
        ...

    async def wait_for_work(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for another worker's change that may make work
        leasable (new requests, freed slots, resumed jobs); returns whether one came. A hint:
        a lease may still find nothing."""
        ...

    async def rescue_expired(self) -> int:
        """Return expired leases to the queue (or dead(worker_lost)); returns how many."""
        ...

    async def maintain(self) -> list[str]:
        """Keep the store's tables fast as they grow and churn: statistics the planner needs
        after a bulk intake, dead rows where the server does not vacuum them (PostgreSQL; see
        :mod:`crawlfleet.frontier.upkeep`). Cheap when there is nothing to do; workers call it
        every few seconds, ``submit`` after its seeds. Returns what it ran."""
        ...

    async def save_worker_stats(self, stats: WorkerStats) -> None:
        """Write a worker process's report (its row is keyed by worker id and start time)."""
        ...


class Jobs(Protocol):
    """Crawl jobs: what exists, and whether workers lease it."""

    async def page_types(self, job: str) -> dict[tuple[str, str], str]:
        """The fetcher each page type ``(domain, URL pattern)`` of the job was found to need."""
        ...

    async def submit_job(self, spec: JobSpec) -> Job:
        """Create the job, or update its spider and settings if it exists (state unchanged)."""
        ...

    async def get_job(self, name: str) -> Job | None: ...
    async def list_jobs(self) -> list[Job]: ...
    async def set_job_state(self, name: str, state: JobState) -> None: ...

    async def is_finished(self, job: str) -> bool: ...

    async def delete_job(self, name: str) -> int:
        """Remove the job and everything of it in the store: requests, their history, records,
        quarantine, budgets, runs (its WARC files are not the store's). Returns how many
        requests it had; 0 for a job that does not exist."""
        ...

    async def current_run(self, job: str) -> Run | None:
        """The job's current run, its counters live while it goes (None: a job of an older
        store that has none)."""
        ...

    async def runs(self, job: str, limit: int = 10) -> list[Run]:
        """The job's runs, the newest first."""
        ...

    async def start_run(
        self, job: str, kind: RunKind = RunKind.RECRAWL, *, schedule: str | None = None
    ) -> Run:
        """Start the job's next run: ``recrawl`` queues again its done requests that are due
        (its current run must be finished: StoreError otherwise, the job's state unchanged);
        ``fresh`` starts over, its requests and their history dropped now, its records and
        quarantine kept until the new run finished (StoreError while requests are leased)."""
        ...

    async def finish_runs(self, jobs: Sequence[str] | None = None) -> list[Run]:
        """End every running run (of all jobs, or those named) whose job has nothing queued or
        leased; returns the runs it ended (each ends once, whoever calls)."""
        ...

    async def save_schedule(self, schedule: Schedule) -> None:
        """Add the job's schedule, or replace it (one per job)."""
        ...

    async def schedules(self) -> list[Schedule]: ...

    async def remove_schedule(self, job: str) -> bool:
        """Remove the job's schedule; False when it had none."""
        ...

    async def start_due_runs(self) -> list[tuple[Schedule, Run | None]]:
        """Start the runs of the schedules due now, each once across the fleet (or skip them,
        or queue them, as their overlap says); returns each due schedule with the run it
        started (None: none)."""
        ...


class Pacing(Protocol):
    """Per-lane (today: per-domain) politeness as the store holds it, fleet-wide."""

    async def set_domain_limits(self, domain: str, limits: DomainLimits) -> None: ...

    async def set_crawl_delay(self, domain: str, seconds: float | None) -> None:
        """The domain's robots.txt ``Crawl-delay``: its delay floor (capped), None to lift it."""
        ...

    async def domain_state(self, domain: str) -> DomainState | None:
        """The domain's first lane (``direct`` if it has one) as held in the store (None: not
        seen yet)."""
        ...

    async def lanes(self, domain: str) -> list[LaneState]:
        """Every lane of the domain (one per route), ``direct`` first."""
        ...

    async def robots_file(self, origin: str) -> tuple[str, str, float] | None:
        """The origin's robots.txt as a worker of the fleet last stored it: ``(state, text,
        age in seconds)`` (state ``ok`` or ``allow_all``), None if none has."""
        ...

    async def save_robots_file(self, origin: str, state: str, text: str) -> None:
        """Share the robots.txt a worker just fetched for ``origin`` (``ok``: its text, or
        ``allow_all``: none to read), fetched now."""
        ...

    async def host_down(self, origin: str, window: float) -> tuple[float, int]:
        """A worker could not connect to ``origin`` now: seconds the fleet has found it so,
        from the first failure of those in a row (0 for the first), and how many failures
        (every worker's; 1 for the first). A failure more than ``window`` seconds after the one
        before starts both again."""
        ...


@dataclass(frozen=True, slots=True)
class ProfileRow:
    """A run's profile as the store keeps it (the JSON of a ``data.profile.RunProfile``)."""

    run: int
    profile: str
    final: bool


class Outbox(Protocol):
    """Events that leave the machine, and their deliveries (see the rules above)."""

    async def emit(self, events: Sequence[OutboxEvent]) -> int:
        """Write the events not written before (by key) with their deliveries; returns how
        many were new."""
        ...

    async def lease_deliveries(
        self, owner: str, destinations: Sequence[str], limit: int, ttl: float
    ) -> list[Delivery]:
        """Lease up to ``limit`` deliveries due now to the ``destinations`` this process can
        send to (those whose holder's lease expired too)."""
        ...

    async def settle_deliveries(self, results: Sequence[DeliveryResult]) -> set[int]:
        """Done, retried later or dead, for the deliveries still held; returns their ids."""
        ...

    async def replay_deliveries(
        self, destination: str | None = None, ids: Sequence[int] = ()
    ) -> int:
        """Queue dead deliveries again (of one destination, or these ids) with fresh tries."""
        ...

    async def prune_outbox(self, before: float) -> int:
        """Forget deliveries that ended before ``before`` and the events none is left of."""
        ...


class Quality(Protocol):
    """Each run's data profile, and the records sinks' progress through finished runs."""

    async def claim_check(self, job: str, run: int, every: float) -> bool:
        """Whether this process checks ``run`` now: it is not final and nobody checked it in
        the last ``every`` seconds (the claim is taken)."""
        ...

    async def save_profile(
        self,
        job: str,
        run: int,
        profile: str,
        *,
        final: bool = False,
        events: Sequence[OutboxEvent] = (),
    ) -> bool:
        """Keep a run's profile, and emit ``events`` in the same transaction. ``final``:
        once per run (False: it was final already, nothing written). A check's profile never
        replaces a final one."""
        ...

    async def advance_sink(
        self,
        job: str,
        run: int,
        sink: str,
        *,
        batches: int,
        after: str,
        done: bool,
        event: OutboxEvent | None = None,
    ) -> bool:
        """Move ``sink``'s progress through ``run`` past batch number ``batches`` (to the key
        ``after``; ``done``: nothing is left), writing ``event`` (the batch) with it. False:
        another process moved it first (nothing written)."""
        ...

    async def sink_state(self, job: str, run: int, sink: str) -> tuple[str, int, bool]:
        """Where ``sink`` is in ``run``: the key its next batch starts after, the batches
        written, whether it is done (a new sink starts at the beginning)."""
        ...


class Insights(Protocol):
    """Read-only views of the store: the commands, export and the dashboard read these."""

    async def capacity(self, job: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """What ``plan`` needs of a job: its domains with work left ``(domain, queued,
        max_in_flight, min_delay, crawl_delay, tier)`` and their lanes ``(domain, route, pool,
        tier, health JSON, breaker JSON)``."""
        ...

    async def list_jobs(self) -> list[Job]: ...
    async def get_job(self, name: str) -> Job | None: ...
    async def stats(self, job: str) -> JobStats: ...

    async def is_finished(self, job: str) -> bool: ...

    def iter_records(self, job: str) -> AsyncIterator[RecordRow]: ...

    def iter_quarantine(self, job: str) -> AsyncIterator[QuarantineRow]: ...

    def iter_all_records(self, job: str) -> AsyncIterator[tuple[RecordRow, str, int | None]]:
        """Every record, the removed ones too: ``(record, status, removed_run)`` by key."""
        ...

    def iter_changes(
        self, job: str, since: int | None = None
    ) -> AsyncIterator[tuple[RecordRow, ChangeRow]]:
        """Records new, changed or removed in the runs from ``since`` on (default: the current
        run), with how they changed, by key."""
        ...

    async def current_run(self, job: str) -> Run | None: ...
    async def runs(self, job: str, limit: int = 10) -> list[Run]: ...
    async def schedules(self) -> list[Schedule]: ...

    async def dead_letters(
        self, job: str | None = None, reason: DeadReason | None = None, limit: int = 1000
    ) -> list[DeadLetter]: ...

    async def dead_letter(self, request_id: int) -> DeadLetter | None: ...

    async def budget_hits(self, job: str) -> list[BudgetHit]:
        """The host and URL-shape budgets the job ran into, most URLs refused first."""
        ...

    async def job_activity(self, job: str) -> JobActivity:
        """When the job last finished a request, its dead letters by reason, who holds its
        leases, and its newest record's update time (StoreError for an unknown job)."""
        ...

    async def records_since(
        self, job: str, after: RecordCursor = (0.0, ""), limit: int = 1000
    ) -> list[tuple[float, RecordRow]]:
        """Records updated after ``after``, as ``(updated_at, record)`` ordered by update time,
        then key: a reader follows a crawl's records as they are stored by passing the last
        pair's ``(updated_at, record.key)`` back. A record updated again comes again. Update
        times are the writers' clocks: a reader that must not miss a commit that was slower
        than a later one reads again from a little before its cursor."""
        ...

    async def worker_stats(self, since: float = 0.0) -> list[WorkerStats]:
        """The reports of every worker process last heard of at ``since`` or later."""
        ...

    async def queue_by_domain(self) -> list[DomainQueue]:
        """Every (job, domain) with unfinished requests: its backlog and oldest ready request."""
        ...

    async def lane_rows(self, limit: int = 1000) -> list[LaneRow]:
        """Up to ``limit`` lanes, the most recently served first."""
        ...

    async def route_rows(self) -> list[RouteRow]:
        """Every route the store knows (``direct`` included), by pool."""
        ...

    async def fleet_counts(self) -> FleetCounts:
        """Failed attempts by outcome and route-tier moves, over the whole store."""
        ...

    async def quarantine_items(
        self, job: str | None = None, limit: int = 100
    ) -> list[QuarantineItem]:
        """The newest quarantined records (of one job, or of all)."""
        ...

    async def quarantine_item(self, item_id: int) -> QuarantineItem | None: ...

    async def outbox_counts(self) -> list[OutboxCount]:
        """Every destination's deliveries by state."""
        ...

    async def dead_deliveries(self, limit: int = 100) -> list[DeadDelivery]: ...

    async def outbox_events(
        self, job: str | None = None, kind: str | None = None, limit: int = 100
    ) -> list[EventRow]:
        """The newest events written (of one job, of one kind)."""
        ...

    async def profiles(self, job: str, limit: int = 10) -> list[ProfileRow]:
        """The job's run profiles, the newest run first."""
        ...

    async def profile_counts(
        self, job: str, run: int
    ) -> tuple[int, int, dict[str, int], dict[str, FieldStats]]:
        """What a profile of a run needs: its records (those it wrote or carried over, not
        those it removed), its quarantined records, those by reason, and every field's counts
        (see ``data.profile.field_stats``)."""
        ...

    async def records_missing(
        self, job: str, run: int, field: str, limit: int = 5
    ) -> list[RecordRow]:
        """Records of the run whose ``field`` is missing or empty (a coverage breach's
        examples), by key."""
        ...

    async def run_costs(self, job: str, run: int, since: float) -> tuple[int, int, int]:
        """A run's retries (over its finished requests), its traps, and the job's attempts
        answered with blocks since ``since`` (the run's start)."""
        ...

    async def sink_records(
        self, job: str, run: int, after: str, limit: int
    ) -> list[tuple[RecordRow, str, Any]]:
        """The next ``limit`` records of a run's changes after key ``after`` (by key): those
        new or changed in it, and those it removed, with their status (``new``, ``changed``,
        ``removed``) and the version before (None: none kept)."""
        ...

    async def blocked_examples(
        self, job: str, since: float = 0.0, limit: int = 5
    ) -> list[tuple[str, float, int]]:
        """URLs of the job answered with blocks since ``since``: ``(url, last at, blocks)``."""
        ...


class Frontier(Queue, Jobs, Pacing, Outbox, Quality, Insights, Protocol):
    """A whole queue store: every port. Backends implement it; callers take what they need."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...

    async def upgrade(self) -> int:
        """Create the schema or apply pending migrations (safe to repeat, and to run from many
        processes at once); returns the schema version."""
        ...

    async def replay_dead(
        self, job: str | None = None, reason: DeadReason | None = None, ids: Sequence[int] = ()
    ) -> int:
        """Put dead requests back in the queue with fresh attempts; returns how many."""
        ...
