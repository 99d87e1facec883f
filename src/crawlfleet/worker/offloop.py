"""Spider code off the event loop: one thread per worker runs the callbacks, one page at a time.

A callback can do anything: parse a page that costs seconds, loop forever, sleep. On the event
loop that would stop the heartbeats (leases expire and are taken over), the other fetches and
the signal handlers (SIGTERM ignored). In a thread, the loop keeps its turns (the interpreter
switches threads every few milliseconds), so the worker still answers whatever the spider does.

Pages are still parsed one after the other, as on the loop (a spider's state is never touched by
two callbacks at once). Each run has a time budget: the callback itself checks it between items
(:meth:`crawlfleet.extract.JobRuntime.process`); one stuck without yielding is given up by a
watchdog here (``TooComplex``), its thread left to finish alone (a daemon: it never holds up the
process's exit) and a fresh thread takes the next pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from crawlfleet.errors import TooComplex

__all__ = ["OffLoop"]

T = TypeVar("T")
log = logging.getLogger("crawlfleet.worker")

#: seconds between two looks of the watchdog at a running callback
WATCH_EVERY = 0.5
#: seconds past its budget a callback that does not yield is given up
GIVE_UP_AFTER = 1.0
#: seconds an idle thread waits for work before it ends (started again on demand)
IDLE_EXIT = 30.0


@dataclass(eq=False)
class _Run(Generic[T]):
    fn: Callable[[float], T]
    budget: float
    future: asyncio.Future[T]
    loop: asyncio.AbstractEventLoop
    started: float | None = None


@dataclass(eq=False)
class _Thread:
    abandoned: bool = False
    thread: threading.Thread | None = field(default=None, repr=False)


class OffLoop:
    """Run ``fn(deadline)`` in this worker's callback thread; ``deadline`` is
    ``time.monotonic()`` at the start plus the budget."""

    def __init__(self, name: str = "crawlfleet-parse") -> None:
        self.name = name
        self._queue: queue.SimpleQueue[_Run[Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._current: _Thread | None = None
        self.abandoned = 0  # threads given up (stuck in a callback), for logs and tests

    async def run(self, fn: Callable[[float], T], budget: float) -> T:
        loop = asyncio.get_running_loop()
        run: _Run[T] = _Run(fn, budget, loop.create_future(), loop)
        self._queue.put(run)
        self._ensure_thread()
        watchdog = loop.call_later(budget + GIVE_UP_AFTER, self._watch, run)
        try:
            return await run.future  # cancelled with its attempt: the thread's answer is dropped
        finally:
            watchdog.cancel()

    def _watch(self, run: _Run[Any]) -> None:
        """Give up a callback still running past its budget (it never yielded); one still
        waiting for its turn is looked at again when its budget could have run out."""
        if run.future.done():
            return
        started = run.started
        left = run.budget + GIVE_UP_AFTER - (time.monotonic() - started if started else 0.0)
        if started is None or left > 0:
            run.loop.call_later(max(left, WATCH_EVERY), self._watch, run)
            return
        self._abandon()
        why = f"the callback ran past {run.budget:g}s without yielding"
        run.future.set_exception(TooComplex(why))

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._current is not None:
                return
            me = _Thread()
            me.thread = threading.Thread(target=self._work, args=(me,), name=self.name, daemon=True)
            self._current = me
            me.thread.start()

    def _abandon(self) -> None:
        with self._lock:
            if self._current is not None:
                self._current.abandoned = True
                self._current = None
            self.abandoned += 1
        log.error("a spider callback is stuck: its thread is left behind, a new one goes on")
        if not self._queue.empty():
            self._ensure_thread()

    def _work(self, me: _Thread) -> None:
        while not me.abandoned:
            try:
                run = self._queue.get(timeout=IDLE_EXIT)
            except queue.Empty:
                with self._lock:
                    if self._current is me and self._queue.empty():
                        self._current = None
                        return
                continue
            run.started = time.monotonic()
            try:
                result = run.fn(run.started + run.budget)
            except BaseException as exc:  # handed to the awaiting coroutine
                _deliver(run, None, exc)
            else:
                _deliver(run, result, None)


def _deliver(run: _Run[Any], result: Any, error: BaseException | None) -> None:
    def settle() -> None:
        if run.future.done():  # given up, or its attempt was cancelled
            return
        if error is not None:
            run.future.set_exception(error)
        else:
            run.future.set_result(result)

    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this any more
        run.loop.call_soon_threadsafe(settle)
