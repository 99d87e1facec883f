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
