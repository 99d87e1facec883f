"""The connection pool keeps at most ``max_idle`` idle keep-alive connections (real sockets)."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from crawlfleet.fetch.connector import BoundedConnector


async def _ok(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def test_idle_connections_bounded__the_most_recent_kept() -> None:
    app = web.Application()
    app.router.add_get("/", _ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    hosts = [f"127.3.0.{i}" for i in range(1, 21)]
    site = web.TCPSite(runner, hosts[0], 0)
    await site.start()
    port = runner.addresses[0][1]
    for host in hosts[1:]:
        await web.TCPSite(runner, host, port).start()
    connector = BoundedConnector(max_idle=5, limit=10)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            for host in hosts:  # one request per host, one after another: 20 connections
                async with session.get(f"http://{host}:{port}/") as resp:
                    assert await resp.text() == "ok"
            assert connector.idle == 5
            kept = {key.host for key in connector._conns}
            assert kept == set(hosts[-5:])  # the most recently used

            async def fetch(host: str) -> None:
                async with session.get(f"http://{host}:{port}/") as resp:
                    await resp.read()

            await asyncio.gather(*(fetch(h) for h in hosts[:10]))
            assert connector.idle <= 5
    finally:
        await runner.cleanup()
