"""When a worker's finished pages wait for more before they are reported: a report is one store
transaction and one WARC sync, whatever its size."""

from __future__ import annotations

from crawlfleet.config.sections import WorkerSettings
from crawlfleet.worker.loops import gathers


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
