"""``crawlfleet crawl``: run a spider to completion on this machine."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import click

from crawlfleet.cli.common import (
    Options,
    fail,
    options,
    pairs,
    queue_option,
    run,
    settings,
    verbosity,
)

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.local.output import Output
    from crawlfleet.local.pool import LocalWorkers
    from crawlfleet.local.runner import CrawlPlan


@click.command()
@click.argument("spider", metavar="SPIDER.py")
@click.option(
    "-w",
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Local worker processes.",
)
@click.option(
    "--in-process/--worker-process",
    "in_process",
    default=True,
    show_default=True,
    help="With one worker: run it in crawl's own process (one interpreter's start-up and "
    "imports instead of two; a worker that dies hard then ends the crawl, which resumes on the "
    "next crawl), or in a process of its own (restarted when it dies). More workers, or "
    "browser workers, are processes of their own.",
)
@click.option(
    "--browser-workers",
    default=0,
    show_default=True,
    type=click.IntRange(0, 64),
    help="Worker processes of their own for the browser pages (each with one Chromium); the "
    "--workers then fetch the rest over HTTP. 0: every worker runs every kind the spider needs.",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Append this run's records to FILE as they are stored (format by extension: .jsonl, "
    ".json, .csv, .parquet; - for stdout).",
)
@click.option(
    "-O",
    "--overwrite-output",
    metavar="FILE",
    help="Replace FILE with every record of the job, written as they are stored.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "json", "csv", "parquet"]),
    help="Output format (default: by extension; JSON lines for -).",
)
@queue_option
@click.option("--job", help="Job name (default: the spider's name).")
@click.option(
    "-a",
    "spider_args",
    multiple=True,
    metavar="NAME=VALUE",
    help="Spider argument, passed to its __init__ (becomes an attribute). Repeatable.",
)
@click.option(
    "-s",
    "set_",
    multiple=True,
    metavar="KEY=VALUE",
    help="Setting for this run and job: worker.concurrency=8, DOWNLOAD_DELAY=0.5, "
    "obey_robots=false, ... Repeatable.",
)
@click.option("--concurrency", type=int, help="Requests in flight per worker.")
@click.option("--lease-ttl", type=float, help="Seconds a lease lasts without a heartbeat.")
@click.option(
    "--recrawl",
    is_flag=True,
    help="A finished job starts its next run: its known pages are revisited with their "
    "validators (an unchanged page costs a 304, its records carried over), and each record "
    "says whether it is new, changed, unchanged or removed (export --changes).",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Start the job over: its requests, their history and dead letters go; its records "
    "stay readable until the new run finished, then are replaced (WARC files are kept).",
)
@click.option(
    "--max-error-rate",
    type=click.FloatRange(0, 1),
    metavar="RATE",
    help="Exit 1 when more than RATE (0-1) of this run's pages failed in the spider "
    "(default: only when every page failed).",
)
@verbosity
@click.pass_context
def crawl(
    ctx: click.Context,
    spider: str,
    workers: int,
    in_process: bool,
    browser_workers: int,
    output: str | None,
    overwrite_output: str | None,
    fmt: str | None,
    queue: str | None,
    job: str | None,
    spider_args: tuple[str, ...],
    set_: tuple[str, ...],
    concurrency: int | None,
    lease_ttl: float | None,
    recrawl: bool,
    fresh: bool,
    max_error_rate: float | None,
) -> None:
    """Run SPIDER.py (or package.module:Class) to completion on this machine.

    The crawl lives in the queue store (./.crawlfleet/queue.db unless --queue names one): stop
    it at any time with Ctrl-C (once: the workers finish what they hold and give the rest back;
    twice: at once) and run the same command again to resume. A finished job says "nothing to
    do"; --recrawl starts its next run, --fresh starts it over.

    Exit code: 0 done, 1 when pages failed in the spider (every one, or more than
    --max-error-rate) or none could be fetched, 2 bad input, 130 interrupted.
    """
    if output and overwrite_output:
        fail("-o and -O: choose one (append, or overwrite)")
    if recrawl and fresh:
        fail("--recrawl and --fresh: choose one")
    set_pairs, arg_pairs = pairs(set_, "-s"), pairs(spider_args, "-a")
    flags = {"queue": queue, "worker.concurrency": concurrency, "worker.lease_ttl": lease_ttl}

    async def go(pool: LocalWorkers) -> int:
        run_settings, job_custom = split_set(set_pairs)
        overrides = {**run_settings, **{k: v for k, v in flags.items() if v is not None}}
        plan = make_plan(
            ctx,
            spider,
            settings(ctx, overrides),
            workers=workers,
            worker_process=not in_process,
            browser_workers=browser_workers,
            job=job,
            job_settings=job_settings(arg_pairs, job_custom),
            worker_overrides=overrides,
            output=output_of(output or overwrite_output, fmt, overwrite=bool(overwrite_output)),
            fresh=fresh,
            recrawl=recrawl,
            max_error_rate=max_error_rate,
        )
        return await run_plan(plan, options(ctx), pool)

    sys.exit(run(with_workers(workers, options(ctx), go, browser_workers, not in_process)))


async def with_workers(
    n: int,
    opts: Options,
    then: Callable[[LocalWorkers], Awaitable[int]],
    browser_workers: int = 0,
    processes: bool = True,
) -> int:
    """Start ``n`` workers (and ``browser_workers``) first (processes import while the rest
    starts; one worker runs in this process when not ``processes``), then ``then``."""
    from crawlfleet.local.runner import worker_pool

    pool = worker_pool(n, opts.argv(), browser_workers, config=opts.config, processes=processes)
    await pool.start()
    try:
        return await then(pool)
    finally:
        await pool.close()


def split_set(values: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``-s`` pairs: (settings for this run, settings stored with the job). A key of the
    settings file applies to the run (and, for the per-job sections, to the job too); a Scrapy
    key or a spider attribute goes with the job, for every worker's spider loader."""
    from crawlfleet.config import JOB_SECTIONS, resolve_key
    from crawlfleet.errors import ConfigError

    run_settings: dict[str, Any] = {}
    job: dict[str, Any] = {}
    for key, value in values.items():
        try:
            section, _ = resolve_key(key) if key != "queue" else ("queue", key)
        except ConfigError:
            job[key] = value  # checked by the spider loader, with the nearest key if unknown
            continue
        run_settings[key] = value
        if section in JOB_SECTIONS:
            job[key] = value
    return run_settings, job


def job_settings(args: Mapping[str, str], custom: Mapping[str, Any]) -> dict[str, Any]:
    from crawlfleet.spiders import JOB_SETTINGS, SPIDER_ARGS

    out: dict[str, Any] = {}
    if args:
        out[SPIDER_ARGS] = dict(args)
    if custom:
        out[JOB_SETTINGS] = dict(custom)
    return out


def output_of(path: str | None, fmt: str | None, *, overwrite: bool) -> Output | None:
    if not path:
        return None
    from crawlfleet.data.feeds import feed_format
    from crawlfleet.local.output import Output

    return Output(path, feed_format(path, fmt), overwrite)


def make_plan(ctx: click.Context, spider: str, s: Settings, **kw: Any) -> CrawlPlan:
    from crawlfleet.local.runner import CrawlPlan

    opts = options(ctx)
    return CrawlPlan(spider=spider, settings=s, worker_argv=opts.argv(), config=opts.config, **kw)


async def run_plan(plan: CrawlPlan, opts: Options, pool: LocalWorkers | None = None) -> int:
    """Run the crawl with its live display, print the summary; returns the exit code."""
    from crawlfleet.cli.progress import CrawlProgress, print_summary
    from crawlfleet.cli.views import crawl_summary
    from crawlfleet.local.runner import crawl as run_crawl
    from crawlfleet.urls import mask_credentials

    with CrawlProgress(plan.job or "", quiet=opts.quiet) as view:
        report = await run_crawl(plan, view, pool)
    s = plan.settings
    output = plan.output.path if plan.output else None
    lines = crawl_summary(report, store=mask_credentials(s.queue), raw=s.raw, output=output)
    print_summary(lines, opts.quiet)
    return report.exit_code
