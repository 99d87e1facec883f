"""``crawlfleet jobs``: list the jobs, or pause, resume or cancel one."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from crawlfleet.cli.common import async_command, opened, queue_option, settings

if TYPE_CHECKING:
    from crawlfleet.model import JobState


@click.group(invoke_without_command=True)
@queue_option
@click.pass_context
def jobs(ctx: click.Context, queue: str | None) -> None:
    """List the jobs (without a subcommand), or pause, resume or cancel one.

    \b
    runs    a job's runs: started, finished, pages, 304s, bytes, records by change
    pause   workers lease nothing more of the job; leases in flight finish normally
    resume  the job is leased again (from paused or cancelled)
    cancel  like pause, and the job counts as finished once nothing is in flight; its queued
            requests, records and dead letters stay in the store (status, export, dead)
    """
    ctx.meta["jobs_queue"] = queue  # `jobs --queue URL pause NAME` works too
    if ctx.invoked_subcommand is None:
        ctx.invoke(jobs_list, queue=queue)


def _queue(ctx: click.Context, queue: str | None) -> str | None:
    return queue or ctx.meta.get("jobs_queue")


@jobs.command("list")
@queue_option
@click.pass_context
@async_command
async def jobs_list(ctx: click.Context, queue: str | None) -> None:
    """Each job: name, state (as status says it: finished, running...), spider, submitted."""
    from crawlfleet.cli.views import job_row

    s = settings(ctx, {"queue": _queue(ctx, queue)})
    async with opened(s, create=False) as store:
        rows = [job_row(j, await store.stats(j.name)) for j in await store.list_jobs()]
    for row in rows or ["no jobs"]:
        click.echo(row)


async def _set_state(ctx: click.Context, name: str, queue: str | None, state: JobState) -> None:
    from crawlfleet.errors import UsageError

    s = settings(ctx, {"queue": _queue(ctx, queue)})
    async with opened(s, create=False) as store:
        job = await store.get_job(name)
        if job is None:
            raise UsageError(f"no job named {name!r}")
        if job.state is not state:
            await store.set_job_state(name, state)
    was = "" if job.state is state else f" (was {job.state.value})"
    click.echo(f"job {name}: {state.value}{was}")


def _state_command(verb: str, state: str, doc: str) -> None:
    @jobs.command(verb, help=doc)
    @click.argument("name")
    @queue_option
    @click.pass_context
    @async_command
    async def command(ctx: click.Context, name: str, queue: str | None) -> None:
        from crawlfleet.model import JobState

        await _set_state(ctx, name, queue, JobState(state))


_state_command(
    "pause", "paused", "Stop leasing NAME's requests; leases in flight finish. Undo with resume."
)
_state_command("resume", "running", "Lease NAME's requests again (a paused or a cancelled job).")
_state_command(
    "cancel",
    "cancelled",
    "Stop NAME for good: nothing more is leased and it counts as finished once nothing is in "
    "flight. Queued requests, records and dead letters stay in the store; resume undoes it.",
)


@jobs.command("runs")
@click.argument("name")
@queue_option
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1), help="Most runs.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@async_command
async def jobs_runs(
    ctx: click.Context, name: str, queue: str | None, limit: int, as_json: bool
) -> None:
    """NAME's runs, the newest first: run, kind (first, recrawl, fresh), state, started,
    finished, pages, 304s (not modified), bytes received, records new / changed / unchanged /
    removed. Tab-separated (--json: one object per run)."""
    import json
    from dataclasses import asdict

    from crawlfleet.cli.views import RUN_HEADER, run_row
    from crawlfleet.errors import UsageError

    s = settings(ctx, {"queue": _queue(ctx, queue)})
    async with opened(s, create=False) as store:
        if await store.get_job(name) is None:
            raise UsageError(f"no job named {name!r}")
        runs = await store.runs(name, limit=limit)
    if as_json:
        click.echo(
            json.dumps([dict(asdict(r), kind=r.kind.value, state=r.state.value) for r in runs])
        )
        return
    click.echo(RUN_HEADER)
    for run in runs:
        click.echo(run_row(run))
