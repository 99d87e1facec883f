"""``crawl``'s live display and its summary, on stderr (stdout stays for data: ``-o -``).

A rich progress bar on a terminal, a plain line every few seconds elsewhere; notes and the
workers' log lines print above the bar. ``-q`` hides the progress, ``-qq`` the summary too.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from crawlfleet.cli.views import progress_line
from crawlfleet.model import JobStats

console = Console(stderr=True, highlight=False)


class RateMeter:
    """Requests finished per second over the last ``window`` seconds of updates (the times are
    passed in: pure)."""

    def __init__(self, window: float = 10.0) -> None:
        self.window = window
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, t: float, finished: int) -> float:
        """Note ``finished`` requests at time ``t``; returns the rate over the window."""
        self._samples.append((t, finished))
        while len(self._samples) > 2 and self._samples[1][0] <= t - self.window:
            self._samples.popleft()
        t0, n0 = self._samples[0]
        return max(0.0, (finished - n0) / (t - t0)) if t > t0 else 0.0


def eta(remaining: int, rate: float) -> float | None:
    """Seconds until ``remaining`` requests are done at ``rate`` (None: no rate yet)."""
    if remaining <= 0:
        return 0.0
    return remaining / rate if rate > 0 else None


class CrawlProgress:
    """The crawl's view (:class:`crawlfleet.runner.CrawlView`)."""

    def __init__(self, job: str, *, quiet: int = 0, every: float = 5.0) -> None:
        self.job = job
        self.quiet = quiet
        self.every = every
        self.tty = sys.stderr.isatty() and not quiet
        self._last_print = 0.0
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f} pages"),
            TextColumn("{task.fields[line]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task(f"crawling {job}", total=1, line="")
        self._meter = RateMeter()

    def __enter__(self) -> CrawlProgress:
        if self.tty:
            self._progress.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.tty:
            self._progress.stop()

    def update(self, stats: JobStats, elapsed: float) -> None:
        if self.quiet:
            return
        if stats.job != self.job:
            self.job = stats.job
            self._progress.update(self._task, description=f"crawling {stats.job}")
        # fetched pages only: a trapped URL was never fetched
        done = stats.done + stats.dead - stats.trap_rows
        left = stats.queued + stats.waiting + stats.leased
        total = done + left
        rate = self._meter.add(time.monotonic(), done)
        line = progress_line(stats, rate, eta(left, rate))
        if self.tty:
            self._progress.update(self._task, completed=done, total=max(total, 1), line=line)
        elif time.monotonic() - self._last_print >= self.every:
            self._last_print = time.monotonic()
            console.print(f"{self.job}: {done:,}/{total:,} pages · {line}", soft_wrap=True)

    def note(self, line: str) -> None:
        if self.quiet < 2:
            console.print(line, markup=False, emoji=False, soft_wrap=True)

    def worker_line(self, line: str) -> None:
        console.print(line, markup=False, emoji=False, soft_wrap=True)


def print_summary(lines: list[str], quiet: int) -> None:
    if quiet < 2:
        for line in lines:
            console.print(line, soft_wrap=True)
