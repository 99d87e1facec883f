"""A site that never ends: every page ``/p/N`` links ``--links`` (K) pages of its own host that no
other page links, ``/p/N*K+1`` … ``/p/N*K+K`` (a K-ary tree: every link a crawler follows is new),
and a menu of ``--menu`` links every page repeats (``/p/1`` …, known after the first page).
Each page has one item (``.item``) for a record.

``--known``: the same pages, but ``/p/N`` links ``/p/N+1`` … ``/p/N+K``: a crawler that reads
the pages in order knows K-1 of them already (one new link a page, the same bytes and links).

    python benchmarks/discovery_site.py --links 50 --menu 10 [--known]

Prints ``listening on URL``; ``GET /stats`` gives the pages served so far (a JSON number).
"""

from __future__ import annotations

import argparse
import asyncio

from aiohttp import web

SERVED = web.AppKey("served", list)
LINKS = web.AppKey("links", int)
KNOWN = web.AppKey("known", bool)
MENU = web.AppKey("menu", bytes)
ROBOTS = b"User-agent: *\nAllow: /\n"


async def page(request: web.Request) -> web.Response:
    request.app[SERVED][0] += 1
    n = int(request.match_info.get("n", "0"))
    k = request.app[LINKS]
    first = n + 1 if request.app[KNOWN] else n * k + 1
    children = "".join(f'<li><a href="/p/{i}">page {i}</a></li>' for i in range(first, first + k))
    body = (
        f"<html><head><title>Page {n}</title></head><body>"
        f"<nav>{request.app[MENU].decode()}</nav><h1>Page {n}</h1>"
        f'<p class="item" data-n="{n}">item {n}</p><ul class="children">{children}</ul>'
        "</body></html>"
    )
    return web.Response(body=body.encode(), content_type="text/html")


async def robots(request: web.Request) -> web.Response:
    return web.Response(body=ROBOTS, content_type="text/plain")


async def stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[SERVED][0])


def make_app(links: int, menu: int, known: bool = False) -> web.Application:
    app = web.Application()
    app[SERVED] = [0]
    app[LINKS] = links
    app[KNOWN] = known
    app[MENU] = "".join(f'<a href="/p/{i}">menu {i}</a>' for i in range(1, menu + 1)).encode()
    app.router.add_get("/p/{n:[0-9]+}", page)
    app.router.add_get("/", page)
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/stats", stats)
    return app


async def main(links: int, menu: int, known: bool, port: int) -> None:
    runner = web.AppRunner(make_app(links, menu, known), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"listening on http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--links", type=int, default=50, help="new links per page (K)")
    p.add_argument("--menu", type=int, default=10, help="links every page repeats")
    p.add_argument("--known", action="store_true", help="link the next K pages (known ones)")
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args()
    asyncio.run(main(a.links, a.menu, a.known, a.port))
