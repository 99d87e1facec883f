"""The vocabulary every layer speaks: states, reasons, outcomes, requests, leases, reports, rows.

Plain values (frozen dataclasses and string enums), importing nothing of crawlfleet: the pure
policies, the store ports and backends, the worker and the commands all build on it. A request's
life::

    queued ──lease──▶ leased ──complete──▶ done
      ▲                 │ fail(retry_at) / lease expired (attempts left)
      └─────────────────┘
                        │ fail(dead) / lease expired, attempts exhausted
                        ▼
                       dead ──replay──▶ queued
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, Final

__all__ = [
    "DEFAULT",
    "DIRECT_ROUTE",
    "KINDS",
    "AttemptRow",
    "BudgetHit",
    "Completion",
    "DeadLetter",
    "DeadReason",
    "Default",
    "DomainLimits",
    "Failure",
    "Job",
    "JobSpec",
    "JobState",
    "JobStats",
    "Lease",
    "LeaseRef",
    "NewRequest",
    "Outcome",
    "QuarantineRow",
    "RecordRow",
    "RoutePlan",
    "Run",
    "RunCounters",
    "RunKind",
    "RunState",
    "Schedule",
    "Settled",
    "State",
    "Visit",
]


#: fetcher kinds a worker can run (``worker --kind``); a request's ``fetcher`` of ``auto`` (or
#: none) starts as ``http``
KINDS = ("http", "impersonate", "browser")
#: the rungs of ``auto``'s ladder, cheapest first: each costs more and passes more bot walls
LADDER = KINDS


def kind_of(fetcher: str | None) -> str:
    """The worker kind that runs a request of fetcher ``fetcher`` (None and ``auto``: http)."""
    return fetcher if fetcher == "browser" or fetcher == "impersonate" else "http"


class Outcome(StrEnum):
    """The verdict on one attempt; stable names, used in metrics and attempt history."""

    OK = "ok"
    GONE = "gone"  # a final answer (404, 410, ...): done with its status, nothing to parse
    BLOCKED = "blocked"
    RETRYABLE_ERROR = "retryable_error"
    PERMANENT_ERROR = "permanent_error"
    ROBOTS = "robots"
    TRAP = "trap"


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
    TOO_COMPLEX = "too_complex"
    TOO_MANY_ITEMS = "too_many_items"
    ADDRESS_REFUSED = "address_refused"
    BLOCKED = "blocked"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    UNSUPPORTED = "unsupported"
    CANCELLED = "cancelled"
    EMPTY = "empty"  # an empty 2xx page, twice
    ROBOTS_UNAVAILABLE = "robots_unavailable"  # robots.txt unreadable past the give-up time
    OUT_OF_SCOPE = "out_of_scope"  # a redirect off the crawl's scope
    TLS_ERROR = "tls_error"  # the site's certificate is not trusted (or no TLS in common)
    BAD_SITEMAP = "bad_sitemap"  # a page fetched as a sitemap is not one (crawlfleet.sitemap)
    HOST_UNREACHABLE = "host_unreachable"  # refused, no DNS name, no connection: past its wait


class Visit(StrEnum):
    """What a fetch found of its page, against the last fetch (a run's page counters)."""

    NEW = "new"  # fetched for the first time
    CHANGED = "changed"
    UNCHANGED = "unchanged"  # a 200 with the same body
    NOT_MODIFIED = "not_modified"  # a 304 to the validators sent


class RunKind(StrEnum):
    FIRST = "first"
    RECRAWL = "recrawl"
    FRESH = "fresh"  # start over: the job's requests dropped, its records replaced at the end


class RunState(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    ABANDONED = "abandoned"  # replaced by a --fresh run before it finished


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
class RoutePlan:
    """One route a job may use, as the store keeps it: the pool's terms, never the proxy URL
    (credentials never reach the store; each worker maps the id to its own configured route).

    ``max_in_flight`` / ``min_delay``: the pool's own limits per domain through this route
    (None / 0: only the domain's). ``domains``: the pool serves only these domains (and their
    subdomains); empty: any domain no other pool claims. ``pinned``: the route serves only
    requests that name its pool (``Request(pool=...)``), none of the others.
    """

    id: str
    pool: str
    tier: int = 0
    max_in_flight: int | None = None
    min_delay: float = 0.0
    cost: float = 0.0
    domains: tuple[str, ...] = ()
    pinned: bool = False


DIRECT_ROUTE = RoutePlan("direct", "direct")


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
    routes: tuple[RoutePlan, ...] = ()  # the routes its pools offer (none: direct only)
    record_history: int = 1  # versions of a record kept before its current one (previous)


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    name: str
    spider: str
    state: JobState
    settings: Mapping[str, Any]
    created_at: float


@dataclass(slots=True)
class NewRequest:
    """A request to put in the frontier; ``url`` is already canonical, ``fingerprint`` its key.

    A value: nothing changes one once made. Not ``frozen``: a crawl makes one per new link,
    and a frozen dataclass's ``__init__`` costs three times as much."""

    url: str
    fingerprint: bytes
    domain: str
    priority: int = 0
    depth: int = 0
    callback: str | None = None
    meta: Mapping[str, Any] | None = None
    method: str = "GET"
    body: bytes | None = field(default=None, repr=False)  # a form's fields: a password, say
    fetcher: str | None = None
    max_attempts: int | None = None  # None: the job's default
    trap: str | None = None  # why the finder judged it a trap: stored as dead(trap), never fetched
    headers: Mapping[str, str] | None = field(default=None, repr=False)  # may hold secrets
    pool: tuple[str, ...] = ()  # the route pools it must leave through (empty: the usual ones)
    found_by: int | None = None  # the request whose page found it (hubs: see policy.revisit)
    lastmod: float | None = None  # when its page last changed, as a sitemap says
    listed: bool = False  # a sitemap lists it: the site's inventory, outside the URL-shape budget


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
    body: bytes | None = field(repr=False)  # a form's fields: a password, say
    fetcher: str | None
    attempts: int
    max_attempts: int
    token: int
    expires_at: float
    start_at: float
    route: str = "direct"  # the route the request leaves by (its lane is (domain, route))
    headers: Mapping[str, str] | None = field(default=None, repr=False)  # may hold secrets
    #: what the job kept of the page from its last fetch (validators, body hash, revisit
    #: interval, capture: see ``crawlfleet.worker.revisit``); empty for a first fetch
    page: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def lane(self) -> tuple[str, str]:
        return (self.domain, self.route)

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
    #: a page type's fetcher learnt from this page: (URL pattern, "http" | "browser"), or its
    #: domain's rung on the ladder: ("", "http" | "impersonate" | "browser")
    page_type: tuple[str, str] | None = None
    #: the page's recrawl state to keep (None: as it was) and what this visit found
    page: Mapping[str, Any] | None = None
    visit: Visit | None = None
    #: the page was not parsed (a 304, or an unchanged body the spider skips): its records of
    #: the last run are carried over, unchanged
    carry: bool = False
    #: seconds until the page is due again (adaptive revisit); None: every run revisits it
    revisit: float | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """An unsuccessful attempt: retried at ``retry_at``, or dead with ``dead_reason``."""

    lease: LeaseRef
    error: str
    retry_at: float | None = None
    dead_reason: DeadReason | None = None
    status: int | None = None
    route: str | None = None
    outcome: Outcome | None = None  # None: nothing for the pacing to learn (stored as "error")
    latency: float | None = None  # response time, when a response arrived
    retry_after: float | None = None  # seconds the host asked for: holds the whole domain
    started_at: float | None = None  # when the request was sent (store clock)
    count_attempt: bool = True  # False: retried later without using up an attempt
    #: what the attempt says of its route, for its breaker ("block", "error", "refused"; None:
    #: nothing, e.g. the origin's own 5xx or timeout)
    route_signal: str | None = None
    #: fetch it again with this fetcher (an ``auto`` page that needs the browser, or a rung up)
    refetch_with: str | None = None
    #: a page type's fetcher learnt from this page: (URL pattern, "http" | "browser"), or its
    #: domain's rung on the ladder: ("", "impersonate" | "browser")
    page_type: tuple[str, str] | None = None
    #: links already found on the page as it arrived, queued now though the page is fetched
    #: again (an ``auto`` page sent to the browser, or waiting for its type's judgement there):
    #: the rest of the crawl goes on without waiting for the render
    discovered: Sequence[NewRequest] = ()

    def __post_init__(self) -> None:
        if isinstance(self.outcome, str) and not isinstance(self.outcome, Outcome):
            object.__setattr__(self, "outcome", Outcome(self.outcome))

    @property
    def outcome_name(self) -> str:
        """The outcome as the attempt history stores it."""
        return self.outcome.value if self.outcome is not None else "error"


@dataclass(frozen=True, slots=True)
class Settled:
    """What one ``report`` did: the accepted completions and failures (by lease id; the others
    were fenced), and the new leases it handed out in the same transaction."""

    completed: set[int]
    failed: set[int]
    leases: list[Lease]


@dataclass(frozen=True, slots=True)
class AttemptRow:
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
    history: Sequence[AttemptRow] = ()


class Default(Enum):
    """The value of a spider attribute left as it is: take the setting (``[traps]``...), where
    ``None`` would mean "no limit"."""

    DEFAULT = "default"

    def __repr__(self) -> str:
        return "DEFAULT"


#: a spider attribute left at the setting's value (see :class:`Default`)
DEFAULT: Final = Default.DEFAULT


@dataclass(frozen=True, slots=True)
class BudgetHit:
    """A budget a job ran into: ``rule`` ``"host_budget"`` (``key`` the host) or
    ``"pattern_budget"`` (``key`` the URL shape), and how many URLs it refused."""

    rule: str
    key: str
    urls: int


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
    traps: int = 0  # links refused by trap guards and budgets (dead(trap) rows and counted)
    trap_rows: int = 0  # the dead(trap) rows among ``dead`` (a sample per rule: the rest counted)
    duplicates: int = 0  # done requests whose body was the same as an earlier request's
    gone: int = 0  # done with a final answer (404, 410, ...): dead links, not dead letters
    blocked: int = 0  # attempts answered with a block (block page, 403/429 block): retried
    traps_by_domain: Mapping[str, int] = field(default_factory=dict)
    #: hosts whose requests wait for their robots.txt, which cannot be read now: (requests
    #: waiting, the last error: ``robots.txt unreachable (HTTP 503): host postponed``), the
    #: five with most
    robots_waiting: Mapping[str, tuple[int, str]] = field(default_factory=dict)
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
class RunCounters:
    """What a run did: its pages (finished in it: fetched, and by what the visit found: 304s,
    unchanged and changed bodies, new pages; final answers such as 404), requests given up,
    body bytes received, and its records by status (``removed`` counted when the run ends)
    and quarantined."""

    pages: int = 0
    not_modified: int = 0
    unchanged_pages: int = 0
    changed_pages: int = 0
    new_pages: int = 0
    gone: int = 0
    dead: int = 0
    bytes: int = 0
    records_new: int = 0
    records_changed: int = 0
    records_unchanged: int = 0
    records_removed: int = 0
    quarantined: int = 0


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a job: run 1 its first crawl, then one per ``--recrawl``, schedule or
    ``--fresh``. ``counters`` are live while it runs, kept once it finished. ``schedule``: the
    schedule that started it (None: by hand)."""

    job: str
    run: int
    kind: RunKind
    state: RunState
    started_at: float
    finished_at: float | None
    counters: RunCounters
    schedule: str | None = None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A job's schedule as the store keeps it: ``every`` seconds from ``anchor``, or a ``cron``
    line in zone ``tz``; what a due run does while the last one goes (``overlap``: skip or
    queue); when the next is due, whether one waits (``queued``), and what the last due time
    did (``last_note``: started run N, skipped, ...)."""

    job: str
    spider: str
    every: float | None
    cron: str | None
    tz: str
    anchor: float
    overlap: str
    next_at: float
    queued: bool = False
    last_at: float | None = None
    last_run: int | None = None
    last_note: str | None = None
    created_at: float = 0.0
