"""``crawlfleet status``: each job's state and counts, once or live (``--watch``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from crawlfleet.cli.common import async_command, opened, queue_option, settings

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.frontier.ports import Frontier
    from crawlfleet.model import Run


@click.command()
@queue_option
@click.option("--job", help="Only this job.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--watch", is_flag=True, help="Refresh live until Ctrl-C.")
@click.option(
    "--every",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.1),
    metavar="SECONDS",
    help="Refresh interval of --watch.",
)
@click.pass_context
@async_command
async def status(
    ctx: click.Context,
    queue: str | None,
    job: str | None,
    as_json: bool,
    watch: bool,
    every: float,
) -> None:
    """Each job's state, backlog and results, and whether it is finished fleet-wide, its current
    run and the last few (pages, 304s, bytes, records new / changed / unchanged / removed),
    the quality alerts of its newest run; the schedules and their next runs; then the fleet:
    workers alive, pages/s, success, block and validation failure rates, the busiest domains
    (backlog, oldest queued request, in flight, pacing), pools, the alerts, and the outbox per
    destination (waiting, delivered, dead: `crawlfleet notify replay` sends the dead again).

    \b
    The first word is the job's state and progress:
      running       workers lease its requests
      finished      nothing queued, waiting for a retry or leased, anywhere in the fleet
      paused        no new leases; in-flight requests finish (jobs resume NAME)
      cancelled     no new leases; queued requests stay in the store (jobs resume NAME)

    \b
    --json gives per job "state" (running, finished, paused, cancelled), "job_state" (what
    workers do with it: running, paused, cancelled), "finished" (true or false) and "progress"
    (the first word above, e.g. "paused (finished)").
    """
    s = settings(ctx, {"queue": queue})
    async with opened(s, create=False) as store:
        names = await _jobs(store, job)
        if as_json:
            click.echo(json.dumps(await _json(store, names)))
        elif watch:
            await _watch(store, s, names, every)
        else:
            for line in await _lines(store, s, names):
                click.echo(line)


async def _jobs(store: Frontier, job: str | None) -> list[str]:
    from crawlfleet.errors import UsageError

    if job is not None:
        if await store.get_job(job) is None:
            raise UsageError(f"no job named {job!r}")
        return [job]
    return [j.name for j in await store.list_jobs()]


async def _json(store: Frontier, names: list[str]) -> list[dict[str, object]]:
    import json
    from dataclasses import asdict

    from crawlfleet.local.runner import state_fields

    out = []
    schedules = {sc.job: sc for sc in await store.schedules()}
    for name in names:
        st, activity = await store.stats(name), await store.job_activity(name)
        reasons = dict(activity.dead_by_reason)
        runs = [_run_json(r) for r in await store.runs(name, limit=RUNS_SHOWN)]
        sched = schedules.get(name)
        quality = None
        for row in await store.profiles(name, limit=1):
            alerts = json.loads(row.profile).get("alerts") or []
            quality = {"run": row.run, "final": row.final, "alerts": alerts}
        out.append(
            dict(
                asdict(st),
                **state_fields(st),  # state, job_state, finished, progress: one picture
                dead_by_reason=reasons,
                runs=runs,
                schedule=asdict(sched) if sched is not None else None,
                quality=quality,
            )
        )
    return out


#: the runs of a job status shows (the current one and those before it)
RUNS_SHOWN = 4


def _run_json(run: Run) -> dict[str, object]:
    from dataclasses import asdict

    return dict(asdict(run), kind=run.kind.value, state=run.state.value)


async def _lines(store: Frontier, s: Settings, names: list[str]) -> list[str]:
    import time

    from crawlfleet.cli.views import fleet_lines, status_block
    from crawlfleet.monitor.overview import read_overview

    if not names:
        return ["no jobs"]
    import json

    from crawlfleet.cli.views import outbox_lines, quality_alert_lines, run_line, schedule_line
    from crawlfleet.notify.destinations import destinations

    lines: list[str] = []
    schedules = {sc.job: sc for sc in await store.schedules()}
    for name in names:
        lines += status_block(await store.stats(name), await store.job_activity(name))
        for row in await store.profiles(name, limit=1):
            alerts = json.loads(row.profile).get("alerts") or []
            lines += quality_alert_lines(row.run, row.final, alerts)
        runs = await store.runs(name, limit=RUNS_SHOWN)
        if runs and (len(runs) > 1 or runs[0].run > 1 or name in schedules):
            lines += [f"  run {run_line(r)}" for r in runs]
        if name in schedules:
            lines.append(f"  schedule {schedule_line(schedules.pop(name))}")
    lines += [f"schedule {schedule_line(sc)}" for sc in schedules.values()]
    c = s.control
    ov = await read_overview(store, time.time(), rules=c.alert_rules(), alive_after=c.alive_after)
    labels = {d.id: d.label for d in destinations(s)}
    outbox = outbox_lines(await store.outbox_counts(), labels, time.time())
    return [*lines, "", *fleet_lines(ov), *outbox]


async def _watch(store: Frontier, s: Settings, names: list[str], every: float) -> None:
    """The same lines, redrawn every ``every`` seconds in place until Ctrl-C (on a terminal;
    piped, each frame is printed in turn, a blank line after it)."""
    import asyncio
    import contextlib
    import signal
    import time

    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from crawlfleet.cli.views import when

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    console = Console(highlight=False)

    async def frame() -> Text:
        current = names or [j.name for j in await store.list_jobs()]
        lines = await _lines(store, s, current)
        head = f"crawlfleet status · {when(time.time())} · Ctrl-C to leave"
        text = Text(head, style="bold")
        for line in lines:
            text.append("\n" + line, style="red" if line.startswith("! ") else "")
        return text

    async def pause() -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)

    try:
        if not console.is_terminal:  # piped to a file or a log: each frame whole, in turn
            while not stop.is_set():
                click.echo((await frame()).plain + "\n")
                await pause()
            return
        with Live(console=console, auto_refresh=False) as live:
            while not stop.is_set():
                live.update(await frame())
                live.refresh()
                await pause()
    finally:
        loop.remove_signal_handler(signal.SIGINT)
