"""``crawlfleet serve``: the web dashboard, its JSON API and ``/metrics``, over the store."""

from __future__ import annotations

from typing import Any

import click

from crawlfleet.cli.common import async_command, opened, queue_option, settings


@click.command()
@queue_option
@click.option("--host", help="Address to bind (default [control] host: 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default 8686; 0: any free).")
@click.option(
    "--token",
    help="Token every request needs ([control] token, CRAWLFLEET_CONTROL_TOKEN); required to "
    "bind anywhere but loopback.",
)
@click.option(
    "--sample-every",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0.1),
    metavar="SECONDS",
    help="How often the charts' numbers are read from the store.",
)
@click.pass_context
@async_command
async def serve(
    ctx: click.Context,
    queue: str | None,
    host: str | None,
    port: int | None,
    token: str | None,
    sample_every: float,
) -> None:
    """Serve the dashboard, a JSON API and Prometheus /metrics for the fleet in the store.

    \b
    Pages: overview (throughput, backlog, oldest queued age, success, block rate, validation
    failures, as charts), jobs (pause, resume, cancel), domains, routes, workers, dead letters
    (replay) and quarantine (each record's raw snapshot from its WARC file).
    The numbers come from the store and from what every worker reports to it: no Prometheus
    server is needed. Loopback only unless a token is set; see README "Monitoring".
    """
    overrides: dict[str, Any] = {
        "queue": queue,
        "control.host": host,
        "control.port": port,
        "control.token": token,
    }
    s = settings(ctx, {k: v for k, v in overrides.items() if v is not None})
    from crawlfleet.control.app import make_app, run
    from crawlfleet.control.security import Guard
    from crawlfleet.control.state import ControlState

    c = s.control
    guard = Guard.make(c.host, c.port, c.token, c.allowed_hosts.split(","))  # refuses first
    async with opened(s, create=False) as store:
        app = make_app(ControlState(store, s), guard, sample_every=sample_every)
        await run(app, c.host, c.port)
