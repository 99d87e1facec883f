"""Many small sites on loopback: a broad crawl's hosts, with their robots.txt quirks and dead ones.

Every live host is its own loopback address (``127.1.x.y``, all on one port: Linux routes the
whole of 127.0.0.0/8 to ``lo``), served by one aiohttp application that tells the hosts apart by
the address a request came in on. A host's number picks its robots.txt:

====  ==============================================================================
kind  robots.txt
====  ==============================================================================
ok    ``Disallow:`` (everything allowed)
404   none: everything allowed (RFC 9309 "unavailable")
500   HTTP 500: everything disallowed (RFC 9309 "unreachable"), so no page is fetched
slow  answers after ``slow`` seconds, allows everything
deny  ``Disallow: /private/``
====  ==============================================================================

With ``quirks`` (the integration test's), more kinds among them:

========  ==========================================================================
kind      robots.txt / pages
========  ==========================================================================
redirect  robots.txt redirects (twice) to a file with ``Disallow: /private/``
huge      ``Disallow: /b`` then 600 kB of comments (past the 500 kB a crawler reads)
lagging   robots.txt allows everything; every page answers after ``slow`` seconds
========  ==========================================================================

Each host serves ``/`` (links to ``/a``, ``/b`` and ``/private/c``), ``/a``, ``/b`` and
``/private/c``. Dead hosts are addresses of ``127.2.x.y`` nothing listens on: connecting is
refused. ``site.hits[(address, path)]`` counts the requests.

``python -m tests.sites.broad --hosts 2000 --dead 40`` serves them in a process of its own (for
the benchmark) and prints one JSON line: the port, the live and dead addresses and their kinds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

KINDS = ("ok", "404", "ok", "500", "ok", "slow", "ok", "deny", "ok", "404")
QUIRKS = (*KINDS, "redirect", "huge", "lagging")
PAGES = ("/", "/a", "/b", "/private/c")
#: what a crawl that obeys robots.txt skips, per kind (all of a ``500`` host)
DISALLOWED = {"deny": ("/private/",), "redirect": ("/private/",), "huge": ("/b",)}


def address(i: int, net: int = 1) -> str:
    """The loopback address of host ``i`` (0-based) in ``127.<net>.0.0/16``."""
    return f"127.{net}.{i // 250}.{i % 250 + 1}"


@dataclass
class BroadSite:
    live: list[str]
    dead: list[str]
    slow: float = 0.5
    kinds: tuple[str, ...] = KINDS
    port: int = 0
    hits: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: time.monotonic() of the last page served (robots.txt files not counted)
    last_page_at: float = 0.0

    def kind(self, host: str) -> str:
        if host not in self.live:
            return "dead"
        return self.kinds[self.live.index(host) % len(self.kinds)]

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def seeds(self) -> list[str]:
        """Every host's home page, the dead ones among them."""
        return [self.url(h) for h in [*self.live, *self.dead]]

    def expected(self) -> set[tuple[str, str]]:
        """The pages a crawl that follows every link and obeys robots.txt fetches."""
        out = set()
        for host in self.live:
            kind = self.kind(host)
            if kind != "500":
                skip = DISALLOWED.get(kind, ())
                out |= {(host, p) for p in PAGES if not p.startswith(skip)}
        return out

    def pages_hit(self) -> Counter[tuple[str, str]]:
        return Counter({k: n for k, n in self.hits.items() if not k[1].startswith("/robots")})


SITE_KEY = web.AppKey("site", BroadSite)

_LINKS = '<a href="/a">a</a> <a href="/b">b</a> <a href="/private/c">c</a>'


async def _robots(request: web.Request) -> web.Response:
    site = request.app[SITE_KEY]
    host = _host(request)
    site.hits[(host, "/robots.txt")] += 1
    match site.kind(host):
        case "404":
            raise web.HTTPNotFound()
        case "500":
            raise web.HTTPInternalServerError()
        case "slow":
            await asyncio.sleep(site.slow)
        case "deny":
            return web.Response(text="User-agent: *\nDisallow: /private/\n")
        case "redirect":
            raise web.HTTPFound("/robots-moved.txt")
        case "huge":
            return web.Response(text="User-agent: *\nDisallow: /b\n" + _PADDING)
    return web.Response(text="User-agent: *\nDisallow:\n")


_PADDING = "# a robots.txt larger than a crawler reads\n" * 15_000


async def _robots_moved(request: web.Request) -> web.Response:
    """Where a ``redirect`` host's robots.txt points: one hop more, then the file."""
    if request.path == "/robots-moved.txt":
        raise web.HTTPMovedPermanently("/robots-final.txt")
    return web.Response(text="User-agent: *\nDisallow: /private/\n")


async def _page(request: web.Request) -> web.Response:
    site = request.app[SITE_KEY]
    host = _host(request)
    site.hits[(host, request.path)] += 1
    if site.kind(host) == "lagging":
        await asyncio.sleep(site.slow)
    site.last_page_at = time.monotonic()
    if request.path not in PAGES:
        raise web.HTTPNotFound()
    body = f"<html><body><h1>{host}{request.path}</h1>{_LINKS if request.path == '/' else ''}"
    return web.Response(text=body + "</body></html>", content_type="text/html")


def _host(request: web.Request) -> str:
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    return str(sockname[0]) if sockname else ""


async def start_broad(
    hosts: int, dead: int = 0, slow: float = 0.5, quirks: bool = False
) -> tuple[BroadSite, Callable[[], Awaitable[None]]]:
    """Serve ``hosts`` live hosts (and name ``dead`` dead ones); returns the site and ``stop``."""
    site = BroadSite([address(i) for i in range(hosts)], [address(i, 2) for i in range(dead)])
    site.slow = slow
    site.kinds = QUIRKS if quirks else KINDS
    app = web.Application()
    app[SITE_KEY] = site
    app.router.add_get("/robots.txt", _robots)
    app.router.add_get("/robots-moved.txt", _robots_moved)
    app.router.add_get("/robots-final.txt", _robots_moved)
    app.router.add_get("/{tail:.*}", _page)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    first = web.TCPSite(runner, site.live[0], 0, backlog=1024)
    await first.start()
    site.port = runner.addresses[0][1]
    for host in site.live[1:]:
        await web.TCPSite(runner, host, site.port, backlog=1024).start()
    return site, runner.cleanup


async def _serve(args: argparse.Namespace) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    site, stop = await start_broad(args.hosts, args.dead, args.slow)
    kinds = {h: site.kind(h) for h in site.live}
    print(json.dumps({"port": site.port, "live": site.live, "dead": site.dead, "kinds": kinds}))
    print(flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--dead", type=int, default=40)
    parser.add_argument("--slow", type=float, default=3.0)
    asyncio.run(_serve(parser.parse_args()))
