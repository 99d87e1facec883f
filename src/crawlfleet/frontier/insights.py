"""The read side of the store (the :class:`~crawlfleet.frontier.ports.Insights` port), written
once over both backends.

Each backend supplies three hooks: :meth:`SqlInsights._all` and :meth:`SqlInsights._one` run a
named query of its ``sql/*.sql`` with positional arguments (the block names and the arguments'
order are the same in both files; only the SQL differs), and ``_job_id`` names a job's row. Each
read is its own statement on the backend's own connection: none joins a write transaction.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any

from crawlfleet.data.profile import FieldStats
from crawlfleet.frontier.common import (
    dead_from_row,
    quarantine_from_row,
    quarantine_item_from_row,
    record_from_row,
)
from crawlfleet.frontier.outbox import (
    DeadDelivery,
    EventRow,
    OutboxCount,
    field_stats_from_rows,
)
from crawlfleet.frontier.ports import (
    DomainQueue,
    FleetCounts,
    JobActivity,
    LaneRow,
    LeaseHolder,
    ProfileRow,
    QuarantineItem,
    RecordCursor,
    RouteRow,
    WorkerStats,
)
from crawlfleet.model import (
    AttemptRow,
    BudgetHit,
    DeadLetter,
    DeadReason,
    QuarantineRow,
    RecordRow,
)
from crawlfleet.policy.traps import url_pattern

__all__ = ["SqlInsights"]

Row = Sequence[Any]


class SqlInsights(ABC):
    """The Insights port over a backend's named queries."""

    clock: Callable[[], float]

    @abstractmethod
    async def _all(self, name: str, *args: Any) -> list[Row]:
        """Every row of the named query."""

    @abstractmethod
    async def _one(self, name: str, *args: Any) -> Row | None:
        """The first row of the named query, or None."""

    @abstractmethod
    async def _job_id(self, name: str) -> int:
        """The id of the job named ``name`` (``UsageError`` if there is none)."""

    async def budget_hits(self, job: str) -> list[BudgetHit]:
        hits: Counter[tuple[str, str]] = Counter()
        for error, url, domain, n in await self._all("budget_traps", await self._job_id(job)):
            if error is not None:  # a dead(trap) row: "trap: RULE", its URL
                rule, pattern = error.removeprefix("trap: "), url_pattern(url)
            else:  # a count past the sample: domain<TAB>rule<TAB>pattern
                domain, rule, pattern = url.split("\t", 2)
            if rule in ("host_budget", "pattern_budget"):
                hits[rule, domain if rule == "host_budget" else pattern] += n
        return [BudgetHit(rule, key, n) for (rule, key), n in hits.most_common()]

    async def is_finished(self, job: str) -> bool:
        return await self._one("unfinished", await self._job_id(job)) is None

    async def iter_records(self, job: str, batch: int = 1000) -> AsyncIterator[RecordRow]:
        job_id = await self._job_id(job)
        last = ""
        while True:
            rows = await self._all("iter_records", job_id, last, batch)
            for row in rows:
                yield record_from_row(row)
            if len(rows) < batch:
                return
            last = rows[-1][0]

    async def iter_quarantine(self, job: str, batch: int = 1000) -> AsyncIterator[QuarantineRow]:
        job_id = await self._job_id(job)
        last = 0
        while True:
            rows = await self._all("iter_quarantine", job_id, last, batch)
            for row in rows:
                yield quarantine_from_row(row)
            if len(rows) < batch:
                return
            last = rows[-1][0]

    async def dead_letters(
        self, job: str | None = None, reason: DeadReason | None = None, limit: int = 1000
    ) -> list[DeadLetter]:
        rows = await self._all("dead_letters", job, reason.value if reason else None, limit)
        return [dead_from_row(r) for r in rows]

    async def dead_letter(self, request_id: int) -> DeadLetter | None:
        row = await self._one("dead_letter", request_id)
        if row is None:
            return None
        history = [AttemptRow(*a) for a in await self._all("attempts_of", request_id)]
        return dead_from_row(row, history)

    async def job_activity(self, job: str) -> JobActivity:
        job_id = await self._job_id(job)
        row = await self._one("job_activity", job_id)
        finished_at, updated_at = row if row is not None else (None, None)
        reasons = {reason: n for reason, n in await self._all("dead_by_reason", job_id)}
        holders = [LeaseHolder(*r) for r in await self._all("lease_holders", job_id)]
        return JobActivity(finished_at, reasons, holders, updated_at)

    async def records_since(
        self, job: str, after: RecordCursor = (0.0, ""), limit: int = 1000
    ) -> list[tuple[float, RecordRow]]:
        job_id = await self._job_id(job)
        rows = await self._all("records_since", job_id, after[0], after[1], limit)
        return [(row[0], record_from_row(tuple(row)[1:])) for row in rows]

    async def worker_stats(self, since: float = 0.0) -> list[WorkerStats]:
        return [WorkerStats(*row) for row in await self._all("worker_stats", since)]

    async def queue_by_domain(self) -> list[DomainQueue]:
        return [DomainQueue(*row) for row in await self._all("queue_by_domain", self.clock())]

    async def lane_rows(self, limit: int = 1000) -> list[LaneRow]:
        return [LaneRow(*row) for row in await self._all("lane_rows", limit)]

    async def route_rows(self) -> list[RouteRow]:
        return [RouteRow(*row) for row in await self._all("route_rows")]

    async def fleet_counts(self) -> FleetCounts:
        outcomes = {outcome: n for outcome, n in await self._all("attempts_by_outcome")}
        moves = await self._one("tier_move_counts")
        up, down = moves if moves is not None else (0, 0)
        return FleetCounts(outcomes, up, down)

    async def quarantine_items(
        self, job: str | None = None, limit: int = 100
    ) -> list[QuarantineItem]:
        rows = await self._all("quarantine_items", job, limit)
        return [quarantine_item_from_row(tuple(row)) for row in rows]

    async def quarantine_item(self, item_id: int) -> QuarantineItem | None:
        row = await self._one("quarantine_item", item_id)
        return None if row is None else quarantine_item_from_row(tuple(row))

    # -- the outbox and the run profiles --------------------------------------------------------

    async def outbox_counts(self) -> list[OutboxCount]:
        return [
            OutboxCount(d, int(q or 0), int(le or 0), int(do or 0), int(de or 0), oldest, err)
            for d, q, le, do, de, oldest, err in await self._all("outbox_counts")
        ]

    async def dead_deliveries(self, limit: int = 100) -> list[DeadDelivery]:
        return [DeadDelivery(*row) for row in await self._all("outbox_dead", limit)]

    async def outbox_events(
        self, job: str | None = None, kind: str | None = None, limit: int = 100
    ) -> list[EventRow]:
        return [EventRow(*row) for row in await self._all("outbox_events_of", job, kind, limit)]

    async def profiles(self, job: str, limit: int = 10) -> list[ProfileRow]:
        rows = await self._all("profiles_of", await self._job_id(job), limit)
        return [ProfileRow(int(run), profile, bool(final)) for run, profile, final in rows]

    async def profile_counts(
        self, job: str, run: int
    ) -> tuple[int, int, dict[str, int], dict[str, FieldStats]]:
        job_id = await self._job_id(job)
        counts = await self._one("profile_records", job_id, run)
        records, quarantined = (int(v or 0) for v in counts) if counts else (0, 0)
        reasons = {str(r): int(n) for r, n in await self._all("quarantine_reasons", job_id, run)}
        stats = field_stats_from_rows(await self._all("profile_fields", job_id, run))
        for name, s in list(stats.items()):
            if s.numbers and s.median is None:  # a backend without a median aggregate
                row = await self._one("profile_median", job_id, name, s.numbers, run)
                median = None if row is None or row[0] is None else float(row[0])
                stats[name] = replace(s, median=median)
        return records, quarantined, reasons, stats

    async def records_missing(
        self, job: str, run: int, field: str, limit: int = 5
    ) -> list[RecordRow]:
        rows = await self._all("records_missing", await self._job_id(job), field, limit, run)
        return [record_from_row(row) for row in rows]

    async def run_costs(self, job: str, run: int, since: float) -> tuple[int, int, int]:
        row = await self._one("run_requests", await self._job_id(job), run, since)
        retries, traps, blocked = (int(v or 0) for v in row) if row else (0, 0, 0)
        return retries, traps, blocked

    async def sink_records(
        self, job: str, run: int, after: str, limit: int
    ) -> list[tuple[RecordRow, str, Any]]:
        rows = await self._all("sink_records", await self._job_id(job), after, limit, run)
        out = []
        for row in rows:
            previous = row[9]
            if isinstance(previous, str):
                previous = json.loads(previous)
            out.append((record_from_row(tuple(row)[:8]), str(row[8]), previous))
        return out

    async def blocked_examples(
        self, job: str, since: float = 0.0, limit: int = 5
    ) -> list[tuple[str, float, int]]:
        rows = await self._all("blocked_examples", await self._job_id(job), since, limit)
        return [(url, float(at), int(n)) for url, at, n in rows]
