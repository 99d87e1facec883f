"""Keeping the runs' quality: whoever runs with the store (workers, ``serve``, ``crawl``) does
this, and the store makes sure each step happens once across the fleet.

* A running run is **checked** every ``[quality] check_every`` seconds (one process at a time:
  ``claim_check``): its profile is computed from the store, the monitors judge it against the
  job's finished runs, and each breach not alerted yet in this run becomes an ``alert`` event.
* A finished run is **closed** once (``save_profile(final=True)``, which loses the race in
  every process but one): its final profile, the breaches the end reveals (fewer records than
  usual, none at all), and a ``run_finished`` event with its summary and profile, all in one
  transaction.
* Then each records sink gets the run's changed records in batches (``changes`` events; the
  store keeps how far each sink got, so a process that dies half way leaves the rest to the
  next).

Events are written whether or not a destination wants them: they are the alerts' history too
(``crawlfleet quality`` shows them); deliveries go to the destinations that want their kind.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from crawlfleet.data.profile import RunProfile, build_profile
from crawlfleet.frontier.outbox import OutboxEvent
from crawlfleet.model import Job, JobState, Run, RunState
from crawlfleet.monitor.quality import Breach, QualityRules, evaluate
from crawlfleet.notify.destinations import Destination
from crawlfleet.notify.payloads import alert_body, changes_body, dumps, run_finished_body
from crawlfleet.urls import mask_credentials

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.frontier.ports import Frontier

__all__ = ["QUALITY_KEY", "QualityKeeper", "RunInfo", "job_quality", "run_info"]

log = logging.getLogger("crawlfleet.quality")

#: the key of a job's stored settings holding its quality rules and its model's fields
QUALITY_KEY: Final = "_quality"
#: alert keys of a run read back to know which breaches were alerted already
ALERTS_READ: Final = 1000
#: most share of the time the checks of a running run may take (reading its records)
CHECK_SHARE: Final = 0.05


def job_quality(rules: QualityRules, kinds: Mapping[str, str]) -> dict[str, Any]:
    """What a job keeps of its quality (at submit): its rules and its model's fields."""
    return {"rules": rules.to_json(), "fields": dict(kinds)}


def _of_job(job: Job) -> tuple[QualityRules, dict[str, str]]:
    saved = job.settings.get(QUALITY_KEY) or {}
    return QualityRules.from_json(saved.get("rules")), dict(saved.get("fields") or {})


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A run of a job: its number, when it started, whether (and when) it finished, and its
    counters (pages done and requests given up in it)."""

    run: int
    started_at: float
    finished: bool
    finished_at: float | None
    pages: int = 0
    dead: int = 0

    @classmethod
    def of(cls, run: Run) -> RunInfo:
        return cls(
            run.run,
            run.started_at,
            run.state is RunState.FINISHED,
            run.finished_at,
            run.counters.pages,
            run.counters.dead,
        )


async def _finished(store: Frontier, job: Job) -> bool:
    """Whether nothing of the job is left to do (one indexed probe: every process asks this of
    every job every few seconds, never the job's whole counts); a cancelled job once none of its
    requests is leased."""
    if job.state is JobState.CANCELLED:
        return (await store.stats(job.name)).leased == 0
    return await store.is_finished(job.name)


async def run_info(store: Frontier, job: Job) -> RunInfo | None:
    """The job's current run; a job whose work is all done has its run ended here if no one
    did yet (``finish_runs``: once, whoever calls). None: the job has no run (an older store)."""
    run = await store.current_run(job.name)
    if run is None:
        return None
    if run.state is RunState.RUNNING and await _finished(store, job):
        for ended in await store.finish_runs([job.name]):
            if ended.run == run.run:
                run = ended
    return RunInfo.of(run)


class QualityKeeper:
    """Checks and closes the runs of the store's jobs (or of ``jobs``), and feeds the sinks."""

    def __init__(
        self,
        store: Frontier,
        settings: Settings,
        destinations: Sequence[Destination] = (),
        *,
        jobs: Sequence[str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.settings = settings
        self.destinations = list(destinations)
        self.jobs = list(jobs) if jobs is not None else None
        self.clock = clock
        self._claimed: dict[tuple[str, int], float] = {}  # when this process last asked

    async def tick(self) -> None:
        """One look at every job: check a running run when due, close a finished one, feed
        the sinks."""
        for job in await self.store.list_jobs():
            if self.jobs is not None and job.name not in self.jobs:
                continue
            try:
                await self.keep(job)
            except Exception:  # one job's trouble must not stop the others'
                log.exception("quality of job %s", job.name)

    async def keep(self, job: Job) -> None:
        info = await run_info(self.store, job)
        if info is None:
            return
        rows = await self.store.profiles(job.name, limit=1)
        closed = bool(rows) and rows[0].run == info.run and rows[0].final
        if info.finished:
            if not closed:
                await self.close(job, info)
            await self.feed_sinks(job, info)
        else:
            took = _took(rows[0].profile) if rows and rows[0].run == info.run else 0.0
            # a check never takes more than CHECK_SHARE of the time: a run whose records take
            # 30 s to profile is checked every 10 minutes, not every minute
            every = max(self.settings.quality.check_every, took / CHECK_SHARE)
            if self._may_claim(job.name, info.run, every) and await self.store.claim_check(
                job.name, info.run, every
            ):
                await self.check(job, info)

    def _may_claim(self, job: str, run: int, every: float) -> bool:
        """Ask the store for a check at most every quarter of ``check_every`` (a claim is a
        write: every process of a fleet asking every few seconds would be many)."""
        now = self.clock()
        gap = every / 4
        if now - self._claimed.get((job, run), -gap) < gap:
            return False
        self._claimed[(job, run)] = now
        return True

    async def close_runs(self, runs: Sequence[Run]) -> None:
        """Close runs that just ended (what ``finish_runs`` returned), before anything starts
        the next run of their jobs."""
        for run in runs:
            if self.jobs is not None and run.job not in self.jobs:
                continue
            job = await self.store.get_job(run.job)
            if job is None:
                continue
            try:
                await self.close(job, RunInfo.of(run))
            except Exception:  # the periodic tick tries again
                log.exception("closing run %d of job %s", run.run, run.job)

    async def profile(self, job: Job, info: RunInfo, *, final: bool) -> RunProfile:
        counts = await self.store.profile_counts(job.name, info.run)
        records, quarantined, reasons, fields = counts
        retries, traps, blocked = await self.store.run_costs(job.name, info.run, info.started_at)
        _, kinds = _of_job(job)
        base = RunProfile(
            job=job.name,
            run=info.run,
            at=self.clock(),
            started_at=info.started_at,
            finished_at=info.finished_at if final else None,
            final=final,
            records=records,
            quarantined=quarantined,
            quarantine_by_reason=reasons,
            pages=info.pages,
            dead=max(0, info.dead - traps),
            blocked=blocked,
            retries=retries,
        )
        return build_profile(base, fields, kinds)

    async def _judge(
        self, job: Job, profile: RunProfile
    ) -> tuple[list[Breach], list[OutboxEvent], list[dict[str, Any]]]:
        rules, _ = _of_job(job)
        rows = await self.store.profiles(job.name, limit=rules.baseline_runs + 2)
        previous = [RunProfile.from_json(json.loads(r.profile)) for r in rows]
        breaches = evaluate(profile, previous, rules, now=self.clock())
        earlier = next((r for r in rows if r.run == profile.run), None)
        fired = {a["key"]: a for a in _alerts_of(earlier.profile if earlier else None)}
        alerted = await self._alerted(job.name, profile.run)
        events = []
        for b in breaches:
            key = b.key(job.name, profile.run)
            fired.setdefault(key, _alert_summary(key, b))
            if key in alerted:
                continue
            examples = await self.examples(
                job.name, profile.run, b, rules.examples, profile.started_at
            )
            body = alert_body(key, job.name, profile.run, b, examples, self.clock())
            events.append(self._event(key, "alert", body, job.name, profile.run))
            log.warning("job %s run %d: %s", job.name, profile.run, b.message)
        return breaches, events, list(fired.values())

    async def check(self, job: Job, info: RunInfo) -> None:
        started = time.monotonic()
        profile = await self.profile(job, info, final=False)
        _, events, alerts = await self._judge(job, profile)
        took = time.monotonic() - started
        await self.store.save_profile(
            job.name, info.run, _row(profile, alerts, took), final=False, events=events
        )

    async def close(self, job: Job, info: RunInfo) -> bool:
        """Close a finished run (once across the fleet); returns whether this call did."""
        rows = await self.store.profiles(job.name, limit=1)
        if rows and rows[0].run == info.run and rows[0].final:
            return False
        profile = await self.profile(job, info, final=True)
        _, events, alerts = await self._judge(job, profile)
        key = f"run_finished:{job.name}:{info.run}"
        body = run_finished_body(key, profile, sorted({a["alert"] for a in alerts}))
        events.append(self._event(key, "run_finished", body, job.name, info.run))
        done = await self.store.save_profile(
            job.name, info.run, _row(profile, alerts), final=True, events=events
        )
        if done:
            log.info(
                "job %s run %d closed: %d records, %d alerts",
                job.name,
                info.run,
                profile.records,
                len(alerts),
            )
        return done

    async def feed_sinks(self, job: Job, info: RunInfo, most: int = 100) -> None:
        """Give each sink up to ``most`` more batches of the run's changed records."""
        for sink in (d for d in self.destinations if d.kind == "sink"):
            for _ in range(most):
                if not await self._batch(job.name, info.run, sink):
                    break

    async def _batch(self, job: str, run: int, sink: Destination) -> bool:
        """Write the sink's next batch; False when it has had everything."""
        after, batches, done = await self.store.sink_state(job, run, sink.id)
        if done:
            return False
        rows = await self.store.sink_records(job, run, after, sink.batch)
        if not rows:
            await self.store.advance_sink(
                job, run, sink.id, batches=batches, after=after, done=True
            )
            return False
        n = batches + 1
        key = f"changes:{job}:{run}:{sink.name}:{n}"
        records = [
            {
                "key": r.key,
                "status": status,
                "data": r.data,
                "previous": previous if status == "changed" else None,
                "url": mask_credentials(r.url),
                "fetched_at": r.fetched_at,
                "warc_file": r.warc_file,
                "warc_record_id": r.warc_record_id,
            }
            for r, status, previous in rows
        ]
        event = OutboxEvent(
            key,
            "changes",
            dumps(changes_body(key, job, run, sink.name, n, records)),
            (sink.id,),
            job,
            run,
            self.settings.notify.tries,
        )
        await self.store.advance_sink(
            job,
            run,
            sink.id,
            batches=batches,
            after=rows[-1][0].key,
            done=len(rows) < sink.batch,
            event=event,
        )
        return len(rows) == sink.batch

    def _event(
        self, key: str, kind: str, body: Mapping[str, Any], job: str, run: int
    ) -> OutboxEvent:
        dests = tuple(d.id for d in self.destinations if d.wants(kind))
        return OutboxEvent(key, kind, dumps(body), dests, job, run, self.settings.notify.tries)

    async def _alerted(self, job: str, run: int) -> set[str]:
        prefix = f"alert:{job}:{run}:"
        rows = await self.store.outbox_events(job, "alert", ALERTS_READ)
        return {e.key for e in rows if e.key.startswith(prefix)}

    async def examples(
        self, job: str, run: int, b: Breach, limit: int, since: float
    ) -> list[dict[str, Any]]:
        """What shows a breach: records missing its field, quarantine rows, dead letters or
        blocked URLs, with their pages and WARC records."""
        if not limit or b.examples is None:
            return []
        if b.examples == "missing_field" and b.field is not None:
            return [
                {
                    "kind": "record",
                    "key": r.key,
                    "url": mask_credentials(r.url),
                    "warc_file": r.warc_file,
                    "warc_record_id": r.warc_record_id,
                }
                for r in await self.store.records_missing(job, run, b.field, limit)
            ]
        if b.examples == "quarantine":
            return [
                {
                    "kind": "quarantine",
                    "id": q.id,
                    "url": mask_credentials(q.row.url),
                    "errors": [dict(e) for e in list(q.row.errors)[:3]],
                    "warc_file": q.row.warc_file,
                    "warc_record_id": q.row.warc_record_id,
                    "snapshot": f"/quarantine/{q.id}/snapshot" if q.row.warc_record_id else None,
                }
                for q in await self.store.quarantine_items(job, limit)
            ]
        if b.examples == "dead":
            return [
                {
                    "kind": "dead_letter",
                    "id": d.id,
                    "url": mask_credentials(d.url),
                    "reason": d.reason.value,
                    "error": d.error,
                }
                for d in await self.store.dead_letters(job, limit=limit)
            ]
        return [
            {"kind": "blocked", "url": mask_credentials(url), "at": at, "blocks": n}
            for url, at, n in await self.store.blocked_examples(job, since, limit)
        ]


def _alert_summary(key: str, b: Breach) -> dict[str, Any]:
    return {
        "key": key,
        "alert": b.alert,
        "field": b.field,
        "severity": b.severity,
        "value": b.value,
        "baseline": b.baseline,
        "threshold": b.threshold,
        "message": b.message,
    }


def _alerts_of(row: str | None) -> list[dict[str, Any]]:
    if not row:
        return []
    alerts = json.loads(row).get("alerts") or []
    return [a for a in alerts if isinstance(a, dict) and "key" in a]


def _row(profile: RunProfile, alerts: Sequence[Mapping[str, Any]], took: float = 0.0) -> str:
    """What the store keeps of a run: its profile, the alerts fired in it so far, and how long
    the check took (seconds)."""
    return dumps({**profile.to_json(), "alerts": list(alerts), "took": took})


def _took(row: str) -> float:
    try:
        return float(json.loads(row).get("took") or 0.0)
    except (ValueError, TypeError, AttributeError):
        return 0.0
