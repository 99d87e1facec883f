"""When a worker's finished pages wait for more before they are reported: a report is one store
transaction and one WARC sync, whatever its size."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crawlfleet.config import Settings
from crawlfleet.config.sections import WorkerSettings
from crawlfleet.frontier import open_frontier
from crawlfleet.model import Failure, LeaseRef
from crawlfleet.worker.loops import Worker, _Pending, gathers


def test_a_worker_with_little_in_flight_reports_each_page_at_once() -> None:
    assert not gathers(held=1, pending=1), "a chain of pages"
    assert not gathers(held=8, pending=1), "a polite domain's window"
    assert not gathers(held=16, pending=1)


def test_a_busy_worker_lets_a_report_gather_a_quarter_of_its_window() -> None:
    assert gathers(held=64, pending=1)
    assert gathers(held=64, pending=15)
    assert not gathers(held=64, pending=16), "a quarter of the window is finished: report"
    assert not gathers(held=20, pending=5)


def test_the_gathering_lasts_tens_of_milliseconds_at_most() -> None:
    assert 0.01 <= WorkerSettings.report_interval <= 0.1


async def test_a_gathering_report_goes_once_a_quarter_of_the_window_finished(
    tmp_path: Path,
) -> None:
    """Answers that come fast (304s) finish a whole window within ``report_interval``: the
    report goes when a quarter of it is in, not when the interval has passed."""
    store = open_frontier(f"sqlite:///{tmp_path / 'queue.db'}")
    await store.open()
    try:
        worker = Worker(store, Settings.of(**{"worker.report_interval": 30.0}))
        sent: list[int] = []

        async def flush() -> None:  # what a report carries, instead of sending it
            sent.append(len(worker._pending))
            worker._pending = _Pending()

        worker._flush = flush  # type: ignore[method-assign]
        worker._held = {i: None for i in range(64)}  # type: ignore[misc]
        reporter = asyncio.create_task(worker._report_loop())
        rt: Any = None
        for i in range(15):
            worker._settle(rt, Failure(LeaseRef(i, 1), "x"))
        await asyncio.sleep(0.05)
        assert sent == [], "15 of 64: it gathers"
        worker._settle(rt, Failure(LeaseRef(15, 1), "x"))
        await asyncio.wait_for(_until(lambda: sent == [16]), 5.0)
        reporter.cancel()
    finally:
        await store.close()


async def _until(check: Callable[[], bool]) -> None:
    while not check():
        await asyncio.sleep(0.001)
