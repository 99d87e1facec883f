"""Runs and schedules on the PostgreSQL frontier (a part of :class:`~crawlfleet.frontier.
postgres.PostgresFrontier`; its SQL is in ``sql/postgres.sql``, the shared rules in
:mod:`crawlfleet.frontier.runs`).

A run's end and start lock the job's row first (``FOR UPDATE``): two processes that see a job
finished at once end its run once, and a start waits for an end in progress. Due schedules are
read ``FOR UPDATE SKIP LOCKED`` in the transaction that starts their runs and moves ``next_at``
on: however many workers, ``serve`` and ``schedule run`` processes look, each due run starts
exactly once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from crawlfleet.data.changes import ChangeRow
from crawlfleet.errors import StoreError
from crawlfleet.frontier.common import record_from_row
from crawlfleet.frontier.postgres.connection import Q
from crawlfleet.frontier.runs import (
    change_of,
    counters_from,
    counters_json,
    run_from_row,
    schedule_from_row,
    schedule_step,
)
from crawlfleet.model import RecordRow, Run, RunCounters, RunKind, RunState, Schedule

if TYPE_CHECKING:
    from crawlfleet.frontier.jobs import JobDefaults

T = TypeVar("T")
Conn = Any  # asyncpg.Connection


class PostgresRuns:
    """The runs and schedules verbs of the PostgreSQL frontier."""

    if TYPE_CHECKING:
        clock: Callable[[], float]
        _job_defaults: dict[int, JobDefaults]

        async def _run(self, fn: Callable[[Conn], Awaitable[T]], *, write: bool = True) -> T: ...
        async def _job_id(self, name: str) -> int: ...
        async def _notify(self, conn: Conn) -> None: ...

    # -- reading --------------------------------------------------------------------------------

    @staticmethod
    async def _counters(conn: Conn, job_id: int, run: int) -> RunCounters:
        pages = await conn.fetchrow(Q["run_pages"], job_id, run)
        records = await conn.fetchrow(Q["run_records"], job_id, run)
        return counters_from(tuple(pages), tuple(records))

    async def _run_of(self, conn: Conn, row: Sequence[Any]) -> Run:
        live = None
        if row[4] == RunState.RUNNING:
            live = await self._counters(conn, row[0], row[2])
        return run_from_row(tuple(row), live)

    async def current_run(self, job: str) -> Run | None:
        job_id = await self._job_id(job)

        async def read(conn: Conn) -> Run | None:
            row = await conn.fetchrow(Q["current_run"], job_id)
            return None if row is None else await self._run_of(conn, row)

        return await self._run(read, write=False)

    async def runs(self, job: str, limit: int = 10) -> list[Run]:
        job_id = await self._job_id(job)

        async def read(conn: Conn) -> list[Run]:
            rows = await conn.fetch(Q["runs_of"], job_id, limit)
            return [await self._run_of(conn, row) for row in rows]

        return await self._run(read, write=False)

    async def iter_all_records(
        self, job: str, batch: int = 1000
    ) -> AsyncIterator[tuple[RecordRow, str, int | None]]:
        """Every record of the job, the removed ones too: ``(record, status, removed_run)``."""
        job_id = await self._job_id(job)
        last = ""
        while True:

            async def read(conn: Conn, after: str = last) -> list[Any]:
                return list(await conn.fetch(Q["iter_all_records"], job_id, after, batch))

            rows = await self._run(read, write=False)
            for row in rows:
                yield record_from_row(tuple(row)[:8]), row[8], row[12]
            if len(rows) < batch:
                return
            last = rows[-1][0]

    async def iter_changes(
        self, job: str, since: int | None = None, batch: int = 1000
    ) -> AsyncIterator[tuple[RecordRow, ChangeRow]]:
        """The job's records new, changed or removed in the runs from ``since`` on (default:
        its current run), each with how it changed (see :func:`crawlfleet.frontier.runs.
        change_of`), by key."""
        job_id = await self._job_id(job)
        if since is None:
            current = await self.current_run(job)
            since = current.run if current is not None else 1
        first = since
        last = ""
        while True:

            async def read(conn: Conn, after: str = last) -> tuple[list[Any], dict[str, Any]]:
                rows = [
                    tuple(r)
                    for r in await conn.fetch(Q["iter_changes"], job_id, first, after, batch)
                ]
                # changed records older than the runs asked for: their version before those runs
                keys = [r[0] for r in rows if r[10] < first <= r[11]]
                older = {
                    k: json.loads(d)
                    for k, d in await conn.fetch(Q["versions_since"], job_id, first, keys)
                }
                return rows, older

            rows, older = await self._run(read, write=False)
            for row in rows:
                change = change_of(row, first, older)
                if change is not None:
                    yield change
            if len(rows) < batch:
                return
            last = rows[-1][0]

    # -- a run's end and start ------------------------------------------------------------------

    async def _finish(self, conn: Conn, job_id: int, run: int, kind: str, now: float) -> bool:
        """End run ``run`` if nothing of the job is left to do (the job's row locked by the
        caller); returns whether it did."""
        if await conn.fetchval(Q["unfinished"], job_id):
            return False
        if kind == RunKind.FRESH:
            await conn.execute(Q["fresh_replace"], job_id, run)
        else:
            await conn.execute(Q["mark_removed"], job_id, run)
        defaults = self._job_defaults.get(job_id)
        keep = defaults.record_history if defaults is not None else 1
        await conn.execute(Q["trim_versions"], job_id, keep)
        counters = counters_json(await self._counters(conn, job_id, run))
        await conn.execute(Q["finish_run"], job_id, run, now, counters)
        return True

    async def finish_runs(self, jobs: Sequence[str] | None = None) -> list[Run]:
        """End every running run whose job has nothing left to do (all jobs, or those named);
        returns the runs it ended."""

        async def tx(conn: Conn) -> list[Run]:
            now = self.clock()
            ended = []
            for job_id, name, run, kind in await conn.fetch(Q["running_runs"]):
                if jobs is not None and name not in jobs:
                    continue
                if await self._finish(conn, job_id, run, kind, now):
                    ended.append(run_from_row(tuple(await conn.fetchrow(Q["current_run"], job_id))))
            return ended

        return await self._run(tx)

    async def _start(
        self,
        conn: Conn,
        job_id: int,
        name: str,
        kind: RunKind,
        now: float,
        schedule: str | None = None,
    ) -> int:
        """Start the job's next run inside the caller's transaction; returns its number."""
        await conn.execute(Q["lock_job_run"], job_id)
        row = await conn.fetchrow(Q["current_run"], job_id)
        run, state, current_kind = (row[2], row[4], row[3]) if row else (0, "finished", "first")
        unfinished = await conn.fetchval(Q["unfinished"], job_id)
        if kind is RunKind.RECRAWL:
            if unfinished:
                raise StoreError(f"run {run} of job {name} is not finished: it goes on")
            if state == RunState.RUNNING:
                await self._finish(conn, job_id, run, current_kind, now)
        else:
            _total, leased = await conn.fetchrow(Q["job_requests"], job_id)
            if leased:
                raise StoreError(f"job {name} has {leased} requests leased: stop its workers first")
            if state == RunState.RUNNING and not await self._finish(
                conn, job_id, run, current_kind, now
            ):
                counters = counters_json(await self._counters(conn, job_id, run))
                await conn.execute(Q["abandon_run"], job_id, run, now, counters)
            await conn.execute(Q["drop_requests"], job_id)
        new = run + 1
        await conn.execute(Q["insert_run"], job_id, new, kind.value, now, schedule)
        await conn.execute(Q["set_job_run"], job_id, new)
        if kind is RunKind.RECRAWL:
            await conn.execute(Q["requeue_due"], job_id, now, run)
        await self._notify(conn)
        return new

    async def start_run(
        self, job: str, kind: RunKind = RunKind.RECRAWL, *, schedule: str | None = None
    ) -> Run:
        """Start the job's next run: ``recrawl`` revisits its known pages that are due (its
        last run must be finished); ``fresh`` starts over (its requests and their history go
        now, its records stay readable until the new run finished). StoreError when it cannot."""
        job_id = await self._job_id(job)

        async def tx(conn: Conn) -> Run:
            await self._start(conn, job_id, job, kind, self.clock(), schedule)
            return await self._run_of(conn, await conn.fetchrow(Q["current_run"], job_id))

        return await self._run(tx)

    # -- schedules ------------------------------------------------------------------------------

    async def save_schedule(self, s: Schedule) -> None:
        args = (s.job, s.spider, s.every, s.cron, s.tz, s.anchor, s.overlap, s.next_at)

        async def tx(conn: Conn) -> None:
            await conn.execute(Q["upsert_schedule"], *args, self.clock())

        await self._run(tx)

    async def schedules(self) -> list[Schedule]:
        async def read(conn: Conn) -> list[Schedule]:
            return [schedule_from_row(tuple(r)) for r in await conn.fetch(Q["list_schedules"])]

        return await self._run(read, write=False)

    async def remove_schedule(self, job: str) -> bool:
        async def tx(conn: Conn) -> bool:
            return str(await conn.execute(Q["delete_schedule"], job)).endswith(" 1")

        return await self._run(tx)

    async def start_due_runs(self) -> list[tuple[Schedule, Run | None]]:
        """Start the runs of the schedules that are due (or queued and now free to run), each
        once across the fleet. Returns each schedule that was due with the run it started
        (None: skipped or queued)."""

        async def tx(conn: Conn) -> list[tuple[Schedule, Run | None]]:
            now = self.clock()
            out: list[tuple[Schedule, Run | None]] = []
            for row in await conn.fetch(Q["due_schedules"], now):
                s = schedule_from_row(tuple(row))
                job = await conn.fetchrow(Q["get_job"], s.job)
                going = None
                if job is not None:
                    await conn.execute(Q["lock_job_run"], job[0])
                    current = await conn.fetchrow(Q["current_run"], job[0])
                    if await conn.fetchval(Q["unfinished"], job[0]):
                        going = current[2] if current else 0
                    elif current is not None and current[4] == RunState.RUNNING:
                        await self._finish(conn, job[0], current[2], current[3], now)
                step = schedule_step(
                    s, now, exists=job is not None, going=going, state=job[3] if job else ""
                )
                started = None
                if step.start and job is not None:
                    n = await self._start(conn, job[0], s.job, RunKind.RECRAWL, now, s.job)
                    started = await self._run_of(
                        conn, await conn.fetchrow(Q["current_run"], job[0])
                    )
                    note = f"started run {n}"
                else:
                    note = step.note or ""
                await conn.execute(
                    Q["schedule_ran"],
                    s.job,
                    step.next_at,
                    step.queued,
                    now if started is not None else None,
                    started.run if started is not None else None,
                    note,
                )
                out.append((s, started))
            return out

        return await self._run(tx)
