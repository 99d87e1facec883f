"""A process owning a browser pool, as a worker would, for the tests that watch it from outside.

python tests/integration/browser_worker.py own RUNTIME_DIR URL
    fetches URL once, prints one JSON line saying what it owns (the browser's pid and start
    time, the members of its process group, the driver's pid, the profile directory),
    then waits to be killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

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


if __name__ == "__main__":
    mode, runtime, url = sys.argv[1:]
    if mode != "own":
        raise SystemExit(f"unknown mode {mode!r}: own")
    asyncio.run(own(runtime, url))
