"""The live progress line and the end-of-crawl summary (stderr; stdout stays for data)."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from crawlfleet.model import JobStats

console = Console(stderr=True, highlight=False)


def _line(stats: JobStats, rate: float) -> str:
    return (
        f"{stats.records} records · {stats.quarantined} quarantined · {stats.retried} retried · "
        f"{stats.dead} dead · {stats.queued + stats.waiting} queued · {rate:,.0f} pages/s"
    )


class CrawlProgress:
    """A rich progress bar on a terminal; a plain line every few seconds elsewhere."""

    def __init__(self, job: str, every: float = 5.0) -> None:
        self.job = job
        self.every = every
        self.tty = sys.stderr.isatty()
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
        finished = stats.done + stats.dead
        total = finished + stats.queued + stats.waiting + stats.leased
        rate = stats.done / elapsed if elapsed > 0 else 0.0
        if self.tty:
            self._progress.update(
                self._task, completed=finished, total=max(total, 1), line=_line(stats, rate)
            )
        elif time.monotonic() - self._last_print >= self.every:
            self._last_print = time.monotonic()
            console.print(f"{self.job}: {finished:,}/{total:,} pages · {_line(stats, rate)}")


def summary(stats: JobStats, elapsed: float, *, store: str, raw: str, output: str | None) -> None:
    rate = stats.done / elapsed if elapsed > 0 else 0.0
    avg_depth = stats.retry_depth_sum / max(1, stats.done + stats.dead)
    console.print(f"[bold green]✓ {stats.job} finished[/] in {elapsed:.1f}s")
    console.print(f"  pages      {stats.done:,} fetched ({rate:,.0f} pages/s)")
    console.print(f"  records    {stats.records:,} valid · {stats.quarantined:,} quarantined")
    console.print(
        f"  retried    {stats.retried:,} requests (average retry depth {avg_depth:.2f}) · "
        f"{stats.dead:,} dead"
    )
    console.print(f"  store      {store}")
    console.print(f"  WARC       {raw}")
    if output:
        console.print(f"  exported   {output}")
    if stats.dead:
        console.print("  see why:   crawlfleet dead list" + (f" --job {stats.job}"))
