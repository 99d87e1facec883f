"""Text views of the store's numbers: pure functions of ``JobStats``, ``JobActivity``, ``Job``,
``Overview`` and ``CrawlReport``, shared by ``status``, ``status --watch``, ``jobs`` and
``crawl``'s progress and summary (the dashboard shows the same numbers from the same
:class:`~crawlfleet.overview.Overview`)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from crawlfleet.model import Job, JobState, JobStats, Run, RunCounters, Schedule

if TYPE_CHECKING:
    from crawlfleet.frontier.outbox import OutboxCount
    from crawlfleet.frontier.ports import JobActivity
    from crawlfleet.local.runner import CrawlReport
    from crawlfleet.monitor.overview import Overview

#: most domains and workers ``status`` lists (the busiest first)
LISTED = 8


def when(timestamp: float | None) -> str:
    """A store time as local ``YYYY-MM-DD HH:MM:SS`` (``-`` for none)."""
    if timestamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def finished(stats: JobStats) -> bool:
    from crawlfleet.local.runner import is_finished

    return is_finished(stats)


def progress_word(state: JobState, done: bool) -> str:
    """One word (or two) for a job: what workers do with it, and whether it is done."""
    from crawlfleet.local.runner import progress_word as word

    return word(state, done)


def status_line(s: JobStats) -> str:
    """The job's state and every count, on one line."""
    state = progress_word(s.state, finished(s))
    return (
        f"{s.job}: {state} · queued {s.queued} (+{s.waiting} waiting to retry, oldest "
        f"{s.oldest_queued_age:.0f}s) · leased {s.leased} · done {s.done} (gone {s.gone})"
        f" · dead {s.dead}"
        f" · records {s.records} · quarantined {s.quarantined} · retried {s.retried}"
        f" · traps {s.traps} · duplicate content {s.duplicates}"
    )


def retry_line(s: JobStats) -> str:
    """Average retry depth and the histogram of attempts per finished request."""
    bars = " ".join(f"{n}:{count}" for n, count in sorted(s.attempts_histogram.items()))
    return f"retry depth avg {s.avg_retry_depth:.2f} · attempts {bars or '-'}"


def top(counts: Mapping[str, int], most: int = 5) -> str:
    """``a 3, b 2, +4 more`` for a count per name, the largest first."""
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{name} {n}" for name, n in ordered[:most])
    return shown + (f", +{len(ordered) - most} more" if len(ordered) > most else "")


def traps_line(s: JobStats, most: int = 5) -> str:
    """Trap counts per domain, the largest first."""
    return f"traps by domain: {top(s.traps_by_domain, most)}"


def dead_line(activity: JobActivity) -> str:
    """Dead requests by reason (parse errors first named: they are bugs to fix)."""
    return f"dead by reason: {top(activity.dead_by_reason, 8)}"


def status_block(s: JobStats, activity: JobActivity | None = None) -> list[str]:
    """What ``status`` prints for one job."""
    lines = [status_line(s), f"  {retry_line(s)}"]
    if s.traps_by_domain:
        lines.append(f"  {traps_line(s)}")
    if s.robots_waiting:
        lines.append(f"  {robots_waiting(s)}")
    if activity is not None and activity.dead_by_reason:
        lines.append(f"  {dead_line(activity)}")
    return lines


def job_row(job: Job, stats: JobStats) -> str:
    """A line of ``jobs``: name, state as ``status`` says it, spider, when submitted."""
    state = progress_word(job.state, finished(stats))
    return f"{job.name}\t{state}\t{job.spider}\t{when(job.created_at)}"


def progress_line(s: JobStats, rate: float, eta: float | None = None) -> str:
    """The counts beside ``crawl``'s progress bar: pages/s, queued, done, blocked, records,
    quarantined, retried, dead and the time left at the current rate."""
    return (
        f"{rate:,.0f} pages/s · {s.queued + s.waiting:,} queued · {s.done:,} done · "
        f"{s.blocked:,} blocked · {s.records:,} records · {s.quarantined:,} quarantined · "
        f"{s.retried:,} retried · {s.dead:,} dead · ETA {duration(eta)}"
    ) + (f" · {robots_waiting(s)}" if s.robots_waiting else "")


def robots_waiting(s: JobStats) -> str:
    """``waiting for robots.txt of h (HTTP 503): 12 requests``, the host with most first, and
    how many others wait so."""
    (host, (n, error)), *others = sorted(s.robots_waiting.items(), key=lambda kv: -kv[1][0])
    why = error.removeprefix("robots.txt unreachable (").partition("): host postponed")[0]
    more = f" (+{len(others)} more hosts)" if others else ""
    return f"waiting for robots.txt of {host} ({why}): {n:,} requests{more}"


def duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h10m``; ``-`` when unknown."""
    from crawlfleet.monitor.alerts import duration as written

    return "-" if seconds is None else written(seconds)


def share(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def fleet_lines(ov: Overview) -> list[str]:
    """The fleet's overview as ``status`` prints it after the jobs: throughput, success, block
    and validation failure rates, backlog, the busiest domains, pools, workers and alerts."""
    alive = [w for w in ov.workers if w.alive]
    kinds: dict[str, int] = {}
    for w in alive:
        for kind in w.stats.kinds.split(","):
            kinds[kind] = kinds.get(kind, 0) + 1
    by_kind = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    lines = [
        f"fleet: {len(alive)} workers alive{f' ({by_kind})' if by_kind else ''} · "
        f"{ov.pages_per_second:,.1f} pages/s · success {share(ov.success_ratio)} · "
        f"recent block rate {share(ov.block_ratio)} · validation failures "
        f"{share(ov.validation_failure_ratio)} · backlog {ov.backlog:,} (oldest "
        f"{duration(ov.oldest_age)}) · leases expired "
        f"{ov.counts.attempts_by_outcome.get('lease_expired', 0):,}"
    ]
    for d in ov.domains[:LISTED]:
        lines.append(
            f"  {d.domain}: backlog {d.backlog:,} (oldest {duration(d.oldest_age)}) · in flight "
            f"{d.in_flight}/{d.max_in_flight} · delay {d.delay:.3f}s · recent block rate "
            f"{share(d.block_ratio if d.recent_attempts else None)} · {d.pages:,.0f} pages"
            + (f" · by {d.rungs_line()}" if d.rungs else "")
        )
    if len(ov.domains) > LISTED:
        lines.append(f"  +{len(ov.domains) - LISTED} more domains")
    pools = [
        f"{name} {h.healthy} healthy" + (f", {h.open} open" if h.open else "")
        + (f", {h.probing} probing" if h.probing else "")
        for name, h in ov.pools.items()
        if name != "direct"
    ]  # fmt: skip
    if pools:
        lines.append(f"routes: {' · '.join(pools)}")
    for w in alive[:LISTED]:
        memory = f" · {w.memory / 2**20:,.0f} MiB" if w.memory else ""
        lines.append(
            f"  worker {w.stats.worker} ({w.stats.kinds}): {w.pages_per_second:,.1f} pages/s · "
            f"{w.pages:,.0f} pages · in flight {w.in_flight}{memory}"
        )
    for w in ov.workers_stale[:LISTED]:
        lines.append(
            f"  worker {w.stats.worker} ({w.stats.kinds}): stale, no report for "
            f"{duration(w.silent)} (last seen {when(w.stats.last_seen)})"
        )
    lines += [f"! {a.message}" for a in ov.alerts] or ["alerts: none"]
    return lines


def crawl_summary(report: CrawlReport, *, store: str, raw: str, output: str | None) -> list[str]:
    """The end of ``crawl`` (rich markup): what happened, what this run did, where data went."""
    s = report.stats
    lines = []
    if report.removed is not None:
        lines.append(
            f"fresh start: removed job {s.job}'s {report.removed:,} requests, their history and "
            "dead letters; its old records stayed readable until this run finished, then were "
            "replaced (WARC files are kept)"
        )
    if report.resumed and report.run is not None:
        lines.append(f"run {report.run.run} of job {s.job} was still going: resumed")
    lines.append(_headline(report))
    if not report.nothing_to_do:
        rate = report.fetched / report.elapsed if report.elapsed > 0 else 0.0
        gone = f" · {s.gone:,} gone (404, 410...)" if s.gone else ""
        lines.append(f"  pages      {report.fetched:,} fetched ({rate:,.0f} pages/s){gone}")
    lines.append(f"  records    {s.records:,} valid · {s.quarantined:,} quarantined")
    if report.run is not None and (report.run.run > 1 or report.run.counters.not_modified):
        lines.append(f"  run        {run_line(report.run)}")
    lines.append(
        f"  retried    {s.retried:,} requests (average retry depth {s.avg_retry_depth:.2f}) · "
        f"{s.dead:,} dead"
    )
    if report.parse_errors:
        lines.append(
            f"  [red]errors     {report.parse_errors:,} pages failed in the spider[/] "
            f"(crawlfleet dead list --job {s.job} --reason parse_error)"
        )
        lines.extend(_parse_error_lines(report))
    lines.extend(_budget_lines(report))
    lines.append(f"  store      {store}")
    lines.append(f"  WARC       {raw}")
    if output:
        lines.append(f"  output     {report.written:,} records → {output}")
    lines.extend(f"  note       {note}" for note in report.notes)
    if s.dead and not report.parse_errors:
        lines.append(f"  see why:   crawlfleet dead list --job {s.job}")
    return lines


#: the budgets a summary names (the rest are counted in one line)
BUDGETS_SHOWN = 5


def _budget_lines(report: CrawlReport) -> list[str]:
    """The budgets the crawl ran into: which, for what (host or URL shape), how many URLs it
    left out, and the setting that raises it."""
    from rich.markup import escape

    hits = report.budget_hits
    if not hits:
        return []
    urls = sum(h.urls for h in hits)
    budgets = f"{len(hits):,} budget" + ("s" if len(hits) > 1 else "")
    lines = [f"  [yellow]budgets    {urls:,} URLs left out by {budgets}[/] (exit 3)"]
    for h in hits[:BUDGETS_SHOWN]:
        what = "host" if h.rule == "host_budget" else "URL shape"
        setting = "host_page_budget" if h.rule == "host_budget" else "pattern_budget"
        lines.append(
            f"             {h.urls:,} URLs over the {what} budget of {escape(h.key)}"
            f" (raise {setting}, or None for no limit)"
        )
    if len(hits) > BUDGETS_SHOWN:
        lines.append(f"             ... and {len(hits) - BUDGETS_SHOWN:,} more budgets")
    return lines


def _parse_error_lines(report: CrawlReport) -> list[str]:
    """The first few distinct spider errors of the run (type, message, file and line; markup
    escaped: an error message is the spider's text), then how many others there were."""
    from rich.markup import escape

    here = os.getcwd() + os.sep
    lines = []
    shown = 0
    for error, pages, url in report.parse_error_samples:
        shown += pages
        first, *rest = error.replace(f" at {here}", " at ").splitlines() or [""]
        more = f" | {len(rest)} more lines" if rest else ""
        where = f"{pages:,} pages, e.g." if pages > 1 else "at"
        lines.append(f"             {escape(first)}{escape(more)} ({where} {escape(url)})")
    others = report.parse_errors - shown
    if others > 0:
        lines.append(f"             ... and {others:,} more pages with other errors")
    return lines


def _headline(report: CrawlReport) -> str:
    name = report.stats.job
    if report.nothing_to_do:
        run = report.run.run if report.run is not None else 1
        return (
            f"nothing to do: job {name} finished at {when(report.finished_at)} (run {run}; "
            f"crawl --recrawl starts run {run + 1}, crawl --fresh starts it over)"
        )
    if report.interrupted:
        how = "stopped" if report.interrupted == "drained" else "killed"
        return (
            f"[yellow]interrupted[/]: {name} {how} after {report.elapsed:.1f}s; run the same "
            "command again to resume"
        )
    if report.failure:
        return f"[bold red]✗ {name} failed[/]: {report.failure} (in {report.elapsed:.1f}s)"
    if report.budget_hits:
        return f"[bold yellow]✓ {name} finished, short of its budgets[/] in {report.elapsed:.1f}s"
    return f"[bold green]✓ {name} finished[/] in {report.elapsed:.1f}s"


def run_counts(c: RunCounters) -> str:
    """A run's counters on one line: pages (and how many were 304s), bytes, records."""
    pages = f"{c.pages:,} pages"
    if c.not_modified:
        pages += f" ({c.not_modified:,} not modified)"
    if c.gone:
        pages += f" · {c.gone:,} gone"
    return (
        f"{pages} · {size(c.bytes)} · records {c.records_new:,} new · {c.records_changed:,} "
        f"changed · {c.records_unchanged:,} unchanged · {c.records_removed:,} removed"
    )


def run_line(run: Run) -> str:
    """One run: its number, kind and state, when, and its counts."""
    state = run.state.value
    end = f" → {when(run.finished_at)}" if run.finished_at is not None else ""
    by = " by schedule" if run.schedule else ""
    head = f"{run.run} ({run.kind.value}{by}, {state}) {when(run.started_at)}{end}"
    return f"{head}: {run_counts(run.counters)}"


def size(n: int) -> str:
    """Bytes as a reader wants them (1.2 MB)."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    return f"{value:,.1f} TB"


def run_row(run: Run) -> str:
    """A ``jobs runs`` row, tab-separated: run, kind, state, started, finished, then the
    counters (pages, 304s, bytes, records new, changed, unchanged, removed)."""
    c = run.counters
    cells = [
        run.run,
        run.kind.value,
        run.state.value,
        when(run.started_at),
        when(run.finished_at) if run.finished_at is not None else "-",
        c.pages,
        c.not_modified,
        c.bytes,
        c.records_new,
        c.records_changed,
        c.records_unchanged,
        c.records_removed,
    ]
    return "\t".join(str(x) for x in cells)


RUN_HEADER = (
    "run\tkind\tstate\tstarted\tfinished\tpages\t304\tbytes\tnew\tchanged\tunchanged\tremoved"
)


def schedule_line(s: Schedule) -> str:
    """A schedule on one line: its job, timing, overlap, next run, and what the last did."""
    from crawlfleet.frontier.runs import timing_of

    last = f" · last: {s.last_note}" if s.last_note else ""
    queued = " · a run queued" if s.queued else ""
    return (
        f"{s.job}: {timing_of(s).describe()} · overlap {s.overlap} · next run "
        f"{when(s.next_at)}{queued}{last}"
    )


def outbox_lines(counts: Sequence[OutboxCount], labels: Mapping[str, str], now: float) -> list[str]:
    """The outbox per destination, as ``status`` and ``notify status`` print it: waiting, in
    flight, delivered, dead (a dead delivery is a ``!`` line: ``notify replay`` sends it)."""
    lines = []
    for c in counts:
        name = labels.get(c.destination, f"{c.destination} (not configured here)")
        oldest = f" (oldest {duration(now - c.oldest_queued_at)})" if c.oldest_queued_at else ""
        line = (
            f"outbox {name}: {c.queued:,} waiting{oldest} · {c.leased:,} in flight · "
            f"{c.done:,} delivered · {c.dead:,} dead"
        )
        if c.last_error and (c.queued or c.dead):
            line += f" · last error: {c.last_error}"
        lines.append(("! " if c.dead else "") + line)
    return lines


def quality_alert_lines(run: int, final: bool, alerts: Sequence[Mapping[str, object]]) -> list[str]:
    """A job's quality alerts of its newest profiled run (``status``)."""
    if not alerts:
        return []
    when_ = "" if final else ", so far"
    return [f"  quality of run {run}{when_}: {len(alerts)} alerts"] + [
        f"  ! {a.get('alert')}: {a.get('message')}" for a in alerts
    ]
