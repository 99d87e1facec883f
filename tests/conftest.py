"""Shared fixtures: a fake clock and the frontier backends every contract test runs against."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from hypothesis import settings

from crawlfleet.frontier.ports import Frontier

# property tests judge results, not speed: a busy machine (CI shares its cores) must not turn a
# slow example into a failure
settings.register_profile("crawlfleet", deadline=None)
settings.load_profile("crawlfleet")

#: PostgreSQL server the fleet tests use (each test run gets its own database, dropped after)
PG_DSN = os.environ.get("CRAWLFLEET_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass
class FakeClock:
    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


BACKENDS = ["sqlite", "postgres"]


class _PgTestDatabase:
    """One database per test session (created on first use, dropped at the end); every test
    starts from empty tables. DELETE of a test's few rows takes about a millisecond, where
    TRUNCATE (new files, fsync) takes tens and a fresh schema would migrate every time."""

    def __init__(self, server_dsn: str) -> None:
        self.server_dsn = server_dsn
        self.name = f"crawlfleet_test_{secrets.token_hex(4)}"
        self.dsn = urlunsplit(urlsplit(server_dsn)._replace(path=f"/{self.name}"))
        self._conn: Any = None  # psycopg.Connection to the test database

    def fresh(self) -> str:
        import psycopg

        if self._conn is None:
            with psycopg.connect(self.server_dsn, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{self.name}"')
            self._conn = psycopg.connect(self.dsn, autocommit=True)
            self._conn.execute("SET synchronous_commit = off")
        deletes = self._conn.execute(
            "SELECT string_agg(format('DELETE FROM %I.%I', schemaname, tablename), '; '"
            "                  ORDER BY tablename = 'jobs', tablename) FROM pg_tables"
            " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            " AND tablename <> 'crawlfleet_meta'"
        ).fetchone()[0]
        if deletes:
            self._conn.execute(f"BEGIN; {deletes}; COMMIT")
        return self.dsn

    def drop(self) -> None:
        if self._conn is None:
            return
        import psycopg

        self._conn.close()
        with psycopg.connect(self.server_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


PG_TEST_DB = _PgTestDatabase(PG_DSN)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    PG_TEST_DB.drop()


#: The queue contract is about leases, not pacing: its stores open new lanes at their full width
#: (a crawl's lanes start narrow and widen as they do well; tests/contract/test_frontier_pacing
#: and the lanes tests use the default start).
WIDE_START = 1 << 20


async def make_frontier(
    backend: str, tmp_path: Path, clock: FakeClock, *, start: int = WIDE_START
) -> Frontier:
    from crawlfleet.policy.pacing import PacingConfig

    pacing = PacingConfig(start_concurrency=start)
    if backend == "sqlite":
        from crawlfleet.frontier.sqlite import SQLiteFrontier

        return SQLiteFrontier(tmp_path / "queue.db", clock=clock, pacing=pacing)
    if backend == "postgres":
        from crawlfleet.frontier.postgres import PostgresFrontier

        return PostgresFrontier(PG_TEST_DB.fresh(), clock=clock, max_size=4, pacing=pacing)
    raise ValueError(backend)


@pytest.fixture(params=BACKENDS)
async def frontier(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[Frontier]:
    store = await make_frontier(request.param, tmp_path, clock)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
