"""The embedded frontier: one SQLite file in WAL mode, shared by the local worker processes.

Every method runs its statements in one transaction on a dedicated thread (sqlite3 releases the
GIL while SQLite works, so the event loop keeps fetching meanwhile). Write transactions open with
``BEGIN IMMEDIATE``: SQLite then queues writers on ``busy_timeout`` instead of failing a deferred
transaction that tries to upgrade to a writer half way through.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple
from pathlib import Path
from typing import Any, TypeVar

from crawlfleet.data.jsonsafe import Unstorable
from crawlfleet.data.validate import refused_record
from crawlfleet.errors import StoreError, UsageError
from crawlfleet.frontier import pacing as pace
from crawlfleet.frontier.common import (
    ACTIVE_WINDOW,
    DOMAINS_PER_LEASE,
    dead_from_row,
    dead_reason_of,
    dumps,
    fair_share,
    job_from_row,
    lane_rows,
    lease_from_row,
    quarantine_from_row,
    quarantine_item_from_row,
    quarantine_values,
    record_from_row,
    record_values,
    request_values,
)
from crawlfleet.frontier.jobs import JobDefaults, settings_with_defaults
from crawlfleet.frontier.ports import (
    DomainQueue,
    DomainState,
    FleetCounts,
    JobActivity,
    LaneRow,
    LeaseHolder,
    QuarantineItem,
    RecordCursor,
    RouteRow,
    WorkerStats,
)
from crawlfleet.frontier.sql import queries
from crawlfleet.model import (
    KINDS,
    AttemptRow,
    Completion,
    DeadLetter,
    DeadReason,
    DomainLimits,
    Failure,
    Job,
    JobSpec,
    JobState,
    JobStats,
    Lease,
    LeaseRef,
    NewRequest,
    Outcome,
    QuarantineRow,
    RecordRow,
    Settled,
)
from crawlfleet.policy.pacing import PacingConfig
from crawlfleet.policy.traps import budget_keys, over_budget
from crawlfleet.routes.pools import DIRECT

T = TypeVar("T")
log = logging.getLogger("crawlfleet.store")
Q = queries("sqlite")

#: the base schema (the ``schema`` block) is version 1; ``migration_NNNN_x`` blocks follow it
MIGRATIONS = sorted(
    (int(name.split("_")[1]), sql) for name, sql in Q.items() if name.startswith("migration_")
)
SCHEMA_VERSION = MIGRATIONS[-1][0] if MIGRATIONS else 1
#: seconds between passive WAL checkpoints of one process (see _maybe_checkpoint)
CHECKPOINT_EVERY = 1.0
#: bytes a WAL file keeps after a checkpoint (PRAGMA journal_size_limit)
WAL_SIZE_LIMIT = 64 << 20
#: how long opening a store waits for another process's schema script (milliseconds)
OPEN_BUSY_TIMEOUT_MS = 30_000
#: seconds a writer waits for the write lock before giving up
BUSY_TIMEOUT = 60.0
#: seconds between two looks of an idle worker at whether another process committed
POLL_EVERY = 0.005


class SQLiteFrontier:
    """The frontier contract on one SQLite file (``sqlite:///path/queue.db``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        pacing: PacingConfig | None = None,
        create: bool = True,
    ) -> None:
        self.path = Path(path)
        self.create = create  # False: open only an existing file (read-only commands)
        self.clock = clock
        self.pacing = pacing or PacingConfig()
        self._db: sqlite3.Connection | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crawlfleet-sqlite")
        self._last_checkpoint = time.monotonic()
        self._job_ids: dict[str, int] = {}
        self._job_defaults: dict[int, JobDefaults] = {}
        # wait_for_work: the work counter as last read, and as last returned to a waiter
        self._data_version = -1
        self._version = 0
        self._seen_version = 0

    def __repr__(self) -> str:
        return f"<SQLiteFrontier {self.path}>"

    # -- plumbing -------------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._db is None:
            raise StoreError("the SQLite frontier is not open")
        return fn(self._db)

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> Callable[[sqlite3.Connection], T]:
        def tx(db: sqlite3.Connection) -> T:
            self._begin_immediate(db)
            try:
                result = fn(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            self._maybe_checkpoint(db)
            return result

        return tx

    @staticmethod
    def _begin_immediate(db: sqlite3.Connection) -> None:
        # SQLite's own busy handler sleeps 1, 2, 5, 10 ... 100 ms between tries: with two
        # processes trading the write lock every few milliseconds that backoff, not the work,
        # would set the pace. Poll every fraction of a millisecond instead.
        deadline = time.monotonic() + BUSY_TIMEOUT
        pause = 0.0002
        while True:
            try:
                db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"the queue store stayed locked for {BUSY_TIMEOUT:g}s"
                    ) from exc
                time.sleep(pause)
                pause = min(pause * 1.5, 0.005)

    def _maybe_checkpoint(self, db: sqlite3.Connection) -> None:
        # Automatic checkpoints run inside COMMIT and were half its cost; instead each process
        # copies the WAL back into the database at most once per CHECKPOINT_EVERY seconds,
        # PASSIVE so that it never waits for (or blocks) the other writers.
        now = time.monotonic()
        if now - self._last_checkpoint >= CHECKPOINT_EVERY:
            self._last_checkpoint = now
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def open(self) -> None:
        if not self.create and not self.path.is_file():
            raise UsageError(f"no queue store at {self.path} (nothing was crawled with it yet)")

        def connect(_: Any) -> sqlite3.Connection:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            # opening may wait for another process opening (and migrating) the same file: the
            # switch to WAL and the schema script take the write lock
            db.execute(f"PRAGMA busy_timeout={OPEN_BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA wal_autocheckpoint=0")
            # after a checkpoint caught up, a WAL that grew past this is cut back to it (a
            # burst of enqueues must not leave a file of gigabytes behind)
            db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            db.execute("PRAGMA temp_store=MEMORY")
            db.execute("PRAGMA cache_size=-65536")
            db.executescript(Q["schema"])
            # from here on, reads in WAL mode never wait; writers wait in _begin_immediate
            db.execute("PRAGMA busy_timeout=0")
            self._write(self._migrate)(db)
            return db

        loop = asyncio.get_running_loop()
        try:
            self._db = await loop.run_in_executor(self._pool, connect, None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open queue store {self.path}: {exc}") from exc

    @staticmethod
    def _migrate(db: sqlite3.Connection) -> None:
        """Apply the migrations newer than the file's schema version (under the write lock, so
        processes opening one file at once migrate it once)."""
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1')")
        (version,) = db.execute(Q["schema_version"]).fetchone()
        for number, sql in MIGRATIONS:
            if number > version:
                for statement in _statements(sql):
                    db.execute(statement)
                db.execute(Q["set_schema_version"], (str(number),))

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await asyncio.get_running_loop().run_in_executor(self._pool, db.close)
        self._pool.shutdown(wait=True)

    async def __aenter__(self) -> SQLiteFrontier:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- jobs -----------------------------------------------------------------------------------

    async def submit_job(self, spec: JobSpec) -> Job:
        settings = settings_with_defaults(spec)
        args = {
            "name": spec.name,
            "spider": spec.spider,
            "settings": dumps(settings),
            "max_attempts": spec.max_attempts,
            "now": self.clock(),
        }

        def tx(db: sqlite3.Connection) -> None:
            db.execute(Q["submit_job"], args)
            db.executemany(Q["upsert_route"], [(r.id, r.pool, r.tier, r.cost) for r in spec.routes])
            for domain, limits in spec.domain_limits.items():
                self._upsert_domain(db, domain, limits)

        await self._run(self._write(tx))
        job = await self.get_job(spec.name)
        assert job is not None
        return job

    def _upsert_domain(self, db: sqlite3.Connection, domain: str, limits: DomainLimits) -> None:
        row = db.execute(Q["domain_cap"], (domain,)).fetchone()
        db.execute(
            Q["upsert_domain"], (domain, limits.max_in_flight, limits.min_delay, limits.min_delay)
        )
        args = {
            "domain": domain,
            "max_in_flight": limits.max_in_flight,
            "raised": int(row is None or limits.max_in_flight > row[0]),
            "min_delay": limits.min_delay,
            "start": self.pacing.start_concurrency,
        }
        db.execute(Q["limit_lanes"], args)

    def _job_from_row(self, row: Sequence[Any]) -> Job:
        job, defaults = job_from_row(row)
        self._job_ids[job.name] = job.id
        self._job_defaults[job.id] = defaults
        return job

    async def get_job(self, name: str) -> Job | None:
        row = await self._run(lambda db: db.execute(Q["get_job"], (name,)).fetchone())
        return None if row is None else self._job_from_row(row)

    async def list_jobs(self) -> list[Job]:
        rows = await self._run(lambda db: db.execute(Q["list_jobs"]).fetchall())
        return [self._job_from_row(r) for r in rows]

    async def set_job_state(self, name: str, state: JobState) -> None:
        def tx(db: sqlite3.Connection) -> None:
            db.execute(Q["set_job_state"], (state, name))
            db.execute(Q["work_changed"])

        await self._run(self._write(tx))

    async def _job_id(self, name: str) -> int:
        if name not in self._job_ids and await self.get_job(name) is None:
            raise StoreError(f"no job named {name!r} in {self.path}")
        return self._job_ids[name]

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
        rows, traps = [], []
        for r in requests:
            row = (job_id, *request_values(r, defaults))
            if r.trap is None:
                domains.add(r.domain)
                if r.pool:
                    pins.setdefault(r.domain, set()).update(r.pool)
                rows.append((*row, now, now))
            else:
                traps.append((*row, f"trap: {r.trap}", now, now, now))
        db.executemany(Q["insert_request"], rows)
        every_row_new = db.total_changes - before == len(rows)
        db.executemany(Q["insert_trap"], traps)
        added = db.total_changes - before
        if added:
            db.execute(Q["work_changed"])
        if defaults.budgeted:
            # every row new (a discovery-heavy page): their ids follow the last one in order
            # (the write lock is ours), no need to read them back
            new = (
                [(after_id + 1 + i, r[2], r[3]) for i, r in enumerate(rows)]
                if every_row_new
                else None
            )
            self._budget(db, job_id, defaults, after_id, now, new)
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
    def _budget(
        db: sqlite3.Connection,
        job_id: int,
        defaults: JobDefaults,
        after_id: int,
        now: float,
        new: list[tuple[int, str, str]] | None = None,
    ) -> None:
        """Turn the new requests (``(id, url, domain)`` after ``after_id``, read back unless
        given) over their host or pattern budget into dead(trap) rows."""
        if new is None:
            new = db.execute(Q["new_requests"], (after_id,)).fetchall()
        if not new:
            return
        keys_of = [budget_keys(url, domain, defaults.traps) for _, url, domain in new]
        keys: dict[str, set[str]] = {}
        for row_keys in keys_of:
            for kind, key in row_keys:
                keys.setdefault(kind, set()).add(key)
        used = {
            (kind, key): n
            for k, ks in keys.items()
            for kind, key, n in db.execute(Q["budgets_of"], (job_id, k, dumps(sorted(ks))))
        }
        trapped, counts = over_budget(new, used, defaults.traps, keys_of)
        db.executemany(
            Q["trap_request"], [(f"trap: {why}", now, rid) for rid, why in trapped.items()]
        )
        db.executemany(Q["budget_used"], [(job_id, k, key, n) for (k, key), n in counts.items()])

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
        return self._lease(db, worker, limit, ttl, names, dumps(list(kinds))) if names else []

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
            batch = dumps(sorted({domain for domain, *_ in candidates}))
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
            db.execute(Q["domain_leased"], {**args, "domain_next": last + step})
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
        ids = dumps([c.lease.id for c in items])
        held = {
            rid: (tok, job_id, (dom, route or "direct"))
            for rid, tok, job_id, dom, route in db.execute(Q["held"], (ids,))
        }
        page_types = []
        done = []
        events: dict[tuple[str, str], list[pace.Event]] = {}
        for c in items:
            h = held.get(c.lease.id)
            if h is None or h[0] != c.lease.token or c.lease.id in accepted:
                continue  # fenced: the lease was lost, nothing this holder sent is written
            _, job_id, lane = h
            accepted.add(c.lease.id)
            if c.page_type is not None:
                page_types.append((job_id, lane[0], *c.page_type, now))
            done.append((c.status, now, c.lease.id))
            freed[lane] += 1
            events.setdefault(lane, []).append(pace.event_of_completion(c))
            for r in c.records:
                try:
                    records.append((job_id, r.key, *record_values(r), now))
                    stored.append(r)
                except Unstorable as exc:  # one bad record is quarantined, never the batch
                    quarantined.append(quarantine_values(job_id, refused_record(r, exc)))
            quarantined.extend(quarantine_values(job_id, q) for q in c.quarantined)
            if c.content_hash is not None:
                contents.append((job_id, c.content_hash, c.lease.id))
            if c.discovered:
                discovered.setdefault(job_id, []).extend(c.discovered)
        db.executemany(Q["complete"], done)
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
        rows = db.execute(Q["pace_read"], (dumps(sorted(freed)),)).fetchall()
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
        rows = db.execute(Q["routes_read"], (dumps(sorted(by_route)),)).fetchall()
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
            Q["domain_tiers"], (dumps(sorted(results)),)
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

    async def page_types(self, job: str) -> dict[tuple[str, str], str]:
        rows = await self._run(lambda db: db.execute(Q["page_types"], (job,)).fetchall())
        return {(d, p): f for d, p, f in rows}

    async def capacity(self, job: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        job_id = await self._job_id(job)

        def read(db: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
            domains = [tuple(r) for r in db.execute(Q["capacity_domains"], (job_id,))]
            names = dumps([d[0] for d in domains])
            return domains, [tuple(r) for r in db.execute(Q["capacity_lanes"], (names,))]

        return await self._run(read)

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
            traps = dict(db.execute(Q["traps_by_domain"], (j.id,)).fetchall())
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
                duplicates=s[8] or 0,
                gone=s[9] or 0,
                blocked=blocked,
                attempts_histogram=dict(db.execute(Q["attempts_histogram"], (j.id,)).fetchall()),
            )

        return await self._run(read)

    async def is_finished(self, job: str) -> bool:
        job_id = await self._job_id(job)
        row = await self._run(lambda db: db.execute(Q["unfinished"], (job_id,)).fetchone())
        return row is None

    async def _page(self, query: str, args: tuple[Any, ...]) -> list[Any]:
        return await self._run(lambda db: db.execute(Q[query], args).fetchall())

    async def iter_records(self, job: str, batch: int = 1000) -> AsyncIterator[RecordRow]:
        job_id = await self._job_id(job)
        last = ""
        while True:
            rows = await self._page("iter_records", (job_id, last, batch))
            for row in rows:
                yield record_from_row(row)
            if len(rows) < batch:
                return
            last = rows[-1][0]

    async def iter_quarantine(self, job: str, batch: int = 1000) -> AsyncIterator[QuarantineRow]:
        job_id = await self._job_id(job)
        last = 0
        while True:
            rows = await self._page("iter_quarantine", (job_id, last, batch))
            for row in rows:
                yield quarantine_from_row(row)
            if len(rows) < batch:
                return
            last = rows[-1][0]

    async def dead_letters(
        self, job: str | None = None, reason: DeadReason | None = None, limit: int = 1000
    ) -> list[DeadLetter]:
        args = {"job": job, "reason": reason.value if reason else None, "limit": limit}
        rows = await self._run(lambda db: db.execute(Q["dead_letters"], args).fetchall())
        return [dead_from_row(r) for r in rows]

    async def dead_letter(self, request_id: int) -> DeadLetter | None:
        def read(db: sqlite3.Connection) -> DeadLetter | None:
            row = db.execute(Q["dead_letter"], (request_id,)).fetchone()
            if row is None:
                return None
            history = [AttemptRow(*a) for a in db.execute(Q["attempts_of"], (request_id,))]
            return dead_from_row(row, history)

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

    async def job_activity(self, job: str) -> JobActivity:
        job_id = await self._job_id(job)

        def read(db: sqlite3.Connection) -> JobActivity:
            finished_at, updated_at = db.execute(Q["job_activity"], {"job_id": job_id}).fetchone()
            reasons = dict(db.execute(Q["dead_by_reason"], (job_id,)).fetchall())
            holders = [LeaseHolder(*row) for row in db.execute(Q["lease_holders"], (job_id,))]
            return JobActivity(finished_at, reasons, holders, updated_at)

        return await self._run(read)

    async def records_since(
        self, job: str, after: RecordCursor = (0.0, ""), limit: int = 1000
    ) -> list[tuple[float, RecordRow]]:
        job_id = await self._job_id(job)
        args = {"job_id": job_id, "t": after[0], "k": after[1], "limit": limit}
        rows = await self._run(lambda db: db.execute(Q["records_since"], args).fetchall())
        return [(row[0], record_from_row(row[1:])) for row in rows]

    # -- the fleet's picture (serve, status) ----------------------------------------------------

    async def save_worker_stats(self, stats: WorkerStats) -> None:
        values = astuple(stats)
        await self._run(self._write(lambda db: db.execute(Q["save_worker_stats"], values)))

    async def worker_stats(self, since: float = 0.0) -> list[WorkerStats]:
        rows = await self._page("worker_stats", (since,))
        return [WorkerStats(*row) for row in rows]

    async def queue_by_domain(self) -> list[DomainQueue]:
        rows = await self._run(
            lambda db: db.execute(Q["queue_by_domain"], {"now": self.clock()}).fetchall()
        )
        return [DomainQueue(*row) for row in rows]

    async def lane_rows(self, limit: int = 1000) -> list[LaneRow]:
        return [LaneRow(*row) for row in await self._page("lane_rows", (limit,))]

    async def route_rows(self) -> list[RouteRow]:
        return [RouteRow(*row) for row in await self._page("route_rows", ())]

    async def fleet_counts(self) -> FleetCounts:
        def read(db: sqlite3.Connection) -> FleetCounts:
            outcomes = dict(db.execute(Q["attempts_by_outcome"]).fetchall())
            up, down = db.execute(Q["tier_move_counts"]).fetchone()
            return FleetCounts(outcomes, up, down)

        return await self._run(read)

    async def quarantine_items(
        self, job: str | None = None, limit: int = 100
    ) -> list[QuarantineItem]:
        args = {"job": job, "limit": limit}
        rows = await self._run(lambda db: db.execute(Q["quarantine_items"], args).fetchall())
        return [quarantine_item_from_row(row) for row in rows]

    async def quarantine_item(self, item_id: int) -> QuarantineItem | None:
        row = await self._run(lambda db: db.execute(Q["quarantine_item"], (item_id,)).fetchone())
        return None if row is None else quarantine_item_from_row(row)


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
        self.jobs = dumps(list(names))
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


def _statements(script: str) -> list[str]:
    """The statements of a migration block (``;`` at a line end ends one; comments dropped)."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";\n") if part.strip().rstrip(";")]
