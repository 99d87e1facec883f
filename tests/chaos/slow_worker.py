"""``crawlfleet`` with fault injection for chaos tests: ``python -m tests.chaos.slow_worker ARGS``.

The worker is the real one (same process, event loop, heartbeats, reports); only its HTTP fetch
is wrapped. Environment:

* ``CHAOS_SLOW_MARK`` / ``CHAOS_SLOW_DELAY``: a fetch of a URL containing the mark first waits
  the delay (seconds). The fetcher's own deadline (``fetch_timeout``, which must not exceed the
  lease) cannot make a fetch outlast its lease; this stands in for what can: a stalled proxy,
  a browser page, a slow disk before the report.
* ``CHAOS_GRACE``: the worker's SIGTERM grace period in seconds (the CLI keeps the default).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from crawlfleet import worker
from crawlfleet.cli import main
from crawlfleet.fetch import http


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
    grace = os.environ.get("CHAOS_GRACE")
    if grace:
        init = worker.Worker.__init__

        def init_with_grace(self: worker.Worker, *args: Any, **kw: Any) -> None:
            kw["grace"] = float(grace)
            init(self, *args, **kw)

        worker.Worker.__init__ = init_with_grace  # type: ignore[method-assign]


if __name__ == "__main__":
    _install()
    main(prog_name="crawlfleet")
