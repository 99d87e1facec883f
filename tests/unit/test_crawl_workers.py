"""Which fetcher kinds each of ``crawl``'s local workers runs (``--workers``,
``--browser-workers``)."""

from __future__ import annotations

from crawlfleet.local.pool import kinds_for


def test_every_worker_runs_every_kind_by_default() -> None:
    assert [kinds_for(["http", "browser"], i, 2, 0) for i in range(2)] == [["http", "browser"]] * 2
    assert [kinds_for(["http"], i, 3, 0) for i in range(3)] == [["http"]] * 3


def test_browser_workers_run_the_browser_alone_and_the_others_the_rest() -> None:
    kinds = [kinds_for(["http", "browser"], i, 3, 2) for i in range(5)]
    assert kinds == [["http"], ["http"], ["http"], ["browser"], ["browser"]]
    # a job that needs no browser: the browser workers lease nothing, the others go on
    assert [kinds_for(["http"], i, 1, 1) for i in range(2)] == [["http"], ["browser"]]
