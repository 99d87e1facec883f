"""The frontier contract: what every queue store (SQLite, PostgreSQL) must do.

A request's life::

    queued ──lease──▶ leased ──complete──▶ done
      ▲                 │ fail(retry_at) / lease expired (attempts left)
      └─────────────────┘
                        │ fail(dead) / lease expired, attempts exhausted
                        ▼
                       dead ──replay──▶ queued

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
  not ready) is retried later without using up an attempt.
* Trap guards end as ``dead(trap)`` rows, never silent drops: links the worker found to be traps
  (``NewRequest.trap``), and new requests over the job's per-host or per-URL-pattern budget,
  counted in the store at enqueue time so the budgets hold across the whole fleet.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from crawlfleet.policy.pacing import PacingState

#: a worker that leased within this many seconds shares each domain's in-flight slots with the
#: other such workers (its fair share is ceil(max_in_flight / active workers))
ACTIVE_WINDOW = 5.0


class State(StrEnum):
    QUEUED = "queued"
    LEASED = "leased"
    DONE = "done"
    DEAD = "dead"


class DeadReason(StrEnum):
    """Why a request was given up; stable names, used by ``crawlfleet dead`` and metrics."""

    HTTP_4XX = "http_4xx"
    TOO_MANY_RETRIES = "too_many_retries"
    ROBOTS = "robots"
    TOO_LARGE = "too_large"
    WORKER_LOST = "worker_lost"
    TRAP = "trap"
    PARSE_ERROR = "parse_error"
    ADDRESS_REFUSED = "address_refused"
    BLOCKED = "blocked"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    UNSUPPORTED = "unsupported"
    CANCELLED = "cancelled"


class JobState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class DomainLimits:
    """Politeness for one domain: most requests in flight, least seconds between request starts."""

    max_in_flight: int = 8
    min_delay: float = 0.0


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a job needs in the store: where its spider lives and its politeness defaults."""

    name: str
    spider: str  # "path/to/file.py" or "package.module:Class"; workers resolve it
    settings: Mapping[str, Any] = field(default_factory=dict)
    default_limits: DomainLimits = DomainLimits()
    domain_limits: Mapping[str, DomainLimits] = field(default_factory=dict)
    max_attempts: int = 5
    page_budget: int | None = None  # most requests per host in this job (the rest: dead(trap))
    pattern_budget: int | None = None  # most requests per URL pattern (policy.traps.url_pattern)


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    name: str
    spider: str
    state: JobState
    settings: Mapping[str, Any]
    created_at: float


@dataclass(frozen=True, slots=True)
class NewRequest:
    """A request to put in the frontier; ``url`` is already canonical, ``fingerprint`` its key."""

    url: str
    fingerprint: bytes
    domain: str
    priority: int = 0
    depth: int = 0
    callback: str | None = None
    meta: Mapping[str, Any] | None = None
    method: str = "GET"
    body: bytes | None = None
    fetcher: str | None = None
    max_attempts: int | None = None  # None: the job's default
    trap: str | None = None  # why the finder judged it a trap: stored as dead(trap), never fetched


@dataclass(frozen=True, slots=True)
class Lease:
    """A leased request. Fetch it no earlier than ``start_at`` (the store's pacing slot)."""

    id: int
    job: str
    url: str
    domain: str
    priority: int
    depth: int
    callback: str | None
    meta: Mapping[str, Any]
    method: str
    body: bytes | None
    fetcher: str | None
    attempts: int
    max_attempts: int
    token: int
    expires_at: float
    start_at: float

    @property
    def ref(self) -> LeaseRef:
        return LeaseRef(self.id, self.token)


@dataclass(frozen=True, slots=True)
class LeaseRef:
    id: int
    token: int


@dataclass(frozen=True, slots=True)
class RecordRow:
    """A validated record with its provenance.

    ``warc_file`` / ``warc_record_id``: the WARC record of the fetch the record came from. When
    that fetch had the same payload as an earlier one and was archived as a ``revisit`` record,
    ``warc_refers_to_file`` / ``warc_refers_to`` name the first capture, which holds the bytes.
    """

    key: str
    data: Mapping[str, Any]
    url: str
    fetched_at: float
    warc_file: str | None = None
    warc_record_id: str | None = None
    warc_refers_to_file: str | None = None
    warc_refers_to: str | None = None


@dataclass(frozen=True, slots=True)
class QuarantineRow:
    """A record that failed validation: never in the records, kept with its errors."""

    data: Any
    errors: Sequence[Mapping[str, Any]]
    url: str
    fetched_at: float
    warc_file: str | None = None
    warc_record_id: str | None = None
    warc_refers_to_file: str | None = None
    warc_refers_to: str | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """The successful end of a lease, written in one transaction with what the page produced."""

    lease: LeaseRef
    status: int
    records: Sequence[RecordRow] = ()
    quarantined: Sequence[QuarantineRow] = ()
    discovered: Sequence[NewRequest] = ()
    #: the body's hash: the store notes the first request of a job with each content (later ones
    #: are counted as duplicates and point at it: ``duplicate_of``)
    content_hash: bytes | None = None
    elapsed: float = 0.0  # response time (seconds): the domain's latency
    nbytes: int = 0
    started_at: float | None = None  # when the request was sent (store clock)


@dataclass(frozen=True, slots=True)
class Failure:
    """An unsuccessful attempt: retried at ``retry_at``, or dead with ``dead_reason``."""

    lease: LeaseRef
    error: str
    retry_at: float | None = None
    dead_reason: DeadReason | None = None
    status: int | None = None
    route: str | None = None
    outcome: str = "error"  # a policy.classify.Outcome value; other names do not pace the domain
    latency: float | None = None  # response time, when a response arrived
    retry_after: float | None = None  # seconds the host asked for: holds the whole domain
    started_at: float | None = None  # when the request was sent (store clock)
    count_attempt: bool = True  # False: retried later without using up an attempt


@dataclass(frozen=True, slots=True)
class Settled:
    """What one ``report`` did: the accepted completions and failures (by lease id; the others
    were fenced), and the new leases it handed out in the same transaction."""

    completed: set[int]
    failed: set[int]
    leases: list[Lease]


@dataclass(frozen=True, slots=True)
class Attempt:
    n: int
    at: float
    outcome: str
    status: int | None
    error: str | None
    route: str | None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: int
    job: str
    url: str
    reason: DeadReason
    error: str | None
    attempts: int
    died_at: float
    history: Sequence[Attempt] = ()


@dataclass(frozen=True, slots=True)
class JobStats:
    job: str
    state: JobState
    queued: int = 0  # ready now
    waiting: int = 0  # queued for a retry later
    leased: int = 0
    done: int = 0
    dead: int = 0
    records: int = 0
    quarantined: int = 0
    retried: int = 0  # requests that needed more than one attempt
    retry_depth_sum: int = 0  # sum over finished requests of (attempts - 1)
    oldest_queued_age: float = 0.0
    traps: int = 0  # dead(trap): links refused by trap guards and budgets
    duplicates: int = 0  # done requests whose body was the same as an earlier request's
    traps_by_domain: Mapping[str, int] = field(default_factory=dict)
    #: finished (done or dead) fetched requests by how many attempts they took
    attempts_histogram: Mapping[int, int] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.queued == 0 and self.waiting == 0 and self.leased == 0

    @property
    def avg_retry_depth(self) -> float:
        """Retries per finished fetched request (0 when every request took one attempt)."""
        fetched = sum(self.attempts_histogram.values())
        return self.retry_depth_sum / fetched if fetched else 0.0


@dataclass(frozen=True, slots=True)
class DomainState:
    """A domain's politeness as the store holds it: configured limits and adaptive pacing."""

    domain: str
    max_in_flight: int
    min_delay: float
    in_flight: int
    next_at: float
    pacing: PacingState


class Frontier(Protocol):
    """The queue store. Every method is batched: none takes one row where it could take many."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...

    async def submit_job(self, spec: JobSpec) -> Job:
        """Create the job, or update its spider and settings if it exists (state unchanged)."""
        ...

    async def get_job(self, name: str) -> Job | None: ...
    async def list_jobs(self) -> list[Job]: ...
    async def set_job_state(self, name: str, state: JobState) -> None: ...

    async def enqueue(self, job: str, requests: Sequence[NewRequest]) -> int:
        """Add requests not seen before in this job; returns how many were new."""
        ...

    async def lease(
        self, worker: str, limit: int, ttl: float, jobs: Sequence[str] | None = None
    ) -> list[Lease]:
        """Lease up to ``limit`` ready requests of running jobs (all, or those named)."""
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
    ) -> Settled:
        """``complete(done)``, ``fail(failed)`` and ``lease(worker, lease, ttl, jobs)`` in one
        transaction: the slots the finished requests free, and the links they discovered, can be
        leased again at once (no timer between the hops of a chain of pages)."""
        ...

    async def wait_for_work(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for another worker's change that may make work
        leasable (new requests, freed slots, resumed jobs); returns whether one came. A hint:
        a lease may still find nothing."""
        ...

    async def rescue_expired(self) -> int:
        """Return expired leases to the queue (or dead(worker_lost)); returns how many."""
        ...

    async def set_domain_limits(self, domain: str, limits: DomainLimits) -> None: ...

    async def set_crawl_delay(self, domain: str, seconds: float | None) -> None:
        """The domain's robots.txt ``Crawl-delay``: its delay floor (capped), None to lift it."""
        ...

    async def domain_state(self, domain: str) -> DomainState | None:
        """The domain's limits and pacing as held in the store (None: not seen yet)."""
        ...

    async def stats(self, job: str) -> JobStats: ...

    async def is_finished(self, job: str) -> bool: ...

    def iter_records(self, job: str) -> AsyncIterator[RecordRow]: ...

    def iter_quarantine(self, job: str) -> AsyncIterator[QuarantineRow]: ...

    async def dead_letters(
        self, job: str | None = None, reason: DeadReason | None = None, limit: int = 1000
    ) -> list[DeadLetter]: ...

    async def dead_letter(self, request_id: int) -> DeadLetter | None: ...

    async def replay_dead(
        self, job: str | None = None, reason: DeadReason | None = None, ids: Sequence[int] = ()
    ) -> int:
        """Put dead requests back in the queue with fresh attempts; returns how many."""
        ...
