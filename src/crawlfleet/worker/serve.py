"""One worker from settings to its end: the fd limit raised, the store opened, the
:class:`~crawlfleet.worker.loops.Worker` made, the store closed.

``crawlfleet worker`` (a process of its own) and ``crawl``'s one worker (the coordinator's own
event loop) both open their worker here; what differs between them (signal handlers, the
coordinator's end of stdin, a metrics endpoint) is what they do inside the ``async with``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from crawlfleet.errors import WorkerStopped

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.worker.loops import Worker

__all__ = ["open_worker"]

log = logging.getLogger("crawlfleet.worker")


@asynccontextmanager
async def open_worker(
    s: Settings,
    *,
    jobs: Sequence[str] | None,
    kinds: tuple[str, ...],
    exit_when_finished: bool,
    worker_id: str | None = None,
    spiders: str | None = None,
    own_crawl: bool = False,
) -> AsyncIterator[Worker]:
    """A worker over ``s.queue`` for the ``async with`` (the caller runs it); its store is
    closed at the end. ``own_crawl``: the worker of a ``crawl``, which cannot finish without
    it, so a job whose spider did not load here ends it with
    :class:`~crawlfleet.errors.WorkerStopped`."""
    from crawlfleet.frontier import open_frontier
    from crawlfleet.worker.fds import raise_nofile
    from crawlfleet.worker.loops import Worker

    low = raise_nofile(s.concurrency, s.max_idle_connections)
    if low is not None:
        log.warning("%s", low)
    store = open_frontier(
        s.queue, pacing=s.pacing_config(), outage_grace=s.worker.store_outage_grace
    )
    await store.open()
    try:
        worker = Worker(
            store,
            s,
            worker_id=worker_id,
            jobs=list(jobs) if jobs is not None else None,
            exit_when_finished=exit_when_finished,
            spiders=spiders,
            kinds=kinds,
            routes=s.routes.pools,  # [[routes.pool]]: the proxies behind the routes' ids
        )
        yield worker
        unfit = [f"{name}: {why}" for name, why in worker.contexts.unloadable.items()]
        if own_crawl and unfit:
            raise WorkerStopped(f"this worker cannot run job {'; '.join(unfit)}")
    finally:
        await store.close()
