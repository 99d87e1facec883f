"""``crawl``'s one worker in the coordinator's own process (the default with ``-w 1`` and no
browser workers; ``--worker-process`` gives it a process of its own).

The worker is the same :class:`~crawlfleet.worker.loops.Worker` a ``crawlfleet worker``
process runs, on the coordinator's event loop with a store connection of its own: one
interpreter instead of two (one start-up, one set of imports, no second process polling the
store), which is what a crawl of a few thousand pages mostly paid for. It behaves as the
:class:`~crawlfleet.local.pool.WorkerPool` of one process does:

* it is told what to run by :meth:`InProcessWorker.go` (the same message a worker process
  reads on its stdin) and leases from then on;
* a worker that raised (a bug) is started again, up to ``max_restarts`` times; one that stopped
  itself (:class:`~crawlfleet.errors.WorkerStopped`: no Chromium for its browser pages, a store
  that refuses its results) is not, and the crawl ends with its error;
* the coordinator's first stop signal drains it (:meth:`terminate`: no new leases, in-flight
  requests finish, the rest is given back), the second cancels it (:meth:`kill`: its leases
  expire after ``lease_ttl``);
* its log lines (and the coordinator's, while it runs) reach the crawl's display through
  ``on_line``, as a worker process's stderr does.

What a process of its own still gives: a worker that dies hard (killed for its memory, a crash
in a C library) takes the crawl with it here; the job stays in the store and the next
``crawl`` resumes it; with ``--worker-process`` the worker is a process of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from crawlfleet.errors import CrawlfleetError, WorkerStopped

if TYPE_CHECKING:
    from crawlfleet.worker.loops import Worker

__all__ = ["InProcessWorker"]

log = logging.getLogger("crawlfleet.pool")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _nothing() -> None:
    pass


class InProcessWorker:
    """One worker on the running event loop, with :class:`~crawlfleet.local.pool.WorkerPool`'s
    interface; ``config``: the settings file the worker reads (``--config``), under the
    overrides of :meth:`go`."""

    workers, browser_workers, n = 1, 0, 1

    def __init__(self, config: str | None = None, *, max_restarts: int = 50) -> None:
        self.config = config
        self.on_line: Callable[[str], None] = _to_stderr
        #: called when the worker ends (the coordinator looks at once instead of at its next poll)
        self.on_exit: Callable[[], None] = _nothing
        self.max_restarts = max_restarts
        self.restarts = 0
        self.stopping = False
        self._message: Mapping[str, Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._worker: Worker | None = None
        self._stopped_itself = False
        self._logs: _Lines | None = None

    async def start(self) -> None:
        """Nothing to start before :meth:`go` (a process would import meanwhile)."""

    async def go(self, message: Mapping[str, Any]) -> None:
        """Start leasing what ``message`` says (``jobs``, ``overrides``, ``kinds``)."""
        self._message = message
        if self._logs is None:
            self._logs = _Lines(self)
        self._task = asyncio.create_task(self._run(message), name="worker")
        self._task.add_done_callback(self._ended)

    def _ended(self, _: asyncio.Task[None]) -> None:
        self.on_exit()

    async def _run(self, message: Mapping[str, Any]) -> None:
        from crawlfleet.config import load_settings
        from crawlfleet.worker.serve import open_worker

        s = load_settings(self.config, dict(message.get("overrides") or {})).check()
        kinds = tuple(message.get("kinds") or ("http",))
        opening = open_worker(
            s, jobs=message["jobs"], kinds=kinds, exit_when_finished=True, own_crawl=True
        )
        async with opening as worker:
            self._worker = worker
            try:
                if self.stopping:
                    worker.stop()
                await worker.run()
            finally:
                self._worker = None

    # -- what the coordinator asks of its workers ---------------------------------------------

    @property
    def stopped_itself(self) -> bool:
        return self._stopped_itself

    @property
    def alive(self) -> int:
        return int(self._task is not None and not self._task.done())

    def terminate(self) -> int:
        """Drain: no new leases, in-flight requests finish, the rest is given back."""
        self.stopping = True
        if self._worker is not None and self.alive:
            self._worker.stop()
            return 1
        return 0

    def kill(self) -> int:
        """Stop at once: the worker's leases expire after ``lease_ttl`` and are rescued."""
        self.stopping = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            return 1
        return 0

    async def check(self, finished: bool) -> bool:
        """Start the worker again if it raised (unless the job is finished or the crawl
        stopping); returns True once it has ended."""
        task = self._task
        if task is None or not task.done():
            return task is None
        if task.cancelled():
            return True
        error = task.exception()
        if error is None:
            return True
        if isinstance(error, WorkerStopped):  # another would fail the same way
            if not self._stopped_itself:
                self._stopped_itself = True
                self.on_line(f"error: {error}")
            return True
        if finished or self.stopping or self.restarts >= self.max_restarts:
            return True
        self.restarts += 1
        log.warning(
            "the worker stopped (%s): starting it again (%d of at most %d)",
            error,
            self.restarts,
            self.max_restarts,
            exc_info=None if isinstance(error, CrawlfleetError) else error,  # a bug: its trace
        )
        assert self._message is not None
        self._task = asyncio.create_task(self._run(self._message), name="worker")
        self._task.add_done_callback(self._ended)
        return False

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the worker to end; returns whether it did."""
        if self._task is None:
            return True
        done, _ = await asyncio.wait({self._task}, timeout=timeout)
        return bool(done)

    async def close(self, timeout: float = 15.0) -> None:
        """End the worker: drained (as a worker process whose stdin closed), cancelled if it is
        still there after ``timeout``."""
        self.stopping = True
        try:
            if self._task is not None and not self._task.done():
                self.terminate()
                if not await self.wait(timeout):
                    self._task.cancel()
                    await self.wait(5.0)
            if self._task is not None and self._task.done() and not self._task.cancelled():
                error = self._task.exception()  # retrieved: no "never retrieved" warning
                if error is not None and not isinstance(error, CrawlfleetError):
                    log.debug("the worker ended with %r", error)
        finally:
            if self._logs is not None:
                self._logs.remove()
                self._logs = None


class _Lines(logging.Handler):
    """While the worker runs, the process's log lines go to ``on_line`` (the crawl's display,
    which prints them above its progress bar) instead of the root logger's stream handlers."""

    def __init__(self, owner: InProcessWorker) -> None:
        super().__init__()
        self.owner = owner
        root = logging.getLogger()
        self.replaced = [h for h in root.handlers if type(h) is logging.StreamHandler]
        if self.replaced:
            self.setFormatter(self.replaced[0].formatter)
            self.setLevel(self.replaced[0].level)
        for handler in self.replaced:
            root.removeHandler(handler)
        root.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # a bad format argument: logging's own report, not a crash
            self.handleError(record)
            return
        with contextlib.suppress(Exception):
            self.owner.on_line(line)

    def remove(self) -> None:
        root = logging.getLogger()
        root.removeHandler(self)
        for handler in self.replaced:
            root.addHandler(handler)
