"""Shared fixtures: a fake clock and the frontier backends every contract test runs against."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from crawlfleet.frontier.base import Frontier

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


BACKENDS = ["sqlite"]


async def make_frontier(backend: str, tmp_path: Path, clock: FakeClock) -> Frontier:
    if backend == "sqlite":
        from crawlfleet.frontier.sqlite import SQLiteFrontier

        return SQLiteFrontier(tmp_path / "queue.db", clock=clock)
    raise ValueError(backend)


@pytest.fixture(params=BACKENDS)
async def frontier(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Frontier]:
    store = await make_frontier(request.param, tmp_path, clock)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
