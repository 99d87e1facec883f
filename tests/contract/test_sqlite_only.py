"""What only the SQLite frontier has: its versioned schema (``meta.schema_version``)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from tests.conftest import FakeClock

from crawlfleet.frontier.sql import queries
from crawlfleet.frontier.sqlite import SCHEMA_VERSION, SQLiteFrontier


def version_1_file(path: Path) -> None:
    """A queue file as schema version 1 left it, with a domain already paced."""
    db = sqlite3.connect(path)
    db.executescript(queries("sqlite")["schema"])
    db.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    db.execute(
        "INSERT INTO domains (domain, max_in_flight, min_delay, delay) VALUES ('a.test', 6, 0, 0.5)"
    )
    db.commit()
    db.close()


async def test_open__migrates_a_version_1_file_in_place(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "queue.db"
    version_1_file(path)
    async with SQLiteFrontier(path, clock=clock) as store:
        state = await store.domain_state("a.test")
    assert state is not None
    assert (state.max_in_flight, state.pacing.concurrency, state.pacing.delay) == (6, 6, 0.5)
    with sqlite3.connect(path) as db:
        (version,) = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    assert int(version) == SCHEMA_VERSION > 1


async def test_open__many_processes_opening_one_old_file_migrate_it_once(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "queue.db"
    version_1_file(path)
    stores = [SQLiteFrontier(path, clock=clock) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    await asyncio.gather(*(s.close() for s in stores))
    async with SQLiteFrontier(path, clock=clock) as store:
        assert await store.domain_state("a.test") is not None


async def test_open__a_new_file_is_at_the_current_version(tmp_path: Path, clock: FakeClock) -> None:
    async with SQLiteFrontier(tmp_path / "new.db", clock=clock):
        pass
    with sqlite3.connect(tmp_path / "new.db") as db:
        (version,) = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    assert int(version) == SCHEMA_VERSION
