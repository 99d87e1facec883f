"""How often ``crawl``'s coordinator reads the job's counts (a read counts every request of the
job): once a second at most, and never more than ``STATS_SHARE`` of the time."""

from __future__ import annotations

from typing import Any

from crawlfleet.local import runner
from crawlfleet.model import JobState, JobStats


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Store:
    """Answers ``stats`` after ``took`` seconds of the fake clock."""

    def __init__(self, clock: Clock, took: float) -> None:
        self.clock, self.took, self.reads = clock, took, 0

    async def stats(self, job: str) -> JobStats:
        self.reads += 1
        self.clock.now += self.took
        return stats(job)


def stats(job: str) -> JobStats:
    return JobStats(job=job, state=JobState.RUNNING, queued=1, waiting=0, leased=0, done=0, dead=0)


def counts(clock: Clock, took: float) -> tuple[Any, Store]:
    store = Store(clock, took)
    return runner._Counts(store, "job", stats("job"), clock=clock), store  # type: ignore[arg-type]


async def test_counts_are_read_once_a_second_at_most() -> None:
    clock = Clock()
    c, store = counts(clock, took=0.001)
    reads = 0
    for _ in range(40):  # ten seconds of polls, POLL apart
        clock.now += runner.POLL
        if c.due():
            await c.read()
            reads += 1
    assert store.reads == reads
    assert 9 <= reads <= 10


async def test_a_slow_read_is_repeated_only_after_fifty_times_as_long() -> None:
    clock = Clock()
    c, _ = counts(clock, took=0.2)  # a big job: its counts take 0.2 s to read
    await c.read()
    clock.now += 9.9
    assert not c.due()
    clock.now += 0.11  # 0.2 / STATS_SHARE = 10 s after the read
    assert c.due()
