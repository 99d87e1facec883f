"""``crawlfleet notify``: the outbox — what waits to be delivered, what died, send, replay."""

from __future__ import annotations

import time

import click

from crawlfleet.cli.common import async_command, opened, queue_option, settings


@click.group()
def notify() -> None:
    """The outbox of alerts, run summaries and records batches: see what waits and what is
    dead, deliver now, replay the dead."""


@notify.command("status")
@queue_option
@click.pass_context
@async_command
async def notify_status(ctx: click.Context, queue: str | None) -> None:
    """Each destination's deliveries: waiting, in flight, delivered, dead, the newest error."""
    from crawlfleet.cli.views import outbox_lines
    from crawlfleet.notify.destinations import destinations

    s = settings(ctx, {"queue": queue})
    async with opened(s, create=False) as store:
        counts = await store.outbox_counts()
        dead = await store.dead_deliveries(20)
    labels = {d.id: d.label for d in destinations(s)}
    lines = outbox_lines(counts, labels, time.time())
    click.echo("\n".join(lines) if lines else "nothing in the outbox")
    for d in dead:
        click.echo(
            f"dead {d.id}\t{labels.get(d.destination, d.destination)}\t{d.key}\t"
            f"{d.attempts} tries\t{d.error or ''}"
        )


@notify.command("deliver")
@queue_option
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to keep delivering.")
@click.pass_context
@async_command
async def notify_deliver(ctx: click.Context, queue: str | None, timeout: float) -> None:
    """Check and close the runs, then deliver what is due, until nothing is or TIMEOUT
    (workers and serve do this all along; this is for a store nothing else runs with)."""
    from crawlfleet.notify.deliver import Deliverer
    from crawlfleet.notify.destinations import destinations
    from crawlfleet.notify.keeper import QualityKeeper
    from crawlfleet.worker.ids import default_worker_id

    s = settings(ctx, {"queue": queue})
    dests = destinations(s)
    async with opened(s, create=False) as store:
        await QualityKeeper(store, s, dests).tick()
        async with Deliverer(store, dests, s.notify, owner=default_worker_id()) as d:
            empty = await d.drain(timeout)
        counts = await store.outbox_counts()
    waiting = sum(c.queued for c in counts if c.destination in {d.id for d in dests})
    click.echo("delivered what was due" if empty else "stopped at --timeout", err=True)
    if waiting:
        click.echo(f"{waiting} deliveries wait for a retry", err=True)


@notify.command("replay")
@click.argument("ids", nargs=-1, type=int)
@queue_option
@click.option("--all", "everything", is_flag=True, help="Every dead delivery.")
@click.pass_context
@async_command
async def notify_replay(
    ctx: click.Context, ids: tuple[int, ...], queue: str | None, everything: bool
) -> None:
    """Queue dead deliveries again (by id, as `notify status` lists them, or --all)."""
    from crawlfleet.errors import UsageError

    if not ids and not everything:
        raise UsageError("name the deliveries to replay (ids), or --all")
    s = settings(ctx, {"queue": queue})
    async with opened(s, create=False) as store:
        n = await store.replay_deliveries(ids=list(ids))
    click.echo(f"replayed {n} deliveries")
