"""The outbox and the run profiles on PostgreSQL: their writes (the reads are
:class:`~crawlfleet.frontier.insights.SqlInsights`). Deliveries are leased with SKIP LOCKED,
as requests are: deliverers on many machines never wait for each other."""

from __future__ import annotations

from collections.abc import Sequence

from crawlfleet.frontier.outbox import Delivery, DeliveryResult, OutboxEvent
from crawlfleet.frontier.postgres.connection import Conn, PostgresConnection, Q, _count


async def emit_events(conn: Conn, events: Sequence[OutboxEvent], now: float) -> int:
    """Write the events not written before, with their deliveries (inside a transaction)."""
    new = 0
    for e in sorted(events, key=lambda e: e.key):  # one lock order for concurrent writers
        event_id = await conn.fetchval(Q["emit_event"], e.key, e.kind, e.job, e.run, e.body, now)
        if event_id is None:
            continue
        new += 1
        await conn.executemany(
            Q["emit_delivery"], [(event_id, d, e.max_attempts, now, now) for d in e.destinations]
        )
    return new


class PostgresOutbox(PostgresConnection):
    """The :class:`~crawlfleet.frontier.ports.Outbox` and ``Quality`` writes."""

    async def emit(self, events: Sequence[OutboxEvent]) -> int:
        if not events:
            return 0
        return await self._run(lambda c: emit_events(c, events, self.clock()))

    async def lease_deliveries(
        self, owner: str, destinations: Sequence[str], limit: int, ttl: float
    ) -> list[Delivery]:
        if not destinations or limit < 1:
            return []
        now = self.clock()

        async def tx(conn: Conn) -> list[Delivery]:
            await conn.execute(Q["outbox_lost"], now)
            leased = await conn.fetch(
                Q["outbox_lease"], owner, now + ttl, list(destinations), now, limit
            )
            if not leased:
                return []
            ids = sorted({row[5] for row in leased})
            bodies = {r[0]: tuple(r)[1:] for r in await conn.fetch(Q["outbox_bodies"], ids)}
            out = []
            for oid, token, dest, attempts, max_attempts, event_id in leased:
                key, kind, job, run, body = bodies[event_id]
                out.append(
                    Delivery(oid, token, dest, attempts, max_attempts, key, kind, body, job, run)
                )
            return sorted(out, key=lambda d: d.id)

        return await self._run(tx)

    async def settle_deliveries(self, results: Sequence[DeliveryResult]) -> set[int]:
        now = self.clock()

        async def tx(conn: Conn) -> set[int]:
            settled = set()
            for r in sorted(results, key=lambda r: r.id):
                status = await conn.execute(
                    Q["outbox_settle"], r.id, r.token, r.state, r.retry_at, r.status, r.error, now
                )
                if _count(status):
                    settled.add(r.id)
            return settled

        return await self._run(tx)

    async def replay_deliveries(
        self, destination: str | None = None, ids: Sequence[int] = ()
    ) -> int:
        status = await self._run(
            lambda c: c.execute(
                Q["outbox_replay"], self.clock(), destination, list(ids) if ids else None
            )
        )
        return _count(status)

    async def prune_outbox(self, before: float) -> int:
        async def tx(conn: Conn) -> int:
            n = _count(await conn.execute(Q["outbox_prune"], before))
            await conn.execute(Q["outbox_prune_events"], before)
            return n

        return await self._run(tx)

    # -- run profiles and sinks -----------------------------------------------------------------

    async def claim_check(self, job: str, run: int, every: float) -> bool:
        job_id = await self._job_id(job)
        now = self.clock()

        async def tx(conn: Conn) -> bool:
            await conn.execute(Q["profile_insert"], job_id, run)
            return _count(await conn.execute(Q["profile_claim"], job_id, run, now, every)) == 1

        return await self._run(tx)

    async def save_profile(
        self,
        job: str,
        run: int,
        profile: str,
        *,
        final: bool = False,
        events: Sequence[OutboxEvent] = (),
    ) -> bool:
        job_id = await self._job_id(job)
        now = self.clock()

        async def tx(conn: Conn) -> bool:
            if final:
                await conn.execute(Q["profile_insert"], job_id, run)
                status = await conn.execute(Q["profile_finalize"], job_id, run, profile, now)
            else:
                status = await conn.execute(Q["profile_save"], profile, job_id, run)
            if _count(status) != 1:
                return False
            await emit_events(conn, events, now)
            return True

        return await self._run(tx)

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
        job_id = await self._job_id(job)
        added = 1 if event is not None else 0

        async def tx(conn: Conn) -> bool:
            await conn.execute(Q["sink_start"], job_id, run, sink)
            status = await conn.execute(
                Q["sink_advance"], job_id, run, sink, after, batches, added, done
            )
            if _count(status) != 1:
                return False
            if event is not None:
                await emit_events(conn, [event], self.clock())
            return True

        return await self._run(tx)

    async def sink_state(self, job: str, run: int, sink: str) -> tuple[str, int, bool]:
        job_id = await self._job_id(job)
        row = await self._run(lambda c: c.fetchrow(Q["sink_state"], job_id, run, sink), write=False)
        return ("", 0, False) if row is None else (row[0], int(row[1]), bool(row[2]))
