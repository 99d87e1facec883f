"""A worker: the loops that lease requests, run their attempts and report them, and nothing else.

One asyncio process. The lease loop and the reporter take leases from the store; each lease runs
as one attempt through :class:`crawlfleet.attempt.Pipeline` (pace slot → robots gate → fetch →
snapshot → classify → parse → verdict); the reporter carries the verdicts back in batched
transactions, after the WARC data of the batch is durable (snapshot before ack), and leases
again in the same transaction. The heartbeat keeps held leases alive. Only caches live here
(:mod:`crawlfleet.jobs`); a worker can die at any moment and lose nothing but time.

A fourth loop reports the worker's counters and gauges (:class:`crawlfleet.metrics.
WorkerMetrics`, an observer of its events) to the store every ``stats_every`` seconds, and once
more when it stops: the fleet's totals are the sums of these rows (``serve``, ``status``). A
fifth keeps the runs' data quality and delivers the outbox (:mod:`crawlfleet.notify`).

SIGTERM: stop leasing, let in-flight attempts finish within ``grace`` seconds, give the rest back
(``release``), flush, exit. A second SIGTERM stops at once (leases then expire and are rescued),
but only when it comes :data:`~crawlfleet.policy.stopping.STOP_GRACE` seconds or more after the
first: a supervisor signalling the whole group sends a worker its own SIGTERM beside the one
``crawl`` forwards, and that stop stays graceful. A second Ctrl-C (SIGINT) stops at once.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field

from crawlfleet.config import Settings
from crawlfleet.errors import RawStoreUnavailable, StoreError, WorkerStopped
from crawlfleet.events import EventBus, Leased, LeasesLost
from crawlfleet.frontier.ports import Frontier, WorkerStats
from crawlfleet.frontier.upkeep import UPKEEP_EVERY
from crawlfleet.model import KINDS, Completion, Failure, JobState, Lease, LeaseRef
from crawlfleet.monitor import metrics
from crawlfleet.policy.stopping import Stop, StopSignals
from crawlfleet.routes.identities import Identities
from crawlfleet.routes.pools import RoutesConfig
from crawlfleet.urls import mask_credentials
from crawlfleet.worker.attempt import GiveBack, Pipeline
from crawlfleet.worker.extract import JobRuntime
from crawlfleet.worker.faults import has_room, local_fault
from crawlfleet.worker.ids import default_worker_id
from crawlfleet.worker.jobs import JobContexts

log = logging.getLogger("crawlfleet.worker")

#: seconds a worker that skips unloadable jobs reuses its list of job names
JOB_LIST_TTL = 1.0
#: most seconds an idle worker waits before it looks again (retries and paced lanes come due)
#: (below the store's lease horizon, ``PacingConfig.lease_horizon``: a paced lane's next
#: start slots are leased before they are due)
IDLE_WAIT = 0.15
#: least seconds between two leases of an idle worker (many idle workers woken at once)
IDLE_LEASE_GAP = 0.01
#: least seconds before a report the store could not take is tried again
REPORT_RETRY = 1.0
#: a worker holding more leases than this lets a small report gather for ``report_interval``
#: (a report is a store transaction and a WARC fsync: their cost is per report, not per page)
GATHER_ABOVE = 16
#: results in a row the store refused for a bug (not an outage) before the worker stops itself
REFUSALS_TO_STOP = 3
#: seconds between two looks of a worker stopped by a local fault (disk full, raw store away)
FAULT_PROBE_EVERY = 2.0


@dataclass
class _Pending:
    done: list[tuple[Completion, JobRuntime]] = field(default_factory=list)
    failed: list[tuple[Failure, JobRuntime]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.done) + len(self.failed)


class Worker:
    """Run leases of the named jobs (or of every running job) until stopped or finished.

    ``spiders`` (a directory of spider files or a package of spider modules) is where this
    worker looks for a job's spider, by name; without it, the path stored with the job is used.
    A job whose spider cannot be loaded is reported once and never leased again by this worker.
    """

    def __init__(
        self,
        frontier: Frontier,
        settings: Settings,
        *,
        worker_id: str | None = None,
        jobs: Sequence[str] | None = None,
        exit_when_finished: bool = False,
        grace: float = 10.0,
        spiders: str | None = None,
        kinds: Sequence[str] = ("http",),
        events: EventBus | None = None,
        routes: RoutesConfig | None = None,
    ) -> None:
        self.frontier = frontier
        self.settings = settings.check()
        self.worker_id = worker_id or default_worker_id()
        self.jobs = list(jobs) if jobs is not None else None
        self.exit_when_finished = exit_when_finished
        self.grace = grace
        self.kinds = tuple(k for k in KINDS if k in kinds)
        self.events = events or EventBus()
        self.metrics = metrics.WorkerMetrics()
        self.events.subscribe(self.metrics.observe)
        self.started_at = time.time()
        self.contexts = JobContexts(
            frontier,
            self.settings,
            worker_id=self.worker_id,
            spiders=spiders,
            kinds=self.kinds,
            routes=routes,
        )
        self.metrics.browser = self.contexts.browser_stats
        self.identities = Identities(frontier, user_agent=self.settings.user_agent, routes=routes)
        self.pipeline = Pipeline(self.settings, self.events, identities=self.identities)
        self._job_names: tuple[float, list[str]] = (-JOB_LIST_TTL, [])
        self._held: dict[int, Lease] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._releases: set[asyncio.Future[set[int]]] = set()  # give-backs on their way
        self._task_of: dict[int, asyncio.Task[None]] = {}  # lease id -> its handler
        self._pending = _Pending()
        self._has_pending = asyncio.Event()  # wakes the reporter
        self._gathered = asyncio.Event()  # a gathering report has enough results: it goes now
        self._reported = asyncio.Event()  # set after every report (and its leases) went through
        self._reporting = 0  # reports on their way to the store right now
        self._asking = 0  # leases asked for in store calls on their way
        self._stopping = asyncio.Event()
        self._signals = StopSignals()  # what a repeated stop signal means
        self._refused_in_row = 0  # results the store refused for a bug since the last it took
        self._fatal: WorkerStopped | None = None  # why this worker stopped itself
        self._fault: str | None = None  # the local fault (disk full) it waits out, if any
        self._fault_raw = False  # that fault is its raw store's (away), not its disk's
        self._fault_since = 0.0
        self._last_pages = (time.monotonic(), 0.0)  # for the pages/s of a report

    # -- lifecycle ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop leasing and drain (what SIGTERM does)."""
        self._stopping.set()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._on_signal, False)
        loop.add_signal_handler(signal.SIGINT, self._on_signal, True)

    def _on_signal(self, terminal: bool) -> None:
        """``terminal``: SIGINT (Ctrl-C); see the module docstring for a repeated signal."""
        how = self._signals.read(time.monotonic(), terminal=terminal)
        if how is Stop.NOW:
            log.warning("second stop signal: exiting now, leases will expire and be rescued")
            os._exit(1)
        if how is Stop.SAME:
            log.info("stop signal again at once (a supervisor's and crawl's): still finishing")
            return
        log.info("stop signal: no new leases, finishing in-flight work")
        self.stop()

    async def run(self) -> None:
        await self.contexts.raw_store(self.settings)  # a raw store that cannot work fails now
        reporter = asyncio.create_task(self._report_loop(), name="reporter")
        heartbeat = asyncio.create_task(self._heartbeat_loop(), name="heartbeat")
        stats = asyncio.create_task(self._stats_loop(), name="stats")
        upkeep = asyncio.create_task(self._upkeep_loop(), name="upkeep")
        quality = asyncio.create_task(self._quality_loop(), name="quality")
        try:
            await self._lease_loop()
            await self._drain()
        finally:
            # a report on its way is let through: cut off, its batch would be fetched again
            deadline = asyncio.get_running_loop().time() + self.grace
            while self._reporting and (left := deadline - asyncio.get_running_loop().time()) > 0:
                self._reported.clear()  # set again when a report has gone through
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._reported.wait(), left)
            reporter.cancel()
            heartbeat.cancel()
            stats.cancel()
            upkeep.cancel()
            quality.cancel()
            for task in (reporter, heartbeat, stats, upkeep, quality):
                with suppress(asyncio.CancelledError):
                    await task
            await self._flush()
            if self._releases:  # give-backs of cancelled attempts reach the store first
                await asyncio.wait(self._releases, timeout=self.grace)
            await self.contexts.close()
            await self._save_stats(stopped=True)  # the last counts: the fleet's totals are exact
        if self._fatal is not None:
            raise self._fatal

    def _free(self) -> int:
        """Requests this worker may lease now (in flight and being asked for count as taken)."""
        return self.settings.concurrency - len(self._tasks) - self._asking

    async def _lease_loop(self) -> None:
        """Lease when nothing else does: the reporter leases with every report (the slots its
        finished requests free are used again in the same transaction), so this loop matters
        when the worker starts, is idle, or waits for work that others or the clock make
        ready. It never polls blindly: it waits for another worker's change that may make work
        leasable (``wait_for_work``), or at most ``IDLE_WAIT`` for the clock (retries, paced
        lanes, hosts on hold)."""
        last = -IDLE_LEASE_GAP
        while not self._stopping.is_set():
            loop = asyncio.get_running_loop()
            if self._fault is None and (away := self.contexts.raw_fault()) is not None:
                await self._local_fault(away)
            if self._fault is not None:
                await self._wait_out_fault()
                continue
            if self._free() <= 0 or self._pending or self._reporting:
                # full, or a report is on its way and leases for us: wait for it
                self._reported.clear()
                await self._wait(self._reported, IDLE_WAIT)
                continue
            # idle workers woken together must not all lease at once, every time
            gap = last + IDLE_LEASE_GAP - loop.time()
            if gap > 0:
                await asyncio.sleep(gap)
            last = loop.time()
            jobs = await self._lease_jobs()
            asked = min(self._free(), self.settings.lease_batch)
            leases = await self._lease(asked, jobs) if jobs is None or jobs else []
            if len(leases) == asked:
                continue  # a full batch: there may be more right away
            quiet = not self._tasks and not self._pending and not self._reporting
            if self.exit_when_finished and quiet and await self._all_finished():
                with suppress(StoreError):
                    await self.frontier.finish_runs(self.jobs)  # the runs end with the work
                return
            await self._idle()

    async def _lease(self, asked: int, jobs: list[str] | None) -> list[Lease]:
        self._asking += asked
        try:
            leases = await self.frontier.lease(
                self.worker_id, asked, self.settings.lease_ttl, jobs=jobs, kinds=self.kinds
            )
        finally:
            self._asking -= asked
        await self._start_all(leases)
        return leases

    async def _idle(self) -> None:
        """Wait for another worker's change that may make work leasable, a report of ours, the
        clock (``IDLE_WAIT``), or a stop."""
        self._reported.clear()
        waits = {
            asyncio.ensure_future(self.frontier.wait_for_work(IDLE_WAIT)),
            asyncio.ensure_future(self._reported.wait()),
            asyncio.ensure_future(self._stopping.wait()),
        }
        try:
            await asyncio.wait(waits, timeout=IDLE_WAIT, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
            for waiter in waits:
                with suppress(asyncio.CancelledError):
                    await waiter

    async def _wait(self, event: asyncio.Event, timeout: float) -> None:
        stop = asyncio.ensure_future(self._stopping.wait())
        ev = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({stop, ev}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            ev.cancel()

    async def _lease_jobs(self) -> list[str] | None:
        """The jobs to lease from: ``None`` (all) until a job turns out unloadable here."""
        if not self.contexts.unloadable:
            return self.jobs
        names = self.jobs
        if names is None:
            read_at, names = self._job_names
            if time.monotonic() - read_at >= JOB_LIST_TTL:  # pick up newly submitted jobs
                names = [j.name for j in await self.frontier.list_jobs()]
                self._job_names = (time.monotonic(), names)
        return [n for n in names if n not in self.contexts.unloadable]

    async def _all_finished(self) -> bool:
        """No work left here: every job this worker could run is finished or cancelled."""
        for job in await self.frontier.list_jobs():
            if self.jobs is not None and job.name not in self.jobs:
                continue
            if job.name in self.contexts.unloadable or job.state is JobState.CANCELLED:
                continue
            if not await self.frontier.is_finished(job.name):
                return False
        return True

    async def _drain(self) -> None:
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=self.grace)
            for task in late:
                task.cancel()
            for task in late:
                with suppress(asyncio.CancelledError):
                    await task
        await self._flush()
        leftover = [lease.ref for lease in self._held.values()]
        if leftover:
            given_back = await self.frontier.release(leftover)
            log.info("released %d unfinished leases", len(given_back))
            self._held.clear()

    # -- one request ----------------------------------------------------------------------------

    async def _start_all(self, leases: Sequence[Lease]) -> None:
        if leases and self._fault is not None:  # leased by a call on its way when it began
            with suppress(StoreError):
                await self._release([lease.ref for lease in leases])
            return
        if leases:
            self.events.emit(Leased(len(leases)))
        for lease in leases:
            self._start(lease)

    def _start(self, lease: Lease) -> None:
        self._held[lease.id] = lease
        task = asyncio.create_task(self._handle(lease))
        self._tasks.add(task)
        self._task_of[lease.id] = task
        task.add_done_callback(functools.partial(self._task_done, lease.id))

    def _task_done(self, lease_id: int, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._task_of.pop(lease_id, None)

    async def _handle(self, lease: Lease) -> None:
        """Run one lease's attempt. Whatever happens, the lease ends settled, given back, or no
        longer held (it expires and is rescued): an attempt never leaves an ownerless lease
        that the heartbeat would keep alive for ever."""
        try:
            job = await self.contexts.get(lease.job)
            if job is None:
                await self._give_back(lease)
                return
            verdict = await self.pipeline.run(job, lease)
            if isinstance(verdict, GiveBack):
                await self._give_back(lease)
            else:
                self._settle(job.runtime, verdict)
        except StoreError as exc:  # the store is away past its grace: the lease expires
            log.warning("%s: left to expire, the store is away: %s", describe(lease), exc)
            self._held.pop(lease.id, None)
        except Exception as exc:
            if (fault := local_fault(exc)) is not None:  # the machine's fault, not the page's
                await self._abandon(lease)
                await self._local_fault(fault)
                return
            log.error("request handler crashed on %s", describe(lease), exc_info=exc)
            await self._abandon(lease)

    async def _abandon(self, lease: Lease) -> None:
        """Give back the lease of a crashed attempt (the request runs again elsewhere), or
        stop holding it when even that fails (then it expires and is rescued). It is held
        until the give-back returns: a local fault that begins meanwhile (and cancels this
        attempt) gives it back with the others."""
        try:
            await self._release([lease.ref])
        except Exception as exc:  # the lease expires: nothing is lost
            log.warning("could not give back %s: %s", describe(lease), _line(exc))
        finally:
            self._held.pop(lease.id, None)

    def _settle(self, rt: JobRuntime, verdict: Completion | Failure) -> None:
        """Queue the verdict for the reporter (none while a local fault holds: its lease was
        given back, and its links must be sendable again)."""
        if self._fault is not None:
            if isinstance(verdict, Completion) or verdict.discovered:
                rt.forget(verdict.discovered)
            return
        if isinstance(verdict, Completion):
            self._pending.done.append((verdict, rt))
        else:
            self._pending.failed.append((verdict, rt))
        self._has_pending.set()
        if not gathers(len(self._held), len(self._pending)):
            self._gathered.set()

    async def _give_back(self, lease: Lease) -> None:
        """Release ``lease`` unfetched (no attempt used) and stop holding it."""
        try:
            await self._release([lease.ref])
        finally:
            self._held.pop(lease.id, None)

    async def _release(self, refs: list[LeaseRef]) -> None:
        """Give ``refs`` back to the queue. A cancel of the caller (a local fault cancels every
        attempt, a drain cut short) does not cut the store call off: cut off, it may never
        reach the store while its caller has stopped holding the leases, and they would stay
        leased to nobody until they expire."""
        if not refs:
            return
        call = asyncio.ensure_future(self.frontier.release(refs))
        self._releases.add(call)
        call.add_done_callback(_settled_release)
        call.add_done_callback(self._releases.discard)
        await asyncio.shield(call)

    # -- local faults ---------------------------------------------------------------------------

    async def _local_fault(self, exc: OSError | RawStoreUnavailable) -> None:
        """This machine is out of something (disk, files) or its raw store is away: stop
        leasing, give back every lease (unfetched: no attempt counts), say so once, raise the
        alert; :meth:`_wait_out_fault` resumes."""
        if self._fault is not None:
            return
        self._fault, self._fault_since = _line(exc), time.monotonic()
        self._fault_raw = isinstance(exc, RawStoreUnavailable)
        me = asyncio.current_task()
        for task in list(self._tasks):
            if task is not me:
                task.cancel()
        self._pending = _Pending()  # their WARC data may not be durable: fetched again
        self.contexts.forget_sent()  # links of pages never reported must be sent again
        # every lease still held, those of attempts giving theirs back right now included
        refs = [lease.ref for lease in self._held.values()]
        self._held.clear()
        with suppress(StoreError):
            await self._release(refs)
        log.error(
            "worker %s stopped leasing: %s (a fault of this worker's, not of the pages'); "
            "%d leases given back, looking again every %.0f s",
            self.worker_id,
            self._fault,
            len(refs),
            FAULT_PROBE_EVERY,
        )
        await self._save_stats()  # the gauge, and so the alert of status, at once
        await self._notify_fault()

    async def _wait_out_fault(self) -> None:
        """Wait, then look again: room in the WARC directories (a probe written and synced)
        and the raw stores answering (their uploaders ask them). With both, new WARC writers
        (the broken files recovered under the names their records carry) and leasing again."""
        with suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), FAULT_PROBE_EVERY)
        if self._stopping.is_set() or self.contexts.raw_fault() is not None:
            return
        if await asyncio.to_thread(has_room, self.contexts.warc_directories()) is not None:
            return
        recovered = await self.contexts.reopen_warcs()
        # again: a cancelled attempt's parse may have gone on in its thread meanwhile
        self.contexts.forget_sent()
        log.warning(
            "worker %s leases again after %.0f s: %s (%d WARC files closed)",
            self.worker_id,
            time.monotonic() - self._fault_since,
            "its raw store answers" if self._fault_raw else "room on its disk",
            len(recovered),
        )
        self._fault, self._fault_raw = None, False
        await self._save_stats()

    async def _notify_fault(self) -> None:
        """The ``worker_local_fault`` alert through the notification outbox (webhooks, Slack,
        mail: the destinations that take alerts), once per fault."""
        from crawlfleet.frontier.outbox import OutboxEvent
        from crawlfleet.monitor.alerts import MACHINE_FAULT, RAW_STORE_FAULT, Alert
        from crawlfleet.notify.destinations import destinations
        from crawlfleet.notify.payloads import dumps, fleet_alert_body

        dests = tuple(d.id for d in destinations(self.settings) if d.wants("alert"))
        if not dests:
            return
        now = time.time()
        what = RAW_STORE_FAULT if self._fault_raw else MACHINE_FAULT
        alert = Alert("worker_local_fault", self.worker_id, what, 0.0)
        key = f"alert:fleet:worker_local_fault:{self.worker_id}:{int(now)}"
        message = f"{alert.message} ({self._fault})"
        body = fleet_alert_body(
            key, alert.rule, self.worker_id, message, value=what, threshold=0.0, at=now
        )
        event = OutboxEvent(
            key, "alert", dumps(body), dests, None, None, self.settings.notify.tries
        )
        try:
            await self.frontier.emit([event])
        except StoreError as exc:
            log.warning("could not queue the local fault alert: %s", exc)

    # -- reporting ------------------------------------------------------------------------------

    async def _report_loop(self) -> None:
        """Group commit: a finished request is reported as soon as no report is on its way, so
        its slot in the store is free again within one store transaction; while one is on its
        way, the next batch gathers. A busy worker (many leases held) waits for more to finish
        first, until a quarter of what it holds has (:func:`gathers`) or ``report_interval``
        has passed: fewer, larger transactions, and never a window of finished requests
        waiting out the interval (answers that come fast, such as 304s, would finish the whole
        window within it and leave the worker idle until the report)."""
        while True:
            await self._has_pending.wait()
            self._has_pending.clear()
            if gathers(len(self._held), len(self._pending)):
                self._gathered.clear()
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._gathered.wait(), self.settings.report_interval)
            await self._flush()

    async def _flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, _Pending()
        self._reporting += 1  # the batch is neither pending nor settled until this returns
        try:
            await self._report(batch)
        except StoreError as exc:  # the store is away: the batch waits for the next report
            log.warning("could not report %d results: %s; trying again", len(batch), exc)
            self._requeue(batch)  # first: a drain cut short still finds it pending
            await asyncio.sleep(max(self.settings.report_interval, REPORT_RETRY))
        except Exception as exc:  # a verdict the store cannot take must not stop the others
            if (fault := local_fault(exc)) is not None:  # the WARC data could not be made durable
                await self._local_fault(fault)
                return
            log.exception("a report of %d results failed: reporting them one by one", len(batch))
            await self._report_alone(batch)
        finally:
            self._reporting -= 1

    async def _report_alone(self, batch: _Pending) -> None:
        """Report each verdict of a refused batch alone; a page whose output is still refused
        is completed with its records quarantined (``store_refused``) and its links dropped."""
        singles = [_Pending(done=[d]) for d in batch.done]
        singles += [_Pending(failed=[f]) for f in batch.failed]
        for single in singles:
            try:
                await self._report(single)
                continue
            except StoreError:  # the store is away now: this one waits for the next report
                self._requeue(single)
                continue
            except Exception as exc:
                log.error("a result the store refused: %s", _line(exc))
                if not single.done:
                    self._refused(single, exc)  # the lease expires and is rescued
                    continue
                completion, rt = single.done[0]
                single = _Pending(done=[(_contained(completion, exc), rt)])
            try:
                await self._report(single)
            except StoreError:
                self._requeue(single)
            except Exception as exc:  # the lease expires and the request is fetched again
                log.error("a page's completion the store refused: %s", _line(exc))
                self._refused(single, exc)

    def _refused(self, single: _Pending, exc: Exception) -> None:
        """A result the store refused for a bug, even contained: stop holding its lease (it
        expires and is rescued, never heartbeated for ever), and after ``REFUSALS_TO_STOP`` in
        a row stop this worker loudly: the store refuses everything, going on would spin."""
        for completion, _ in single.done:
            self._held.pop(completion.lease.id, None)
        for failure, _ in single.failed:
            self._held.pop(failure.lease.id, None)
        self._refused_in_row += 1
        if self._refused_in_row < REFUSALS_TO_STOP or self._fatal is not None:
            return
        log.error("the store refuses every result of this worker", exc_info=exc)
        self._fatal = WorkerStopped(
            f"worker {self.worker_id} stopped: the store refused {self._refused_in_row} results "
            f"in a row ({_line(exc)}); their leases expire and go back to the queue"
        )
        self.stop()

    def _requeue(self, batch: _Pending) -> None:
        """Put ``batch`` back in front of what is pending, for the next report."""
        self._pending.done[:0] = batch.done
        self._pending.failed[:0] = batch.failed
        self._has_pending.set()

    async def _report(self, batch: _Pending) -> None:
        # snapshot durable before ack: a crash after this point refetches, never loses
        await self.contexts.flush()
        await self.identities.flush()  # cookies learnt, sessions retired: for the whole fleet
        # the slots these requests free are leased again in the same transaction
        stopped = (
            self._stopping.is_set()
            or self._fault is not None
            or self.contexts.raw_fault() is not None  # the lease loop stops for it next
        )
        ask = 0 if stopped else min(self._free(), self.settings.lease_batch)
        jobs = await self._lease_jobs() if ask else None
        if jobs is not None and not jobs:
            ask = 0
        self._asking += ask
        try:
            settled = await self.frontier.report(
                self.worker_id,
                [c for c, _ in batch.done],
                [f for f, _ in batch.failed],
                lease=ask,
                ttl=self.settings.lease_ttl,
                jobs=jobs,
                kinds=self.kinds,
            )
        finally:
            self._asking -= ask
        refused = 0
        for completion, rt in batch.done:
            if completion.lease.id not in settled.completed:
                rt.forget(completion.discovered)
                refused += 1
            elif completion.content_hash is not None:
                # parsed only once the store took the page: were a refused (fenced) page
                # taken as parsed, skip_duplicate_content would lose its records
                rt.captures.confirm(completion.content_hash)
            self._held.pop(completion.lease.id, None)
        for failure, rt in batch.failed:
            if failure.lease.id not in settled.failed:
                if failure.discovered:  # a lost lease: its links go with its next fetch
                    rt.forget(failure.discovered)
                refused += 1
        self._refused_in_row = 0  # the store takes results again
        for failure, _ in batch.failed:
            self._held.pop(failure.lease.id, None)
        if refused:
            self.events.emit(LeasesLost(refused, reported=True))
            log.warning("%d reports refused: their leases were lost (expired, taken over)", refused)
        await self._start_all(settled.leases)
        self._reported.set()

    async def _heartbeat_loop(self) -> None:
        ttl = self.settings.lease_ttl
        while True:
            await asyncio.sleep(ttl / 3)
            refs = [LeaseRef(lease.id, lease.token) for lease in self._held.values()]
            if not refs:
                continue
            try:
                held = await self.frontier.heartbeat(refs, ttl)
            except StoreError as exc:  # away past its grace: the next beat tries again
                log.debug("heartbeat skipped: %s", exc)
                continue
            # a lease reported meanwhile is no longer ours to keep: only the others count
            lost = [r.id for r in refs if r.id not in held and r.id in self._held]
            if lost:
                self.events.emit(LeasesLost(len(lost), reported=False))
                log.warning("%d leases were lost (expired and taken over)", len(lost))
                self._drop(lost)

    async def _upkeep_loop(self) -> None:
        """The store's upkeep (statistics, dead rows: ``Frontier.maintain``), from the start
        (a bulk-submitted backlog is analyzed before it is leased much) and every
        ``UPKEEP_EVERY`` seconds (:mod:`crawlfleet.frontier.upkeep`); one process of the fleet
        does it at a time."""
        while True:
            try:
                await self.frontier.maintain()
                await self._runs()
            except StoreError as exc:  # the store is away: the lease and report loops say so
                log.debug("store upkeep skipped: %s", exc)
            except Exception:  # the upkeep must never stop the worker: try again next time
                log.exception("store upkeep failed")
            await asyncio.sleep(UPKEEP_EVERY)

    async def _quality_loop(self) -> None:
        """The runs' quality and the outbox (:mod:`crawlfleet.notify`): every worker takes
        part, the store sees that each check, run end and delivery happens once."""
        from crawlfleet.notify.service import keep

        await keep(self.frontier, self.settings, owner=self.worker_id, jobs=self.jobs)

    async def _runs(self) -> None:
        """Whoever runs with the store keeps its runs going: a run whose job has nothing left
        ends (its removed records marked, its counters kept), and the schedules that are due
        start their runs (each once across the fleet: the store sees to it)."""
        ended = await self.frontier.finish_runs(self.jobs)
        for run in ended:
            log.info("job %s: run %d finished", run.job, run.run)
        if ended:  # their quality closed before a schedule starts their next run
            from crawlfleet.notify.destinations import destinations
            from crawlfleet.notify.keeper import QualityKeeper

            keeper = QualityKeeper(self.frontier, self.settings, destinations(self.settings))
            await keeper.close_runs(ended)
        for schedule, started in await self.frontier.start_due_runs():
            if started is not None:
                log.info("schedule of job %s: run %d started", schedule.job, started.run)

    # -- what this worker did, for the fleet's totals -------------------------------------------

    async def _stats_loop(self) -> None:
        while True:
            await self._save_stats()
            await asyncio.sleep(self.settings.worker.stats_every)

    async def _save_stats(self, *, stopped: bool = False) -> None:
        """Write this process's counters and gauges to the store (its row in worker_stats)."""
        at, before = self._last_pages
        now, pages = time.monotonic(), self.metrics.pages_total()
        self._last_pages = (now, pages)
        gauges = self.metrics.sample_gauges(
            in_flight=len(self._tasks),
            leases_held=len(self._held),
            local_fault=bool(self._fault),
            raw_store_down=self._fault_raw,
        )
        gauges["pages_per_second"] = (pages - before) / (now - at) if now > at else 0.0
        if stopped:
            gauges["stopped"] = 1
        row = WorkerStats(
            self.worker_id,
            self.started_at,
            ",".join(self.kinds),
            socket.gethostname(),
            os.getpid(),
            time.time(),
            self.metrics.snapshot(),
            json.dumps(gauges, separators=(",", ":")),
        )
        try:
            await self.frontier.save_worker_stats(row)
        except StoreError as exc:  # counts are for watching: a store hiccup must not stop work
            log.warning("could not report this worker's counters: %s", exc)

    def _drop(self, lost: list[int]) -> None:
        """Forget leases another worker owns now: their work here can no longer be reported."""
        for lease_id in lost:
            self._held.pop(lease_id, None)
            task = self._task_of.pop(lease_id, None)
            if task is not None:
                task.cancel()


def gathers(held: int, pending: int) -> bool:
    """Whether a report of ``pending`` results waits for more first: when the worker holds more
    than :data:`GATHER_ABOVE` leases and fewer than a quarter of them are finished. A worker
    with little in flight (a chain of pages, a polite domain) reports each page at once; a busy
    one reports a share of its window at a time."""
    return held > GATHER_ABOVE and pending < max(GATHER_ABOVE // 4, held // 4)


def _settled_release(call: asyncio.Future[set[int]]) -> None:
    """Retrieve the outcome of a give-back whose caller was cancelled (its lease expires)."""
    if not call.cancelled() and (exc := call.exception()) is not None:
        log.debug("could not give back leases: %s", _line(exc))


def _contained(completion: Completion, exc: BaseException) -> Completion:
    """``completion`` with its records quarantined (the store refused them) and no links."""
    from dataclasses import replace

    from crawlfleet.data.validate import refused_record

    quarantined = [*completion.quarantined, *(refused_record(r, exc) for r in completion.records)]
    return replace(completion, records=(), quarantined=quarantined, discovered=())


def _line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def describe(lease: Lease) -> str:
    return f"{lease.method} {mask_credentials(lease.url)} (attempt {lease.attempts})"
