"""The queue verbs of the sqlite store: enqueue (with the trap budgets), lease, heartbeat,
complete, fail, report (complete + fail + lease in one transaction), release and rescue."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import astuple
from typing import Any

from crawlfleet.data.jsonsafe import Unstorable
from crawlfleet.data.validate import refused_record
from crawlfleet.frontier import pacing as pace
from crawlfleet.frontier.common import (
    ACTIVE_WINDOW,
    DOMAINS_PER_LEASE,
    dead_reason_of,
    fair_share,
    lane_rows,
    lease_from_row,
    quarantine_values,
    record_values,
    request_values,
    store_json,
)
from crawlfleet.frontier.jobs import JobDefaults
from crawlfleet.frontier.ports import (
    WorkerStats,
)
from crawlfleet.frontier.runs import completion_values
from crawlfleet.frontier.sqlite.connection import (
    POLL_EVERY,
    Q,
    SQLiteConnection,
    log,
)
from crawlfleet.model import (
    KINDS,
    Completion,
    Failure,
    JobState,
    Lease,
    LeaseRef,
    NewRequest,
    Outcome,
    RecordRow,
    Settled,
)
from crawlfleet.policy.traps import budget_keys, dropped_key, over_budget, sample_traps
from crawlfleet.routes.pools import DIRECT


class SQLiteQueue(SQLiteConnection):
    """The :class:`~crawlfleet.frontier.ports.Queue` port on the sqlite store."""

    # -- enqueue --------------------------------------------------------------------------------

    async def enqueue(self, job: str, requests: Sequence[NewRequest]) -> int:
        if not requests:
            return 0
        job_id = await self._job_id(job)
        return await self._run(self._write(lambda db: self._enqueue(db, job_id, requests)))

    def _enqueue(self, db: sqlite3.Connection, job_id: int, requests: Iterable[NewRequest]) -> int:
        defaults = self._job_defaults[job_id]
        now = self.clock()
        before = db.total_changes
        after_id = db.execute(Q["last_request_id"]).fetchone()[0]
        domains: set[str] = set()
        pins: dict[str, set[str]] = {}
        rows, traps, relisted = [], [], []
        requests = list(requests)
        for r in requests:
            row = (job_id, *request_values(r, defaults))
            if r.trap is None:
                if r.lastmod is not None:
                    relisted.append(r)
                domains.add(r.domain)
                if r.pool:
                    pins.setdefault(r.domain, set()).update(r.pool)
                rows.append((*row, now, now))
            else:
                traps.append((*row, f"trap: {r.trap}", now, now, now))
        if traps:
            traps = self._sample(db, job_id, traps, [r for r in requests if r.trap is not None])
            before = db.total_changes  # the sample's counters are no rows added
        db.executemany(Q["insert_request"], rows)
        every_row_new = db.total_changes - before == len(rows)
        db.executemany(Q["insert_trap"], traps)
        added = db.total_changes - before
        if relisted and not every_row_new:
            self._relist(db, job_id, relisted, now)
        if added or db.total_changes - before > added:
            db.execute(Q["work_changed"])
        if defaults.budgeted:
            # every row new (a discovery-heavy page): their ids follow the last one in order
            # (the write lock is ours), no need to read them back
            new = (
                [(after_id + 1 + i, r[2], r[3], r[16]) for i, r in enumerate(rows)]
                if every_row_new
                else None
            )
            added -= self._budget(db, job_id, defaults, after_id, now, new)
        if traps or defaults.budgeted:
            db.execute(Q["trap_history"], {"now": now, "after": after_id})
        for domain in domains:
            limits = defaults.limits_for(domain)
            db.execute(
                Q["insert_domain"],
                (domain, limits.max_in_flight, limits.min_delay, limits.min_delay),
            )
            start = self.pacing.start_concurrency
            db.executemany(
                Q["insert_lane"], lane_rows(domain, limits, defaults.lanes_for(domain), start=start)
            )
            if domain in pins:
                routes = defaults.pinned_lanes(pins[domain])
                db.executemany(
                    Q["insert_lane"], lane_rows(domain, limits, routes, start=start, pinned=True)
                )
            db.execute(Q["domain_tier_init"], {"domain": domain})
        return added

    @staticmethod
    def _keep(db: sqlite3.Connection, job_id: int, rules: list[str]) -> list[bool]:
        """Which of these new traps (their rule each) are kept as rows: the job's sample of each
        rule (``policy.traps.sample_traps``), its counters updated."""
        kept = dict(db.execute(Q["trap_samples"], (job_id,)).fetchall())
        mask, counts = sample_traps(rules, kept)
        db.executemany(
            Q["budget_used"], [(job_id, "trap_sample", rule, n) for rule, n in counts.items()]
        )
        return mask

    @staticmethod
    def _count_dropped(
        db: sqlite3.Connection, job_id: int, gone: list[tuple[str, str, str]]
    ) -> None:
        """Count the traps ``(domain, rule, url)`` kept as no row, per domain, rule and pattern."""
        counts = Counter(dropped_key(d, rule, url) for d, rule, url in gone)
        db.executemany(Q["trap_dropped"], [(job_id, k, n) for k, n in sorted(counts.items())])

    def _sample(
        self,
        db: sqlite3.Connection,
        job_id: int,
        rows: list[tuple[Any, ...]],
        requests: list[NewRequest],
    ) -> list[tuple[Any, ...]]:
        """The rows of the links their finder judged traps that the job keeps (its sample per
        rule); the others are counted."""
        rules = [r.trap or "" for r in requests]
        mask = self._keep(db, job_id, rules)
        self._count_dropped(
            db,
            job_id,
            [
                (r.domain, r.trap or "", r.url)
                for r, keep in zip(requests, mask, strict=True)
                if not keep
            ],
        )
        return [row for row, keep in zip(rows, mask, strict=True) if keep]

    @staticmethod
    def _relist(
        db: sqlite3.Connection, job_id: int, requests: list[NewRequest], now: float
    ) -> None:
        """Requests a sitemap lists again with a newer ``lastmod``: revisited in this run."""
        (run,) = db.execute(Q["run_of_job"], (job_id,)).fetchone()
        db.executemany(
            Q["relist"],
            [
                {
                    "lastmod": r.lastmod,
                    "run": run,
                    "now": now,
                    "job_id": job_id,
                    "fingerprint": r.fingerprint,
                }
                for r in requests
            ],
        )

    @staticmethod
    def _budget(
        db: sqlite3.Connection,
        job_id: int,
        defaults: JobDefaults,
        after_id: int,
        now: float,
        new: list[tuple[int, str, str, int]] | None = None,
    ) -> int:
        """Turn the new requests (``(id, url, domain, listed)`` after ``after_id``, read back
        unless given) over their host or pattern budget into dead(trap) rows, or past their
        rule's sample into counts only; returns how many rows went. A page a sitemap lists is
        the site's inventory: no URL-shape budget cuts it."""
        if new is None:
            new = db.execute(Q["new_requests"], (after_id,)).fetchall()
        if not new:
            return 0
        keys_of = [budget_keys(u, d, defaults.traps, listed) for _, u, d, listed in new]
        keys: dict[str, set[str]] = {}
        for row_keys in keys_of:
            for kind, key in row_keys:
                keys.setdefault(kind, set()).add(key)
        used = {
            (kind, key): n
            for k, ks in keys.items()
            for kind, key, n in db.execute(Q["budgets_of"], (job_id, k, store_json(sorted(ks))))
        }
        trapped, counts = over_budget([r[:3] for r in new], used, defaults.traps, keys_of)
        if trapped:
            where = {rid: (url, domain) for rid, url, domain, _ in new if rid in trapped}
            ids = sorted(trapped)
            kept = SQLiteQueue._keep(db, job_id, [trapped[i] for i in ids])
            gone = [
                (i, trapped[i], *where[i]) for i, keep in zip(ids, kept, strict=True) if not keep
            ]
            db.executemany(Q["drop_trapped"], [(i,) for i, *_ in gone])
            SQLiteQueue._count_dropped(db, job_id, [(d, why, u) for _, why, u, d in gone])
            db.executemany(
                Q["trap_request"],
                [
                    (f"trap: {trapped[i]}", now, i)
                    for i, keep in zip(ids, kept, strict=True)
                    if keep
                ],
            )
        db.executemany(Q["budget_used"], [(job_id, k, key, n) for (k, key), n in counts.items()])
        return len(gone) if trapped else 0

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
        return await self._run(
            self._write(lambda db: self._lease_running(db, worker, limit, ttl, jobs, kinds))
        )

    def _lease_running(
        self,
        db: sqlite3.Connection,
        worker: str,
        limit: int,
        ttl: float,
        jobs: Sequence[str] | None,
        kinds: Sequence[str] = KINDS,
    ) -> list[Lease]:
        """Lease from the running jobs (all, or those named) inside the caller's transaction."""
        wanted = set(jobs) if jobs is not None else None
        # the running jobs are read inside the lease transaction: one trip to the thread
        names = {}
        for row in db.execute(Q["list_jobs"]):
            job = self._job_from_row(row)
            if job.state == JobState.RUNNING and (wanted is None or job.name in wanted):
                names[job.id] = job.name
        return self._lease(db, worker, limit, ttl, names, store_json(list(kinds))) if names else []

    def _lease(
        self,
        db: sqlite3.Connection,
        worker: str,
        limit: int,
        ttl: float,
        names: dict[int, str],
        kinds: str,
    ) -> list[Lease]:
        now = self.clock()
        self._rescue(db, now)
        candidates = db.execute(
            Q["lease_lanes"],
            {"now": now, "horizon": now + self.pacing.lease_horizon, "limit": DOMAINS_PER_LEASE},
        ).fetchall()
        db.execute(Q["worker_seen"], {"worker": worker, "now": now})
        sharers = db.execute(Q["active_workers"], (now - ACTIVE_WINDOW,)).fetchone()[0]
        mine: dict[tuple[str, str], int] = {}
        if sharers > 1:
            mine = {(d, r): n for d, r, n in db.execute(Q["my_leases"], (worker,))}
        picker = _Picker(db, worker, ttl, names, kinds, now)
        if any(route != DIRECT for _, route, *_ in candidates):  # a domain with routes to choose
            batch = store_json(sorted({domain for domain, *_ in candidates}))
            for domain, pool, shared, usable in db.execute(Q["usable_lanes"], (batch, now)):
                picker.lanes[domain] = picker.lanes.get(domain, 0) + shared
                picker.pool_lanes[(domain, pool)] = usable
        domain_free: dict[str, int] = {}
        leases: list[Lease] = []
        for row in candidates:
            domain, route, free, d_free, delay, step, next_at, concurrency, shared, tag = row
            share = fair_share(concurrency, sharers, mine.get((domain, route), 0))
            room = domain_free.setdefault(domain, d_free)
            want = min(free, share, room, limit - len(leases))
            if share <= 0 or room <= 0:
                continue
            if want <= 0:
                break
            start = max(next_at, now)
            gap = max(delay, step)  # the lane's own spacing, or its domain's, whichever is wider
            if gap > 0:
                # hand out the pacing slots that fall inside the horizon, one start every `gap`
                want = min(want, int((now + self.pacing.lease_horizon - start) / gap) + 1)
            taken = picker.take(domain, route, want, start, gap, shared=bool(shared), tag=tag)
            if not taken:
                db.execute(Q["lane_touched"], (now, domain, route))
                continue
            leases.extend(taken)
            domain_free[domain] = room - len(taken)
            last = start + (len(taken) - 1) * gap
            args = {"n": len(taken), "now": now, "domain": domain, "route": route}
            db.execute(Q["lane_leased"], {**args, "lane_next": last + delay})
            # a domain without spacing of its own (step 0) leaves its lanes to their delays:
            # the last slot of one lane is not the first of the next (see the PostgreSQL lease)
            domain_next = last + step if step > 0 else 0.0
            db.execute(Q["domain_leased"], {**args, "domain_next": domain_next})
        return leases

    def _rescue(self, db: sqlite3.Connection, now: float) -> int:
        rows = db.execute(Q["rescue_expired"], {"now": now}).fetchall()
        if not rows:
            return 0
        db.execute(Q["work_changed"])
        self._release_lanes(db, Counter((domain, route) for _, domain, _, route in rows))
        db.executemany(
            Q["insert_attempt"],
            [
                (rid, att, now, "lease_expired", None, "lease expired", route)
                for rid, _, att, route in rows
            ],
        )
        return len(rows)

    @staticmethod
    def _release_lanes(db: sqlite3.Connection, freed: Counter[tuple[str, str | None]]) -> None:
        """Give back in-flight slots of lanes and of their domains."""
        per_domain: Counter[str] = Counter()
        for (domain, route), n in freed.items():
            db.execute(Q["lane_released"], (n, domain, route or "direct"))
            per_domain[domain] += n
        for domain, n in per_domain.items():
            db.execute(Q["domain_released"], (n, domain))

    async def rescue_expired(self) -> int:
        return await self._run(self._write(lambda db: self._rescue(db, self.clock())))

    async def maintain(self) -> list[str]:
        # Nothing to do: the lease's queries are planned by their indexes, not by statistics
        # (bench_frontier.py shows the plans at 10,000,000 queued), a delete frees its pages for
        # reuse, and the WAL is checkpointed by every writer (_maybe_checkpoint).
        return []

    # -- lease holders' verbs -------------------------------------------------------------------

    async def heartbeat(self, leases: Sequence[LeaseRef], ttl: float) -> set[int]:
        if not leases:
            return set()

        def tx(db: sqlite3.Connection) -> set[int]:
            until = self.clock() + ttl
            held = set()
            for ref in leases:
                if db.execute(Q["heartbeat"], (until, ref.id, ref.token)).fetchone():
                    held.add(ref.id)
            return held

        return await self._run(self._write(tx))

    async def complete(self, items: Sequence[Completion]) -> set[int]:
        if not items:
            return set()
        return await self._run(self._write(lambda db: self._complete(db, items)))

    def _complete(self, db: sqlite3.Connection, items: Sequence[Completion]) -> set[int]:
        now = self.clock()
        accepted: set[int] = set()
        freed: Counter[tuple[str, str]] = Counter()
        records: list[tuple[Any, ...]] = []
        stored: list[RecordRow] = []  # the records' rows, in the order of ``records``
        quarantined: list[tuple[Any, ...]] = []
        contents: list[tuple[Any, ...]] = []
        discovered: dict[int, list[NewRequest]] = {}
        ids = store_json([c.lease.id for c in items])
        held = {
            rid: (tok, job_id, (dom, route or "direct"))
            for rid, tok, job_id, dom, route in db.execute(Q["held"], (ids,))
        }
        page_types = []
        done = []
        carried = []
        runs = dict(db.execute(Q["job_runs"]).fetchall())
        events: dict[tuple[str, str], list[pace.Event]] = {}
        for c in items:
            h = held.get(c.lease.id)
            if h is None or h[0] != c.lease.token or c.lease.id in accepted:
                continue  # fenced: the lease was lost, nothing this holder sent is written
            _, job_id, lane = h
            run = runs.get(job_id, 1)
            accepted.add(c.lease.id)
            if c.page_type is not None:
                page_types.append((job_id, lane[0], *c.page_type, now))
            done.append(completion_values(c, now, run))
            if c.carry:
                carried.append({"run": run, "job_id": job_id, "id": c.lease.id})
            freed[lane] += 1
            events.setdefault(lane, []).append(pace.event_of_completion(c))
            for r in c.records:
                try:
                    records.append((job_id, r.key, *record_values(r), c.lease.id, run, now))
                    stored.append(r)
                except Unstorable as exc:  # one bad record is quarantined, never the batch
                    quarantined.append(quarantine_values(job_id, refused_record(r, exc)))
            quarantined.extend(quarantine_values(job_id, q) for q in c.quarantined)
            if c.content_hash is not None:
                contents.append((job_id, c.content_hash, c.lease.id))
            if c.discovered:
                discovered.setdefault(job_id, []).extend(c.discovered)
        db.executemany(Q["complete"], done)
        db.executemany(Q["carry_records"], carried)
        self._keep_versions(db, records)
        self._upsert_records(db, records, stored, quarantined)
        db.executemany(Q["insert_quarantine"], quarantined)
        db.executemany(Q["insert_content"], contents)
        db.executemany(Q["note_duplicate"], contents)
        db.executemany(Q["set_page_type"], page_types)
        for job_id, reqs in discovered.items():
            self._enqueue(db, job_id, reqs)
        self._pace(db, now, freed, events)
        if accepted:
            db.execute(Q["work_changed"])
        return accepted

    def _keep_versions(self, db: sqlite3.Connection, records: list[tuple[Any, ...]]) -> None:
        """Jobs that keep more than one version of a record (``record_history``): the versions
        this batch replaces go to record_versions first."""
        keep = [
            (r[0], r[1], r[11], r[9])
            for r in records
            if (d := self._job_defaults.get(r[0])) is not None and d.record_history > 1
        ]
        db.executemany(Q["keep_version"], keep)

    @staticmethod
    def _upsert_records(
        db: sqlite3.Connection,
        records: list[tuple[Any, ...]],
        rows: list[RecordRow],
        quarantined: list[tuple[Any, ...]],
    ) -> None:
        """Write the batch's records; one the database refuses is quarantined with its reason,
        the others go in (a failed statement leaves the transaction open in SQLite)."""
        try:
            db.executemany(Q["upsert_record"], records)
            return
        except (sqlite3.Error, ValueError, OverflowError) as first:
            log.warning("a record batch was refused (%s): writing its records one by one", first)
        for values, row in zip(records, rows, strict=True):
            try:
                db.execute(Q["upsert_record"], values)
            except (sqlite3.Error, ValueError, OverflowError) as exc:
                quarantined.append(quarantine_values(values[0], refused_record(row, exc)))

    def _pace(
        self,
        db: sqlite3.Connection,
        now: float,
        freed: Counter[tuple[str, str]],
        events: dict[tuple[str, str], list[pace.Event]],
    ) -> None:
        """Free the batch's lane and domain slots and fold its outcomes into the lanes' pacing
        and health, the routes' breakers and the domains' route tiers."""
        if not freed:
            return
        rows = db.execute(Q["pace_read"], (store_json(sorted(freed)),)).fetchall()
        updates = []
        per_domain: Counter[str] = Counter()
        tiered: dict[str, list[tuple[int, bool]]] = {}
        for row in rows:
            lane = pace.state_from_row(row, self.pacing)
            key = (lane.domain, lane.route)
            mine = events.get(key, ())
            state = pace.apply(lane, self.pacing, now, mine)
            health = pace.fold_health(row[11], mine, now)
            updates.append((freed[key], *pace.write_values(state), health, lane.domain, lane.route))
            per_domain[lane.domain] += freed[key]
            if lane.route != DIRECT and row[13]:  # a domain's tier: its own lanes decide
                tiered.setdefault(lane.domain, []).extend(
                    (row[12], e.outcome is Outcome.BLOCKED) for e in mine
                )
        db.executemany(Q["pace_write"], updates)
        db.executemany(Q["domain_released"], [(n, d) for d, n in per_domain.items()])
        self._fold_routes(db, now, events)
        if tiered:
            self._escalate(db, now, tiered)

    def _fold_routes(
        self, db: sqlite3.Connection, now: float, events: dict[tuple[str, str], list[pace.Event]]
    ) -> None:
        """Each route's breaker after the batch's attempts through it (direct has none)."""
        by_route: dict[str, list[pace.Event]] = {}
        for (_, route), evs in events.items():
            if route != DIRECT:
                by_route.setdefault(route, []).extend(evs)
        if not by_route:
            return
        rows = db.execute(Q["routes_read"], (store_json(sorted(by_route)),)).fetchall()
        writes = []
        for route, document in rows:
            breaker, open_until = pace.fold_breaker(
                document, by_route[route], now, pace.health_config(self.pacing)
            )
            writes.append((breaker, open_until, route))
        db.executemany(Q["route_write"], writes)

    @staticmethod
    def _escalate(
        db: sqlite3.Connection, now: float, results: dict[str, list[tuple[int, bool]]]
    ) -> None:
        """Move domains that keep getting blocked up a route tier (or probe one down)."""
        for domain, tier, document, tiers in db.execute(
            Q["domain_tiers"], (store_json(sorted(results)),)
        ).fetchall():
            levels = [int(t) for t in str(tiers).split(",")]
            if len(set(levels)) < 2:
                continue
            saved, new_tier, moves = pace.fold_escalation(
                document, levels, results[domain], now, current=tier
            )
            db.execute(Q["escalate"], (new_tier, saved, domain))
            for move in moves:
                db.execute(Q["tier_moved"], (domain, now, move.from_tier, move.to_tier, move.why))

    async def fail(self, items: Sequence[Failure]) -> set[int]:
        if not items:
            return set()
        return await self._run(self._write(lambda db: self._fail(db, items)))

    def _fail(self, db: sqlite3.Connection, items: Sequence[Failure]) -> set[int]:
        now = self.clock()
        accepted: set[int] = set()
        freed: Counter[tuple[str, str]] = Counter()
        events: dict[tuple[str, str], list[pace.Event]] = {}
        for f in items:
            row = db.execute(
                Q["fail"],
                {
                    "retry_at": f.retry_at,
                    "dead_reason": dead_reason_of(f),
                    "error": f.error,
                    "status": f.status,
                    "now": now,
                    "id": f.lease.id,
                    "token": f.lease.token,
                    "counted": int(f.count_attempt),
                    "refetch": f.refetch_with,
                },
            ).fetchone()
            if row is None:
                continue
            domain, attempts, route, job_id = row
            if f.page_type is not None:
                db.execute(Q["set_page_type"], (job_id, domain, *f.page_type, now))
            if f.discovered:
                self._enqueue(db, job_id, f.discovered)
            lane = (domain, route or "direct")
            accepted.add(f.lease.id)
            freed[lane] += 1
            events.setdefault(lane, []).append(pace.event_of_failure(f))
            n = attempts if f.count_attempt else attempts + 1
            db.execute(
                Q["insert_attempt"],
                (f.lease.id, n, now, f.outcome_name, f.status, f.error, f.route),
            )
        self._pace(db, now, freed, events)
        if accepted:
            db.execute(Q["work_changed"])
        return accepted

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
        def tx(db: sqlite3.Connection) -> Settled:
            completed = self._complete(db, done) if done else set()
            refused = self._fail(db, failed) if failed else set()
            leases = self._lease_running(db, worker, lease, ttl, jobs, kinds) if lease > 0 else []
            return Settled(completed, refused, leases)

        if not done and not failed and lease <= 0:
            return Settled(set(), set(), [])
        return await self._run(self._write(tx))

    async def wait_for_work(self, timeout: float) -> bool:
        """Wait until a transaction made work leasable (new requests, freed slots) or timeout.

        SQLite has no notifications: such transactions move a counter (``work_version``), and an
        idle worker polls it every :data:`POLL_EVERY` seconds. ``PRAGMA data_version`` (changed
        by any other connection's commit, read without touching the file) filters the polls, so
        most cost a few microseconds. A change since the last wait returns at once: a wake-up is
        never lost between a lease and a wait. Returns whether something changed.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            version = await self._run(self._work_version)
            if version != self._seen_version:
                self._seen_version = version
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(POLL_EVERY, left))

    def _work_version(self, db: sqlite3.Connection) -> int:
        data_version = db.execute("PRAGMA data_version").fetchone()[0]
        if data_version != self._data_version:
            self._data_version = data_version
            self._version = db.execute(Q["work_version"]).fetchone()[0]
        return self._version

    async def release(self, leases: Sequence[LeaseRef]) -> set[int]:
        if not leases:
            return set()

        def tx(db: sqlite3.Connection) -> set[int]:
            now = self.clock()
            accepted: set[int] = set()
            freed: Counter[tuple[str, str | None]] = Counter()
            for ref in leases:
                row = db.execute(Q["release"], (now, ref.id, ref.token)).fetchone()
                if row is not None:
                    accepted.add(ref.id)
                    freed[(row[0], row[1])] += 1
            self._release_lanes(db, freed)
            if accepted:
                db.execute(Q["work_changed"])
            return accepted

        return await self._run(self._write(tx))

    async def load_sessions(self, job: str, key: str) -> list[str]:
        job_id = await self._job_id(job)
        rows = await self._run(lambda db: db.execute(Q["load_sessions"], (job_id, key)).fetchall())
        return [r[0] for r in rows]

    async def save_sessions(self, job: str, rows: Sequence[tuple[str, str, str, bool]]) -> None:
        if not rows:
            return
        job_id = await self._job_id(job)
        now = self.clock()

        def tx(db: sqlite3.Connection) -> None:
            for key, sid, data, retired in rows:
                if retired:
                    db.execute(Q["drop_session"], (job_id, key, sid))
                else:
                    db.execute(Q["save_session"], (job_id, key, sid, data, now))

        await self._run(self._write(tx))

    # -- the fleet's picture (serve, status) ----------------------------------------------------

    async def save_worker_stats(self, stats: WorkerStats) -> None:
        values = astuple(stats)
        await self._run(self._write(lambda db: db.execute(Q["save_worker_stats"], values)))


class _Picker:
    """Takes a lane's best ready requests inside one lease transaction."""

    def __init__(
        self,
        db: sqlite3.Connection,
        worker: str,
        ttl: float,
        names: dict[int, str],
        kinds: str,
        now: float,
    ) -> None:
        self.db, self.worker, self.ttl, self.names, self.kinds, self.now = (
            db,
            worker,
            ttl,
            names,
            kinds,
            now,
        )
        self.jobs = store_json(list(names))
        #: per domain, its lanes that may lease its own requests now (a domain missing has one)
        self.lanes: dict[str, int] = {}
        #: per (domain, pool), the lanes that may lease requests pinned to the pool now
        self.pool_lanes: dict[tuple[str, str], int] = {}

    def take(
        self,
        domain: str,
        route: str,
        want: int,
        start: float,
        gap: float,
        *,
        shared: bool = True,
        tag: str = f",{DIRECT},",
    ) -> list[Lease]:
        """Up to ``want`` leases through ``route``, starting at ``start``, one every ``gap``: of
        the domain's own requests if the lane is ``shared``, and of those pinned to its pool
        (``tag``, as the requests' pool column spells it)."""
        args = {
            "worker": self.worker,
            "domain": domain,
            "route": route,
            "now": self.now,
            "jobs": self.jobs,
            "kinds": self.kinds,
            "limit": want,
            "alone": int(self.lanes.get(domain, 1) <= 1),
            "shared": int(shared),
            "tag": tag,
            "pool_alone": int(self.pool_lanes.get((domain, tag.strip(",")), 1) <= 1),
        }
        if gap <= 0:  # every lease starts now: one statement, one shared expiry
            expires = self.now + self.ttl
            rows = self.db.execute(Q["lease_batch"], {**args, "expires": expires}).fetchall()
            rows.sort(key=lambda r: (-r[4], r[0]))  # RETURNING order is not the pick order
            return [lease_from_row(r, self.names[r[1]], expires, start, route) for r in rows]
        taken = []
        for i, (rid,) in enumerate(self.db.execute(Q["lease_pick"], args).fetchall()):
            start_at = start + i * gap
            take = {
                "worker": self.worker,
                "expires": start_at + self.ttl,
                "route": route,
                "id": rid,
            }
            row = self.db.execute(Q["lease_take"], take).fetchone()
            taken.append(
                lease_from_row(row, self.names[row[1]], start_at + self.ttl, start_at, route)
            )
        return taken
