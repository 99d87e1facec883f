"""What both backends share of runs and schedules: their rows as objects, a run's counters, and
what a due schedule does.

A job's runs live in ``runs`` (one row per run: kind, state, start and end, the schedule that
started it, and once it finished its counters as JSON); ``jobs.run`` is the current one. While a
run goes its counters are read from the rows it touched (requests finished in it, records it
wrote or removed, quarantine rows it added: ``run_pages`` / ``run_records``), so no worker
updates a shared counter row on its hot path; the run's end writes them into its row.

A schedule (``schedules``, one per job) starts runs of its job. :func:`schedule_step` is what
one due schedule does, given whether its job exists and whether its last run is still going;
the backends run it inside the transaction that starts the run and moves ``next_at`` on, so a
fleet starts each due run exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from crawlfleet.data.changes import ChangeRow, RecordStatus
from crawlfleet.frontier.common import record_from_row
from crawlfleet.model import (
    Completion,
    RecordRow,
    Run,
    RunCounters,
    RunKind,
    RunState,
    Schedule,
)
from crawlfleet.policy.revisit import due_at
from crawlfleet.policy.schedule import Timing, next_due

__all__ = [
    "RUN_COLUMNS",
    "ScheduleStep",
    "change_of",
    "completion_values",
    "counters_from",
    "counters_json",
    "run_from_row",
    "schedule_from_row",
    "schedule_step",
    "timing_of",
]

#: the columns of ``current_run`` / ``runs_of`` rows (both SQL files)
RUN_COLUMNS = (
    "job_id",
    "job",
    "run",
    "kind",
    "state",
    "started_at",
    "finished_at",
    "schedule",
    "counters",
)


def completion_values(c: Completion, now: float, run: int) -> dict[str, Any]:
    """A completion's columns for the ``complete`` statement: its status, the run, the page's
    recrawl state (JSON, None: kept), when it is due again (None: every run), its bytes and what
    the visit found."""
    return {
        "status": c.status,
        "now": now,
        "run": run,
        "page": json.dumps(c.page, separators=(",", ":")) if c.page is not None else None,
        "due_at": due_at(now, c.revisit) if c.revisit is not None else None,
        "nbytes": c.nbytes,
        "visit": c.visit.value if c.visit is not None else None,
        "id": c.lease.id,
    }


def counters_from(pages: Sequence[Any], records: Sequence[Any]) -> RunCounters:
    """A run's counters from its ``run_pages`` and ``run_records`` rows."""
    p = [int(v or 0) for v in pages]
    r = [int(v or 0) for v in records]
    return RunCounters(*p, *r)


def counters_json(counters: RunCounters) -> str:
    return json.dumps(asdict(counters), separators=(",", ":"))


_COUNTER_NAMES = frozenset(f.name for f in fields(RunCounters))


def run_from_row(row: Sequence[Any], live: RunCounters | None = None) -> Run:
    """A ``current_run`` / ``runs_of`` row; a running run's counters are ``live`` (its row
    holds them once it finished)."""
    _job_id, job, run, kind, state, started_at, finished_at, schedule, counters = row
    if live is not None:
        kept = live
    elif counters:
        values = json.loads(counters) if isinstance(counters, str) else dict(counters)
        kept = RunCounters(**{k: int(v) for k, v in values.items() if k in _COUNTER_NAMES})
    else:
        kept = RunCounters()
    return Run(
        job=job,
        run=int(run),
        kind=RunKind(kind),
        state=RunState(state),
        started_at=float(started_at),
        finished_at=None if finished_at is None else float(finished_at),
        counters=kept,
        schedule=schedule,
    )


def schedule_from_row(row: Sequence[Any]) -> Schedule:
    """A ``list_schedules`` / ``due_schedules`` row."""
    job, spider, every, cron, tz, anchor, overlap, next_at, queued, last_at, last_run = row[:11]
    note, created_at = row[11], row[12]
    return Schedule(
        job=job,
        spider=spider,
        every=every,
        cron=cron,
        tz=tz,
        anchor=float(anchor),
        overlap=overlap,
        next_at=float(next_at),
        queued=bool(queued),
        last_at=last_at,
        last_run=last_run,
        last_note=note,
        created_at=float(created_at),
    )


def timing_of(s: Schedule) -> Timing:
    return Timing(every=s.every, cron=s.cron, tz=s.tz, anchor=s.anchor)


@dataclass(frozen=True, slots=True)
class ScheduleStep:
    """What a due schedule does now: start a run or not, when it is due next, whether a run
    waits (``queued``), and a note of what happened (``status`` shows it)."""

    start: bool
    next_at: float
    queued: bool
    note: str | None


def schedule_step(
    s: Schedule, now: float, *, exists: bool, going: int | None, state: str = "running"
) -> ScheduleStep:
    """The step of schedule ``s`` at ``now``: its job ``exists`` or not, its last run is still
    ``going`` (that run's number) or not (None), and the job's ``state`` (a paused or cancelled
    job starts no run). A schedule that was due moves ``next_at`` on past ``now`` (a scheduler
    down for a day starts one run, not four); one that only had a run queued keeps it."""
    due = s.next_at <= now
    next_at = next_due(timing_of(s), now) if due else s.next_at
    if not exists:
        return ScheduleStep(False, next_at, False, f"job {s.job} is not in the store: nothing run")
    if state != "running":
        return ScheduleStep(False, next_at, False, f"skipped: job {s.job} is {state}")
    if going is not None:
        if s.overlap == "queue":
            return ScheduleStep(False, next_at, True, f"queued: run {going} is still going")
        if due:
            return ScheduleStep(False, next_at, False, f"skipped: run {going} was still going")
        return ScheduleStep(False, next_at, False, s.last_note)
    return ScheduleStep(True, next_at, False, None)


def change_of(
    row: Sequence[Any], since: int, older: Mapping[str, Any]
) -> tuple[RecordRow, ChangeRow] | None:
    """An ``iter_changes`` row as what ``export --changes --since`` writes of it: the record and
    how it changed across the runs from ``since`` on (None: no change to tell). ``older`` holds,
    by key, the version a record had before those runs where record_versions kept it (else the
    record's ``previous`` is the best known). A record new and removed within those runs, or
    changed and back again, is no change."""
    record = record_from_row(row[:8])
    status, _run, first_run, changed_run, removed_run, previous = row[8:14]
    if status == RecordStatus.REMOVED and removed_run is not None and removed_run >= since:
        if first_run >= since:
            return None
        return record, ChangeRow(record.key, record.data, RecordStatus.REMOVED)
    if status == RecordStatus.REMOVED:
        return None
    if first_run >= since:
        return record, ChangeRow(record.key, record.data, RecordStatus.NEW)
    if changed_run >= since:
        before = older.get(record.key)
        if before is None and previous is not None:
            before = json.loads(previous) if isinstance(previous, str) else previous
        row_ = ChangeRow(record.key, record.data, RecordStatus.CHANGED, before or {})
        return (record, row_) if row_.columns() is not None else None
    return None
