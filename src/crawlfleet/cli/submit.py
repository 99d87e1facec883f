"""``crawlfleet submit``: register a crawl job and its seeds in a shared store."""

from __future__ import annotations

import click

from crawlfleet.cli.common import async_command, opened, pairs, queue_option, settings


@click.command()
@click.argument("spider", metavar="SPIDER.py")
@queue_option
@click.option("--job", help="Job name (default: the spider's name).")
@click.option(
    "-a",
    "spider_args",
    multiple=True,
    metavar="NAME=VALUE",
    help="Spider argument, passed to its __init__ on every worker. Repeatable.",
)
@click.option(
    "-s",
    "set_",
    multiple=True,
    metavar="KEY=VALUE",
    help="Setting of this job, applied by every worker: worker.fetch_timeout=60, "
    "DOWNLOAD_DELAY=1, ... Repeatable.",
)
@click.option(
    "--recrawl",
    is_flag=True,
    help="A finished job starts its next run: its known pages are revisited (with their "
    "validators: an unchanged page costs a 304). A run still going is left to go on.",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Start the job over: its requests and their history go now, its records stay "
    "readable until the new run finished, then are replaced.",
)
@click.pass_context
@async_command
async def submit(
    ctx: click.Context,
    spider: str,
    queue: str | None,
    job: str | None,
    spider_args: tuple[str, ...],
    set_: tuple[str, ...],
    recrawl: bool,
    fresh: bool,
) -> None:
    """Register a crawl job and its seeds in the shared frontier (then start workers).

    The job stores SPIDER.py's absolute path and the spider's name: workers on this machine load
    the file, workers elsewhere find the spider by name with --spiders. Its arguments (-a) and
    settings (-s) are stored with it, so every worker runs the spider the same way. Submitting
    again updates the job's spider and settings and adds any new seeds; its state is kept.
    A finished job starts its next run with --recrawl (or starts over with --fresh).
    """
    from crawlfleet.cli.crawl import job_settings
    from crawlfleet.intake import prepare
    from crawlfleet.intake import submit as submit_job
    from crawlfleet.spiders import configure, load_spider, spider_ref
    from crawlfleet.urls import mask_credentials

    s = settings(ctx, {"queue": queue})
    stored = job_settings(pairs(spider_args, "-a"), pairs(set_, "-s"))
    spider_cls = configure(load_spider(spider), stored)
    name = job or spider_cls.name
    intake = prepare(name, spider_ref(spider), spider_cls, s, stored)
    from crawlfleet.errors import StoreError, UsageError

    if recrawl and fresh:
        raise UsageError("--recrawl and --fresh: choose one")
    async with opened(s) as store:
        try:
            _, added, started = await submit_job(store, intake, recrawl=recrawl, fresh=fresh)
        except StoreError as exc:
            raise UsageError(f"cannot start {name} afresh: {exc}") from None
        run = await store.current_run(name)
    where = mask_credentials(s.queue)
    if started is not None:
        click.echo(f"job {name}: run {started.run} ({started.kind.value}) started in {where}")
    elif recrawl and run is not None:
        click.echo(f"job {name}: run {run.run} is still going: it goes on")
    click.echo(f"job {name}: {added} new seed requests in {where}")
