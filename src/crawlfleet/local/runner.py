"""``crawlfleet crawl`` on one machine: submit the job, run N worker processes, watch, stream the
records to the output, and say how it went.

The coordinator holds no crawl state: it polls the store for progress, restarts a worker that
died (its leases expire and are rescued by the others), and stops when the store says the job is
finished: nothing queued, leased or waiting for a retry.

Start-up is arranged for the time to the first request: the worker processes start first and
import while the coordinator loads the spider, checks it and opens the store; they are told to
run the job once it is submitted (:mod:`crawlfleet.pool`). Everything that can refuse the spider
runs before the job is written (:mod:`crawlfleet.intake`), so a refused spider leaves no job.
Seeds are not checked for reachability first: they are requests like any other (a dead seed
ends a dead letter with its reason while the others are crawled), and a crawl of which no page
could be fetched at all fails at its end, saying why its requests were given up.

Signals (the workers have sessions of their own, so the terminal's reach the coordinator only):
the first Ctrl-C (or SIGTERM, SIGHUP) drains — SIGTERM to every worker: no new leases, in-flight
requests finish, the rest is given back; the second exits at once — SIGKILL, and the leases the
workers held expire after ``lease_ttl``: the next ``crawl`` says it waits for them. A repeated
SIGTERM or SIGHUP is "the second" only :data:`~crawlfleet.policy.stopping.STOP_GRACE` seconds or
more after the first (a supervisor signalling a group sends one to each process, twice over
when it names the group and the process); a second Ctrl-C always is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from crawlfleet.errors import StoreError, UsageError
from crawlfleet.local.output import RecordTail, finish_output, open_tail
from crawlfleet.model import BudgetHit, JobState, JobStats, Run
from crawlfleet.policy.stopping import Stop, StopSignals

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.frontier.ports import Frontier, JobActivity
    from crawlfleet.local.output import Output
    from crawlfleet.local.pool import LocalWorkers

__all__ = [
    "CrawlPlan",
    "CrawlReport",
    "CrawlView",
    "crawl",
    "is_finished",
    "progress_word",
    "state_fields",
    "worker_pool",
]

log = logging.getLogger("crawlfleet.crawl")

#: seconds between two looks at whether the job is finished (one indexed row)
POLL = 0.25
#: least seconds between two reads of the job's counts for the display (a read counts the
#: job's requests: milliseconds at a few thousand, more as the job grows) ...
STATS_EVERY = 1.0
#: ... and at most this share of the time spent reading them, however big the job
STATS_SHARE = 0.02
#: seconds between two reads of new records for the output
TAIL_EVERY = 1.0


class CrawlView(Protocol):
    """What the user sees of a crawl (the command's progress display)."""

    def update(self, stats: JobStats, elapsed: float) -> None: ...
    def note(self, line: str) -> None: ...
    def worker_line(self, line: str) -> None: ...


@dataclass(frozen=True)
class CrawlPlan:
    """What ``crawl`` was asked to do.

    ``job_settings`` are stored with the job for every worker's loader (spider arguments, the
    job's ``-s`` settings, overrides such as the demo's ``start_urls``); ``worker_overrides``
    are settings the local workers apply over their own configuration (flags and ``-s``);
    ``worker_argv`` the global options they are started with (``--config``, ``-v``/``-q``),
    ``config`` the settings file an in-process worker reads (``--config``); ``worker_process``
    False runs a single worker in this process (see :func:`worker_pool`).
    """

    spider: str
    settings: Settings
    workers: int = 1
    browser_workers: int = 0  # workers of their own for the browser pages (0: none)
    job: str | None = None
    job_settings: Mapping[str, Any] = field(default_factory=dict)
    worker_overrides: Mapping[str, Any] = field(default_factory=dict)
    worker_argv: Sequence[str] = ()
    config: str | None = None
    worker_process: bool = True
    output: Output | None = None
    fresh: bool = False
    recrawl: bool = False  # a finished job starts its next run
    max_error_rate: float | None = None  # None: fail only when every page failed


@dataclass
class CrawlReport:
    """How a crawl went: the job's counts at the end and what this run added to them."""

    job: str
    stats: JobStats
    elapsed: float
    fetched: int = 0  # pages done in this run
    parse_errors: int = 0  # pages of this run whose callback raised
    dead: int = 0  # requests given up in this run
    dead_by_reason: Mapping[str, int] = field(default_factory=dict)  # the job's, at the end
    finished_at: float | None = None
    nothing_to_do: bool = False
    interrupted: str | None = None  # "drained" or "killed"
    removed: int | None = None  # requests removed by --fresh
    run: Run | None = None  # the job's run, at the end
    resumed: bool = False  # --recrawl found the current run unfinished: it went on
    written: int = 0  # records written to the output by this run
    changed: int = 0  # records that changed after they were written
    notes: list[str] = field(default_factory=list)
    failure: str | None = None  # why the crawl counts as failed (exit code 1)
    #: this run's spider errors, the first few distinct ones: (error, pages, a page's URL)
    parse_error_samples: list[tuple[str, int, str]] = field(default_factory=list)
    #: the host and URL-shape budgets the job ran into (exit code 3: pages were left out)
    budget_hits: list[BudgetHit] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if self.failure:
            return 1
        return BUDGET_EXIT if self.budget_hits else 0


#: ``crawl``'s exit code for a crawl that finished but left URLs out for a budget
BUDGET_EXIT = 3


def is_finished(stats: JobStats) -> bool:
    """Whether a job needs no more work anywhere in the fleet.

    A running or paused job is finished when none of its requests is queued (ready or waiting
    for a retry) or leased. A cancelled job is finished once none is leased: its queued requests
    stay in the store (counted by ``status``, runnable again after ``jobs resume``) but no worker
    leases them.
    """
    if stats.state is JobState.CANCELLED:
        return stats.leased == 0
    return stats.finished


def progress_word(state: JobState, done: bool) -> str:
    """One word (or two) for a job: what workers do with it, and whether it is done."""
    if state is JobState.RUNNING:
        return "finished" if done else "running"
    if state is JobState.PAUSED:
        return "paused (finished)" if done else "paused"
    return "cancelled" if done else "cancelled (leases in flight)"


def state_fields(stats: JobStats) -> dict[str, object]:
    """A job's state as ``status --json`` and ``/api/jobs`` give it, consistent by construction:

    * ``state``: ``running``, ``finished`` (running, nothing left anywhere in the fleet),
      ``paused`` or ``cancelled``: never ``running`` beside ``"finished": true``;
    * ``job_state``: what workers do with it, whether finished or not (``running``, ``paused``,
      ``cancelled``: what ``jobs pause``, ``resume`` and ``cancel`` set);
    * ``finished``: :func:`is_finished`;
    * ``progress``: the status line's word (``paused (finished)``, ``cancelled (leases in
      flight)``...).
    """
    done = is_finished(stats)
    own = stats.state.value
    return {
        "state": "finished" if done and stats.state is JobState.RUNNING else own,
        "job_state": own,
        "finished": done,
        "progress": progress_word(stats.state, done),
    }


# -- the crawl ------------------------------------------------------------------------------------


def worker_pool(
    workers: int,
    worker_argv: Sequence[str],
    browser_workers: int = 0,
    *,
    config: str | None = None,
    processes: bool = True,
) -> LocalWorkers:
    """The local workers of a crawl, not started yet: processes, or, with one worker and not
    ``processes`` (``crawl``'s default with one worker), that worker in this process
    (:mod:`crawlfleet.local.inproc`). Started first (``await pool.start()``), processes import
    while the coordinator loads the spider and opens the store; they learn the queue and the
    job from ``go`` (their settings file, ``config``, is the coordinator's)."""
    if workers == 1 and not browser_workers and not processes:
        from crawlfleet.local.inproc import InProcessWorker

        return InProcessWorker(config)
    from crawlfleet.local.pool import WorkerPool

    return WorkerPool(workers, browser_workers=browser_workers, argv=worker_argv)


async def crawl(plan: CrawlPlan, view: CrawlView, pool: LocalWorkers | None = None) -> CrawlReport:
    """Run ``plan`` to the end (finished, interrupted, or an error raised as UsageError), with
    ``pool`` if it was started already (see :func:`worker_pool`)."""
    if pool is None:
        pool = worker_pool(
            plan.workers,
            plan.worker_argv,
            plan.browser_workers,
            config=plan.config,
            processes=plan.worker_process,
        )
        await pool.start()
    pool.on_line = view.worker_line
    try:
        return await _crawl(plan, view, pool)
    finally:
        await pool.close()


async def _crawl(plan: CrawlPlan, view: CrawlView, pool: LocalWorkers) -> CrawlReport:
    from crawlfleet.frontier import open_frontier
    from crawlfleet.intake import prepare, submit
    from crawlfleet.spiders import configure, load_spider, spider_ref

    settings = plan.settings
    spider_cls = configure(load_spider(plan.spider), plan.job_settings)
    name = plan.job or spider_cls.name
    intake = prepare(name, spider_ref(plan.spider), spider_cls, settings, plan.job_settings)
    if plan.output and plan.output.path != "-":
        from crawlfleet.data.feeds import check_writable

        check_writable(plan.output.path)
    await _check_raw_store(settings)
    store = open_frontier(
        settings.queue,
        pacing=settings.pacing_config(),
        outage_grace=settings.worker.store_outage_grace,  # the coordinator waits out outages too
    )
    await store.open()
    try:
        before = await _state(store, name)
        try:
            job, added, started = await submit(
                store, intake, recrawl=plan.recrawl, fresh=plan.fresh
            )
        except StoreError as exc:
            raise UsageError(f"cannot start {name} afresh: {exc}") from None
        removed = None
        if plan.fresh and before.stats is not None:
            b = before.stats
            removed = b.queued + b.waiting + b.leased + b.done + b.dead
        counted_from = before
        if started is not None:
            log.info("job %s: run %d (%s) started", name, started.run, started.kind.value)
            # this run's counts start where it started: a fresh run removed the old requests
            # and their dead letters, a recrawl queued the known pages again
            counted_from = await _state(store, name)
        log.info("job %s: %d start requests, %d new, in %r", name, len(intake.seeds), added, store)
        if job.state is not JobState.RUNNING:
            raise UsageError(
                f"job {name} is {job.state.value}: crawlfleet jobs resume {name}, then crawl again"
            )
        tail = open_tail(store, name, plan.output, before.activity)
        report = await _run(store, pool, view, plan, name, tail, intake.kinds)
        report.written, report.changed, notes = await finish_output(store, name, plan.output, tail)
        report.notes.extend(notes)
        after = await store.job_activity(name)
        _account(report, counted_from, after, plan.max_error_rate)
        report.parse_error_samples = await _parse_error_samples(store, name, report.parse_errors)
        report.budget_hits = await store.budget_hits(name)
        report.removed = removed
        report.resumed = plan.recrawl and started is None and not report.nothing_to_do
        if not report.interrupted:
            await store.finish_runs([name])
        report.run = await store.current_run(name)
        if not report.interrupted:
            report.notes.extend(await _quality(store, settings, name))
        return report
    finally:
        await store.close()


async def _run(
    store: Frontier,
    pool: LocalWorkers,
    view: CrawlView,
    plan: CrawlPlan,
    name: str,
    tail: RecordTail | None,
    kinds: list[str],
) -> CrawlReport:
    started = time.monotonic()
    stats = await store.stats(name)
    if is_finished(stats):  # every seed was crawled before: no worker needed
        if tail is not None:
            await tail.poll()
        return CrawlReport(name, stats, 0.0, nothing_to_do=True)
    _note_lease_holders(view, await store.job_activity(name), name)
    overrides = {"queue": plan.settings.queue, **plan.worker_overrides}
    await pool.go({"jobs": [name], "overrides": overrides, "kinds": kinds})
    log.info("%d workers run job %s", pool.n, name)
    stop = _Stopper(pool, view, plan.settings.lease_ttl)
    pool.on_exit = stop.wake  # the end of a run is seen when its workers end, not a poll later
    counts = _Counts(store, name, stats)
    last_tail = 0.0
    with stop.installed():
        while True:
            await stop.sleep(POLL)
            # the cheap look every poll, the counts when due or when it says done (a cancelled
            # job is finished with requests queued: its counts say so within STATS_EVERY)
            done = await store.is_finished(name)
            finished = False
            if done or counts.due():
                stats = await counts.read()
                view.update(stats, time.monotonic() - started)
                finished = is_finished(stats)
            if tail is not None and time.monotonic() - last_tail >= TAIL_EVERY:
                last_tail = time.monotonic()
                await tail.poll()
            if pool.stopped_itself and not (finished or stop.how):
                await pool.close()
                raise UsageError(
                    f"a worker of job {name} stopped itself (see its error above): "
                    "the crawl cannot finish"
                )
            if not await pool.check(finished):
                continue
            if finished or stop.how:
                break
            if is_finished(await store.stats(name)):
                break  # the last workers finished it between the read above and their exit
            raise UsageError(
                f"all workers stopped but job {name} is not finished "
                f"(restarted {pool.restarts} times); see the worker errors above"
            )
    stats = await store.stats(name)
    view.update(stats, time.monotonic() - started)
    return CrawlReport(name, stats, time.monotonic() - started, interrupted=stop.how)


class _Counts:
    """The job's counts as the coordinator last read them, read again when due: every
    :data:`STATS_EVERY` seconds, but never more than :data:`STATS_SHARE` of the time (a read
    that took 30 ms is not repeated for 1.5 s)."""

    def __init__(
        self,
        store: Frontier,
        name: str,
        stats: JobStats,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.name, self.stats, self.clock = store, name, stats, clock
        self._due = clock() + STATS_EVERY

    def due(self) -> bool:
        return self.clock() >= self._due

    async def read(self) -> JobStats:
        started = self.clock()
        self.stats = await self.store.stats(self.name)
        took = self.clock() - started
        self._due = self.clock() + max(STATS_EVERY, took / STATS_SHARE)
        return self.stats


class _Stopper:
    """The coordinator's signals: the first drains the workers, the second kills them."""

    def __init__(self, pool: LocalWorkers, view: CrawlView, lease_ttl: float) -> None:
        self.pool, self.view, self.lease_ttl = pool, view, lease_ttl
        self.how: str | None = None
        self._woken = asyncio.Event()
        self._signals = StopSignals()

    @contextlib.contextmanager
    def installed(self) -> Any:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        for sig in signals:
            loop.add_signal_handler(sig, self.signal, sig == signal.SIGINT)
        try:
            yield self
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    def signal(self, terminal: bool = True) -> None:
        """A stop signal (``terminal``: Ctrl-C): the first drains, a second kills (a repeated
        SIGTERM only after the grace: see the module docstring)."""
        how = self._signals.read(time.monotonic(), terminal=terminal)
        if how is Stop.SAME:
            return
        self._woken.set()
        if how is Stop.DRAIN:
            self.how = "drained"
            n = self.pool.terminate()
            self.view.note(
                f"stopping: {n} workers finish the requests in flight and give the rest back "
                "(Ctrl-C again to exit now)"
            )
            return
        self.how = "killed"
        self.pool.kill()
        self.view.note(
            f"exiting now: the workers' leases expire within {self.lease_ttl:g}s; the next crawl "
            "waits for them"
        )

    def wake(self) -> None:
        """Cut the current :meth:`sleep` short (a worker ended: look at the job now)."""
        self._woken.set()

    async def sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), seconds)
        self._woken.clear()


def _note_lease_holders(view: CrawlView, activity: JobActivity, name: str) -> None:
    """Say so when leases of another run are still live: the crawl waits for them to expire."""
    now = time.time()
    holders = [h for h in activity.holders if h.expires_at > now]
    if not holders:
        return
    leases = sum(h.leases for h in holders)
    wait = max(h.expires_at for h in holders) - now
    who = ", ".join(h.worker for h in holders[:3]) + (", ..." if len(holders) > 3 else "")
    view.note(
        f"waiting for {leases} leases of job {name} held by other workers ({who}) to expire: "
        f"up to {wait:.0f}s (a crawl that exited hard leaves its leases until then)"
    )


@dataclass(frozen=True)
class _Before:
    stats: JobStats | None
    activity: JobActivity | None


async def _state(store: Frontier, name: str) -> _Before:
    if await store.get_job(name) is None:
        return _Before(None, None)
    return _Before(await store.stats(name), await store.job_activity(name))


#: dead letters of pages that were fetched (an answer came, then was refused or failed)
FETCHED_DEAD: Final = frozenset(
    {"parse_error", "too_complex", "too_many_items", "http_4xx", "blocked", "empty"}
)
#: distinct spider errors the summary shows
PARSE_ERRORS_SHOWN: Final = 3


def _account(
    report: CrawlReport, before: _Before, after: JobActivity, max_error_rate: float | None
) -> None:
    """What this run added to the job's counts, and whether the crawl failed."""
    b_stats, b_act = before.stats, before.activity
    dead_before = b_act.dead_by_reason if b_act else {}
    added = {r: n - dead_before.get(r, 0) for r, n in after.dead_by_reason.items()}
    # fetched: every page an answer came for, the ones the spider then failed on too
    report.fetched = report.stats.done - (b_stats.done if b_stats else 0)
    report.fetched += sum(n for r, n in added.items() if r in FETCHED_DEAD)
    report.dead = report.stats.dead - (b_stats.dead if b_stats else 0)
    report.parse_errors = added.get("parse_error", 0)
    report.dead_by_reason = after.dead_by_reason
    report.finished_at = after.finished_at
    if report.interrupted or report.nothing_to_do:
        return
    pages = report.stats.done - (b_stats.done if b_stats else 0) + report.parse_errors
    if report.parse_errors and pages:
        share = report.parse_errors / pages
        if max_error_rate is None and share >= 1.0:
            report.failure = f"every page ({pages}) failed in the spider"
        elif max_error_rate is not None and share > max_error_rate:
            report.failure = (
                f"{share:.0%} of the pages failed in the spider (more than --max-error-rate "
                f"{max_error_rate:g})"
            )
    if report.failure is None and report.fetched == 0 and report.dead > 0:
        # the seeds were tried like any request (no check before the crawl): say why they died
        given_up = sorted(((r, n) for r, n in added.items() if n > 0), key=lambda kv: -kv[1])
        reasons = ", ".join(f"{r} {n}" for r, n in given_up)
        report.failure = (
            f"no page was fetched: all {report.dead} requests were given up ({reasons})"
        )


async def _quality(store: Frontier, settings: Settings, name: str) -> list[str]:
    """Close the finished run's quality (its profile, the monitors, the run summary) and
    deliver what is due for a few seconds; the lines the summary gets of it."""
    import json

    from crawlfleet.errors import StoreError
    from crawlfleet.notify.service import finish_job
    from crawlfleet.worker.ids import default_worker_id

    notes = []
    try:
        delivered = await finish_job(store, settings, name, owner=default_worker_id())
        rows = await store.profiles(name, limit=1)
    except StoreError as exc:
        return [f"quality: not checked ({exc})"]
    if not delivered:
        notes.append("notifications: some wait in the outbox (crawlfleet notify status)")
    if rows and rows[0].final:
        alerts = json.loads(rows[0].profile).get("alerts") or []
        if alerts:
            names = ", ".join(sorted({str(a.get("alert")) for a in alerts}))
            notes.append(
                f"quality: {len(alerts)} alerts in run {rows[0].run} ({names}): crawlfleet quality"
            )
    return notes


async def _parse_error_samples(
    store: Frontier, name: str, errors: int
) -> list[tuple[str, int, str]]:
    """This run's spider errors (its newest ``errors`` parse-error dead letters), the first
    :data:`PARSE_ERRORS_SHOWN` distinct ones in the order they came: error, pages, a URL."""
    from crawlfleet.model import DeadReason

    if errors <= 0:
        return []
    letters = await store.dead_letters(name, DeadReason.PARSE_ERROR, limit=min(errors, 10_000))
    seen: dict[str, list[Any]] = {}
    for letter in reversed(letters):  # oldest first
        error = (letter.error or "").removeprefix("parse error: ")
        found = seen.setdefault(error, [0, letter.url])
        found[0] += 1
    return [(e, n, url) for e, (n, url) in list(seen.items())[:PARSE_ERRORS_SHOWN]]


async def _check_raw_store(settings: Settings) -> None:
    """Fail with one line before the job is written if the raw store cannot work (no bucket)."""
    from crawlfleet.data.rawstore import open_raw_store

    store = open_raw_store(settings.raw, s3_endpoint=settings.s3_endpoint, spool=settings.raw_spool)
    await asyncio.to_thread(store.open)
    await asyncio.to_thread(store.close)
