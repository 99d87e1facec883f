"""The whole postgres store: the queue, the jobs and pacing verbs, and the read side
(:class:`~crawlfleet.frontier.insights.SqlInsights`)."""

from __future__ import annotations

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
from crawlfleet.frontier.postgres.connection import (
    Conn,
    Q,
    _columns,
    _count,
)
from crawlfleet.frontier.postgres.outbox import PostgresOutbox
from crawlfleet.frontier.postgres.queue import PostgresQueue
from crawlfleet.frontier.postgres.runs import PostgresRuns
from crawlfleet.model import (
    DeadReason,
    DomainLimits,
    Job,
    JobSpec,
    JobState,
    JobStats,
)


class PostgresFrontier(PostgresQueue, PostgresRuns, PostgresOutbox, SqlInsights):
    """The frontier contract on PostgreSQL (``postgresql://user@host/db``)."""

    # -- jobs -----------------------------------------------------------------------------------

    async def submit_job(self, spec: JobSpec) -> Job:
        settings = settings_with_defaults(spec)
        args = (spec.name, spec.spider, store_json(settings), spec.max_attempts, self.clock())

        async def tx(conn: Conn) -> None:
            await conn.execute(Q["submit_job"], *args)
            await conn.execute(Q["ensure_first_run"], spec.name, args[-1])
            if spec.routes:
                routes = sorted((r.id, r.pool, r.tier, r.cost) for r in spec.routes)
                await conn.execute(Q["upsert_routes"], *_columns(routes, 4))
            for domain, limits in sorted(spec.domain_limits.items()):
                await self._upsert_domain(conn, domain, limits)

        await self._run(tx)
        job = await self.get_job(spec.name)
        assert job is not None
        return job

    async def list_jobs(self) -> list[Job]:
        rows = await self._run(lambda c: c.fetch(Q["list_jobs"]), write=False)
        return [self._job_from_row(r) for r in rows]

    async def set_job_state(self, name: str, state: JobState) -> None:
        async def tx(conn: Conn) -> None:
            await conn.execute(Q["set_job_state"], state.value, name)
            await self._notify(conn)

        await self._run(tx)

    async def page_types(self, job: str) -> dict[tuple[str, str], str]:
        rows = await self._run(lambda c: c.fetch(Q["page_types"], job), write=False)
        return {(d, p): f for d, p, f in rows}

    async def capacity(self, job: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        job_id = await self._job_id(job)

        async def read(conn: Conn) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
            domains = [tuple(r) for r in await conn.fetch(Q["capacity_domains"], job_id)]
            lanes = await conn.fetch(Q["capacity_lanes"], [d[0] for d in domains])
            return domains, [tuple(r) for r in lanes]

        return await self._run(read, write=False)

    async def set_domain_limits(self, domain: str, limits: DomainLimits) -> None:
        await self._run(lambda c: self._upsert_domain(c, domain, limits))
        self._known_domains.add(domain)

    async def set_crawl_delay(self, domain: str, seconds: float | None) -> None:
        floor = pace.crawl_floor(self.pacing, seconds)
        await self._run(lambda c: c.execute(Q["set_crawl_delay"], domain, floor))

    async def robots_file(self, origin: str) -> tuple[str, str, float] | None:
        now = self.clock()
        row = await self._run(lambda c: c.fetchrow(Q["robots_file"], origin, now), write=False)
        return (row[0], row[1], row[2]) if row is not None else None

    async def save_robots_file(self, origin: str, state: str, text: str) -> None:
        now = self.clock()
        await self._run(lambda c: c.execute(Q["save_robots_file"], origin, state, text, now))

    async def host_down(self, origin: str, window: float) -> tuple[float, int]:
        now = self.clock()
        row = await self._run(lambda c: c.fetchrow(Q["host_down"], origin, now, window))
        return float(row[0]), int(row[1])

    async def domain_state(self, domain: str) -> DomainState | None:
        lanes = await self.lanes(domain)
        return lanes[0] if lanes else None

    async def lanes(self, domain: str) -> list[DomainState]:
        rows = await self._run(lambda c: c.fetch(Q["lane_state"], domain), write=False)
        return [pace.state_from_row(tuple(row), self.pacing) for row in rows]

    # -- reading --------------------------------------------------------------------------------

    async def stats(self, job: str) -> JobStats:
        j = await self.get_job(job)
        if j is None:
            raise StoreError(f"no job named {job!r} in {self._where()}")
        now = self.clock()

        async def read(
            conn: Conn,
        ) -> tuple[Any, dict[str, tuple[int, int]], dict[int, int], int, list[Any]]:
            counts = await conn.fetchrow(Q["count_states"], now, j.id)
            traps = {d: (n, kept) for d, n, kept in await conn.fetch(Q["traps_by_domain"], j.id)}
            histogram = dict(await conn.fetch(Q["attempts_histogram"], j.id))
            blocked = await conn.fetchval(Q["blocked_attempts"], j.id)
            waiting = list(await conn.fetch(Q["robots_waiting"], j.id))
            return counts, traps, histogram, blocked, waiting

        s, traps, histogram, blocked, waiting = await self._run(read, write=False)
        return JobStats(
            job=job,
            state=j.state,
            queued=s[0],
            waiting=s[1],
            leased=s[2],
            done=s[3],
            dead=s[4],
            retried=s[5],
            retry_depth_sum=s[6],
            oldest_queued_age=max(0.0, now - s[7]) if s[7] is not None else 0.0,
            records=s[8],
            quarantined=s[9],
            traps=sum(n for n, _ in traps.values()),
            traps_by_domain={d: n for d, (n, _) in traps.items()},
            trap_rows=sum(kept for _, kept in traps.values()),
            robots_waiting={domain: (n, error) for domain, n, error in waiting},
            attempts_histogram=histogram,
            duplicates=s[10],
            gone=s[11],
            blocked=blocked,
        )

    async def replay_dead(
        self, job: str | None = None, reason: DeadReason | None = None, ids: Sequence[int] = ()
    ) -> int:
        now = self.clock()

        async def tx(conn: Conn) -> int:
            if ids:
                status = await conn.execute(Q["replay_dead_ids"], now, list(ids))
            else:
                value = reason.value if reason else None
                status = await conn.execute(Q["replay_dead_where"], now, job, value)
            await self._notify(conn)
            return _count(status)

        return await self._run(tx)

    # -- fresh starts, following a crawl ---------------------------------------------------------

    async def delete_job(self, name: str) -> int:
        job = await self.get_job(name)
        if job is None:
            return 0

        async def tx(conn: Conn) -> int:
            await conn.execute(Q["lock_job"], job.id)
            total, leased = await conn.fetchrow(Q["job_requests"], job.id)
            if leased:
                raise StoreError(f"job {name} has {leased} requests leased: stop its workers first")
            await conn.execute(Q["delete_job"], job.id)
            await conn.execute(Q["delete_job_row"], job.id)
            return int(total)

        removed = await self._run(tx)
        self._job_ids.pop(name, None)
        self._job_defaults.pop(job.id, None)
        return removed
