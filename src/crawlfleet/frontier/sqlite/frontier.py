"""The whole sqlite store: the queue, the jobs and pacing verbs, and the read side
(:class:`~crawlfleet.frontier.insights.SqlInsights`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from crawlfleet.errors import StoreError
from crawlfleet.frontier import pacing as pace
from crawlfleet.frontier.common import (
    store_json,
)
from crawlfleet.frontier.insights import SqlInsights
from crawlfleet.frontier.jobs import settings_with_defaults
from crawlfleet.frontier.ports import (
    DomainState,
)
from crawlfleet.frontier.sqlite.connection import (
    Q,
    _statements,
)
from crawlfleet.frontier.sqlite.outbox import SQLiteOutbox
from crawlfleet.frontier.sqlite.queue import SQLiteQueue
from crawlfleet.frontier.sqlite.runs import SQLiteRuns
from crawlfleet.model import (
    DeadReason,
    DomainLimits,
    Job,
    JobSpec,
    JobState,
    JobStats,
)


class SQLiteFrontier(SQLiteQueue, SQLiteRuns, SQLiteOutbox, SqlInsights):
    """The frontier contract on one SQLite file (``sqlite:///path/queue.db``)."""

    # -- jobs -----------------------------------------------------------------------------------

    async def submit_job(self, spec: JobSpec) -> Job:
        settings = settings_with_defaults(spec)
        args = {
            "name": spec.name,
            "spider": spec.spider,
            "settings": store_json(settings),
            "max_attempts": spec.max_attempts,
            "now": self.clock(),
        }

        def tx(db: sqlite3.Connection) -> None:
            db.execute(Q["submit_job"], args)
            db.execute(Q["ensure_first_run"], {"name": spec.name, "now": args["now"]})
            db.executemany(Q["upsert_route"], [(r.id, r.pool, r.tier, r.cost) for r in spec.routes])
            for domain, limits in spec.domain_limits.items():
                self._upsert_domain(db, domain, limits)

        await self._run(self._write(tx))
        job = await self.get_job(spec.name)
        assert job is not None
        return job

    async def list_jobs(self) -> list[Job]:
        rows = await self._run(lambda db: db.execute(Q["list_jobs"]).fetchall())
        return [self._job_from_row(r) for r in rows]

    async def set_job_state(self, name: str, state: JobState) -> None:
        def tx(db: sqlite3.Connection) -> None:
            db.execute(Q["set_job_state"], (state, name))
            db.execute(Q["work_changed"])

        await self._run(self._write(tx))

    async def page_types(self, job: str) -> dict[tuple[str, str], str]:
        rows = await self._run(lambda db: db.execute(Q["page_types"], (job,)).fetchall())
        return {(d, p): f for d, p, f in rows}

    async def capacity(self, job: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        job_id = await self._job_id(job)

        def read(db: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
            domains = [tuple(r) for r in db.execute(Q["capacity_domains"], (job_id,))]
            names = store_json([d[0] for d in domains])
            return domains, [tuple(r) for r in db.execute(Q["capacity_lanes"], (names,))]

        return await self._run(read)

    async def set_domain_limits(self, domain: str, limits: DomainLimits) -> None:
        def tx(db: sqlite3.Connection) -> None:
            self._upsert_domain(db, domain, limits)
            db.execute(Q["work_changed"])

        await self._run(self._write(tx))

    async def set_crawl_delay(self, domain: str, seconds: float | None) -> None:
        args = {"domain": domain, "floor": pace.crawl_floor(self.pacing, seconds)}

        def tx(db: sqlite3.Connection) -> None:
            db.execute(Q["set_crawl_delay"], args)
            db.execute(Q["set_crawl_delay_lanes"], args)

        await self._run(self._write(tx))

    async def robots_file(self, origin: str) -> tuple[str, str, float] | None:
        now = self.clock()
        row = await self._run(lambda db: db.execute(Q["robots_file"], (origin, now)).fetchone())
        return (row[0], row[1], row[2]) if row is not None else None

    async def save_robots_file(self, origin: str, state: str, text: str) -> None:
        args = (origin, state, text, self.clock())
        await self._run(self._write(lambda db: db.execute(Q["save_robots_file"], args)))

    async def host_down(self, origin: str, window: float) -> tuple[float, int]:
        args = (origin, self.clock(), window)
        row = await self._run(self._write(lambda db: db.execute(Q["host_down"], args).fetchone()))
        return float(row[0]), int(row[1])

    async def domain_state(self, domain: str) -> DomainState | None:
        lanes = await self.lanes(domain)
        return lanes[0] if lanes else None

    async def lanes(self, domain: str) -> list[DomainState]:
        rows = await self._run(lambda db: db.execute(Q["lane_state"], (domain,)).fetchall())
        return [pace.state_from_row(row, self.pacing) for row in rows]

    # -- reading --------------------------------------------------------------------------------

    async def stats(self, job: str) -> JobStats:
        j = await self.get_job(job)
        if j is None:
            raise StoreError(f"no job named {job!r} in {self.path}")

        def read(db: sqlite3.Connection) -> JobStats:
            now = self.clock()
            s = db.execute(Q["count_states"], {"now": now, "job_id": j.id}).fetchone()
            rec, quar = db.execute(Q["count_records"], {"job_id": j.id}).fetchone()
            trap_rows = db.execute(Q["traps_by_domain"], (j.id,)).fetchall()
            traps = {domain: n for domain, n, _ in trap_rows}
            waiting = db.execute(Q["robots_waiting"], (j.id,)).fetchall()
            (blocked,) = db.execute(Q["blocked_attempts"], (j.id,)).fetchone()
            return JobStats(
                job=job,
                state=j.state,
                queued=s[0] or 0,
                waiting=s[1] or 0,
                leased=s[2] or 0,
                done=s[3] or 0,
                dead=s[4] or 0,
                retried=s[5] or 0,
                retry_depth_sum=s[6] or 0,
                oldest_queued_age=max(0.0, now - s[7]) if s[7] is not None else 0.0,
                records=rec,
                quarantined=quar,
                traps=sum(traps.values()),
                traps_by_domain=traps,
                trap_rows=sum(kept for _, _, kept in trap_rows),
                robots_waiting={domain: (n, error) for domain, n, error in waiting},
                duplicates=s[8] or 0,
                gone=s[9] or 0,
                blocked=blocked,
                attempts_histogram=dict(db.execute(Q["attempts_histogram"], (j.id,)).fetchall()),
            )

        return await self._run(read)

    async def replay_dead(
        self, job: str | None = None, reason: DeadReason | None = None, ids: Sequence[int] = ()
    ) -> int:
        targets = list(ids) or [
            d.id for d in await self.dead_letters(job, reason, limit=10_000_000)
        ]

        def tx(db: sqlite3.Connection) -> int:
            now = self.clock()
            n = 0
            for rid in targets:
                n += db.execute(Q["replay_dead"], {"now": now, "id": rid}).rowcount
            if n:
                db.execute(Q["work_changed"])
            return n

        return await self._run(self._write(tx))

    # -- schema, fresh starts, following a crawl -------------------------------------------------

    async def upgrade(self) -> int:
        """Apply pending migrations (opening did already); returns the schema version."""

        def tx(db: sqlite3.Connection) -> int:
            self._migrate(db)
            (version,) = db.execute(Q["schema_version"]).fetchone()
            return int(version)

        return await self._run(self._write(tx))

    async def delete_job(self, name: str) -> int:
        job = await self.get_job(name)
        if job is None:
            return 0

        def tx(db: sqlite3.Connection) -> int:
            total, leased = db.execute(Q["job_requests"], (job.id,)).fetchone()
            if leased:
                raise StoreError(f"job {name} has {leased} requests leased: stop its workers first")
            for statement in _statements(Q["delete_job"]):
                db.execute(statement, {"job_id": job.id})
            return int(total)

        removed = await self._run(self._write(tx))
        self._job_ids.pop(name, None)
        self._job_defaults.pop(job.id, None)
        return removed
