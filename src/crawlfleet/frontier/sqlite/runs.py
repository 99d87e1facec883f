"""Runs and schedules on the SQLite frontier (a part of :class:`~crawlfleet.frontier.sqlite.
SQLiteFrontier`; its SQL is in ``sql/sqlite.sql``, the shared rules in
:mod:`crawlfleet.frontier.runs`).

Every step that changes a run is one write transaction: a run's end (removed records marked,
a ``--fresh`` run's leftovers replaced, counters kept) happens once, under the write lock; a
run's start finishes the last one first, then revisits the pages that are due.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from crawlfleet.data.changes import ChangeRow
from crawlfleet.errors import StoreError
from crawlfleet.frontier.common import record_from_row
from crawlfleet.frontier.runs import (
    change_of,
    counters_from,
    counters_json,
    run_from_row,
    schedule_from_row,
    schedule_step,
)
from crawlfleet.frontier.sqlite.connection import Q, _statements
from crawlfleet.model import RecordRow, Run, RunCounters, RunKind, RunState, Schedule

if TYPE_CHECKING:
    from crawlfleet.frontier.jobs import JobDefaults

T = TypeVar("T")


class SQLiteRuns:
    """The runs and schedules verbs of the SQLite frontier."""

    if TYPE_CHECKING:
        clock: Callable[[], float]
        _job_defaults: dict[int, JobDefaults]

        async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...
        def _write(
            self, fn: Callable[[sqlite3.Connection], T]
        ) -> Callable[[sqlite3.Connection], T]: ...
        async def _job_id(self, name: str) -> int: ...
        async def _all(self, name: str, *args: Any) -> list[Any]: ...

    # -- reading --------------------------------------------------------------------------------

    @staticmethod
    def _counters(db: sqlite3.Connection, job_id: int, run: int) -> RunCounters:
        args = {"job_id": job_id, "run": run}
        pages = db.execute(Q["run_pages"], args).fetchone()
        records = db.execute(Q["run_records"], args).fetchone()
        return counters_from(pages, records)

    def _run_of(self, db: sqlite3.Connection, row: Sequence[Any]) -> Run:
        live = None
        if row[4] == RunState.RUNNING:
            live = self._counters(db, row[0], row[2])
        return run_from_row(row, live)

    async def current_run(self, job: str) -> Run | None:
        job_id = await self._job_id(job)

        def read(db: sqlite3.Connection) -> Run | None:
            row = db.execute(Q["current_run"], (job_id,)).fetchone()
            return None if row is None else self._run_of(db, row)

        return await self._run(read)

    async def runs(self, job: str, limit: int = 10) -> list[Run]:
        job_id = await self._job_id(job)

        def read(db: sqlite3.Connection) -> list[Run]:
            rows = db.execute(Q["runs_of"], (job_id, limit)).fetchall()
            return [self._run_of(db, row) for row in rows]

        return await self._run(read)

    async def iter_all_records(
        self, job: str, batch: int = 1000
    ) -> AsyncIterator[tuple[RecordRow, str, int | None]]:
        """Every record of the job, the removed ones too: ``(record, status, removed_run)``."""
        job_id = await self._job_id(job)
        last = ""
        while True:
            rows = await self._all("iter_all_records", job_id, last, batch)
            for row in rows:
                yield record_from_row(row[:8]), row[8], row[12]
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
        last = ""
        while True:
            args = {"job_id": job_id, "after": last, "since": since, "limit": batch}

            def read(
                db: sqlite3.Connection, args: dict[str, Any] = args
            ) -> tuple[list[Any], dict[str, Any]]:
                rows = db.execute(Q["iter_changes"], args).fetchall()
                # changed records older than the runs asked for: their version before those runs
                keys = json.dumps([r[0] for r in rows if r[10] < since <= r[11]])
                older = {
                    k: json.loads(d)
                    for k, d in db.execute(
                        Q["versions_since"], {"job_id": job_id, "since": since, "keys": keys}
                    )
                }
                return rows, older

            rows, older = await self._run(read)
            for row in rows:
                change = change_of(row, since, older)
                if change is not None:
                    yield change
            if len(rows) < batch:
                return
            last = rows[-1][0]

    # -- a run's end and start ------------------------------------------------------------------

    def _finish(self, db: sqlite3.Connection, job_id: int, run: int, kind: str, now: float) -> bool:
        """End run ``run`` if nothing of the job is left to do; returns whether it did."""
        if db.execute(Q["unfinished"], (job_id,)).fetchone() is not None:
            return False
        args = {"job_id": job_id, "run": run}
        if kind == RunKind.FRESH:
            for statement in _statements(Q["fresh_replace"]):
                db.execute(statement, args)
        else:
            db.execute(Q["mark_removed"], args)
        defaults = self._job_defaults.get(job_id)
        keep = defaults.record_history if defaults is not None else 1
        db.execute(Q["trim_versions"], {"job_id": job_id, "keep": keep})
        counters = counters_json(self._counters(db, job_id, run))
        db.execute(Q["finish_run"], {**args, "now": now, "counters": counters})
        return True

    async def finish_runs(self, jobs: Sequence[str] | None = None) -> list[Run]:
        """End every running run whose job has nothing left to do (all jobs, or those named);
        returns the runs it ended."""

        def tx(db: sqlite3.Connection) -> list[Run]:
            now = self.clock()
            ended = []
            for job_id, name, run, kind in db.execute(Q["running_runs"]).fetchall():
                if jobs is not None and name not in jobs:
                    continue
                if self._finish(db, job_id, run, kind, now):
                    row = db.execute(Q["current_run"], (job_id,)).fetchone()
                    ended.append(run_from_row(row))
            return ended

        return await self._run(self._write(tx))

    def _start(
        self,
        db: sqlite3.Connection,
        job_id: int,
        name: str,
        kind: RunKind,
        now: float,
        schedule: str | None = None,
    ) -> int:
        """Start the job's next run (``recrawl`` or ``fresh``) inside the caller's transaction;
        returns its number."""
        row = db.execute(Q["current_run"], (job_id,)).fetchone()
        run, state, current_kind = (row[2], row[4], row[3]) if row else (0, "finished", "first")
        unfinished = db.execute(Q["unfinished"], (job_id,)).fetchone() is not None
        args = {"job_id": job_id}
        if kind is RunKind.RECRAWL:
            if unfinished:
                raise StoreError(f"run {run} of job {name} is not finished: it goes on")
            if state == RunState.RUNNING:
                self._finish(db, job_id, run, current_kind, now)
        else:
            _total, leased = db.execute(Q["job_requests"], (job_id,)).fetchone()
            if leased:
                raise StoreError(f"job {name} has {leased} requests leased: stop its workers first")
            if state == RunState.RUNNING and not self._finish(db, job_id, run, current_kind, now):
                counters = counters_json(self._counters(db, job_id, run))
                db.execute(Q["abandon_run"], {**args, "run": run, "now": now, "counters": counters})
            for statement in _statements(Q["drop_requests"]):
                db.execute(statement, args)
        new = run + 1
        db.execute(
            Q["insert_run"],
            {**args, "run": new, "kind": kind.value, "now": now, "schedule": schedule},
        )
        db.execute(Q["set_job_run"], {**args, "run": new})
        if kind is RunKind.RECRAWL:
            db.execute(Q["requeue_due"], {**args, "now": now, "last": run})
        db.execute(Q["work_changed"])
        return new

    async def start_run(
        self, job: str, kind: RunKind = RunKind.RECRAWL, *, schedule: str | None = None
    ) -> Run:
        """Start the job's next run: ``recrawl`` revisits its known pages that are due (its
        last run must be finished); ``fresh`` starts over (its requests and their history go
        now, its records stay readable until the new run finished). StoreError when it cannot."""
        job_id = await self._job_id(job)

        def tx(db: sqlite3.Connection) -> Run:
            self._start(db, job_id, job, kind, self.clock(), schedule)
            return self._run_of(db, db.execute(Q["current_run"], (job_id,)).fetchone())

        return await self._run(self._write(tx))

    # -- schedules ------------------------------------------------------------------------------

    async def save_schedule(self, s: Schedule) -> None:
        args = {
            "job": s.job,
            "spider": s.spider,
            "every": s.every,
            "cron": s.cron,
            "tz": s.tz,
            "anchor": s.anchor,
            "overlap": s.overlap,
            "next_at": s.next_at,
            "now": self.clock(),
        }
        await self._run(self._write(lambda db: db.execute(Q["upsert_schedule"], args)))

    async def schedules(self) -> list[Schedule]:
        rows = await self._run(lambda db: db.execute(Q["list_schedules"]).fetchall())
        return [schedule_from_row(r) for r in rows]

    async def remove_schedule(self, job: str) -> bool:
        def tx(db: sqlite3.Connection) -> bool:
            return db.execute(Q["delete_schedule"], (job,)).rowcount > 0

        return await self._run(self._write(tx))

    async def start_due_runs(self) -> list[tuple[Schedule, Run | None]]:
        """Start the runs of the schedules that are due (or queued and now free to run), each
        once: the write lock makes this transaction the only one that sees them due. Returns
        each schedule that was due with the run it started (None: skipped or queued)."""

        def tx(db: sqlite3.Connection) -> list[tuple[Schedule, Run | None]]:
            now = self.clock()
            out: list[tuple[Schedule, Run | None]] = []
            for row in db.execute(Q["due_schedules"], {"now": now}).fetchall():
                s = schedule_from_row(row)
                job = db.execute(Q["get_job"], (s.job,)).fetchone()
                going = None
                if job is not None:
                    current = db.execute(Q["current_run"], (job[0],)).fetchone()
                    if db.execute(Q["unfinished"], (job[0],)).fetchone() is not None:
                        going = current[2] if current else 0
                    elif current is not None and current[4] == RunState.RUNNING:
                        self._finish(db, job[0], current[2], current[3], now)
                step = schedule_step(
                    s, now, exists=job is not None, going=going, state=job[3] if job else ""
                )
                started = None
                if step.start and job is not None:
                    n = self._start(db, job[0], s.job, RunKind.RECRAWL, now, schedule=s.job)
                    started = self._run_of(db, db.execute(Q["current_run"], (job[0],)).fetchone())
                    note = f"started run {n}"
                else:
                    note = step.note or ""
                db.execute(
                    Q["schedule_ran"],
                    {
                        "job": s.job,
                        "next_at": step.next_at,
                        "queued": int(step.queued),
                        "last_at": now if started is not None else None,
                        "last_run": started.run if started is not None else None,
                        "note": note,
                    },
                )
                out.append((s, started))
            return out

        return await self._run(self._write(tx))
