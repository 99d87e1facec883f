"""``crawlfleet dead``: the dead-letter queue: why requests were given up, and replay."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from crawlfleet.cli.common import async_command, opened, queue_option, settings

if TYPE_CHECKING:
    from crawlfleet.frontier.ports import Insights
    from crawlfleet.model import DeadReason


@click.group()
def dead() -> None:
    """The dead-letter queue: what was given up, why, and replay after a fix."""


def _reason(value: str | None) -> DeadReason | None:
    from crawlfleet.errors import UsageError
    from crawlfleet.model import DeadReason

    if value is None:
        return None
    try:
        return DeadReason(value)
    except ValueError:
        choices = ", ".join(r.value for r in DeadReason)
        raise UsageError(f"unknown reason {value!r} (one of: {choices})") from None


@dead.command("list")
@queue_option
@click.option("--job")
@click.option("--reason", help="parse_error, http_4xx, too_many_retries, robots, trap, ...")
@click.option("--limit", default=100, show_default=True)
@click.pass_context
@async_command
async def dead_list(
    ctx: click.Context, queue: str | None, job: str | None, reason: str | None, limit: int
) -> None:
    """List dead requests, newest first: id, job, reason, attempts, URL, last error."""
    from crawlfleet.urls import mask_credentials

    s = settings(ctx, {"queue": queue})
    why = _reason(reason)
    async with opened(s, create=False) as store:
        await _known_job(store, job)
        letters = await store.dead_letters(job, why, limit)
    if not letters:
        click.echo("no dead requests")
    for d in letters:
        click.echo(
            f"{d.id}\t{d.job}\t{d.reason.value}\t{d.attempts} attempts\t"
            f"{mask_credentials(d.url)}\t{one_line(d.error)}"
        )


def one_line(error: str | None) -> str:
    """An error as one line of the listing: its lines joined with `` | ``, tabs as spaces."""
    lines = (line.strip() for line in (error or "").replace("\t", " ").splitlines())
    return " | ".join(line for line in lines if line)


async def _known_job(store: Insights, job: str | None) -> None:
    from crawlfleet.errors import UsageError

    if job is not None and await store.get_job(job) is None:
        raise UsageError(f"no job named {job!r}")


@dead.command("show")
@click.argument("request_id", type=int)
@queue_option
@click.pass_context
@async_command
async def dead_show(ctx: click.Context, request_id: int, queue: str | None) -> None:
    """Show one dead request with every attempt (outcome, status, error, route)."""
    from crawlfleet.errors import UsageError
    from crawlfleet.urls import mask_credentials

    s = settings(ctx, {"queue": queue})
    async with opened(s, create=False) as store:
        d = await store.dead_letter(request_id)
    if d is None:
        raise UsageError(f"no dead request with id {request_id}")
    click.echo(f"request {d.id} of job {d.job}: {mask_credentials(d.url)}")
    click.echo(f"dead: {d.reason.value} after {d.attempts} attempts: {one_line(d.error)}")
    for a in d.history:
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(a.at))
        click.echo(
            f"  #{a.n} {at} {a.outcome} status={a.status or '-'} "
            f"route={a.route or 'direct'} {one_line(a.error)}"
        )


@dead.command("replay")
@click.argument("ids", nargs=-1, type=int)
@queue_option
@click.option("--job", help="Replay this job's dead requests.")
@click.option("--reason", help="Only those dead for this reason (e.g. parse_error).")
@click.option("--all", "everything", is_flag=True, help="Replay every dead request of the store.")
@click.pass_context
@async_command
async def dead_replay(
    ctx: click.Context,
    ids: tuple[int, ...],
    queue: str | None,
    job: str | None,
    reason: str | None,
    everything: bool,
) -> None:
    """Put dead requests back in the queue with fresh attempts (then run workers or crawl).

    Name them: IDS, or --job NAME (with --reason to narrow), or --all.
    """
    from crawlfleet.errors import UsageError

    if not (ids or job or everything):
        raise UsageError("name the requests to replay: IDS, --job NAME, or --all")
    s = settings(ctx, {"queue": queue})
    why = _reason(reason)
    async with opened(s, create=False) as store:
        await _known_job(store, job)
        n = await store.replay_dead(job, why, list(ids))
    click.echo(f"{n} requests queued again")
