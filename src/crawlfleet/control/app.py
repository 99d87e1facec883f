"""``crawlfleet serve``: the dashboard, the JSON API and ``/metrics`` as one aiohttp application.

::

    app = make_app(ControlState(store, settings), Guard.make("127.0.0.1", 8686, token=""))
    await run(app, "127.0.0.1", 8686)            # until SIGINT or SIGTERM

Every request passes :func:`crawlfleet.control.security.guard_middleware` (Host, token,
same-origin); the state samples the store every ``sample_every`` seconds for the charts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import AsyncIterator

from aiohttp import web

from crawlfleet.control import api, views
from crawlfleet.control.security import GUARD, Guard, guard_middleware
from crawlfleet.control.state import ControlState
from crawlfleet.errors import StoreError
from crawlfleet.frontier.ports import Jobs
from crawlfleet.frontier.upkeep import UPKEEP_EVERY
from crawlfleet.notify.destinations import destinations
from crawlfleet.notify.keeper import QualityKeeper

__all__ = ["keep_runs", "make_app", "run", "start_metrics_server"]

log = logging.getLogger("crawlfleet.control")


def make_app(
    state: ControlState, guard: Guard, *, sample_every: float = 5.0, keep_quality: bool = True
) -> web.Application:
    """The application over ``state``, guarded by ``guard``, sampling every ``sample_every``;
    it keeps the runs' quality and delivers the outbox too (``keep_quality``), as workers do."""
    app = web.Application(middlewares=[guard_middleware], client_max_size=1 << 20)
    app[GUARD] = guard
    app[api.STATE] = state
    app[views.REFRESH_MS] = max(1000, int(sample_every * 1000))
    api.register(app)
    views.register(app)

    async def sampler(_: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(state.sample(sample_every), name="sampler")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def quality(_: web.Application) -> AsyncIterator[None]:
        from crawlfleet.notify.service import keep

        owner = f"serve-{socket.gethostname()}-{os.getpid()}"
        task = asyncio.create_task(keep(state.store, state.settings, owner=owner), name="notify")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def scheduler(_: web.Application) -> AsyncIterator[None]:
        closing = (
            QualityKeeper(state.store, state.settings, destinations(state.settings))
            if keep_quality
            else None
        )
        task = asyncio.create_task(keep_runs(state.store, closing=closing), name="scheduler")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(sampler)
    if keep_quality:
        app.cleanup_ctx.append(quality)
    app.cleanup_ctx.append(scheduler)
    return app


async def keep_runs(
    store: Jobs, every: float = UPKEEP_EVERY, *, closing: QualityKeeper | None = None
) -> None:
    """What ``serve`` does for the runs, as every worker does: end the runs whose jobs have
    nothing left (and close their quality with ``closing``, before a schedule can start the
    next), and start the due runs of the schedules (each once across the fleet)."""
    while True:
        try:
            ended = await store.finish_runs()
            if ended and closing is not None:
                await closing.close_runs(ended)
            await store.start_due_runs()
        except StoreError as exc:
            log.debug("runs and schedules skipped: %s", exc)
        except Exception:  # the dashboard goes on whatever the store does
            log.exception("runs and schedules failed")
        await asyncio.sleep(every)


async def run(app: web.Application, host: str, port: int) -> str:
    """Serve ``app`` on ``host:port`` until SIGINT or SIGTERM; returns the URL it served."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound = runner.addresses[0]
        app[GUARD].port = bound[1]  # --port 0: the Host header names the port picked
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        url = f"http://{shown}:{bound[1]}"
        print(f"serving the dashboard on {url}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        return url
    finally:
        await runner.cleanup()


async def start_metrics_server(registry: object, host: str, port: int) -> web.AppRunner:
    """A worker's own ``/metrics`` (``worker --metrics-port``) on ``host:port``: read-only, no
    token; call ``cleanup()`` on the returned runner to stop it."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    assert isinstance(registry, CollectorRegistry)

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
