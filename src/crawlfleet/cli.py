"""The ``crawlfleet`` command. Thin: it parses flags and wires the pieces together.

Every error a user can cause ends as one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from crawlfleet.config import Settings, load_settings
from crawlfleet.errors import CrawlfleetError, UsageError
from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import DeadReason, JobState, JobStats
from crawlfleet.urls import mask_credentials

T = TypeVar("T")
FORMATS = ("jsonl", "csv", "parquet")


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def run_async(fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T | None]:
    """Run an async command body; turn crawlfleet errors into one line and exit 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T | None:
        try:
            return _event_loop_run(fn(*args, **kwargs))
        except CrawlfleetError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            click.echo("interrupted; run the same command again to resume", err=True)
            sys.exit(130)
        return None

    return wrapper


def _event_loop_run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every POSIX platform
        return asyncio.run(coro)
    result: T = uvloop.run(coro)
    return result


def _settings(ctx: click.Context, **overrides: Any) -> Settings:
    config = ctx.find_root().params.get("config")
    try:
        return load_settings(config, overrides).check()
    except CrawlfleetError as exc:
        _fail(str(exc))
        raise  # unreachable


@asynccontextmanager
async def _opened(settings: Settings) -> AsyncIterator[Frontier]:
    """The frontier ``settings.queue`` names, open for the length of the ``async with``."""
    from crawlfleet.frontier import open_frontier

    frontier = open_frontier(settings.queue, pacing=settings.pacing_config())
    await frontier.open()
    try:
        yield frontier
    finally:
        await frontier.close()


def _check_writable(path: str) -> None:
    target = Path(path)
    probe = target.with_name(target.name + ".probe")
    try:
        with open(probe, "wb"):
            pass
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _format_of(path: str, fmt: str | None) -> str:
    if fmt:
        return fmt
    suffix = Path(path).suffix.lstrip(".").lower()
    return {"json": "jsonl", "ndjson": "jsonl"}.get(
        suffix, suffix if suffix in FORMATS else "jsonl"
    )


queue_option = click.option(
    "--queue",
    "queue",
    metavar="URL",
    help="Queue store: sqlite:///path.db (default ./.crawlfleet/queue.db) or postgresql://…",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--config", type=click.Path(dir_okay=False), help="crawlfleet.toml to read.")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.version_option(package_name="crawlfleet")
def main(config: str | None, verbose: int) -> None:
    """crawlfleet: write a spider once, crawl on a laptop (SQLite) or a fleet (PostgreSQL).

    \b
    Quick start:
      crawlfleet demo                          crawl the bundled demo shop end to end
      crawlfleet crawl spider.py --workers 2 -o records.jsonl
      crawlfleet export --format csv -o records.csv

    \b
    A fleet (one PostgreSQL, workers on any number of machines):
      crawlfleet db upgrade --queue postgresql://db/crawl
      crawlfleet submit spider.py --queue postgresql://db/crawl
      crawlfleet worker --queue postgresql://db/crawl --spiders ./spiders   (on every machine)
      crawlfleet status --queue postgresql://db/crawl
    """
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# -- crawl ----------------------------------------------------------------------------------------


@main.command()
@click.argument("spider", metavar="SPIDER.py")
@click.option(
    "-w",
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Local worker processes.",
)
@click.option("-o", "--output", metavar="FILE", help="Export the records here when finished.")
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), help="Output format (default: by suffix)."
)
@queue_option
@click.option("--job", help="Job name (default: the spider's name).")
@click.option("--concurrency", type=int, help="Requests in flight per worker.")
@click.option("--lease-ttl", type=float, help="Seconds a lease lasts without a heartbeat.")
@click.pass_context
def crawl(
    ctx: click.Context,
    spider: str,
    workers: int,
    output: str | None,
    fmt: str | None,
    queue: str | None,
    job: str | None,
    concurrency: int | None,
    lease_ttl: float | None,
) -> None:
    """Run SPIDER.py to completion on this machine with N worker processes.

    The crawl state lives in the queue store (./.crawlfleet/queue.db unless --queue names
    one): stop it at any time and run the same command again to resume.
    """
    settings = _settings(ctx, queue=queue, concurrency=concurrency, lease_ttl=lease_ttl)
    run_async(_crawl)(spider, settings, workers, output, fmt, job, None)


async def _crawl(
    spider: str,
    settings: Settings,
    workers: int,
    output: str | None,
    fmt: str | None,
    job_name: str | None,
    overrides: dict[str, Any] | None,
) -> None:
    from crawlfleet import runner
    from crawlfleet.progress import CrawlProgress, summary
    from crawlfleet.spiders import configure, load_spider, spider_ref

    spider_cls = load_spider(spider)
    if overrides:
        spider_cls = configure(spider_cls, overrides)
    if output:
        _check_writable(output)
    await runner.check_reachable(list(spider_cls.start_urls))
    await _check_raw_store(settings)
    name = job_name or spider_cls.name
    async with _opened(settings) as frontier:
        spec = runner.job_spec(name, spider_ref(spider), spider_cls, settings, overrides)
        await runner.submit(frontier, spec, spider_cls)
        pool = runner.WorkerPool(settings.queue, name, workers, runner.settings_json(settings))
        started = time.monotonic()
        with CrawlProgress(name) as progress:
            stats = await runner.run_workers(frontier, pool, progress.update)
        elapsed = time.monotonic() - started
        if output:
            await _export(frontier, name, output, _format_of(output, fmt), False, False)
        summary(
            stats, elapsed, store=mask_credentials(settings.queue), raw=settings.raw, output=output
        )


async def _check_raw_store(settings: Settings) -> None:
    """Fail with one line before starting workers if the raw store cannot work (e.g. no bucket)."""
    from crawlfleet.data.rawstore import open_raw_store

    store = open_raw_store(settings.raw, s3_endpoint=settings.s3_endpoint, spool=settings.raw_spool)
    await asyncio.to_thread(store.open)
    await asyncio.to_thread(store.close)


# -- worker / submit ------------------------------------------------------------------------------


@main.command()
@queue_option
@click.option("--job", "jobs", multiple=True, help="Only lease work of this job (repeatable).")
@click.option(
    "--kind",
    default="http",
    show_default=True,
    help="Fetchers this worker offers (only http is implemented for now).",
)
@click.option(
    "--spiders",
    metavar="DIR_OR_MODULE",
    help="Find each job's spider by name here: a directory (its *.py files) or a package "
    "(its modules). Default: the spider file path stored at submit time.",
)
@click.option("--concurrency", type=int, help="Requests in flight in this worker.")
@click.option("--exit-when-finished", is_flag=True, help="Exit once the jobs have no work left.")
@click.option("--worker-id", help="Name in leases and logs (default host-pid).")
@click.pass_context
def worker(
    ctx: click.Context,
    queue: str | None,
    jobs: tuple[str, ...],
    kind: str,
    spiders: str | None,
    concurrency: int | None,
    exit_when_finished: bool,
    worker_id: str | None,
) -> None:
    """Join the fleet: lease work for every running job whose spider this worker can load.

    Run one per CPU core on as many machines as the targets and routes allow, all pointed at
    the same --queue. A job whose spider cannot be loaded here is reported once and left to
    other workers; paused and cancelled jobs are not leased. Stop with SIGTERM or Ctrl-C: no
    new leases, in-flight work finishes, the rest is given back.
    """
    from crawlfleet.runner import settings_from_env

    settings = settings_from_env(_settings(ctx, queue=queue, concurrency=concurrency))
    if spiders and not _spiders_exist(spiders):
        _fail(f"--spiders {spiders}: no such directory or importable module")
    args = (settings, list(jobs) or None, exit_when_finished, worker_id, spiders)
    profile = os.environ.get("CRAWLFLEET_PROFILE")  # a directory: write a cProfile per worker
    if not profile:
        run_async(_worker)(*args)
        return
    import cProfile

    with cProfile.Profile() as prof:
        run_async(_worker)(*args)
    prof.dump_stats(Path(profile) / f"worker-{os.getpid()}.prof")


def _spiders_exist(where: str) -> bool:
    if Path(where).is_dir():
        return True
    if "/" in where or where.endswith(".py"):
        return False
    import importlib.util

    try:
        return importlib.util.find_spec(where) is not None
    except (ImportError, ValueError):
        return False


async def _worker(
    settings: Settings,
    jobs: list[str] | None,
    exit_when_finished: bool,
    worker_id: str | None,
    spiders: str | None = None,
) -> None:
    from crawlfleet.worker import Worker

    async with _opened(settings) as frontier:
        w = Worker(
            frontier,
            settings,
            worker_id=worker_id,
            jobs=jobs,
            exit_when_finished=exit_when_finished,
            spiders=spiders,
        )
        w.install_signal_handlers()
        await w.run()


@main.command()
@click.argument("spider", metavar="SPIDER.py")
@queue_option
@click.option("--job", help="Job name (default: the spider's name).")
@click.pass_context
def submit(ctx: click.Context, spider: str, queue: str | None, job: str | None) -> None:
    """Register a crawl job and its seeds in the shared frontier (then start workers).

    The job stores SPIDER.py's absolute path and the spider's name: workers on this machine load
    the file, workers elsewhere find the spider by name with --spiders. Submitting again updates
    the job's spider and settings and adds any new seeds; its state is kept.
    """
    settings = _settings(ctx, queue=queue)

    async def go() -> None:
        from crawlfleet import runner
        from crawlfleet.spiders import load_spider, spider_ref

        spider_cls = load_spider(spider)
        name = job or spider_cls.name
        async with _opened(settings) as frontier:
            spec = runner.job_spec(name, spider_ref(spider), spider_cls, settings)
            _, added = await runner.submit(frontier, spec, spider_cls)
        click.echo(f"job {name}: {added} new seed requests in {mask_credentials(settings.queue)}")

    run_async(go)()


# -- demo -----------------------------------------------------------------------------------------


@main.command()
@click.option("--products", default=2000, show_default=True, type=click.IntRange(10, 100_000))
@click.option("-w", "--workers", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option(
    "-o",
    "--output",
    default="demo-records.jsonl",
    show_default=True,
    help="Where the records are exported.",
)
@click.option(
    "--dir",
    "workdir",
    default=".crawlfleet-demo",
    show_default=True,
    help="Store and WARC directory of the demo (wiped at start).",
)
@click.pass_context
def demo(ctx: click.Context, products: int, workers: int, output: str, workdir: str) -> None:
    """Serve the bundled demo shop on a free loopback port and crawl it end to end."""
    base = Path(workdir)
    if base.exists():
        if not (base / "queue.db").exists() and any(base.iterdir()):
            _fail(f"{workdir} exists and is not a crawlfleet demo directory")
        shutil.rmtree(base)
    settings = _settings(ctx, queue=f"sqlite:///{base / 'queue.db'}", raw=str(base / "warc"))
    run_async(_demo)(settings, products, workers, output)


async def _demo(settings: Settings, products: int, workers: int, output: str) -> None:
    from crawlfleet.demo.catalog import Catalog
    from crawlfleet.demo.faults import Faults
    from crawlfleet.demo.server import start_demo_server

    base_url, server = await start_demo_server(Catalog(products), Faults())
    click.echo(f"demo shop with {products} products at {base_url}", err=True)
    try:
        await _crawl(
            "crawlfleet.demo.spider:DemoShop",
            settings,
            workers,
            output,
            None,
            "demo-shop",
            {"start_urls": [base_url + "/"]},
        )
    finally:
        await server.cleanup()


# -- reading the store ----------------------------------------------------------------------------


async def _one_job(frontier: Frontier, job: str | None) -> str:
    if job:
        if await frontier.get_job(job) is None:
            raise UsageError(f"no job named {job!r}")
        return job
    jobs = await frontier.list_jobs()
    if not jobs:
        raise UsageError("the queue store has no jobs yet")
    if len(jobs) > 1:
        names = ", ".join(j.name for j in jobs)
        raise UsageError(f"several jobs ({names}); choose one with --job")
    return jobs[0].name


async def _export(
    frontier: Frontier, job: str, output: str, fmt: str, quarantine: bool, provenance: bool
) -> int:
    from crawlfleet.data.export import export_records

    if quarantine:
        rows: list[Any] = [
            {
                "url": q.url,
                "errors": q.errors,
                "data": q.data,
                "fetched_at": q.fetched_at,
                "warc_file": q.warc_file,
                "warc_record_id": q.warc_record_id,
                "warc_refers_to_file": q.warc_refers_to_file,
                "warc_refers_to": q.warc_refers_to,
            }
            async for q in frontier.iter_quarantine(job)
        ]
    else:
        rows = [r async for r in frontier.iter_records(job)]
    return await asyncio.to_thread(export_records, rows, fmt, output, provenance=provenance)  # type: ignore[arg-type]


@main.command()
@queue_option
@click.option("--job", help="Job to export (needed when the store has several).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Default: from the file suffix.")
@click.option("-o", "--output", required=True, metavar="FILE")
@click.option("--quarantine", is_flag=True, help="Export the quarantined records instead.")
@click.option(
    "--provenance",
    is_flag=True,
    help="Add _url, _fetched_at, _warc_file, _warc_record_id, and for pages archived as WARC "
    "revisits _warc_refers_to_file, _warc_refers_to (the first capture, holding the bytes).",
)
@click.pass_context
def export(
    ctx: click.Context,
    queue: str | None,
    job: str | None,
    fmt: str | None,
    output: str,
    quarantine: bool,
    provenance: bool,
) -> None:
    """Write a job's records (one JSON object per record in JSONL) to FILE."""
    settings = _settings(ctx, queue=queue)

    async def go() -> None:
        _check_writable(output)
        async with _opened(settings) as frontier:
            name = await _one_job(frontier, job)
            n = await _export(
                frontier, name, output, _format_of(output, fmt), quarantine, provenance
            )
        click.echo(
            f"{n} {'quarantined ' if quarantine else ''}records of {name} → {output}", err=True
        )

    run_async(go)()


@main.command()
@queue_option
@click.option("--job", help="Only this job.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def status(ctx: click.Context, queue: str | None, job: str | None, as_json: bool) -> None:
    """Each job's state, backlog and results, and whether it is finished fleet-wide.

    \b
    The first word is the job's state and progress:
      running       workers lease its requests
      finished      nothing queued, waiting for a retry or leased, anywhere in the fleet
      paused        no new leases; in-flight requests finish (jobs resume NAME)
      cancelled     no new leases; queued requests stay in the store (jobs resume NAME)
    """
    settings = _settings(ctx, queue=queue)

    async def go() -> None:
        from dataclasses import asdict

        from crawlfleet.runner import is_finished

        async with _opened(settings) as frontier:
            jobs = [j.name for j in await frontier.list_jobs() if job in (None, j.name)]
            stats = [await frontier.stats(name) for name in jobs]
        if as_json:
            click.echo(json.dumps([dict(asdict(s), finished=is_finished(s)) for s in stats]))
            return
        if not stats:
            click.echo("no jobs")
        for s in stats:
            state = _progress_word(s.state, is_finished(s))
            click.echo(
                f"{s.job}: {state} · queued {s.queued} (+{s.waiting} waiting to retry, oldest "
                f"{s.oldest_queued_age:.0f}s) · leased {s.leased} · done {s.done} · dead {s.dead}"
                f" · records {s.records} · quarantined {s.quarantined} · retried {s.retried}"
                f" · traps {s.traps} · duplicate content {s.duplicates}"
            )
            click.echo(f"  {_retry_line(s)}")
            if s.traps_by_domain:
                click.echo(f"  {_traps_line(s)}")

    run_async(go)()


def _retry_line(s: JobStats) -> str:
    """Average retry depth and the histogram of attempts per finished request."""
    bars = " ".join(f"{n}:{count}" for n, count in sorted(s.attempts_histogram.items()))
    return f"retry depth avg {s.avg_retry_depth:.2f} · attempts {bars or '-'}"


def _traps_line(s: JobStats, most: int = 5) -> str:
    """Trap counts per domain, the largest first."""
    top = sorted(s.traps_by_domain.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{domain} {n}" for domain, n in top[:most])
    more = f", +{len(top) - most} domains" if len(top) > most else ""
    return f"traps by domain: {shown}{more}"


def _progress_word(state: JobState, finished: bool) -> str:
    """One word (or two) for ``status``: what workers do with the job, and if it is done."""
    if state is JobState.RUNNING:
        return "finished" if finished else "running"
    if state is JobState.PAUSED:
        return "paused (finished)" if finished else "paused"
    return "cancelled" if finished else "cancelled (leases in flight)"


# -- schema and jobs ------------------------------------------------------------------------------


@main.group()
def db() -> None:
    """The queue store's schema."""


@db.command("upgrade")
@queue_option
@click.pass_context
def db_upgrade(ctx: click.Context, queue: str | None) -> None:
    """Create the queue store's tables, or migrate them to this version (safe to repeat).

    PostgreSQL: pending migrations run under an advisory lock, so workers starting at the same
    time migrate once. SQLite: the schema is created when the file is opened.
    """
    settings = _settings(ctx, queue=queue)

    async def go() -> None:
        from crawlfleet.frontier.postgres import PostgresFrontier
        from crawlfleet.frontier.sqlite import SCHEMA_VERSION

        # opening creates (SQLite) or migrates (PostgreSQL) the schema
        async with _opened(settings) as frontier:
            if isinstance(frontier, PostgresFrontier):
                version = await frontier.upgrade()
            else:
                version = SCHEMA_VERSION
        click.echo(f"{mask_credentials(settings.queue)}: schema version {version}")

    run_async(go)()


@main.group(invoke_without_command=True)
@queue_option
@click.pass_context
def jobs(ctx: click.Context, queue: str | None) -> None:
    """List the jobs (without a subcommand), or pause, resume or cancel one.

    \b
    pause   workers lease nothing more of the job; leases in flight finish normally
    resume  the job is leased again (from paused or cancelled)
    cancel  like pause, and the job counts as finished once nothing is in flight; its queued
            requests, records and dead letters stay in the store (status, export, dead)
    """
    ctx.ensure_object(dict)
    ctx.obj["jobs_queue"] = queue
    if ctx.invoked_subcommand is None:
        ctx.invoke(jobs_list, queue=queue)


@jobs.command("list")
@queue_option
@click.pass_context
def jobs_list(ctx: click.Context, queue: str | None) -> None:
    """Each job: name, state, spider and when it was submitted."""
    settings = _settings(ctx, queue=queue or (ctx.obj or {}).get("jobs_queue"))

    async def go() -> None:
        async with _opened(settings) as frontier:
            found = await frontier.list_jobs()
        if not found:
            click.echo("no jobs")
        for j in found:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(j.created_at))
            click.echo(f"{j.name}\t{j.state.value}\t{j.spider}\t{when}")

    run_async(go)()


def _job_state_command(verb: str, state: JobState, doc: str) -> None:
    @jobs.command(verb, help=doc)
    @click.argument("name")
    @queue_option
    @click.pass_context
    def command(ctx: click.Context, name: str, queue: str | None) -> None:
        settings = _settings(ctx, queue=queue or (ctx.obj or {}).get("jobs_queue"))

        async def go() -> None:
            async with _opened(settings) as frontier:
                job = await frontier.get_job(name)
                if job is None:
                    raise UsageError(f"no job named {name!r}")
                if job.state is not state:
                    await frontier.set_job_state(name, state)
            was = "" if job.state is state else f" (was {job.state.value})"
            click.echo(f"job {name}: {state.value}{was}")

        run_async(go)()


_job_state_command(
    "pause",
    JobState.PAUSED,
    "Stop leasing NAME's requests; leases in flight finish. Undo with resume.",
)
_job_state_command(
    "resume",
    JobState.RUNNING,
    "Lease NAME's requests again (a paused or a cancelled job).",
)
_job_state_command(
    "cancel",
    JobState.CANCELLED,
    "Stop NAME for good: nothing more is leased and it counts as finished once nothing is in "
    "flight. Queued requests, records and dead letters stay in the store; resume undoes it.",
)


# -- dead letters ---------------------------------------------------------------------------------


@main.group()
def dead() -> None:
    """The dead-letter queue: what was given up, why, and replay after a fix."""


def _reason(value: str | None) -> DeadReason | None:
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
@click.option("--reason", help="http_4xx, too_many_retries, robots, worker_lost, trap, ...")
@click.option("--limit", default=100, show_default=True)
@click.pass_context
def dead_list(
    ctx: click.Context, queue: str | None, job: str | None, reason: str | None, limit: int
) -> None:
    """List dead requests, newest first."""
    settings = _settings(ctx, queue=queue)

    async def go() -> None:
        async with _opened(settings) as frontier:
            letters = await frontier.dead_letters(job, _reason(reason), limit)
        if not letters:
            click.echo("no dead requests")
        for d in letters:
            click.echo(
                f"{d.id}\t{d.job}\t{d.reason.value}\t{d.attempts} attempts\t"
                f"{mask_credentials(d.url)}\t{d.error or ''}"
            )

    run_async(go)()


@dead.command("show")
@click.argument("request_id", type=int)
@queue_option
@click.pass_context
def dead_show(ctx: click.Context, request_id: int, queue: str | None) -> None:
    """Show one dead request with every attempt (outcome, status, error, route)."""
    settings = _settings(ctx, queue=queue)

    async def go() -> None:
        async with _opened(settings) as frontier:
            d = await frontier.dead_letter(request_id)
        if d is None:
            raise UsageError(f"no dead request with id {request_id}")
        click.echo(f"request {d.id} of job {d.job}: {mask_credentials(d.url)}")
        click.echo(f"dead: {d.reason.value} after {d.attempts} attempts: {d.error or ''}")
        for a in d.history:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(a.at))
            click.echo(
                f"  #{a.n} {when} {a.outcome} status={a.status or '-'} "
                f"route={a.route or 'direct'} {a.error or ''}"
            )

    run_async(go)()


@dead.command("replay")
@click.argument("ids", nargs=-1, type=int)
@queue_option
@click.option("--job")
@click.option("--reason")
@click.pass_context
def dead_replay(
    ctx: click.Context, ids: tuple[int, ...], queue: str | None, job: str | None, reason: str | None
) -> None:
    """Put dead requests back in the queue with fresh attempts (then run workers or crawl)."""
    settings = _settings(ctx, queue=queue)

    async def go() -> None:
        async with _opened(settings) as frontier:
            n = await frontier.replay_dead(job, _reason(reason), list(ids))
        click.echo(f"{n} requests queued again")

    run_async(go)()


def _main_entry() -> None:  # pragma: no cover
    main(prog_name=os.path.basename(sys.argv[0]) or "crawlfleet")
