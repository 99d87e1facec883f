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
@click.pass_context
@async_command
async def submit(
    ctx: click.Context,
    spider: str,
    queue: str | None,
    job: str | None,
    spider_args: tuple[str, ...],
    set_: tuple[str, ...],
) -> None:
    """Register a crawl job and its seeds in the shared frontier (then start workers).

    The job stores SPIDER.py's absolute path and the spider's name: workers on this machine load
    the file, workers elsewhere find the spider by name with --spiders. Its arguments (-a) and
    settings (-s) are stored with it, so every worker runs the spider the same way. Submitting
    again updates the job's spider and settings and adds any new seeds; its state is kept.
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
    async with opened(s) as store:
        _, added = await submit_job(store, intake)
    click.echo(f"job {name}: {added} new seed requests in {mask_credentials(s.queue)}")
