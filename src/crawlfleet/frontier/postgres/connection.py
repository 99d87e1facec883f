"""The fleet frontier: one PostgreSQL database shared by workers on any number of machines.

Same contract and semantics as :mod:`crawlfleet.frontier.sqlite` (the reference); the SQL and the
reasons behind it (SKIP LOCKED, lock order, indexes) are in ``sql/postgres.sql``. Every verb is one
transaction of a few batched statements on a pooled asyncpg connection. The schema is versioned:
``upgrade()`` (run by ``open()``, and by ``crawlfleet db upgrade``) applies pending migrations under
an advisory lock, so a fleet that boots at once migrates once.

This module: the connection, the schema and its migrations, and what every part of the
store shares; ``queue.py`` the queue verbs, ``frontier.py`` the whole store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Final, Self, TypeVar

import asyncpg

from crawlfleet.cache import BoundedSet
from crawlfleet.errors import StoreError, StoreUnavailable, UsageError
from crawlfleet.frontier.common import (
    job_from_row,
)
from crawlfleet.frontier.insights import Row
from crawlfleet.frontier.jobs import JobDefaults
from crawlfleet.frontier.sql import queries
from crawlfleet.frontier.upkeep import UPKEEP_EVERY
from crawlfleet.model import (
    DomainLimits,
    Job,
    LeaseRef,
)
from crawlfleet.policy.pacing import PacingConfig
from crawlfleet.policy.retry import backoff
from crawlfleet.urls import mask_credentials

T = TypeVar("T")
Q = queries("postgres")
#: insert_requests for a job with page budgets: the rows actually inserted come back
INSERT_RETURNING = Q["insert_requests"].removesuffix(";") + "\nRETURNING id, url, domain, listed"
Conn = Any  # asyncpg.Connection (asyncpg ships no type hints)
log = logging.getLogger("crawlfleet.store")

#: milliseconds a session may sit idle inside a transaction before the server ends it
IDLE_IN_TRANSACTION_MS = 30_000
#: versioned migrations, ``[(version, name, sql)]`` in order, from ``-- name: migration_NNNN_x``
MIGRATIONS = sorted(
    (int(name.split("_")[1]), name.split("_", 2)[2], sql)
    for name, sql in Q.items()
    if name.startswith("migration_")
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
#: times one lease call looks again at a domain found empty where pinned requests may be left to
#: another of its lanes (the lane was one only they use, or they are waiting)
PINNED_LOOKS = 4
#: deadlocks are avoided by lock order; these are the rare leftovers, worth one more try
_RETRYABLE = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
#: the tables maintain() looks after (in the store's schema; nothing else of a shared schema)
STORE_TABLES: Final = (
    "attempts",
    "budgets",
    "content",
    "domains",
    "hosts_down",
    "jobs",
    "lanes",
    "outbox",
    "outbox_events",
    "page_types",
    "quarantine",
    "record_versions",
    "records",
    "requests",
    "robots_files",
    "routes",
    "run_profiles",
    "runs",
    "schedules",
    "sessions",
    "sink_progress",
    "tier_moves",
    "worker_stats",
    "workers",
)
#: domains a process remembers having stored (PostgresFrontier._known_domains)
KNOWN_DOMAINS: Final = 100_000
#: most rows of one insert statement (an enqueue of more runs several, in one transaction)
ENQUEUE_SLICE: Final = 10_000
#: how long the upkeep waits for a table's lock (milliseconds)
MAINTAIN_LOCK_TIMEOUT_MS: Final = 200
_TX_ATTEMPTS = 5
#: errors that say the server is away, not that the statement is wrong: refused or cut
#: connections, a server shutting down, crashed or starting up (57P01-03), no connection slot
#: left (53300). A transaction cut by one of them either committed or did not; every verb is
#: safe to run again (fencing tokens decide what a second report may still settle).
_AWAY = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
)
#: first and longest pause (seconds) between two tries of a store that is away
OUTAGE_BACKOFF_BASE: Final = 0.25
OUTAGE_BACKOFF_CAP: Final = 5.0


def _quiet_pool_floor(record: logging.LogRecord) -> bool:
    """asyncpg's pool logs a traceback each time it fails to reconnect its floor of connections
    (a store outage): the outage has one line of its own here, so those become debug lines
    without the traceback."""
    if str(record.msg).startswith("Failed to restore the pool connection floor"):
        exc = record.exc_info[1] if record.exc_info else None
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        if exc is not None:
            record.msg, record.args = "%s: %s", (record.msg, _line(exc))
        return log.isEnabledFor(logging.DEBUG)
    return True


logging.getLogger("asyncpg.pool").addFilter(_quiet_pool_floor)


def _count(status: str) -> int:
    """Rows affected, from a command tag such as ``INSERT 0 12`` or ``UPDATE 3``."""
    return int(status.rsplit(" ", 1)[-1])


class PostgresConnection:
    """The store's connection, schema and shared plumbing (the base of
    :class:`~crawlfleet.frontier.postgres.PostgresFrontier`)."""

    def __init__(
        self,
        dsn: str,
        *,
        clock: Callable[[], float] = time.time,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        pacing: PacingConfig | None = None,
        create: bool = True,
        outage_grace: float = 0.0,
    ) -> None:
        self.dsn = dsn
        #: seconds a call waits for a store that is away (reconnecting with capped, jittered
        #: backoff) before it raises StoreUnavailable; 0: at once (the one-shot commands)
        self.outage_grace = outage_grace
        self._down_since: float | None = None  # time.monotonic() the store was first found away
        self._down_tries = 0
        self.create = create  # False: open only an existing schema (read-only commands)
        self.clock = clock
        self.pacing = pacing or PacingConfig()
        self.schema = schema
        self.min_size = min_size
        self.max_size = max_size
        self._pool: Any = None  # asyncpg.Pool
        self._job_ids: dict[str, int] = {}
        self._job_defaults: dict[int, JobDefaults] = {}
        #: domains this process knows the store has (their rows and lanes are not inserted
        #: again); bounded: a broad crawl meets millions, and a forgotten one is only inserted
        #: again (ON CONFLICT DO NOTHING)
        self._known_domains: BoundedSet[str] = BoundedSet(KNOWN_DOMAINS)
        #: one NOTIFY channel per schema: fleets in other schemas do not wake each other
        self._channel = f"crawlfleet_work:{schema or ''}"
        self._listener: Any = None  # asyncpg.Connection that LISTENs (see wait_for_work)
        self._work = asyncio.Event()
        self._maintained_at = -UPKEEP_EVERY  # time.monotonic() of the last maintain()
        #: requests this process added since its last maintain(): the server's counters of them
        #: reach pg_stat only a second or more after their transactions (a bulk submit, then
        #: maintain() at once, would see nothing new)
        self._added_since_upkeep = 0

    def __repr__(self) -> str:
        where = mask_credentials(self.dsn) + (f" schema={self.schema}" if self.schema else "")
        return f"<PostgresFrontier {where}>"

    # -- plumbing -------------------------------------------------------------------------------

    def _where(self) -> str:
        return mask_credentials(self.dsn)

    def _settings(self) -> dict[str, str]:
        settings = {"search_path": _quote_ident(self.schema)} if self.schema else {}
        # A worker frozen inside a transaction (SIGSTOP, a stalled VM) would hold its row locks
        # and block every other worker; the server ends such a session instead. Transactions
        # here never sit idle between their statements for more than milliseconds.
        settings["idle_in_transaction_session_timeout"] = str(IDLE_IN_TRANSACTION_MS)
        return settings

    async def open(self) -> None:
        settings = self._settings()
        while True:
            try:
                self._pool = await asyncpg.create_pool(
                    self.dsn,
                    min_size=self.min_size,
                    max_size=self.max_size,
                    server_settings=settings,
                    reset=_reset,
                )
                self._store_back()
                break
            except _AWAY as exc:
                if not await self._store_away(exc):
                    where = self._where()
                    raise StoreUnavailable(
                        f"cannot connect to queue store {where}: {_line(exc)}{self._gave_up()}"
                    ) from exc
            except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                where = self._where()
                raise StoreError(f"cannot connect to queue store {where}: {_line(exc)}") from exc
        try:
            if not self.create and not await self._run(_has_schema, write=False):
                where = self._where() + (f" schema {self.schema}" if self.schema else "")
                raise UsageError(f"no queue store in {where} (crawlfleet db upgrade creates one)")
            await self.upgrade()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await listener.close(timeout=5)
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, fn: Callable[[Conn], Awaitable[T]], *, write: bool = True) -> T:
        """Run ``fn(conn)`` in one transaction (retried on deadlock; on a store that is away,
        retried on a new connection for up to ``outage_grace`` seconds), then StoreError."""
        attempt = 0
        while True:
            if self._pool is None:
                raise StoreError("the PostgreSQL frontier is not open")
            try:
                result = await self._once(fn, write)
            except _RETRYABLE:
                attempt += 1
                if attempt == _TX_ATTEMPTS:
                    raise
                await asyncio.sleep(0.01 * attempt)
                continue
            except _AWAY as exc:
                if self._pool is None or not await self._store_away(exc):
                    where = self._where()
                    raise StoreUnavailable(
                        f"queue store {where} failed: {_line(exc)}{self._gave_up()}"
                    ) from exc
                continue
            self._store_back()
            return result

    async def _once(self, fn: Callable[[Conn], Awaitable[T]], write: bool) -> T:
        async with self._pool.acquire() as conn:
            if not write:
                return await fn(conn)
            async with conn.transaction():
                return await fn(conn)

    async def _store_away(self, exc: BaseException) -> bool:
        """The store is away (``exc`` says how): wait a backoff and return True to try again,
        or False once ``outage_grace`` is spent. One line when an outage begins, whichever of
        this process's calls meets it first."""
        now = time.monotonic()
        if self._down_since is None:
            self._down_since, self._down_tries = now, 0
            if self.outage_grace > 0:
                log.warning(
                    "queue store %s is away (%s): reconnecting for up to %.0f s",
                    self._where(),
                    _line(exc),
                    self.outage_grace,
                )
        if now - self._down_since >= self.outage_grace:
            return False
        self._down_tries += 1
        pause = backoff(
            self._down_tries, base=OUTAGE_BACKOFF_BASE, cap=OUTAGE_BACKOFF_CAP, rand=random.random()
        )
        await asyncio.sleep(min(pause, self._down_since + self.outage_grace - now))
        return True

    def _store_back(self) -> None:
        """A call went through: an outage under way is over (one line saying how long)."""
        if self._down_since is None:
            return
        away, self._down_since = time.monotonic() - self._down_since, None
        if self.outage_grace > 0:
            log.warning("queue store %s is back after %.1f s away", self._where(), away)

    def _gave_up(self) -> str:
        if self.outage_grace <= 0 or self._down_since is None:
            return ""
        return f" (away for {time.monotonic() - self._down_since:.0f} s: giving up)"

    async def upgrade(self) -> int:
        """Apply pending schema migrations; returns the schema version. Safe to run concurrently."""

        async def tx(conn: Conn) -> int:
            await conn.execute(Q["advisory_lock"], self.schema or "")
            if self.schema:
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote_ident(self.schema)}")
                await conn.execute(f"SET LOCAL search_path TO {_quote_ident(self.schema)}")
            await conn.execute(Q["meta_table"])
            applied = {row[0] for row in await conn.fetch(Q["applied_versions"])}
            for version, name, sql in MIGRATIONS:
                if version not in applied:
                    await conn.execute(sql)
                    await conn.execute(Q["record_version"], version, name, self.clock())
            current: int = await conn.fetchval(Q["schema_version"])
            return current

        return await self._run(tx)

    async def _upsert_domain(self, conn: Conn, domain: str, limits: DomainLimits) -> None:
        before = await conn.fetchval(
            Q["upsert_domain"], domain, limits.max_in_flight, limits.min_delay
        )
        raised = before is None or limits.max_in_flight > before
        start = self.pacing.start_concurrency
        await conn.execute(
            Q["limit_lanes"], domain, limits.max_in_flight, raised, limits.min_delay, start
        )

    def _job_from_row(self, row: Sequence[Any]) -> Job:
        job, defaults = job_from_row(row)
        self._job_ids[job.name] = job.id
        self._job_defaults[job.id] = defaults
        return job

    async def get_job(self, name: str) -> Job | None:
        row = await self._run(lambda c: c.fetchrow(Q["get_job"], name), write=False)
        return None if row is None else self._job_from_row(row)

    async def _job_id(self, name: str) -> int:
        if name not in self._job_ids and await self.get_job(name) is None:
            raise StoreError(f"no job named {name!r} in {self._where()}")
        return self._job_ids[name]

    async def _all(self, name: str, *args: Any) -> list[Row]:
        """Every row of the named query (arguments by position: ``$N``), outside a transaction."""
        rows: list[Row] = await self._run(lambda c: c.fetch(Q[name], *args), write=False)
        return rows

    async def _one(self, name: str, *args: Any) -> Row | None:
        row: Row | None = await self._run(lambda c: c.fetchrow(Q[name], *args), write=False)
        return row

    async def _notify(self, conn: Conn) -> None:
        """Wake idle workers when this transaction commits (LISTEN/NOTIFY instead of polling):
        it queued requests, freed slots or changed what may be leased."""
        await conn.execute(Q["notify"], self._channel)

    def _know_domains(self, domains: Iterable[str]) -> None:
        for domain in domains:
            self._known_domains.add(domain)


async def _has_schema(conn: Conn) -> bool:
    return bool(await conn.fetchval("SELECT to_regclass('crawlfleet_meta') IS NOT NULL"))


async def _reset(conn: Conn) -> None:
    """Ready a connection for reuse. Nothing here keeps session state (the advisory lock is per
    transaction, settings are SET LOCAL), so asyncpg's full reset, one more round trip on every
    release, is not needed: only a transaction left open by a cancelled caller is rolled back."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


def _refs(leases: Sequence[LeaseRef]) -> tuple[list[int], list[int]]:
    """Ids and tokens as two arrays, in id order (one lock order for every transaction)."""
    ordered = sorted(leases, key=lambda r: r.id)
    return [r.id for r in ordered], [r.token for r in ordered]


def _json_rows(rows: Sequence[tuple[Any, ...]]) -> str:
    """``request_values`` rows (a trap's with its error after them) as the JSON array of arrays
    the request inserts take apart on the server, the fingerprint and body as hex: one text
    parameter for the whole batch."""
    out = []
    for row in rows:
        body = row[8]
        out.append((row[0].hex(), *row[1:8], None if body is None else body.hex(), *row[9:]))
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _columns(rows: Iterable[Sequence[Any]], width: int = 5) -> list[list[Any]]:
    """Rows to columns, the shape ``unnest($1::t[], $2::t[], …)`` takes (rows of ``width``
    values each: a row of another width is an error)."""
    cols = [list(col) for col in zip(*rows, strict=True)]
    if not cols:
        return [[] for _ in range(width)]
    if len(cols) != width:
        raise ValueError(f"rows of {len(cols)} values, not {width}")
    return cols


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _line(exc: BaseException) -> str:
    """One line about ``exc``: its class and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
