"""A worker: lease → fetch → classify → parse → store → report, and nothing else.

One asyncio process. It leases batches from the store, fetches each request no earlier than its
pacing slot, writes every response to WARC, asks the pure policies what the outcome means, runs
the spider on good pages and reports everything back in batched transactions — after the WARC
data of the batch is durable (snapshot before ack). Only caches live here (seen-sets, robots,
connection pools); a worker can die at any moment and lose nothing but time.

SIGTERM: stop leasing, let in-flight fetches finish within ``grace`` seconds, give the rest back
(``release``), flush, exit. A second SIGTERM stops at once (leases then expire and are rescued).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import signal
import socket
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field

from crawlfleet import metrics
from crawlfleet.config import Settings
from crawlfleet.data.rawstore import RawStore, open_raw_store
from crawlfleet.data.warc import Capture, WarcRef, WarcWriter
from crawlfleet.errors import CrawlfleetError, FetchError, SpiderLoadError
from crawlfleet.extract import JobRuntime, ParseError, Provenance, trap_rules
from crawlfleet.fetch.http import FetchResult, FetchSettings, HttpFetcher
from crawlfleet.fetch.robots import RobotsCache
from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import (
    Completion,
    DeadReason,
    Failure,
    JobState,
    Lease,
    LeaseRef,
)
from crawlfleet.policy.classify import Outcome, classify_response, outcome_for_error
from crawlfleet.policy.retry import RetryDecision, decide, parse_retry_after
from crawlfleet.response import Response
from crawlfleet.spiders import load_job_spider
from crawlfleet.urls import mask_credentials

log = logging.getLogger("crawlfleet.worker")

#: seconds a worker that skips unloadable jobs reuses its list of job names
JOB_LIST_TTL = 1.0
#: most seconds an idle worker waits before it looks again (retries and paced lanes come due)
IDLE_WAIT = 0.25
#: least seconds between two leases of an idle worker (many idle workers woken at once)
IDLE_LEASE_GAP = 0.01
#: a worker holding more leases than this lets a small report gather for ``report_interval``
GATHER_ABOVE = 16


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class _Job:
    runtime: JobRuntime
    fetcher: HttpFetcher
    robots: RobotsCache | None
    warc: WarcWriter
    raw: RawStore


@dataclass
class _Pending:
    done: list[tuple[Completion, JobRuntime]] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)

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
    ) -> None:
        self.frontier = frontier
        self.settings = settings.check()
        self.worker_id = worker_id or default_worker_id()
        self.jobs = list(jobs) if jobs is not None else None
        self.exit_when_finished = exit_when_finished
        self.grace = grace
        self.spiders = spiders
        self._raw: dict[str, RawStore] = {}
        self._job_names: tuple[float, list[str]] = (-JOB_LIST_TTL, [])
        self._loaded: dict[str, _Job] = {}
        self._unloadable: dict[str, str] = {}
        self._loading: dict[str, asyncio.Future[_Job | None]] = {}
        self._held: dict[int, Lease] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._task_of: dict[int, asyncio.Task[None]] = {}  # lease id -> its handler
        self._pending = _Pending()
        self._has_pending = asyncio.Event()  # wakes the reporter
        self._reported = asyncio.Event()  # set after every report (and its leases) went through
        self._reporting = 0  # reports on their way to the store right now
        self._asking = 0  # leases asked for in store calls on their way
        self._stopping = asyncio.Event()
        self._rng = random.Random()
        #: per domain: when this worker told the store its robots.txt Crawl-delay, and the delay
        self._crawl_delays: dict[str, asyncio.Future[tuple[float, float]]] = {}
        #: domains with a Crawl-delay of which one lease handed out before it was known ran
        self._unpaced_ran: set[str] = set()

    # -- lifecycle ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop leasing and drain (what SIGTERM does)."""
        self._stopping.set()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._on_signal)
        loop.add_signal_handler(signal.SIGINT, self._on_signal)

    def _on_signal(self) -> None:
        if self._stopping.is_set():
            log.warning("second stop signal: exiting now, leases will expire and be rescued")
            os._exit(1)
        log.info("stop signal: no new leases, finishing in-flight work")
        self.stop()

    async def run(self) -> None:
        await self._raw_store(self.settings)  # a raw store that cannot work fails the start
        reporter = asyncio.create_task(self._report_loop(), name="reporter")
        heartbeat = asyncio.create_task(self._heartbeat_loop(), name="heartbeat")
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
            for task in (reporter, heartbeat):
                with suppress(asyncio.CancelledError):
                    await task
            await self._flush()
            await self._close_jobs()
            await self._close_raw()

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
                return
            await self._idle()

    async def _lease(self, asked: int, jobs: list[str] | None) -> list[Lease]:
        self._asking += asked
        try:
            leases = await self.frontier.lease(
                self.worker_id, asked, self.settings.lease_ttl, jobs=jobs
            )
        finally:
            self._asking -= asked
        self._start_all(leases)
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
        if not self._unloadable:
            return self.jobs
        names = self.jobs
        if names is None:
            read_at, names = self._job_names
            if time.monotonic() - read_at >= JOB_LIST_TTL:  # pick up newly submitted jobs
                names = [j.name for j in await self.frontier.list_jobs()]
                self._job_names = (time.monotonic(), names)
        return [n for n in names if n not in self._unloadable]

    async def _all_finished(self) -> bool:
        """No work left here: every job this worker could run is finished or cancelled."""
        for job in await self.frontier.list_jobs():
            if self.jobs is not None and job.name not in self.jobs:
                continue
            if job.name in self._unloadable or job.state is JobState.CANCELLED:
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

    # -- jobs -----------------------------------------------------------------------------------

    async def _job(self, name: str) -> _Job | None:
        if name in self._loaded:
            return self._loaded[name]
        if name in self._unloadable:
            return None
        # many leases of a new job arrive at once: load it once, the others wait for that
        loading = self._loading.get(name)
        if loading is None:
            loading = asyncio.ensure_future(self._load_job(name))
            self._loading[name] = loading
        return await asyncio.shield(loading)

    async def _load_job(self, name: str) -> _Job | None:
        job = await self.frontier.get_job(name)
        try:
            if job is None:
                raise SpiderLoadError(f"job {name!r} disappeared")
            spider_cls = await asyncio.to_thread(load_job_spider, job, self.spiders)
            traps = trap_rules(spider_cls, self.settings)
            self._loaded[name] = await self._open_job(JobRuntime(job, spider_cls, traps))
        except CrawlfleetError as exc:
            self._unloadable[name] = str(exc)
            log.error("cannot run job %s here: %s", name, exc)
            return None
        return self._loaded[name]

    async def _open_job(self, runtime: JobRuntime) -> _Job:
        spider = runtime.spider_cls
        s = self.settings.for_spider(spider.custom_settings, spider.name)
        raw = await self._raw_store(s)  # first: it may fail, and then nothing is left open
        fetch_settings = FetchSettings(
            timeout=s.fetch_timeout,
            max_body=s.max_body,
            max_redirects=s.max_redirects,
            user_agent=s.user_agent,
            concurrency=s.concurrency,
            allow_private_addresses=spider.allow_private_addresses,
            private_ok_hosts=frozenset(spider.seed_hosts()),
        )
        fetcher = HttpFetcher(fetch_settings)
        await fetcher.__aenter__()
        robots = (
            RobotsCache(fetcher, user_agent=s.user_agent, error_recheck=s.robots_recheck)
            if spider.obey_robots
            else None
        )
        warc = raw.writer(
            _safe_name(f"{runtime.job.name}-{self.worker_id}"),
            max_size=s.warc_max_size,
            gzip_level=s.warc_gzip_level,
        )
        return _Job(runtime, fetcher, robots, warc, raw)

    async def _raw_store(self, s: Settings) -> RawStore:
        """The raw store ``s`` names, opened once per worker (spiders may name their own)."""
        store = self._raw.get(s.raw)
        if store is None:
            store = open_raw_store(s.raw, s3_endpoint=s.s3_endpoint, spool=s.raw_spool)
            await asyncio.to_thread(store.open)
            self._raw[s.raw] = store
        return store

    async def _close_jobs(self) -> None:
        for job in self._loaded.values():
            await job.fetcher.__aexit__(None, None, None)
            await asyncio.to_thread(job.warc.close)
        self._loaded.clear()

    async def _close_raw(self) -> None:
        """After the writers closed: uploads what is left (object stores) and stops."""
        stores, self._raw = list(self._raw.values()), {}
        for store in stores:
            await asyncio.to_thread(store.close)

    # -- one request ----------------------------------------------------------------------------

    def _start_all(self, leases: Sequence[Lease]) -> None:
        metrics.LEASED.inc(len(leases))
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
        if not task.cancelled() and task.exception() is not None:
            log.error("request handler crashed", exc_info=task.exception())

    async def _handle(self, lease: Lease) -> None:
        job = await self._job(lease.job)
        if job is None:
            await self._give_back(lease)
            return
        wait = lease.start_at - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        if job.robots is not None and not await self._robots_allow(job.robots, lease):
            return
        started_at = time.time()
        started = time.perf_counter()
        try:
            result = await job.fetcher.fetch(lease.url, method=lease.method, body=lease.body)
        except FetchError as exc:
            metrics.FETCH_DURATION.observe(time.perf_counter() - started)
            self._fail(
                lease,
                outcome_for_error(exc),
                f"{exc.kind}: {exc}",
                error_kind=exc.kind,
                started_at=started_at,
            )
            return
        elapsed = time.perf_counter() - started
        metrics.FETCH_DURATION.observe(elapsed)
        metrics.BYTES.inc(len(result.body))
        fetched_at = time.time()
        digest = job.runtime.content_hash(result.body)
        earlier = job.runtime.captures.get(digest)
        ref = job.warc.write(
            url=result.url,
            method=lease.method,
            request_headers=result.request_headers,
            status=result.status,
            reason=result.reason,
            http_version=result.http_version,
            response_headers=result.headers,
            body=result.body,
            fetched_at=fetched_at,
            ip=result.remote_ip,
            request_body=lease.body,
            revisit_of=earlier,
        )
        self._judge(job, lease, result, ref, digest, earlier, fetched_at, elapsed, started_at)

    async def _give_back(self, lease: Lease) -> None:
        """Release ``lease`` unfetched (no attempt used) and stop holding it."""
        await self.frontier.release([lease.ref])
        self._held.pop(lease.id, None)

    async def _robots_allow(self, robots: RobotsCache, lease: Lease) -> bool:
        """Whether robots.txt lets ``lease`` be fetched now; if not, the lease is reported.

        RFC 9309: an unreachable robots.txt (5xx, 429, no answer) disallows the whole host for
        now. That is the host's state, not the request's fault: the request is retried after
        ``robots_recheck`` seconds without using up an attempt, and the store holds the whole
        domain until then (``retry_after``), so a long outage costs one robots.txt fetch per
        recheck, not attempts. A robots.txt Crawl-delay is told to the store once per domain.
        """
        if await robots.allowed(lease.url):
            return await self._crawl_delay_allows(robots, lease)
        if robots.state(lease.url) == "unreachable":
            recheck = self.settings.robots_recheck
            metrics.FETCHES.labels("robots_unreachable").inc()
            self._pending.failed.append(
                Failure(
                    lease.ref,
                    "robots.txt unreachable: host postponed",
                    retry_at=time.time() + recheck,
                    outcome=Outcome.ROBOTS,
                    retry_after=recheck,
                    count_attempt=False,
                )
            )
            self._has_pending.set()
        else:
            self._fail(lease, Outcome.ROBOTS, "robots.txt disallows this URL")
        return False

    async def _crawl_delay_allows(self, robots: RobotsCache, lease: Lease) -> bool:
        """Tell the store the domain's Crawl-delay (once); leases it handed out before it knew
        are given back (no attempt used) to be paced, but for one."""
        told = self._crawl_delays.get(lease.domain)
        if told is None:
            told = asyncio.ensure_future(self._tell_crawl_delay(robots, lease))
            self._crawl_delays[lease.domain] = told
        told_at, delay = await asyncio.shield(told)
        if not delay or lease.start_at >= told_at:
            return True
        if lease.domain not in self._unpaced_ran:
            self._unpaced_ran.add(lease.domain)
            return True
        await self._give_back(lease)
        return False

    async def _tell_crawl_delay(self, robots: RobotsCache, lease: Lease) -> tuple[float, float]:
        delay = await robots.crawl_delay(lease.url) or 0.0
        if delay > 0:
            await self.frontier.set_crawl_delay(lease.domain, delay)
        return time.time(), delay

    def _judge(
        self,
        job: _Job,
        lease: Lease,
        result: FetchResult,
        ref: WarcRef,
        digest: bytes,
        earlier: Capture | None,
        fetched_at: float,
        elapsed: float,
        started_at: float | None = None,
    ) -> None:
        rt = job.runtime
        response = Response(
            result.url,
            result.status,
            result.header_map,
            result.body,
            meta=lease.meta,
            depth=lease.depth,
            request_url=lease.url,
        )
        try:
            verdict = rt.spider.is_blocked(response)
        except Exception:  # a broken hook must not pass a block page as data
            log.exception("%s.is_blocked raised", rt.spider_cls.__name__)
            verdict = None
        outcome = classify_response(
            result.status, result.header_map, result.body, spider_verdict=verdict
        )
        if outcome is not Outcome.OK:
            retry_after = parse_retry_after(result.header_map.get("retry-after"), time.time())
            error = f"HTTP {result.status}" + (
                " (block page)" if outcome is Outcome.BLOCKED else ""
            )
            self._fail(
                lease,
                outcome,
                error,
                status=result.status,
                retry_after=retry_after,
                latency=elapsed,
                started_at=started_at,
            )
            return
        warc = Provenance(
            job.raw.locate(ref.file),
            ref.record_id,
            earlier.file if earlier else None,
            earlier.record_id if earlier else None,
        )
        if earlier is None:  # later pages with these bytes are archived as revisits of this one
            rt.captures.remember(
                digest, Capture(warc.file, ref.record_id, ref.target_uri, ref.date)
            )
        else:
            metrics.FETCHES.labels("duplicate_content").inc()
            # the spider's own opt-in, never a default: a page's output depends on its URL
            if rt.spider_cls.skip_duplicate_content and rt.captures.parsed(digest):
                done = Completion(
                    lease.ref,
                    result.status,
                    content_hash=digest,
                    elapsed=elapsed,
                    started_at=started_at,
                )
                self._done(rt, done)
                return
        try:
            out = rt.process(
                response,
                robots=job.robots,
                page_url=lease.url,
                callback=lease.callback,
                depth=lease.depth,
                fetched_at=fetched_at,
                warc=warc,
            )
        except ParseError as exc:
            self._fail(
                lease,
                Outcome.PERMANENT_ERROR,
                f"parse error: {exc}",
                status=result.status,
                dead=DeadReason.PARSE_ERROR,
                latency=elapsed,
                started_at=started_at,
            )
            return
        metrics.FETCHES.labels("ok").inc()
        metrics.RECORDS.inc(len(out.records))
        metrics.QUARANTINED.inc(len(out.quarantined))
        metrics.TRAPS.inc(out.traps)
        metrics.ROBOTS_FILTERED.inc(out.robots_dropped)
        completion = Completion(
            lease.ref,
            result.status,
            records=out.records,
            quarantined=out.quarantined,
            discovered=out.discovered,
            content_hash=digest,
            elapsed=elapsed,
            nbytes=len(result.body),
            started_at=started_at,
        )
        self._done(rt, completion)

    def _fail(
        self,
        lease: Lease,
        outcome: Outcome,
        error: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        error_kind: str | None = None,
        dead: DeadReason | None = None,
        latency: float | None = None,
        started_at: float | None = None,
    ) -> None:
        metrics.FETCHES.labels(outcome.value).inc()
        if dead is not None:
            decision = RetryDecision(None, dead, error)
        else:
            decision = decide(
                outcome=outcome,
                attempts=lease.attempts,
                max_attempts=lease.max_attempts,
                now=time.time(),
                rand=self._rng.random(),
                status=status,
                error_kind=error_kind,
                retry_after=retry_after,
                base=self.settings.retry_base,
                cap=self.settings.retry_cap,
            )
        if decision.retry_at is None:
            metrics.DEAD.labels((decision.dead_reason or DeadReason.TOO_MANY_RETRIES).value).inc()
        else:
            metrics.RETRIES.inc()
        self._pending.failed.append(
            Failure(
                lease.ref,
                error[:1000],
                retry_at=decision.retry_at,
                dead_reason=decision.dead_reason,
                status=status,
                outcome=outcome,
                latency=latency,
                retry_after=retry_after,
                started_at=started_at,
            )
        )
        self._has_pending.set()

    def _done(self, rt: JobRuntime, completion: Completion) -> None:
        self._pending.done.append((completion, rt))
        self._has_pending.set()

    # -- reporting ------------------------------------------------------------------------------

    async def _report_loop(self) -> None:
        """Group commit: a finished request is reported as soon as no report is on its way, so
        its slot in the store is free again within one store transaction; while one is on its
        way, the next batch gathers. A busy worker (many leases held) waits up to
        ``report_interval`` for more to finish first: fewer, larger transactions."""
        while True:
            await self._has_pending.wait()
            self._has_pending.clear()
            if len(self._held) > GATHER_ABOVE and len(self._pending) < GATHER_ABOVE // 4:
                await asyncio.sleep(self.settings.report_interval)
            await self._flush()

    async def _flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, _Pending()
        self._reporting += 1  # the batch is neither pending nor settled until this returns
        try:
            await self._report(batch)
        finally:
            self._reporting -= 1

    async def _report(self, batch: _Pending) -> None:
        # snapshot durable before ack: a crash after this point refetches, never loses
        await asyncio.gather(*(asyncio.to_thread(j.warc.flush) for j in self._loaded.values()))
        # the slots these requests free are leased again in the same transaction
        ask = 0 if self._stopping.is_set() else min(self._free(), self.settings.lease_batch)
        jobs = await self._lease_jobs() if ask else None
        if jobs is not None and not jobs:
            ask = 0
        self._asking += ask
        try:
            settled = await self.frontier.report(
                self.worker_id,
                [c for c, _ in batch.done],
                batch.failed,
                lease=ask,
                ttl=self.settings.lease_ttl,
                jobs=jobs,
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
        refused += len(batch.failed) - len(settled.failed)
        for failure in batch.failed:
            self._held.pop(failure.lease.id, None)
        if refused:
            metrics.FENCED.inc(refused)
            log.warning("%d reports refused: their leases were lost (expired, taken over)", refused)
        self._start_all(settled.leases)
        self._reported.set()

    async def _heartbeat_loop(self) -> None:
        ttl = self.settings.lease_ttl
        while True:
            await asyncio.sleep(ttl / 3)
            refs = [LeaseRef(lease.id, lease.token) for lease in self._held.values()]
            if not refs:
                continue
            held = await self.frontier.heartbeat(refs, ttl)
            # a lease reported meanwhile is no longer ours to keep: only the others count
            lost = [r.id for r in refs if r.id not in held and r.id in self._held]
            if lost:
                metrics.FENCED.inc(len(lost))
                log.warning("%d leases were lost (expired and taken over)", len(lost))
                self._drop(lost)

    def _drop(self, lost: list[int]) -> None:
        """Forget leases another worker owns now: their work here can no longer be reported."""
        for lease_id in lost:
            self._held.pop(lease_id, None)
            task = self._task_of.pop(lease_id, None)
            if task is not None:
                task.cancel()


def describe(lease: Lease) -> str:
    return f"{lease.method} {mask_credentials(lease.url)} (attempt {lease.attempts})"


def _safe_name(text: str) -> str:
    """A file-name-safe version of ``text`` (job names and worker ids are user input)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
