"""The embedded frontier: one SQLite file in WAL mode, shared by the local worker processes.

Every method runs its statements in one transaction on a dedicated thread (sqlite3 releases the
GIL while SQLite works, so the event loop keeps fetching meanwhile). Write transactions open with
``BEGIN IMMEDIATE``: SQLite then queues writers on ``busy_timeout`` instead of failing a deferred
transaction that tries to upgrade to a writer half way through.

This module: the connection, the schema and its migrations, and what every part of the
store shares; ``queue.py`` the queue verbs, ``frontier.py`` the whole store.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self, TypeVar

from crawlfleet.errors import StoreError, UsageError
from crawlfleet.frontier.common import (
    job_from_row,
)
from crawlfleet.frontier.insights import Row
from crawlfleet.frontier.jobs import JobDefaults
from crawlfleet.frontier.sql import queries
from crawlfleet.model import (
    DomainLimits,
    Job,
)
from crawlfleet.policy.pacing import PacingConfig

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


class SQLiteConnection:
    """The store's connection, schema and shared plumbing (the base of
    :class:`~crawlfleet.frontier.sqlite.SQLiteFrontier`)."""

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

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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

    async def _job_id(self, name: str) -> int:
        if name not in self._job_ids and await self.get_job(name) is None:
            raise StoreError(f"no job named {name!r} in {self.path}")
        return self._job_ids[name]

    async def _all(self, name: str, *args: Any) -> list[Row]:
        """Every row of the named query (arguments by position: ``?`` or ``?N``)."""
        return await self._run(lambda db: db.execute(Q[name], args).fetchall())

    async def _one(self, name: str, *args: Any) -> Row | None:
        row: Row | None = await self._run(lambda db: db.execute(Q[name], args).fetchone())
        return row


def _statements(script: str) -> list[str]:
    """The statements of a migration block (``;`` at a line end ends one; comments dropped)."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";\n") if part.strip().rstrip(";")]
