"""The local worker processes of ``crawl``: started at once, told what to run once the job is
in the store, restarted when they crash, stopped by the coordinator's signals.

* Each worker runs in a session (process group) of its own, so the terminal's Ctrl-C reaches
  the coordinator only, and the coordinator decides: drain (SIGTERM) or exit now (SIGKILL).
* A worker starts importing while the coordinator loads the spider and opens the store; it
  waits for one line on stdin (:meth:`WorkerPool.go`: the jobs to run, the settings
  overrides and the fetcher kinds), then leases. Its stdin stays a pipe from the coordinator:
  end of file means the coordinator is gone, and the worker drains and exits (no crawl goes on
  as an orphan).
* Its stderr comes through the coordinator (``on_line``), so log lines print above the
  progress display instead of through it.
* A worker that stopped itself (exit 3, :class:`~crawlfleet.errors.WorkerStopped`: the store
  refuses its results for a bug, or it cannot run the job, e.g. no Chromium for its browser
  pages) is not restarted: another would fail the same way, and the crawl ends with its error
  (the other workers are stopped: the pages of its kind would wait for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from crawlfleet.errors import WorkerStopped

__all__ = ["LocalWorkers", "WorkerPool", "kinds_for"]

log = logging.getLogger("crawlfleet.pool")

_PIPE = asyncio.subprocess.PIPE


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _nothing() -> None:
    pass


def kinds_for(kinds: Sequence[str], index: int, workers: int, browser_workers: int) -> list[str]:
    """The fetcher kinds worker ``index`` runs, of the ``kinds`` the job needs: all of them in
    every worker, or, with ``browser_workers`` of their own (indexes from ``workers`` on), the
    browser in those alone and the other kinds in the rest."""
    if not browser_workers:
        return list(kinds)
    if index >= workers:
        return ["browser"]
    return [k for k in kinds if k != "browser"] or ["http"]


class LocalWorkers(Protocol):
    """What ``crawl``'s coordinator asks of its local workers: :class:`WorkerPool` (processes)
    or :class:`~crawlfleet.local.inproc.InProcessWorker` (one, in its own process)."""

    n: int
    restarts: int
    on_line: Callable[[str], None]
    on_exit: Callable[[], None]  # a worker ended: the coordinator looks now, not at its next poll

    async def start(self) -> None: ...
    async def go(self, message: Mapping[str, Any]) -> None: ...
    @property
    def stopped_itself(self) -> bool: ...
    @property
    def alive(self) -> int: ...
    def terminate(self) -> int: ...
    def kill(self) -> int: ...
    async def check(self, finished: bool) -> bool: ...
    async def wait(self, timeout: float) -> bool: ...
    async def close(self, timeout: float = 15.0) -> None: ...


class WorkerPool:
    """``n`` ``crawlfleet worker --coordinated`` processes, and ``browser_workers`` more that
    run the job's browser pages alone (see :func:`kinds_for`); ``argv``: the options before the
    ``worker`` command, e.g. ``--config``, ``-v``; ``worker_args``: after it."""

    def __init__(
        self,
        n: int,
        *,
        browser_workers: int = 0,
        argv: Sequence[str] = (),
        worker_args: Sequence[str] = (),
        on_line: Callable[[str], None] | None = None,
        max_restarts: int = 50,
    ) -> None:
        self.workers, self.browser_workers = n, browser_workers
        self.n = n + browser_workers
        self.cmd = [
            sys.executable,
            "-m",
            "crawlfleet",
            *argv,
            "worker",
            "--coordinated",
            *worker_args,
        ]
        self.on_line = on_line or _to_stderr  # where the workers' stderr lines go
        self.on_exit: Callable[[], None] = _nothing  # a worker's stderr closed: it is ending
        self.max_restarts = max_restarts
        self.restarts = 0
        self.procs: list[asyncio.subprocess.Process] = []
        self._readers: list[asyncio.Task[None]] = []
        self._message: Mapping[str, Any] | None = None
        self._host = socket.gethostname()
        self._ids: set[str] = set()
        self.stopping = False

    async def start(self) -> None:
        """Start the processes (they import, then wait for :meth:`go`)."""
        self.procs = [await self._spawn(i) for i in range(self.n)]

    async def _spawn(self, index: int) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            *self.cmd,
            stdin=_PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=_PIPE,
            start_new_session=True,  # the terminal's signals are the coordinator's alone
        )
        self._ids.add(f"{self._host}-{proc.pid}")
        log.debug("started worker %s-%d: %s", self._host, proc.pid, " ".join(self.cmd))
        self._readers.append(asyncio.create_task(self._forward(proc)))
        if self._message is not None:
            await self._send(proc, self._for(index, self._message))
        return proc

    async def _forward(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            self.on_line(line.decode("utf-8", "replace").rstrip("\n"))  # the current one
        with contextlib.suppress(asyncio.CancelledError, ProcessLookupError):
            await proc.wait()
        self.on_exit()

    async def go(self, message: Mapping[str, Any]) -> None:
        """Tell every worker (and every one restarted later) what to run."""
        self._message = message
        for i, proc in enumerate(self.procs):
            await self._send(proc, self._for(i, message))

    def _for(self, index: int, message: Mapping[str, Any]) -> bytes:
        """``message`` as worker ``index`` gets it: with the fetcher kinds of its own."""
        kinds = kinds_for(message.get("kinds", ()), index, self.workers, self.browser_workers)
        return json.dumps({**message, "kinds": kinds}).encode() + b"\n"

    @staticmethod
    async def _send(proc: asyncio.subprocess.Process, data: bytes) -> None:
        if proc.stdin is None or proc.returncode is not None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(data)
            await proc.stdin.drain()

    @property
    def worker_ids(self) -> set[str]:
        """The lease owner names of every worker this pool started (``host-pid``)."""
        return set(self._ids)

    @property
    def stopped_itself(self) -> bool:
        """Whether a worker stopped itself (:class:`~crawlfleet.errors.WorkerStopped`: it cannot
        run the job, or the store refuses its results): the crawl cannot finish as it is."""
        return any(p.returncode == WorkerStopped.exit_code for p in self.procs)

    @property
    def alive(self) -> int:
        return sum(1 for p in self.procs if p.returncode is None)

    def terminate(self) -> int:
        """SIGTERM to every live worker: no new leases, in-flight work finishes, the rest is
        given back. Returns how many were signalled."""
        self.stopping = True
        return self._signal(signal.SIGTERM, group=False)

    def kill(self) -> int:
        """SIGKILL to every live worker's process group (with anything it started)."""
        self.stopping = True
        return self._signal(signal.SIGKILL, group=True)

    def _signal(self, sig: signal.Signals, *, group: bool) -> int:
        sent = 0
        for proc in self.procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    (os.killpg if group else os.kill)(proc.pid, sig)
                    sent += 1
        return sent

    async def check(self, finished: bool) -> bool:
        """Restart workers that crashed (unless the job is finished or the pool stopping);
        returns True when every worker has exited."""
        alive = 0
        for i, proc in enumerate(self.procs):
            if proc.returncode is None:
                alive += 1
            elif (
                proc.returncode not in (0, WorkerStopped.exit_code)  # it stopped itself: why
                and not (finished or self.stopping)
                and self.restarts < (self.max_restarts)
            ):
                self.restarts += 1
                log.warning(
                    "worker %d exited with code %s: starting another (%d of at most %d)",
                    proc.pid,
                    proc.returncode,
                    self.restarts,
                    self.max_restarts,
                )
                self.procs[i] = await self._spawn(i)
                alive += 1
        return alive == 0

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every worker to exit; returns whether they did."""
        waits = [asyncio.ensure_future(p.wait()) for p in self.procs]
        if not waits:
            return True
        _, pending = await asyncio.wait(waits, timeout=timeout)
        for w in pending:
            w.cancel()
        return not pending

    async def close(self, timeout: float = 15.0) -> None:
        """End the pool: stdin closed (a worker waiting for :meth:`go` exits, a running one
        drains), then SIGTERM and at last SIGKILL for any still there after ``timeout``."""
        self.stopping = True
        for proc in self.procs:
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()
        if not await self.wait(timeout / 2):
            self.terminate()
            if not await self.wait(timeout / 2):
                self.kill()
                await self.wait(5.0)
        for reader in self._readers:  # the last lines a worker wrote still come through
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(reader, 2.0)
