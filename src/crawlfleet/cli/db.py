"""``crawlfleet db``: the queue store's schema."""

from __future__ import annotations

import click

from crawlfleet.cli.common import async_command, opened, queue_option, settings


@click.group()
def db() -> None:
    """The queue store's schema."""


@db.command("upgrade")
@queue_option
@click.pass_context
@async_command
async def db_upgrade(ctx: click.Context, queue: str | None) -> None:
    """Create the queue store's tables, or migrate them to this version (safe to repeat).

    PostgreSQL: pending migrations run under an advisory lock, so workers starting at the same
    time migrate once. SQLite: the file and its directory are created if missing.
    """
    from crawlfleet.urls import mask_credentials

    s = settings(ctx, {"queue": queue})
    async with opened(s) as store:
        version = await store.upgrade()
    click.echo(f"{mask_credentials(s.queue)}: schema version {version}")


@db.command("upkeep")
@queue_option
@click.pass_context
@async_command
async def db_upkeep(ctx: click.Context, queue: str | None) -> None:
    """Look after the store's tables now: ANALYZE those whose statistics are stale and VACUUM
    those with many dead rows where autovacuum does not run (PostgreSQL; SQLite needs none).

    Workers do this every 10 s and ``submit`` after its seeds; by hand it serves after a bulk
    load made otherwise, or from cron on a fleet that is mostly stopped. Skipped while another
    process of the fleet is at it.
    """
    from crawlfleet.urls import mask_credentials

    s = settings(ctx, {"queue": queue})
    async with opened(s, create=False) as store:
        done = await store.maintain()
    click.echo(f"{mask_credentials(s.queue)}: {', '.join(done) or 'nothing to do'}")
