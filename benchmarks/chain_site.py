"""A pager: ``/chain/N`` links only to ``/chain/N+1`` (up to ``--length``), each answered after
``--delay`` seconds. The shape of "next" links and detail-after-listing: every hop waits for the
one before it, so what a crawler adds between hops is all that is measured.

    python benchmarks/chain_site.py --length 50 --delay 0.005

Prints ``listening on URL``; ``GET /stats`` gives the start time of every request (server clock).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from aiohttp import web

TIMES = web.AppKey("times", list)
LENGTH = web.AppKey("length", int)
DELAY = web.AppKey("delay", float)


async def page(request: web.Request) -> web.Response:
    request.app[TIMES].append((time.time(), request.path))
    n = int(request.match_info["n"])
    await asyncio.sleep(request.app[DELAY])
    length = request.app[LENGTH]
    if n > length:
        raise web.HTTPNotFound()
    nxt = f'<a class="next" href="/chain/{n + 1}">next</a>' if n < length else ""
    body = f"<html><body><h1>Page {n}</h1><p class='item'>item {n}</p>{nxt}</body></html>"
    return web.Response(text=body, content_type="text/html")


async def robots(request: web.Request) -> web.Response:
    return web.Response(text="User-agent: *\nAllow: /\n")


async def stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[TIMES])


async def main(length: int, delay: float) -> None:
    app = web.Application()
    app[TIMES] = []
    app[LENGTH], app[DELAY] = length, delay
    app.router.add_get("/chain/{n}", page)
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/stats", stats)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    print(f"listening on http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--length", type=int, default=50)
    p.add_argument("--delay", type=float, default=0.005)
    args = p.parse_args()
    try:
        import uvloop

        uvloop.run(main(args.length, args.delay))
    except KeyboardInterrupt:
        pass
