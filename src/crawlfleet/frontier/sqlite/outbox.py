"""The outbox and the run profiles on SQLite: their writes (the reads are
:class:`~crawlfleet.frontier.insights.SqlInsights`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from crawlfleet.frontier.outbox import Delivery, DeliveryResult, OutboxEvent
from crawlfleet.frontier.sqlite.connection import Q, SQLiteConnection, _statements


def emit_events(db: sqlite3.Connection, events: Sequence[OutboxEvent], now: float) -> int:
    """Write the events not written before, with their deliveries (inside a transaction)."""
    new = 0
    for e in events:
        row = db.execute(Q["emit_event"], (e.key, e.kind, e.job, e.run, e.body, now)).fetchone()
        if row is None:
            continue  # written before: its deliveries were written with it
        new += 1
        db.executemany(
            Q["emit_delivery"], [(row[0], d, e.max_attempts, now, now) for d in e.destinations]
        )
    return new


class SQLiteOutbox(SQLiteConnection):
    """The :class:`~crawlfleet.frontier.ports.Outbox` and ``Quality`` writes."""

    async def emit(self, events: Sequence[OutboxEvent]) -> int:
        if not events:
            return 0
        return await self._run(self._write(lambda db: emit_events(db, events, self.clock())))

    async def lease_deliveries(
        self, owner: str, destinations: Sequence[str], limit: int, ttl: float
    ) -> list[Delivery]:
        if not destinations or limit < 1:
            return []
        now = self.clock()
        args = {
            "owner": owner,
            "expires": now + ttl,
            "destinations": json.dumps(list(destinations)),
            "now": now,
            "limit": limit,
        }

        def tx(db: sqlite3.Connection) -> list[Delivery]:
            db.execute(Q["outbox_lost"], {"now": now})
            leased = db.execute(Q["outbox_lease"], args).fetchall()
            if not leased:
                return []
            ids = json.dumps(sorted({row[5] for row in leased}))
            bodies = {r[0]: r[1:] for r in db.execute(Q["outbox_bodies"], (ids,))}
            out = []
            for oid, token, dest, attempts, max_attempts, event_id in leased:
                key, kind, job, run, body = bodies[event_id]
                out.append(
                    Delivery(oid, token, dest, attempts, max_attempts, key, kind, body, job, run)
                )
            return sorted(out, key=lambda d: d.id)

        return await self._run(self._write(tx))

    async def settle_deliveries(self, results: Sequence[DeliveryResult]) -> set[int]:
        now = self.clock()

        def tx(db: sqlite3.Connection) -> set[int]:
            settled = set()
            for r in results:
                args = {
                    "state": r.state,
                    "retry_at": r.retry_at,
                    "status": r.status,
                    "error": r.error,
                    "now": now,
                    "id": r.id,
                    "token": r.token,
                }
                if db.execute(Q["outbox_settle"], args).rowcount:
                    settled.add(r.id)
            return settled

        return await self._run(self._write(tx))

    async def replay_deliveries(
        self, destination: str | None = None, ids: Sequence[int] = ()
    ) -> int:
        args = {
            "now": self.clock(),
            "destination": destination,
            "ids": json.dumps(list(ids)) if ids else None,
        }
        return await self._run(
            self._write(lambda db: db.execute(Q["outbox_replay"], args).rowcount)
        )

    async def prune_outbox(self, before: float) -> int:
        def tx(db: sqlite3.Connection) -> int:
            n = db.execute(Q["outbox_prune"], (before,)).rowcount
            db.execute(Q["outbox_prune_events"], (before,))
            return int(n)

        return await self._run(self._write(tx))

    # -- run profiles and sinks -----------------------------------------------------------------

    async def claim_check(self, job: str, run: int, every: float) -> bool:
        args = {"job_id": await self._job_id(job), "run": run, "now": self.clock(), "every": every}

        def tx(db: sqlite3.Connection) -> bool:
            claimed = 0
            for statement in _statements(Q["profile_claim"]):
                claimed = db.execute(statement, args).rowcount
            return claimed == 1

        return await self._run(self._write(tx))

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
        args = {"job_id": job_id, "run": run, "now": now, "profile": profile}

        def tx(db: sqlite3.Connection) -> bool:
            if final:
                n = 0
                for statement in _statements(Q["profile_finalize"]):
                    n = db.execute(statement, args).rowcount
            else:
                n = db.execute(Q["profile_save"], (profile, job_id, run)).rowcount
            if n != 1:
                return False
            emit_events(db, events, now)
            return True

        return await self._run(self._write(tx))

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
        args = {
            "job_id": job_id,
            "run": run,
            "sink": sink,
            "after": after,
            "added": 1 if event is not None else 0,
            "done": int(done),
            "batches": batches,
        }

        def tx(db: sqlite3.Connection) -> bool:
            db.execute(Q["sink_start"], (job_id, run, sink))
            if db.execute(Q["sink_advance"], args).rowcount != 1:
                return False
            if event is not None:
                emit_events(db, [event], self.clock())
            return True

        return await self._run(self._write(tx))

    async def sink_state(self, job: str, run: int, sink: str) -> tuple[str, int, bool]:
        job_id = await self._job_id(job)
        row = await self._run(
            lambda db: db.execute(Q["sink_state"], (job_id, run, sink)).fetchone()
        )
        return ("", 0, False) if row is None else (row[0], int(row[1]), bool(row[2]))
