"""``crawlfleet crawl`` on one machine: submit the job, run N worker processes, watch, summarise.

The coordinator holds no crawl state: it polls the store for progress, restarts a worker that
died (its leases expire and are rescued by the others), and stops when the store says the job is
finished: nothing queued, leased or waiting for a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from crawlfleet.config import Settings
from crawlfleet.errors import UsageError
from crawlfleet.extract import JobRuntime, trap_rules
from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import (
    DomainLimits,
    Job,
    JobSpec,
    JobState,
    JobStats,
)
from crawlfleet.spider import Spider
from crawlfleet.spiders import SPIDER_NAME

SETTINGS_ENV = "CRAWLFLEET_SETTINGS_JSON"


def job_spec(
    name: str,
    spider_ref: str,
    spider_cls: type[Spider],
    settings: Settings,
    overrides: Mapping[str, Any] | None = None,
) -> JobSpec:
    settings.for_spider(spider_cls.custom_settings, spider_cls.name)  # refuse it now, in one line
    rate = spider_cls.domain_rate
    traps = trap_rules(spider_cls, settings)
    return JobSpec(
        name=name,
        spider=spider_ref,
        settings={**(overrides or {}), SPIDER_NAME: spider_cls.name},
        default_limits=DomainLimits(
            max_in_flight=spider_cls.domain_concurrency,
            min_delay=1.0 / rate if rate else 0.0,
        ),
        domain_limits=dict(settings.domains),
        max_attempts=spider_cls.max_attempts,
        page_budget=traps.host_page_budget,
        pattern_budget=traps.pattern_budget,
    )


async def submit(frontier: Frontier, spec: JobSpec, spider_cls: type[Spider]) -> tuple[Job, int]:
    """Register the job and its seeds; returns the job and how many seeds were new."""
    job = await frontier.submit_job(spec)
    try:
        seeds = JobRuntime(job, spider_cls).seed_requests()
    except ValueError as exc:
        raise UsageError(f"bad start URL: {exc}") from None
    if not seeds:
        raise UsageError(f"spider {spider_cls.__name__} has no start_urls")
    return job, await frontier.enqueue(job.name, seeds)


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


async def check_reachable(urls: list[str], timeout: float = 5.0) -> None:
    """Fail fast, with one line, if a start URL's host cannot be reached at all."""
    seen: set[tuple[str, int]] = set()
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"bad start URL {url!r}: need http(s)://host/...")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if (parts.hostname, port) in seen:
            continue
        seen.add((parts.hostname, port))
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(parts.hostname, port), timeout
            )
        except (OSError, TimeoutError) as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise UsageError(f"cannot reach start URL {url}: {reason}") from None
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@dataclass
class WorkerPool:
    """N ``crawlfleet worker`` processes for one job, restarted when they die."""

    queue: str
    job: str
    n: int
    settings_json: str
    max_restarts: int = 50

    def __post_init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.restarts = 0

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        cmd = [
            sys.executable,
            "-m",
            "crawlfleet",
            "worker",
            "--queue",
            self.queue,
            "--job",
            self.job,
            "--exit-when-finished",
        ]
        env = dict(os.environ, **{SETTINGS_ENV: self.settings_json})
        return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)

    def start(self) -> None:
        self.procs = [self._spawn(i) for i in range(self.n)]

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def check(self, finished: bool) -> bool:
        """Restart crashed workers; returns True when every worker has exited."""
        alive = 0
        for i, proc in enumerate(self.procs):
            code = proc.poll()
            if code is None:
                alive += 1
            elif code != 0 and not finished and self.restarts < self.max_restarts:
                self.restarts += 1
                self.procs[i] = self._spawn(i)
                alive += 1
        return alive == 0

    def stop(self, timeout: float = 15.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def run_workers(
    frontier: Frontier,
    pool: WorkerPool,
    on_progress: Callable[[JobStats, float], None],
    poll: float = 0.25,
) -> JobStats:
    """Run the pool until the job is finished and every worker has exited."""
    started = time.monotonic()
    pool.start()
    try:
        while True:
            await asyncio.sleep(poll)
            stats = await frontier.stats(pool.job)
            on_progress(stats, time.monotonic() - started)
            finished = is_finished(stats)
            if not pool.check(finished):
                continue
            if finished:
                return stats
            raise UsageError(
                f"all workers stopped but job {pool.job} is not finished "
                f"(restarted {pool.restarts} times); see the worker errors above"
            )
    finally:
        pool.stop()


def settings_json(settings: Settings) -> str:
    data = {k: v for k, v in vars(settings).items() if k != "domains"}
    data["domains"] = {d: [v.max_in_flight, v.min_delay] for d, v in settings.domains.items()}
    return json.dumps(data)


def settings_from_env(base: Settings) -> Settings:
    raw = os.environ.get(SETTINGS_ENV)
    if not raw:
        return base
    data = json.loads(raw)
    domains = {d: DomainLimits(*v) for d, v in data.pop("domains", {}).items()}
    return base.with_overrides(data).with_overrides({"domains": domains})
