"""A pure simulation of one lane: a model site, the store's lease loop, the pacing policy.

Everything runs on a fake clock (an event queue: no real time, no sleeps, seeded randomness),
so a crawl of thousands of pages against a rate-limited, noisy or load-sensitive site takes a
fraction of a second. The unit tests assert the controller's required behaviours with it and
``benchmarks/pacing_sim.py`` tabulates them::

    result = simulate(Site(rate_limit=40), Crawl(pages=3000, max_concurrency=32))
    result.throughput, result.share(429), result.captchas

The **site** (:class:`Site`) answers per client: a rate limit of N requests a second over a
sliding one-second window of accepted requests (429 with Retry-After beyond it), captcha pages
(status 200) for ``captcha_for`` seconds to a client that drew more than ``captcha_after`` 429s
within ``captcha_window`` seconds, latency ``latency + per_request * (requests in flight, this
one included)``, random faults by page (503 share, connections cut, slow pages; 503s and cuts on
a page's first attempt only, so a retry always works), push-back on everything between two
times (``blocked_between``), a dead host (every connection refused), and robots.txt Crawl-delay.

The **crawler** (:class:`Crawl`) is the store and its workers as the lane sees them: every page
queued at time 0; a lease hands out at most ``concurrency`` in flight (counted until the report
reaches the store), start slots spaced by ``delay`` within a horizon, never before
``blocked_until``; the next free slot (``next_at``) stays where the lease left it when the delay
shrinks later (``next_at_follows`` pulls it in instead, to show what that would change); a new
lane starts at :func:`~crawlfleet.policy.pacing.initial`'s width (``start_width`` another); a
busy machine freezes the worker for ``stalls[1]`` seconds every ``stalls[0]`` (nothing starts
or is read meanwhile; the starts it missed go at once when it thaws, as a worker's do, or
``delay`` apart from then with ``respace_late``); a start may come up to ``jitter`` seconds
late (a worker's timers and event loop); a
leased request starts at its slot even if the lane was held since; each
response costs ``client_cpu`` seconds of one worker's CPU (FIFO: the latency a worker measures
includes waiting for its CPU) and reaches the store ``report_delay`` later, where
:func:`~crawlfleet.policy.pacing.update` folds it in and :func:`~crawlfleet.policy.retry.decide`
schedules retries (capped backoff with jitter, Retry-After honoured).
"""

from __future__ import annotations

import functools
import heapq
import math
import random
import statistics
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.pacing import PacingConfig, PacingState, initial, update
from crawlfleet.policy.retry import decide

__all__ = ["Crawl", "Result", "Site", "simulate"]


@dataclass(frozen=True)
class Site:
    """How the model site answers (every switch off: a healthy 5 ms site)."""

    latency: float = 0.005
    per_request: float = 0.0
    rate_limit: float | None = None
    retry_after: float = 1.0
    captcha_after: int | None = 20
    captcha_window: float = 10.0
    captcha_for: float = 60.0
    p503: float = 0.0
    retry_after_503: float | None = 1.0
    p_cut: float = 0.0
    p_slow: float = 0.0
    slow: float = 3.0
    blocked_between: tuple[float, float] | None = None
    dead: bool = False
    crawl_delay: float | None = None


@dataclass(frozen=True)
class Crawl:
    """The crawl and the scheduler: pages, limits, timings of the store and the workers."""

    pages: int = 2000
    max_concurrency: int = 32
    min_delay: float = 0.0
    workers: int = 1
    client_cpu: float = 0.0
    report_delay: float = 0.002
    lease_delay: float = 0.001
    horizon: float | None = None  # the store's lease horizon (None: the pacing config's)
    next_at_follows: bool = False
    start_width: int | None = None
    stalls: tuple[float, float] | None = None
    respace_late: bool = False
    jitter: float = 0.0
    retry_base: float = 0.2
    retry_cap: float = 2.0
    max_attempts: int = 5
    until: float = 900.0
    seed: int = 1
    pacing: PacingConfig = field(default_factory=PacingConfig)


@dataclass
class Result:
    """What the site and the store saw. ``arrivals``: (time, status) of every request at the
    site (status 0: connection cut or refused); ``latencies``: (time, server latency) of
    answered requests; ``states``: (time, delay, concurrency) after every update."""

    site: Site
    crawl: Crawl
    done: int = 0
    dead: int = 0
    end: float = 0.0
    captchas: int = 0
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    latencies: list[tuple[float, float]] = field(default_factory=list)
    completions: list[float] = field(default_factory=list)
    states: list[tuple[float, float, int]] = field(default_factory=list)
    final: PacingState | None = None

    @property
    def requests(self) -> int:
        return len(self.arrivals)

    def share(self, status: int) -> float:
        """Share of requests answered ``status`` (0: no answer)."""
        n = sum(1 for _, s in self.arrivals if s == status)
        return n / max(1, len(self.arrivals))

    @property
    def throughput(self) -> float:
        """Pages done a second in the bulk of the crawl: between its 5% and 95% completions
        (the start-up and the tail of retries and slow pages left out)."""
        times = sorted(self.completions)
        if len(times) < 20:
            return 0.0
        lo, hi = times[len(times) // 20], times[len(times) * 19 // 20]
        return (len(times) * 9 / 10) / max(hi - lo, 1e-9)

    def accepted_rate(self, start: float, end: float) -> float:
        """Requests the site accepted (not 429) a second between ``start`` and ``end``."""
        n = sum(1 for t, s in self.arrivals if start <= t < end and s != 429)
        return n / max(end - start, 1e-9)

    def max_window(self, width: float = 1.0) -> int:
        """Most requests the site accepted (not 429) in any ``width``-second window."""
        times = [t for t, s in self.arrivals if s != 429]
        best, lo = 0, 0
        for hi, t in enumerate(times):
            while times[lo] <= t - width:
                lo += 1
            best = max(best, hi - lo + 1)
        return best

    def median_latency(self, start: float, end: float) -> float:
        values = [x for t, x in self.latencies if start <= t < end]
        return statistics.median(values) if values else 0.0

    def recovered_at(self, after: float) -> float | None:
        """When, after ``after``, the lane's pacing went back to full pace (delay at its floor,
        concurrency at its maximum) for good and the next request started: None if it was
        not at full pace at the end."""
        floor = max(self.crawl.min_delay, self.final.floor if self.final else 0.0)
        when = None
        for t, delay, width in self.states:
            if t < after:
                continue
            full = delay <= floor + 1e-9 and width >= self.crawl.max_concurrency
            if full and when is None:
                when = t
            elif not full:
                when = None
        if when is None:
            return None
        return next((t for t, _ in self.arrivals if t >= when), None)


@dataclass
class _Page:
    index: int
    attempts: int = 0
    ready_at: float = 0.0
    fault: str = ""  # "503", "cut" (first attempt only) or ""
    slow: bool = False


class _Sim:
    def __init__(self, site: Site, crawl: Crawl) -> None:
        self.site, self.crawl = site, crawl
        self.rng = random.Random(crawl.seed)
        self.config = replace(
            crawl.pacing, min_delay=crawl.min_delay, max_concurrency=crawl.max_concurrency
        )
        self.horizon = self.config.lease_horizon if crawl.horizon is None else crawl.horizon
        self.state = initial(self.config, site.crawl_delay)
        if crawl.start_width is not None:  # a store that seeds new lanes at another width
            self.state = replace(
                self.state, concurrency=crawl.start_width, window=float(crawl.start_width)
            )
        self.result = Result(site, crawl)
        self.events: list[tuple[float, int, Callable[[float], None]]] = []
        self.seq = 0
        self.ready: deque[_Page] = deque()
        self.waiting: list[tuple[float, int, _Page]] = []  # retries, by ready_at
        self.in_flight = [0] * crawl.workers
        self.cpu_free = [0.0] * crawl.workers
        self.next_at = 0.0
        self.last_start = 0.0
        self.resume_at = 0.0
        self.lease_at: float | None = None  # a lease already scheduled at this time
        self.server_in_flight = 0
        self.accepted: deque[float] = deque()
        self.refusals: deque[float] = deque()
        self.captcha_until = -1.0
        for i in range(crawl.pages):
            draw = self.rng.random()
            fault = "503" if draw < site.p503 else "cut" if draw < site.p503 + site.p_cut else ""
            self.ready.append(_Page(i, fault=fault, slow=self.rng.random() < site.p_slow))

    def at(self, when: float, action: Callable[[float], None]) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, self.seq, action))

    def run(self) -> Result:
        self.at(0.0, self.lease)
        while self.events:
            when, _, action = heapq.heappop(self.events)
            if when > self.crawl.until:
                break
            action(when)
        self.result.final = self.state
        return self.result

    # -- the store and its workers ---------------------------------------------------------

    def wake(self, when: float) -> None:
        """Ask for a lease at ``when`` (one pending wake-up is enough: the earliest)."""
        when += self.crawl.lease_delay
        if self.lease_at is not None and self.lease_at <= when:
            return
        self.lease_at = when
        self.at(when, self.lease)

    def lease(self, now: float) -> None:
        if self.lease_at is not None and now < self.lease_at:
            return  # superseded by an earlier wake-up that ran already
        self.lease_at = None
        while self.waiting and self.waiting[0][0] <= now:
            self.ready.append(heapq.heappop(self.waiting)[2])
        st = self.state
        if now < st.blocked_until:
            self.wake(st.blocked_until)
            return
        if not self.ready:
            if self.waiting:
                self.wake(self.waiting[0][0])
            return
        start = max(self.next_at, now)
        if start > now + self.horizon:
            self.wake(start - self.horizon)
            return
        free = st.concurrency - sum(self.in_flight)
        share = -(-st.concurrency // self.crawl.workers)
        for worker in range(self.crawl.workers):
            want = min(free, share - self.in_flight[worker], len(self.ready))
            if st.delay > 0:
                want = min(want, int((now + self.horizon - start) / st.delay) + 1)
            for _ in range(max(0, want)):
                page = self.ready.popleft()
                self.in_flight[worker] += 1
                free -= 1
                late = self.rng.random() * self.crawl.jitter if self.crawl.jitter else 0.0
                self.at(start + late, functools.partial(self.send, page=page, worker=worker))
                start += st.delay
        self.next_at = max(self.next_at, start)
        self.last_start = start - st.delay
        if st.delay > 0 and self.ready and free > 0:
            self.wake(max(now, start - self.horizon))

    def thawed(self, when: float) -> float:
        """``when``, or the end of the stall it falls in."""
        if self.crawl.stalls is None:
            return when
        every, length = self.crawl.stalls
        into = when % every
        return when if into >= length else when - into + length

    def send(self, now: float, page: _Page, worker: int) -> None:
        thawed = self.thawed(now)
        if thawed > now:
            if self.crawl.respace_late:
                self.resume_at = thawed = max(thawed, self.resume_at + self.state.delay)
            self.at(thawed, functools.partial(self.send, page=page, worker=worker))
            return
        page.attempts += 1
        status, latency = self.answer(now, page)
        self.result.arrivals.append((now, status))
        self.server_in_flight += 1

        def arrive(t: float) -> None:
            self.server_in_flight -= 1
            read_at = self.thawed(max(t, self.cpu_free[worker]))
            self.cpu_free[worker] = read_at + self.crawl.client_cpu
            done = self.cpu_free[worker] + self.crawl.report_delay
            self.at(done, lambda t2: self.report(t2, page, worker, status, now, read_at - now))

        self.at(now + latency, arrive)

    def report(
        self, now: float, page: _Page, worker: int, status: int, started: float, took: float
    ) -> None:
        self.in_flight[worker] -= 1
        outcome, retry_after = self.judge(status)
        self.state = update(
            self.state,
            self.config,
            now=now,
            outcome=outcome,
            status=200 if status == 299 else status or None,
            latency=took if status else None,
            retry_after=retry_after,
            started=started,
        )
        self.result.states.append((now, self.state.delay, self.state.concurrency))
        if self.crawl.next_at_follows:
            self.next_at = min(self.next_at, self.last_start + self.state.delay)
        if outcome is Outcome.OK:
            self.result.done += 1
            self.result.completions.append(now)
            self.result.end = now
        else:
            self.retry(now, page, outcome, status, retry_after)
        self.wake(now)

    def retry(
        self, now: float, page: _Page, outcome: Outcome, status: int, retry_after: float | None
    ) -> None:
        decision = decide(
            outcome=outcome,
            attempts=page.attempts,
            max_attempts=self.crawl.max_attempts,
            now=now,
            rand=self.rng.random(),
            status=status or None,
            retry_after=retry_after,
            base=self.crawl.retry_base,
            cap=self.crawl.retry_cap,
        )
        if decision.retry_at is None:
            self.result.dead += 1
            return
        heapq.heappush(self.waiting, (decision.retry_at, page.index, page))

    def judge(self, status: int) -> tuple[Outcome, float | None]:
        """The worker's verdict (as ``classify_response`` gives it) and the Retry-After."""
        if status == 200:
            return Outcome.OK, None
        if status == 429:
            return Outcome.BLOCKED, self.site.retry_after
        if status == 299:  # a captcha page: status 200, classified as a block
            return Outcome.BLOCKED, None
        if status == 503:
            return Outcome.RETRYABLE_ERROR, self.site.retry_after_503
        return Outcome.RETRYABLE_ERROR, None

    # -- the site ------------------------------------------------------------------------------

    def answer(self, now: float, page: _Page) -> tuple[int, float]:
        """(status, seconds until the answer) of one request; status 0: cut or refused, 299: a
        captcha page (status 200 on the wire)."""
        site = self.site
        if site.dead:
            return 0, 0.0005
        latency = site.latency + site.per_request * (self.server_in_flight + 1)
        if page.slow:
            latency += site.slow
        self.result.latencies.append((now, latency))
        if now < self.captcha_until:
            self.result.captchas += 1
            return 299, latency
        if site.rate_limit is not None and not self.admit(now, site.rate_limit):
            return 429, min(latency, site.latency)
        if site.blocked_between and site.blocked_between[0] <= now < site.blocked_between[1]:
            return 299, latency
        first = page.attempts == 1
        if first and page.fault == "503":
            return 503, site.latency
        if first and page.fault == "cut":
            return 0, latency
        return 200, latency

    def admit(self, now: float, limit: float) -> bool:
        """The sliding-window limiter: at most ``limit`` accepted requests in any second; a
        client refused more than ``captcha_after`` times in ``captcha_window`` seconds earns
        captcha pages for ``captcha_for`` seconds."""
        while self.accepted and self.accepted[0] <= now - 1.0:
            self.accepted.popleft()
        if len(self.accepted) < math.floor(limit):
            self.accepted.append(now)
            return True
        site = self.site
        self.refusals.append(now)
        while self.refusals and self.refusals[0] <= now - site.captcha_window:
            self.refusals.popleft()
        if site.captcha_after is not None and len(self.refusals) > site.captcha_after:
            self.captcha_until = now + site.captcha_for
        return False


def simulate(site: Site, crawl: Crawl | None = None) -> Result:
    """Crawl ``crawl.pages`` pages of ``site`` on a fake clock; see the module docstring."""
    return _Sim(site, crawl or Crawl()).run()


def count_statuses(result: Result) -> Counter[int]:
    """Requests by status at the site (0: no answer, 299: captcha page)."""
    return Counter(s for _, s in result.arrivals)
