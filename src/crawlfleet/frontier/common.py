"""What both backends share outside their SQL: the JSON they store, and their rows as objects.

Column order here is the order of the matching queries in both SQL files (``get_job`` /
``list_jobs``, the lease queries, ``dead_letter(s)``, ``iter_records``, ``iter_quarantine``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from crawlfleet.data import jsonsafe
from crawlfleet.data.changes import record_hash
from crawlfleet.frontier.jobs import JobDefaults, defaults_from_settings
from crawlfleet.frontier.ports import QuarantineItem
from crawlfleet.model import (
    AttemptRow,
    DeadLetter,
    DeadReason,
    DomainLimits,
    Failure,
    Job,
    JobState,
    Lease,
    NewRequest,
    QuarantineRow,
    RecordRow,
    RoutePlan,
)

#: a worker that leased within this many seconds shares each domain's in-flight slots with the
#: other such workers (its fair share is ceil(max_in_flight / active workers))
ACTIVE_WINDOW = 5.0


def fair_share(limit: int, sharers: int, held: int) -> int:
    """How many more of a lane's ``limit`` in-flight slots one worker may take now: its share is
    ``ceil(limit / sharers)`` (workers leasing lately), less the ``held`` leases it has there.

    The SQLite backend calls this; the PostgreSQL lease statement computes the same inline
    (``(concurrency + sharers - 1) / sharers - held``); one contract test holds both to it.
    """
    return -(-limit // max(1, sharers)) - held


#: a lane's "no limit of its own" (its domain's apply)
NO_CAP = 1 << 30

#: most lanes looked at per lease call; the rest get their turn at the next call
DOMAINS_PER_LEASE = 256

__all__ = [
    "ACTIVE_WINDOW",
    "DOMAINS_PER_LEASE",
    "dead_from_row",
    "dead_reason_of",
    "fair_share",
    "job_from_row",
    "lane_rows",
    "lease_from_row",
    "pool_tags",
    "quarantine_from_row",
    "quarantine_item_from_row",
    "quarantine_values",
    "record_from_row",
    "record_values",
    "request_values",
    "store_json",
]


def store_json(value: Any) -> str:
    """Compact JSON, as the store keeps settings, meta, records and errors."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def request_values(r: NewRequest, defaults: JobDefaults) -> tuple[Any, ...]:
    """A new request's columns, in the order of the request inserts (after the job)."""
    return (
        r.fingerprint,
        r.url,
        r.domain,
        r.priority,
        r.depth,
        r.callback,
        store_json(r.meta) if r.meta else None,
        r.method,
        r.body,
        r.fetcher,
        r.max_attempts or defaults.max_attempts,
        store_json(dict(r.headers)) if r.headers else None,
        pool_tags(r.pool),
        r.found_by,
        r.lastmod,
        int(r.listed),
    )


def pool_tags(pools: Sequence[str]) -> str | None:
    """The ``pool`` column of a request pinned to ``pools``: ``,a,b,`` (a lane through pool ``a``
    matches ``,a,``); None for a request that is not."""
    return f",{','.join(pools)}," if pools else None


def quarantine_values(job_id: int, q: QuarantineRow) -> tuple[Any, ...]:
    """A quarantined record's columns, in the order of ``insert_quarantine`` (its data and
    errors repaired: a quarantine row can always be written)."""
    return (
        job_id,
        jsonsafe.repair(q.url),
        jsonsafe.dumps(jsonsafe.repair(q.data)),
        jsonsafe.dumps(jsonsafe.repair(q.errors)),
        q.fetched_at,
        q.warc_file,
        q.warc_record_id,
        q.warc_refers_to_file,
        q.warc_refers_to,
    )


def dead_reason_of(f: Failure) -> str | None:
    """The dead reason a failure stores: none while it is retried, too_many_retries by default."""
    return None if f.retry_at is not None else (f.dead_reason or DeadReason.TOO_MANY_RETRIES).value


def job_from_row(row: Sequence[Any]) -> tuple[Job, JobDefaults]:
    """A job row, and the store-side defaults kept in its settings (taken out of them)."""
    settings = json.loads(row[4])
    defaults = defaults_from_settings(settings, row[6])
    return Job(row[0], row[1], row[2], JobState(row[3]), settings, row[5]), defaults


def lease_from_row(
    row: Sequence[Any], job: str, expires_at: float, start_at: float, route: str = "direct"
) -> Lease:
    """A leased request row (its second column, the job, is named by ``job``)."""
    (rid, _job, url, domain, prio, depth, cb, meta, method, body, fetcher) = row[:11]
    attempts, max_attempts, token = row[11:14]
    headers = row[14] if len(row) > 14 else None
    page = row[15] if len(row) > 15 else None
    return Lease(
        id=rid,
        job=job,
        url=url,
        domain=domain,
        priority=prio,
        depth=depth,
        callback=cb,
        meta=json.loads(meta) if meta else {},
        method=method,
        body=body,
        fetcher=fetcher,
        attempts=attempts,
        max_attempts=max_attempts,
        token=token,
        expires_at=expires_at,
        start_at=start_at,
        route=route,
        headers=json.loads(headers) if headers else None,
        page=json.loads(page) if page else {},
    )


def dead_from_row(row: Sequence[Any], history: Sequence[AttemptRow] = ()) -> DeadLetter:
    rid, job, url, reason, error, attempts, died_at = row
    return DeadLetter(
        rid,
        job,
        url,
        DeadReason(reason or "too_many_retries"),
        error,
        attempts,
        died_at or 0.0,
        tuple(history),
    )


def record_values(r: RecordRow) -> tuple[Any, ...]:
    """A record's columns after its job and key, in the order of ``upsert_record(s)``.

    Raises :class:`~crawlfleet.data.jsonsafe.Unstorable` for a record no store takes as it is
    (the caller quarantines it). The last value is the hash of its fields (what a run's change
    status compares: :func:`crawlfleet.data.changes.record_hash`)."""
    for text in (r.key, r.url):
        if jsonsafe.problem(text) is not None:
            raise jsonsafe.Unstorable("unstorable_text", "the record key or URL is not UTF-8 text")
    return (
        jsonsafe.dumps(r.data),
        r.url,
        r.fetched_at,
        r.warc_file,
        r.warc_record_id,
        r.warc_refers_to_file,
        r.warc_refers_to,
        record_hash(r.data),
    )


def record_from_row(row: Sequence[Any]) -> RecordRow:
    key, data, url, fetched_at, *warc = row
    return RecordRow(key, json.loads(data), url, fetched_at, *warc)


def quarantine_from_row(row: Sequence[Any]) -> QuarantineRow:
    _id, data, errors, url, fetched_at, *warc = row
    data_obj = json.loads(data) if data else None
    return QuarantineRow(data_obj, json.loads(errors), url, fetched_at, *warc)


def quarantine_item_from_row(row: Sequence[Any]) -> QuarantineItem:
    """``quarantine_items`` / ``quarantine_item`` rows: id, job name, then the quarantine row."""
    item_id, job, url, data, errors, fetched_at, *warc = row
    q = quarantine_from_row((item_id, data, errors, url, fetched_at, *warc))
    return QuarantineItem(int(item_id), job, q)


def lane_rows(
    domain: str,
    limits: DomainLimits,
    routes: Sequence[RoutePlan],
    *,
    start: int,
    pinned: bool = False,
) -> list[dict[str, Any]]:
    """The ``insert_lane`` rows of a new domain: one per route, with the route's own limits,
    starting ``start`` wide at most (the pacing controller widens a lane that does well).

    ``pinned``: lanes for requests pinned to the routes' pools (``shared`` 0, ``pinned`` 1); else
    the domain's own lanes (``shared`` 1, ``pinned`` 0). A lane already there keeps its terms
    and gains the role (see ``insert_lane(s)``)."""
    return [
        {
            "domain": domain,
            "route": r.id,
            "tier": r.tier,
            "max_in_flight": r.max_in_flight or NO_CAP,
            "min_delay": r.min_delay,
            "delay": max(r.min_delay, limits.min_delay),
            "concurrency": max(1, min(start, r.max_in_flight or NO_CAP, limits.max_in_flight)),
            "shared": int(not pinned),
            "pinned": int(pinned),
        }
        for r in routes
    ]
