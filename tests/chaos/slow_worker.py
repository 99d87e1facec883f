"""``crawlfleet`` with fault injection for chaos tests: ``python -m tests.chaos.slow_worker ARGS``.

The worker is the real one (same process, event loop, heartbeats, reports); only its HTTP fetch
is wrapped. Environment:

* ``CHAOS_SLOW_MARK`` / ``CHAOS_SLOW_DELAY``: a fetch of a URL containing the mark first waits
  the delay (seconds). The fetcher's own deadline (``fetch_timeout``, which must not exceed the
  lease) cannot make a fetch outlast its lease; this stands in for what can: a stalled proxy,
  a browser page, a slow disk before the report.
* ``CHAOS_GRACE``: the worker's SIGTERM grace period in seconds (the CLI keeps the default).
* ``CHAOS_REPORT_POISON``: a report to the SQLite store whose records hold this text raises
  (a store bug that refuses a batch); the worker must report the rest and go on.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from crawlfleet.cli import main
from crawlfleet.fetch import http
from crawlfleet.worker import loops as worker


def _install() -> None:
    mark = os.environ.get("CHAOS_SLOW_MARK")
    delay = float(os.environ.get("CHAOS_SLOW_DELAY", "0"))
    if mark:
        fetch = http.HttpClient.fetch

        async def slow_fetch(self: http.HttpClient, url: str, **kw: Any) -> http.FetchResult:
            if mark in url:
                await asyncio.sleep(delay)
            return await fetch(self, url, **kw)

        http.HttpClient.fetch = slow_fetch  # type: ignore[method-assign]
    poison = os.environ.get("CHAOS_REPORT_POISON")
    if poison:
        _poison_reports(poison)
    grace = os.environ.get("CHAOS_GRACE")
    if grace:
        init = worker.Worker.__init__

        def init_with_grace(self: worker.Worker, *args: Any, **kw: Any) -> None:
            kw["grace"] = float(grace)
            init(self, *args, **kw)

        worker.Worker.__init__ = init_with_grace  # type: ignore[method-assign]


def _poison_reports(mark: str) -> None:
    from crawlfleet.frontier.sqlite import SQLiteFrontier

    report = SQLiteFrontier.report

    async def poisoned(self: SQLiteFrontier, who: str, done: Any = (), *a: Any, **kw: Any) -> Any:
        if any(mark in json.dumps(r.data, default=str) for c in done for r in c.records):
            raise ValueError("chaos: the store refused this batch")
        return await report(self, who, done, *a, **kw)

    SQLiteFrontier.report = poisoned  # type: ignore[method-assign]


if __name__ == "__main__":
    _install()
    main(prog_name="crawlfleet")
