"""A process owning a browser pool, as a worker would, for the tests that watch it from outside.

python tests/integration/browser_worker.py own RUNTIME_DIR URL
    fetches URL once, prints one JSON line saying what it owns (the browser's pid and start
    time, the members of its process group, the driver's pid, the profile directory),
    then waits to be killed;
python tests/integration/browser_worker.py crawl RUNTIME_DIR CONTEXTS BUDGET < urls
    fetches every URL read from stdin with CONTEXTS pages in flight and a memory budget
    of BUDGET bytes, then prints the pool's statistics as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from crawlfleet.fetch.browser import BrowserFetcher, BrowserSettings, procs

SEEDS = frozenset({"127.0.0.1"})


async def own(runtime: str, url: str) -> None:
    fetcher = BrowserFetcher(
        BrowserSettings(contexts=1, runtime_dir=runtime, private_ok_hosts=SEEDS)
    )
    await fetcher.start()
    await fetcher.render(url)
    pid = fetcher.pool.browser_pid
    assert pid is not None
    browser = procs.read_proc(pid)
    assert browser is not None
    owned = {
        "browser": pid,
        "start": browser.start,
        "members": [p.pid for p in procs.browser_group(pid, browser.start)],
        "driver": [p.pid for p in procs.all_procs() if p.ppid == os.getpid()],
        "profile": procs.profile_dir(pid),
    }
    print(json.dumps(owned), flush=True)
    await asyncio.Event().wait()


async def crawl(runtime: str, contexts: int, budget: int, urls: list[str]) -> None:
    settings = BrowserSettings(
        contexts=contexts,
        pages_per_context=100_000,  # only the memory budget keeps the browser in check
        memory_budget=budget,
        runtime_dir=runtime,
        private_ok_hosts=SEEDS,
    )
    queue = list(reversed(urls))
    async with BrowserFetcher(settings) as fetcher:

        async def worker() -> None:
            while queue:
                await fetcher.render(queue.pop(), wait_for="[data-ready]")

        await asyncio.gather(*(worker() for _ in range(contexts)))
        stats = fetcher.pool.stats
        out: dict[str, Any] = {
            "pages": stats.pages,
            "launches": stats.launches,
            "restarts": dict(stats.restarts),
            "contexts_closed": dict(stats.contexts_closed),
            "peak_rss": stats.peak_rss,
            "peak_anon": stats.peak_anon,
            "contexts_limit": stats.contexts_limit,
            "admission_waits": stats.admission_waits,
        }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    mode, runtime, *rest = sys.argv[1:]
    if mode == "own":
        asyncio.run(own(runtime, rest[0]))
    else:
        lines = [line.strip() for line in sys.stdin if line.strip()]
        asyncio.run(crawl(runtime, int(rest[0]), int(rest[1]), lines))
