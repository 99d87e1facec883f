"""``crawlfleet schedule``: runs of a job started on a timetable held in the store.

``schedule add SPIDER --every 6h`` (or ``--cron "0 6 * * *"``) stores the job's schedule; every
process that runs with the store (the workers of a fleet, ``serve``, ``schedule run``) starts
its due runs, each exactly once across the fleet.
"""

from __future__ import annotations

import click

from crawlfleet.cli.common import async_command, opened, options, pairs, queue_option, settings


@click.group()
def schedule() -> None:
    """Start runs of a job on a timetable: every N hours, or at the times a cron line names.

    \b
    add     store a job's schedule (and submit the job, its first run now, if it is new)
    list    the schedules: timing, overlap, next run, what the last due time did
    remove  drop a job's schedule
    run     start due runs in the foreground, with local workers to crawl them

    The schedule lives in the store: a fleet has one. Every worker of the fleet, serve and
    schedule run start the runs that are due, each exactly once across the fleet; a run due
    while the last is still going is skipped (--overlap skip, the default) or started as soon as
    the last one finished (--overlap queue).
    """


@schedule.command("add")
@click.argument("spider", metavar="SPIDER.py")
@click.option("--every", metavar="INTERVAL", help="Run every INTERVAL: 6h, 30m, 1d, 1d12h.")
@click.option("--cron", metavar='"M H DOM MON DOW"', help='A cron line: "0 6 * * *".')
@click.option("--tz", default="UTC", show_default=True, help="Time zone of --cron (an IANA name).")
@click.option(
    "--overlap",
    type=click.Choice(["skip", "queue"]),
    default="skip",
    show_default=True,
    help="A run due while the last one goes: skip it, or queue it (started once the last ends).",
)
@click.option("--job", help="Job name (default: the spider's name).")
@click.option("-a", "spider_args", multiple=True, metavar="NAME=VALUE", help="Spider argument.")
@click.option("-s", "set_", multiple=True, metavar="KEY=VALUE", help="Setting of the job.")
@queue_option
@click.pass_context
@async_command
async def schedule_add(
    ctx: click.Context,
    spider: str,
    every: str | None,
    cron: str | None,
    tz: str,
    overlap: str,
    job: str | None,
    spider_args: tuple[str, ...],
    set_: tuple[str, ...],
    queue: str | None,
) -> None:
    """Schedule SPIDER.py's job: --every INTERVAL or --cron LINE. A job new to the store is
    submitted with it (its first run starts now, crawled by whoever runs workers); a job there
    already keeps its runs, its spider and settings updated."""
    import time

    from crawlfleet.cli.crawl import job_settings
    from crawlfleet.cli.views import when
    from crawlfleet.errors import UsageError
    from crawlfleet.intake import prepare, submit
    from crawlfleet.model import Schedule
    from crawlfleet.policy.schedule import next_due, parse_timing
    from crawlfleet.spiders import configure, load_spider, spider_ref

    now = time.time()
    try:
        timing = parse_timing(every, cron, tz, anchor=now)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    s = settings(ctx, {"queue": queue})
    stored = job_settings(pairs(spider_args, "-a"), pairs(set_, "-s"))
    spider_cls = configure(load_spider(spider), stored)
    name = job or spider_cls.name
    intake = prepare(name, spider_ref(spider), spider_cls, s, stored)
    async with opened(s) as store:
        new = await store.get_job(name) is None
        if new:
            await submit(store, intake)
        else:
            await store.submit_job(intake.spec)
        due = next_due(timing, now)
        await store.save_schedule(
            Schedule(
                job=name,
                spider=intake.spec.spider,
                every=timing.every,
                cron=timing.cron,
                tz=timing.tz,
                anchor=timing.anchor,
                overlap=overlap,
                next_at=due,
            )
        )
    first = "; job submitted, its first run starts now" if new else ""
    click.echo(f"job {name}: {timing.describe()}, next run {when(due)}{first}")


@schedule.command("list")
@queue_option
@click.pass_context
@async_command
async def schedule_list(ctx: click.Context, queue: str | None) -> None:
    """Each schedule: job, timing, overlap, next run, what its last due time did."""
    from crawlfleet.cli.views import schedule_line

    s = settings(ctx, {"queue": queue})
    async with opened(s, create=False) as store:
        schedules = await store.schedules()
    for line in [schedule_line(x) for x in schedules] or ["no schedules"]:
        click.echo(line)


@schedule.command("remove")
@click.argument("job")
@queue_option
@click.pass_context
@async_command
async def schedule_remove(ctx: click.Context, job: str, queue: str | None) -> None:
    """Drop JOB's schedule (the job, its runs and records stay)."""
    from crawlfleet.errors import UsageError

    s = settings(ctx, {"queue": queue})
    async with opened(s, create=False) as store:
        if not await store.remove_schedule(job):
            raise UsageError(f"no schedule for job {job!r}")
    click.echo(f"job {job}: schedule removed")


@schedule.command("run")
@click.option(
    "-w",
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(0, 256),
    help="Local worker processes that crawl the runs (0: none, the fleet's workers do).",
)
@click.option("--spiders", metavar="DIR_OR_MODULE", help="Where the workers find spiders.")
@click.option(
    "--tick",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.5),
    metavar="SECONDS",
    help="How often due schedules are looked for.",
)
@queue_option
@click.pass_context
@async_command
async def schedule_run(
    ctx: click.Context, workers: int, spiders: str | None, tick: float, queue: str | None
) -> None:
    """Start due runs in the foreground until Ctrl-C, with local workers that crawl them.

    Any number of schedule run, serve and worker processes may run with one store: each due
    run starts once."""
    import asyncio
    import contextlib
    import signal
    import sys

    from crawlfleet.cli.views import when

    s = settings(ctx, {"queue": queue})
    argv = [sys.executable, "-m", "crawlfleet", *options(ctx).argv(), "worker", "--queue", s.queue]
    if spiders:
        argv += ["--spiders", spiders]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    procs = [await asyncio.create_subprocess_exec(*argv) for _ in range(workers)]
    try:
        async with opened(s) as store:
            click.echo(f"schedule run: {len(await store.schedules())} schedules, {workers} workers")
            while not stop.is_set():
                for run in await store.finish_runs():
                    click.echo(f"{when(run.finished_at)} job {run.job}: run {run.run} finished")
                for sched, started in await store.start_due_runs():
                    if started is not None:
                        click.echo(
                            f"{when(started.started_at)} job {sched.job}: run {started.run} started"
                        )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), tick)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
        for proc in procs:
            await proc.wait()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
