"""``crawlfleet worker``: join the fleet and lease work for the jobs whose spider loads here."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crawlfleet.cli.common import fail, queue_option, run, settings, verbosity

if TYPE_CHECKING:
    from crawlfleet.config import Settings


@click.command()
@queue_option
@click.option("--job", "jobs", multiple=True, help="Only lease work of this job (repeatable).")
@click.option(
    "--kind",
    default="http",
    show_default=True,
    metavar="KINDS",
    help="Fetchers this worker runs, comma-separated (http; impersonate: a browser's TLS and "
    "HTTP/2 fingerprint without a browser; browser: the system's Chromium); it leases only "
    "requests of those kinds.",
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
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Serve this worker's own Prometheus /metrics on this port (0: any free one).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address of --metrics-port (read-only; no job state is changed through it).",
)
@click.option(
    "--coordinated",
    is_flag=True,
    hidden=True,
    help="Started by crawl: wait for the jobs and settings on stdin, drain at its end.",
)
@verbosity
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
    metrics_port: int | None,
    metrics_host: str,
    coordinated: bool,
) -> None:
    """Join the fleet: lease work for every running job whose spider this worker can load.

    Run one per CPU core on as many machines as the targets and routes allow, all pointed at
    the same --queue. A job whose spider cannot be loaded here is reported once and left to
    other workers; paused and cancelled jobs are not leased. Stop with SIGTERM or Ctrl-C: no
    new leases, in-flight work finishes, the rest is given back.
    """
    overrides: dict[str, Any] = {"queue": queue, "worker.concurrency": concurrency}
    job_list = list(jobs) or None
    if coordinated:
        import crawlfleet.worker.loops  # noqa: F401 - imported while the coordinator submits the job

        message = _wait_for_start()
        overrides.update(message.get("overrides", {}))
        job_list, exit_when_finished = message["jobs"], True
        kind = ",".join(message.get("kinds", [kind]))
    kinds = _kinds(kind)
    s = settings(ctx, overrides)
    if spiders and not _spiders_exist(spiders):
        fail(f"--spiders {spiders}: no such directory or importable module")
    metrics_at = (metrics_host, metrics_port) if metrics_port is not None else None
    args = (s, job_list, exit_when_finished, worker_id, spiders, coordinated, kinds, metrics_at)
    profile = os.environ.get("CRAWLFLEET_PROFILE")  # a directory: write a cProfile per worker
    if not profile:
        run(_worker(*args))
        return
    import cProfile

    with cProfile.Profile() as prof:
        run(_worker(*args))
    prof.dump_stats(Path(profile) / f"worker-{os.getpid()}.prof")


def _wait_for_start() -> dict[str, Any]:
    """The coordinator's one line: ``{"jobs": [...], "overrides": {...}, "kinds": [...]}``;
    end of file (the crawl stopped before it started) exits quietly."""
    line = sys.stdin.readline()
    if not line.strip():
        sys.exit(0)
    message: dict[str, Any] = json.loads(line)
    return message


def _kinds(value: str) -> tuple[str, ...]:
    from crawlfleet.model import KINDS

    kinds = tuple(k.strip() for k in value.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        fail(f"--kind {value}: choose from {', '.join(KINDS)}")
    return kinds


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
    s: Settings,
    jobs: list[str] | None,
    exit_when_finished: bool,
    worker_id: str | None,
    spiders: str | None,
    coordinated: bool,
    kinds: tuple[str, ...],
    metrics_at: tuple[str, int] | None,
) -> None:
    import logging

    from crawlfleet.worker.serve import open_worker

    log = logging.getLogger("crawlfleet.worker")
    opening = open_worker(
        s,
        jobs=jobs,
        kinds=kinds,
        exit_when_finished=exit_when_finished,
        worker_id=worker_id,
        spiders=spiders,
        own_crawl=coordinated,
    )
    async with opening as w:
        w.install_signal_handlers()
        if coordinated:  # the coordinator gone (stdin closed): drain, as on SIGTERM
            _on_eof(sys.stdin.fileno(), w.stop)
        log.info(
            "worker %s leases %s from %r", w.worker_id, ", ".join(jobs or ["every job"]), w.frontier
        )
        exporter = None
        if metrics_at is not None:
            from crawlfleet.control.app import start_metrics_server

            exporter = await start_metrics_server(w.metrics.registry, *metrics_at)
            host, port = exporter.addresses[0][:2]
            print(f"worker {w.worker_id} metrics on http://{host}:{port}/metrics", flush=True)
        try:
            await w.run()
        finally:
            if exporter is not None:
                await exporter.cleanup()
        log.info("worker %s stops", w.worker_id)


def _on_eof(fd: int, then: Any) -> None:
    """Call ``then`` once ``fd`` reaches its end (read on the event loop: no thread)."""
    loop = asyncio.get_running_loop()

    def readable() -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
            then()

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)
