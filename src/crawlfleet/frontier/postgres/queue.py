"""The queue verbs of the postgres store: enqueue (with the trap budgets), lease, heartbeat,
complete, fail, report (complete + fail + lease in one transaction), release and rescue."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import astuple
from typing import Any

import asyncpg

from crawlfleet.data.jsonsafe import Unstorable
from crawlfleet.data.validate import refused_record
from crawlfleet.errors import StoreError
from crawlfleet.frontier import pacing as pace
from crawlfleet.frontier.common import (
    ACTIVE_WINDOW,
    DOMAINS_PER_LEASE,
    dead_reason_of,
    lane_rows,
    lease_from_row,
    quarantine_values,
    record_values,
    request_values,
)
from crawlfleet.frontier.jobs import JobDefaults
from crawlfleet.frontier.ports import (
    WorkerStats,
)
from crawlfleet.frontier.postgres.connection import (
    ENQUEUE_SLICE,
    INSERT_RETURNING,
    MAINTAIN_LOCK_TIMEOUT_MS,
    PINNED_LOOKS,
    STORE_TABLES,
    Conn,
    PostgresConnection,
    Q,
    _columns,
    _count,
    _json_rows,
    _line,
    _quote_ident,
    _refs,
    log,
)
from crawlfleet.frontier.runs import completion_values
from crawlfleet.frontier.upkeep import UPKEEP_EVERY, TableHealth
from crawlfleet.frontier.upkeep import actions as upkeep_actions
from crawlfleet.model import (
    KINDS,
    Completion,
    Failure,
    Lease,
    LeaseRef,
    NewRequest,
    Outcome,
    RecordRow,
    Settled,
)
from crawlfleet.policy.traps import budget_keys, dropped_key, over_budget, sample_traps
from crawlfleet.routes.pools import DIRECT


class PostgresQueue(PostgresConnection):
    """The :class:`~crawlfleet.frontier.ports.Queue` port on the postgres store."""

    # -- enqueue --------------------------------------------------------------------------------

    async def enqueue(self, job: str, requests: Sequence[NewRequest]) -> int:
        if not requests:
            return 0
        job_id = await self._job_id(job)
        added, new_domains = await self._run(lambda c: self._enqueue(c, job_id, requests))
        self._know_domains(new_domains)
        return added

    async def _enqueue(
        self, conn: Conn, job_id: int, requests: Iterable[NewRequest]
    ) -> tuple[int, list[str]]:
        """Insert the requests and any domain not seen yet; returns (added, domains inserted)."""
        defaults = self._job_defaults[job_id]
        now = self.clock()
        values: list[tuple[Any, ...]] = []
        traps: list[tuple[Any, ...]] = []
        domains: set[str] = set()
        pins: dict[str, set[str]] = {}
        for r in sorted(requests, key=lambda r: r.fingerprint):
            if r.trap is not None:
                traps.append((*request_values(r, defaults), f"trap: {r.trap}"))
                continue
            domains.add(r.domain)
            if r.pool:
                pins.setdefault(r.domain, set()).update(r.pool)
            values.append(request_values(r, defaults))
        added = 0
        if traps:
            traps = await self._sample(conn, job_id, traps)
        # a bulk intake (a file of millions of seeds) goes in slices, in fingerprint order still
        for i in range(0, len(traps), ENQUEUE_SLICE):
            batch = _json_rows(traps[i : i + ENQUEUE_SLICE])
            added += _count(await conn.execute(Q["insert_traps"], job_id, now, batch))
        for i in range(0, len(values), ENQUEUE_SLICE):
            batch = _json_rows(values[i : i + ENQUEUE_SLICE])
            if defaults.budgeted:
                rows = await conn.fetch(INSERT_RETURNING, job_id, now, batch)
                added += len(rows)
                added -= await self._budget(conn, job_id, defaults, [tuple(r) for r in rows], now)
            else:
                added += _count(await conn.execute(Q["insert_requests"], job_id, now, batch))
        relisted = sorted(
            (r.fingerprint, r.lastmod) for r in requests if r.trap is None and r.lastmod is not None
        )
        if relisted and added < len(values):
            run = await conn.fetchval(Q["run_of_job"], job_id)
            await conn.execute(Q["relist"], job_id, run, now, *_columns(relisted, 2))
        new = sorted(d for d in domains if d not in self._known_domains)
        if new:
            limits = [defaults.limits_for(d) for d in new]
            await conn.execute(
                Q["insert_domains"],
                new,
                [x.max_in_flight for x in limits],
                [x.min_delay for x in limits],
            )
        if new or pins:
            # a new domain's own lanes; every batch's pinned requests' lanes (rare, and a lane
            # another process made for the domain's own requests gains the pinned role)
            start = self.pacing.start_concurrency
            rows = [
                row
                for d in new
                for row in lane_rows(d, defaults.limits_for(d), defaults.lanes_for(d), start=start)
            ]
            for d, pools in pins.items():
                routes = defaults.pinned_lanes(pools)
                limits_d = defaults.limits_for(d)
                rows.extend(lane_rows(d, limits_d, routes, start=start, pinned=True))
            await self._insert_lanes(conn, rows)
        if new:
            await conn.execute(Q["domain_tier_init"], new)
        if added:
            await self._notify(conn)
            self._added_since_upkeep += added
        return added, new

    @staticmethod
    async def _insert_lanes(conn: Conn, rows: list[dict[str, Any]]) -> None:
        """Insert ``lane_rows`` (one per lane: its roles merged), in lane order, then give the
        lanes there already the roles they lack."""
        keys = ("domain", "route", "tier", "max_in_flight", "min_delay", "delay", "concurrency")
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        for row in rows:
            seen = merged.setdefault((row["domain"], row["route"]), row)
            if seen is not row:
                seen.update(shared=max(seen["shared"], row["shared"]))
                seen.update(pinned=max(seen["pinned"], row["pinned"]))
        lanes = [merged[k] for k in sorted(merged)]
        values = [(*(r[k] for k in keys), r["shared"], r["pinned"]) for r in lanes]
        await conn.execute(Q["insert_lanes"], *_columns(values, 9))
        roles = [(r["domain"], r["route"], r["shared"], r["pinned"]) for r in lanes]
        await conn.execute(Q["lane_roles"], *_columns(roles, 4))

    @staticmethod
    async def _keep(conn: Conn, job_id: int, rules: list[str]) -> list[bool]:
        """Which of these new traps (their rule each) are kept as rows: the job's sample of each
        rule (``policy.traps.sample_traps``), its counters locked and updated."""
        names = sorted(set(rules))
        rows = await conn.fetch(Q["lock_budgets"], job_id, ["trap_sample"] * len(names), names)
        mask, counts = sample_traps(rules, {r[1]: r[2] for r in rows})
        if counts:
            changed = sorted(counts)
            await conn.execute(
                Q["set_budgets"],
                job_id,
                ["trap_sample"] * len(changed),
                changed,
                [counts[k] for k in changed],
            )
        return mask

    @staticmethod
    async def _count_dropped(conn: Conn, job_id: int, gone: list[tuple[str, str, str]]) -> None:
        """Count the traps ``(domain, rule, url)`` kept as no row, per domain, rule and pattern."""
        if not gone:
            return
        counts = Counter(dropped_key(d, rule, url) for d, rule, url in gone)
        keys = sorted(counts)
        await conn.execute(Q["add_trap_dropped"], job_id, keys, [counts[k] for k in keys])

    async def _sample(
        self, conn: Conn, job_id: int, rows: list[tuple[Any, ...]]
    ) -> list[tuple[Any, ...]]:
        """The rows of the links their finder judged traps that the job keeps (its sample per
        rule); the others are counted. A row's URL, domain and error are its 2nd, 3rd and last."""
        rules = [row[-1].removeprefix("trap: ") for row in rows]
        mask = await self._keep(conn, job_id, rules)
        await self._count_dropped(
            conn,
            job_id,
            [
                (row[2], rule, row[1])
                for row, rule, keep in zip(rows, rules, mask, strict=True)
                if not keep
            ],
        )
        return [row for row, keep in zip(rows, mask, strict=True) if keep]

    @staticmethod
    async def _budget(
        conn: Conn,
        job_id: int,
        defaults: JobDefaults,
        new: list[tuple[int, str, str, int]],
        now: float,
    ) -> int:
        """Turn the new requests ``(id, url, domain, listed)`` over their host or pattern budget
        into dead(trap) rows, or past their rule's sample into counts only (a page a sitemap
        lists draws on no URL-shape budget); returns how many rows went."""
        gone: list[int] = []
        if not new:
            return 0
        new.sort()  # RETURNING order is not insertion order: first come, first admitted
        keys_of = [budget_keys(u, d, defaults.traps, listed) for _, u, d, listed in new]
        keys = sorted({k for ks in keys_of for k in ks})
        rows = await conn.fetch(Q["lock_budgets"], job_id, *_columns(keys, 2))
        used = {(r[0], r[1]): r[2] for r in rows}
        trapped, counts = over_budget([r[:3] for r in new], used, defaults.traps, keys_of)
        if trapped:
            ids = sorted(trapped)
            where = {rid: (url, domain) for rid, url, domain, _ in new if rid in trapped}
            mask = await PostgresQueue._keep(conn, job_id, [trapped[i] for i in ids])
            gone = [i for i, keep in zip(ids, mask, strict=True) if not keep]
            ids = [i for i, keep in zip(ids, mask, strict=True) if keep]
            if gone:
                await conn.execute(Q["drop_trapped"], gone)
            await PostgresQueue._count_dropped(
                conn, job_id, [(where[i][1], trapped[i], where[i][0]) for i in gone]
            )
            if ids:
                await conn.execute(
                    Q["trap_requests"], now, ids, [f"trap: {trapped[i]}" for i in ids]
                )
        if counts:
            changed = sorted(counts)
            await conn.execute(
                Q["set_budgets"],
                job_id,
                *_columns(changed, 2),
                [counts[k] for k in changed],
            )
        return len(gone)

    # -- lease ----------------------------------------------------------------------------------

    async def lease(
        self,
        worker: str,
        limit: int,
        ttl: float,
        jobs: Sequence[str] | None = None,
        kinds: Sequence[str] = KINDS,
    ) -> list[Lease]:
        if limit <= 0:
            return []
        return await self._run(lambda conn: self._lease(conn, worker, limit, ttl, jobs, kinds))

    async def _lease(
        self,
        conn: Conn,
        worker: str,
        limit: int,
        ttl: float,
        jobs: Sequence[str] | None,
        kinds: Sequence[str] = KINDS,
    ) -> list[Lease]:
        """Lease from the running jobs (all, or those named) inside the caller's transaction."""
        wanted = list(jobs) if jobs is not None else None
        now = self.clock()
        if await self._rescue(conn, now):
            await self._notify(conn)  # rescued requests are work for every idle worker
        await conn.execute(Q["worker_seen"], worker, now)
        sharers = max(1, await conn.fetchval(Q["active_workers"], now - ACTIVE_WINDOW))
        mine: dict[tuple[str, str], int] = {}
        if sharers > 1:
            mine = {(d, r): n for d, r, n in await conn.fetch(Q["my_leases"], worker)}
        leases: list[Lease] = []
        visited: list[str] = []
        looked: Counter[str] = Counter()  # domains looked at again (see PINNED_LOOKS)
        # One lane per domain per statement: a domain with several lanes takes several rounds.
        # Every round takes a lease, passes over a domain for good, or looks again at one found
        # empty where pinned requests may be another lane's (a few times at most), so this ends.
        while len(leases) < limit and len(visited) < DOMAINS_PER_LEASE:
            lanes = sorted(mine)
            rows = await conn.fetch(
                Q["lease"],
                now,
                now + self.pacing.lease_horizon,
                DOMAINS_PER_LEASE - len(visited),
                limit - len(leases),
                worker,
                ttl,
                wanted,
                visited,
                sharers,
                [d for d, _ in lanes],
                [r for _, r in lanes],
                [mine[k] for k in lanes],
                list(kinds),
            )
            taken = [self._lease_from_row(r) for r in rows if r[0] is not None]
            leases.extend(taken)
            # Skip only the domains found empty: one that handed out leases may have more
            # (the row limit cut it short, or another lane); what it gave counts against this
            # worker's share of its lane.
            empty = {r[3] for r in rows if r[0] is None}
            unsettled = (r[3] for r in rows if r[0] is None and not r[-1])
            again = {d for d in unsettled if looked[d] < PINNED_LOOKS}
            looked.update(again)
            if not taken and not empty:
                break  # nothing more anywhere in reach
            visited.extend(empty - again)
            for lease in taken:
                mine[lease.lane] = mine.get(lease.lane, 0) + 1
        return leases

    async def wait_for_work(self, timeout: float) -> bool:
        """Wait for another worker's NOTIFY (see :meth:`_notify`) or ``timeout`` seconds.

        One connection per process LISTENs, opened on first use and again when the store cut it.
        A notification that came since the last wait returns at once: a wake-up is never lost
        between a lease and a wait. While the store is away (within ``outage_grace``), this only
        waits: the calls that need the store wait out the outage and say so.
        """
        if self._listener is not None and self._listener.is_closed():
            self._listener = None  # cut by a restart or an outage: LISTEN again
            self._work.set()  # what was notified meanwhile is unknown: look once
        if self._listener is None:
            if self._pool is None:
                raise StoreError("the PostgreSQL frontier is not open")
            try:
                self._listener = await asyncpg.connect(self.dsn, server_settings=self._settings())
                await self._listener.add_listener(self._channel, self._on_notify)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                listener, self._listener = self._listener, None
                if listener is not None:
                    listener.terminate()
                if self.outage_grace <= 0:
                    raise StoreError(f"queue store {self._where()} failed: {_line(exc)}") from exc
                await asyncio.sleep(timeout)
                return False
        try:
            await asyncio.wait_for(self._work.wait(), timeout)
        except TimeoutError:
            return False
        self._work.clear()
        return True

    def _on_notify(self, *_: Any) -> None:
        self._work.set()

    @staticmethod
    def _lease_from_row(row: Sequence[Any]) -> Lease:
        *head, expires_at, start_at, route, _settled = row  # the job column holds its name
        return lease_from_row(head, head[1], expires_at, start_at, route)

    async def _rescue(self, conn: Conn, now: float) -> int:
        rows = await conn.fetch(Q["rescue_expired"], now)
        await self._release_lanes(conn, Counter({(r[0], r[1]): r[2] for r in rows}))
        return sum(r[2] for r in rows)

    async def rescue_expired(self) -> int:
        return await self._run(lambda c: self._rescue(c, self.clock()))

    async def maintain(self) -> list[str]:
        """ANALYZE the store's tables whose statistics are stale, and VACUUM those with many
        dead rows where autovacuum does not run (:mod:`crawlfleet.frontier.upkeep`); one process
        of the fleet at a time (the others skip), at most once per ``UPKEEP_EVERY`` seconds per
        process. Returns what it ran (``"vacuum requests"``, ...)."""
        now = time.monotonic()
        if self._pool is None or now - self._maintained_at < UPKEEP_EVERY:
            return []
        self._maintained_at = now
        done: list[str] = []
        rows = await self._run(
            lambda c: c.fetch(Q["table_health"], list(STORE_TABLES)), write=False
        )
        added = self._added_since_upkeep
        tables = [
            TableHealth(
                r[0], r[1], r[2], max(r[3], added) if r[0] == "requests" else r[3], r[4], r[5]
            )
            for r in rows
        ]
        todo = upkeep_actions(tables)
        if not todo:
            return done
        try:
            # a connection of its own, closed after: its session lock and lock_timeout never
            # reach the pool (a VACUUM cut short by a stopping worker leaves nothing behind);
            # never queue behind a lock (autovacuum at work, a migration): next time
            settings = {**self._settings(), "lock_timeout": str(MAINTAIN_LOCK_TIMEOUT_MS)}
            conn = await asyncpg.connect(self.dsn, server_settings=settings)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            raise StoreError(f"queue store {self._where()} failed: {_line(exc)}") from exc
        try:
            key = f"crawlfleet upkeep {self.schema or ''}"
            if not await conn.fetchval("SELECT pg_try_advisory_lock(hashtext($1))", key):
                return done  # another process of the fleet is at it
            for action, table in todo:
                sql = "VACUUM (ANALYZE) " if action == "vacuum" else "ANALYZE "
                try:
                    await conn.execute(sql + _quote_ident(table))
                except asyncpg.LockNotAvailableError:
                    continue
                done.append(f"{action} {table}")
                if table == "requests":  # counted now: what was added meanwhile counts next time
                    self._added_since_upkeep -= added
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(f"queue store {self._where()} failed: {_line(exc)}") from exc
        finally:
            conn.terminate()
        if done:  # a vacuum is news (a server without autovacuum); an analyze is routine
            level = logging.INFO if any(d.startswith("vacuum") for d in done) else logging.DEBUG
            log.log(level, "store upkeep: %s", ", ".join(done))
        return done

    @staticmethod
    async def _release_lanes(conn: Conn, freed: Counter[tuple[str, str]]) -> None:
        if freed:
            lanes = sorted(freed)
            await conn.execute(
                Q["release_lanes"],
                [d for d, _ in lanes],
                [r for _, r in lanes],
                [freed[k] for k in lanes],
            )

    # -- lease holders' verbs -------------------------------------------------------------------

    async def heartbeat(self, leases: Sequence[LeaseRef], ttl: float) -> set[int]:
        if not leases:
            return set()
        ids, tokens = _refs(leases)

        async def tx(conn: Conn) -> set[int]:
            rows = await conn.fetch(Q["heartbeat"], self.clock() + ttl, ids, tokens)
            return {r[0] for r in rows}

        return await self._run(tx)

    async def complete(self, items: Sequence[Completion]) -> set[int]:
        if not items:
            return set()
        new_domains: list[str] = []
        if any(c.discovered for c in items):
            # The links go in first, in a short transaction of their own: workers discover the
            # same links, and an insert of a key another transaction inserted waits for that
            # transaction to end. Inside the completion, those waits chained whole completions
            # (and deadlocked them). Links of a lease that turns out lost are harmless: the
            # store would have them from whoever fetches the page again.

            async def links(conn: Conn) -> None:
                new_domains.clear()  # a retried transaction starts over
                await self._enqueue_discovered(conn, items, new_domains)

            await self._run(links)

        async def tx(conn: Conn) -> set[int]:
            return await self._complete(conn, items)

        accepted = await self._run(tx)
        self._know_domains(new_domains)
        return accepted

    async def _enqueue_discovered(
        self, conn: Conn, items: Sequence[Completion | Failure], new_domains: list[str]
    ) -> None:
        ids = [c.lease.id for c in items if c.discovered]
        job_of = {r[0]: r[1] for r in await conn.fetch(Q["jobs_of"], ids)}
        discovered: dict[int, list[NewRequest]] = {}
        for c in items:
            if c.discovered and c.lease.id in job_of:
                discovered.setdefault(job_of[c.lease.id], []).extend(c.discovered)
        if discovered.keys() - self._job_defaults.keys():
            # a worker learns a job's politeness defaults here if it never looked the job up
            for row in await conn.fetch(Q["list_jobs"]):
                self._job_from_row(row)
        for job_id, reqs in sorted(discovered.items()):
            _, new = await self._enqueue(conn, job_id, reqs)
            new_domains.extend(new)

    async def _complete(self, conn: Conn, items: Sequence[Completion]) -> set[int]:
        now = self.clock()
        ordered = sorted(items, key=lambda c: c.lease.id)
        values = [completion_values(c, now, 0) for c in ordered]
        rows = await conn.fetch(
            Q["complete"],
            now,
            [c.lease.id for c in ordered],
            [c.lease.token for c in ordered],
            [c.status for c in ordered],
            [v["page"] for v in values],
            [v["due_at"] for v in values],
            [v["nbytes"] for v in values],
            [v["visit"] for v in values],
        )
        # fenced leases are missing here: nothing they sent is written
        job_of = {r[0]: r[1] for r in rows}
        done = [c for c in items if c.lease.id in job_of]
        run_of = dict(await conn.fetch(Q["job_runs"], sorted(set(job_of.values()))))
        carried = sorted((job_of[c.lease.id], c.lease.id) for c in done if c.carry)
        if carried:
            await conn.execute(Q["carry_records"], *_columns(carried, 2))
        records: dict[tuple[int, str], tuple[tuple[Any, ...], RecordRow]] = {}
        quarantined = [
            quarantine_values(job_of[c.lease.id], q) for c in done for q in c.quarantined
        ]
        for c in done:
            job_id = job_of[c.lease.id]
            run = run_of.get(job_id, 1)
            for r in c.records:  # the last row of one key wins, as with sequential upserts
                try:
                    records[(job_id, r.key)] = ((*record_values(r), c.lease.id, run), r)
                except Unstorable as exc:  # one bad record is quarantined, never the batch
                    quarantined.append(quarantine_values(job_id, refused_record(r, exc)))
        if records:
            await self._keep_versions(conn, records)
            await self._upsert_records(conn, now, records, quarantined)
        if quarantined:
            await conn.execute(Q["insert_quarantine"], *_columns(quarantined, 9))
        contents = sorted(
            (job_of[c.lease.id], c.content_hash, c.lease.id)
            for c in done
            if c.content_hash is not None
        )
        if contents:
            await conn.execute(Q["insert_content"], *_columns(contents, 3))
            await conn.execute(Q["note_duplicates"], *_columns(contents, 3))
        lane_of = {r[0]: (r[2], r[3]) for r in rows}
        learnt = sorted(
            (job_of[c.lease.id], lane_of[c.lease.id][0], *c.page_type)
            for c in done
            if c.page_type is not None
        )
        if learnt:
            await conn.execute(Q["set_page_types"], now, *_columns(learnt, 4))
        events: dict[tuple[str, str], list[pace.Event]] = {}
        for c in done:
            events.setdefault(lane_of[c.lease.id], []).append(pace.event_of_completion(c))
        await self._pace(conn, now, Counter(lane_of.values()), events)
        if rows:
            await self._notify(conn)
        return set(job_of)

    async def _keep_versions(
        self, conn: Conn, records: dict[tuple[int, str], tuple[tuple[Any, ...], RecordRow]]
    ) -> None:
        """Jobs that keep more than one version of a record (``record_history``): the versions
        this batch replaces go to record_versions first."""
        keep = sorted(
            (job_id, key, values[9], values[7])
            for (job_id, key), (values, _) in records.items()
            if (d := self._job_defaults.get(job_id)) is not None and d.record_history > 1
        )
        if keep:
            await conn.execute(Q["keep_versions"], *_columns(keep, 4))

    @staticmethod
    async def _upsert_records(
        conn: Conn,
        now: float,
        records: dict[tuple[int, str], tuple[tuple[Any, ...], RecordRow]],
        quarantined: list[tuple[Any, ...]],
    ) -> None:
        """Write the batch's records in one statement; if the server refuses it, one by one, each
        in a savepoint: a record it refuses is quarantined with its reason, the others go in."""
        keys = sorted(records, key=lambda k: (k[0], str(k[1])))  # lock order, whatever the key

        async def write(some: list[tuple[int, str]]) -> None:
            values = (records[k][0] for k in some)
            await conn.execute(Q["upsert_records"], now, *_columns(some, 2), *_columns(values, 10))

        try:
            async with conn.transaction():  # a savepoint: a refusal leaves the rest standing
                await write(keys)
            return
        except (asyncpg.DataError, ValueError, UnicodeError) as first:
            log.warning("a record batch was refused (%s): writing its records one by one", first)
        for key in keys:
            try:
                async with conn.transaction():
                    await write([key])
            except (asyncpg.DataError, ValueError, UnicodeError) as exc:
                quarantined.append(quarantine_values(key[0], refused_record(records[key][1], exc)))

    async def _pace(
        self,
        conn: Conn,
        now: float,
        freed: Counter[tuple[str, str]],
        events: dict[tuple[str, str], list[pace.Event]],
    ) -> None:
        """Free the batch's lane and domain slots and fold its outcomes into the lanes' pacing.
        Domains are locked first, then lanes, each in key order (the lock order of the SQL)."""
        if not freed:
            return
        lanes = sorted(freed)
        per_domain: Counter[str] = Counter()
        for (domain, _), n in freed.items():
            per_domain[domain] += n
        domains = sorted(per_domain)
        await conn.execute(Q["lock_domains"], domains)
        rows = await conn.fetch(Q["pace_read"], [d for d, _ in lanes], [r for _, r in lanes])
        values = []
        tiered: dict[str, list[tuple[int, bool]]] = {}
        for row in rows:
            lane = pace.state_from_row(tuple(row), self.pacing)
            key = (lane.domain, lane.route)
            mine = events.get(key, ())
            state = pace.apply(lane, self.pacing, now, mine)
            health = pace.fold_health(row[11], mine, now)
            values.append((lane.domain, lane.route, freed[key], *pace.write_values(state), health))
            if lane.route != DIRECT and row[13]:  # a domain's tier: its own lanes decide
                tiered.setdefault(lane.domain, []).extend(
                    (row[12], e.outcome is Outcome.BLOCKED) for e in mine
                )
        await conn.execute(Q["pace_write"], *_columns(values, 8))
        await conn.execute(Q["domains_freed"], domains, [per_domain[d] for d in domains])
        await self._fold_routes(conn, now, events)
        if tiered:
            await self._escalate(conn, now, tiered)

    async def _fold_routes(
        self, conn: Conn, now: float, events: dict[tuple[str, str], list[pace.Event]]
    ) -> None:
        """Each route's breaker after the batch's attempts through it (direct has none)."""
        by_route: dict[str, list[pace.Event]] = {}
        for (_, route), evs in events.items():
            if route != DIRECT:
                by_route.setdefault(route, []).extend(evs)
        if not by_route:
            return
        writes = []
        for route, document in await conn.fetch(Q["routes_read"], sorted(by_route)):
            breaker, open_until = pace.fold_breaker(
                document, by_route[route], now, pace.health_config(self.pacing)
            )
            writes.append((route, breaker, open_until))
        await conn.execute(Q["routes_write"], *_columns(writes, 3))

    @staticmethod
    async def _escalate(conn: Conn, now: float, results: dict[str, list[tuple[int, bool]]]) -> None:
        """Move domains that keep getting blocked up a route tier (or probe one down)."""
        for domain, tier, document, levels in await conn.fetch(Q["domain_tiers"], sorted(results)):
            if len(set(levels)) < 2:
                continue
            saved, new_tier, moves = pace.fold_escalation(
                document, list(levels), results[domain], now, current=tier
            )
            await conn.execute(Q["escalate"], domain, new_tier, saved)
            for move in moves:
                await conn.execute(
                    Q["tier_moved"], domain, now, move.from_tier, move.to_tier, move.why
                )

    async def fail(self, items: Sequence[Failure]) -> set[int]:
        if not items:
            return set()
        new_domains: list[str] = []
        if any(f.discovered for f in items):
            # the links first, in a short transaction of their own (see complete)

            async def links(conn: Conn) -> None:
                new_domains.clear()  # a retried transaction starts over
                await self._enqueue_discovered(conn, items, new_domains)

            await self._run(links)
        accepted = await self._run(lambda conn: self._fail(conn, items))
        self._know_domains(new_domains)
        return accepted

    async def _fail(self, conn: Conn, items: Sequence[Failure]) -> set[int]:
        ordered = sorted(items, key=lambda f: f.lease.id)
        args = (
            [f.lease.id for f in ordered],
            [f.lease.token for f in ordered],
            [f.retry_at for f in ordered],
            [dead_reason_of(f) for f in ordered],
            [f.error for f in ordered],
            [f.status for f in ordered],
            [f.outcome_name for f in ordered],
            [f.route for f in ordered],
            [f.count_attempt for f in ordered],
            [f.refetch_with for f in ordered],
        )
        by_id = {f.lease.id: f for f in ordered}
        now = self.clock()
        rows = await conn.fetch(Q["fail"], now, *args)
        learnt = [
            (r[3], r[1], *by_id[r[0]].page_type)  # type: ignore[misc]
            for r in rows
            if by_id[r[0]].page_type is not None
        ]
        if learnt:
            await conn.execute(Q["set_page_types"], now, *_columns(sorted(learnt), 4))
        events: dict[tuple[str, str], list[pace.Event]] = {}
        for r in sorted(rows, key=lambda r: r[0]):
            events.setdefault((r[1], r[2]), []).append(pace.event_of_failure(by_id[r[0]]))
        await self._pace(conn, now, Counter((r[1], r[2]) for r in rows), events)
        if rows:
            await self._notify(conn)
        return {r[0] for r in rows}

    async def report(
        self,
        worker: str,
        done: Sequence[Completion] = (),
        failed: Sequence[Failure] = (),
        *,
        lease: int = 0,
        ttl: float = 60.0,
        jobs: Sequence[str] | None = None,
        kinds: Sequence[str] = KINDS,
    ) -> Settled:
        if not done and not failed and lease <= 0:
            return Settled(set(), set(), [])
        new_domains: list[str] = []
        finding: list[Completion | Failure] = [c for c in done if c.discovered]
        finding += [f for f in failed if f.discovered]
        if finding:
            # the links first, in a short transaction of their own (see complete)

            async def links(conn: Conn) -> None:
                new_domains.clear()  # a retried transaction starts over
                await self._enqueue_discovered(conn, finding, new_domains)

            await self._run(links)

        async def tx(conn: Conn) -> Settled:
            # completions and failures lock request rows, then domain rows in domain order; the
            # lease takes domain and request rows only with SKIP LOCKED, so it never waits
            completed = await self._complete(conn, done) if done else set()
            refused = await self._fail(conn, failed) if failed else set()
            leases = await self._lease(conn, worker, lease, ttl, jobs, kinds) if lease > 0 else []
            return Settled(completed, refused, leases)

        settled = await self._run(tx)
        self._know_domains(new_domains)
        return settled

    async def release(self, leases: Sequence[LeaseRef]) -> set[int]:
        if not leases:
            return set()
        ids, tokens = _refs(leases)

        async def tx(conn: Conn) -> set[int]:
            rows = await conn.fetch(Q["release"], self.clock(), ids, tokens)
            await self._release_lanes(conn, Counter((r[1], r[2]) for r in rows))
            if rows:
                await self._notify(conn)
            return {r[0] for r in rows}

        return await self._run(tx)

    async def load_sessions(self, job: str, key: str) -> list[str]:
        job_id = await self._job_id(job)
        rows = await self._run(lambda c: c.fetch(Q["load_sessions"], job_id, key), write=False)
        return [r[0] for r in rows]

    async def save_sessions(self, job: str, rows: Sequence[tuple[str, str, str, bool]]) -> None:
        if not rows:
            return
        job_id = await self._job_id(job)
        live = sorted((k, i, d) for k, i, d, retired in rows if not retired)
        gone = sorted((k, i) for k, i, _, retired in rows if retired)

        async def tx(conn: Conn) -> None:
            if live:
                await conn.execute(Q["save_sessions"], job_id, *_columns(live, 3), self.clock())
            if gone:
                await conn.execute(Q["drop_sessions"], job_id, *_columns(gone, 2))

        await self._run(tx)

    # -- the fleet's picture (serve, status) ----------------------------------------------------

    async def save_worker_stats(self, stats: WorkerStats) -> None:
        values = astuple(stats)
        await self._run(lambda c: c.execute(Q["save_worker_stats"], *values))
