"""One small catalogue served, byte for byte, under several paths of one host.

``/a/index.html``, ``/b/index.html``, ... are the same bytes; so are ``/a/item-3.html`` and
``/b/item-3.html``. Every link is relative (``item-3.html``, ``page-2.html``), so a page's links
depend on the URL it was fetched from, not only on its bytes: a crawler that skips parsing a
page because it saw the same bytes elsewhere loses the whole subtree of the other mirrors.

``start_mirrors()`` serves it on 127.0.0.1 (OS-assigned port); ``site.hits[path]`` counts requests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

MIRRORS = ("a", "b", "c")
ITEMS = 12
PER_PAGE = 5


@dataclass
class MirrorSite:
    port: int = 0
    hits: Counter[str] = field(default_factory=Counter)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pages(self) -> list[str]:
        """Every page path of every mirror."""
        per_mirror = [f"page-{n}.html" for n in range(2, _pages() + 1)]
        per_mirror += ["index.html", *(f"item-{i}.html" for i in range(1, ITEMS + 1))]
        return [f"/{m}/{p}" for m in MIRRORS for p in per_mirror]


SITE_KEY = web.AppKey("site", MirrorSite)


def _pages() -> int:
    return -(-ITEMS // PER_PAGE)


def _listing(page: int) -> bytes:
    first = (page - 1) * PER_PAGE + 1
    items = range(first, min(ITEMS, first + PER_PAGE - 1) + 1)
    links = "".join(f'<li><a class="item" href="item-{i}.html">Item {i}</a></li>' for i in items)
    nxt = f'<a class="next" href="page-{page + 1}.html">next</a>' if page < _pages() else ""
    return f"<html><body><ul>{links}</ul>{nxt}</body></html>".encode()


def _item(i: int) -> bytes:
    return (
        f'<html><body><h1 class="name">Item {i}</h1><span class="sku">S-{i:03d}</span>'
        f'<a class="back" href="index.html">back</a></body></html>'
    ).encode()


async def _page(request: web.Request) -> web.StreamResponse:
    mirror, name = request.match_info["mirror"], request.match_info["name"]
    request.app[SITE_KEY].hits[request.path] += 1
    body: bytes | None = None
    if mirror in MIRRORS:
        if name == "index.html":
            body = _listing(1)
        elif name.startswith("page-") and name[5:-5].isdigit():
            n = int(name[5:-5])
            body = _listing(n) if 1 < n <= _pages() else None
        elif name.startswith("item-") and name[5:-5].isdigit():
            i = int(name[5:-5])
            body = _item(i) if 1 <= i <= ITEMS else None
    if body is None:
        raise web.HTTPNotFound()
    return web.Response(body=body, content_type="text/html")


async def start_mirrors() -> tuple[MirrorSite, Callable[[], Awaitable[None]]]:
    """Serve the mirrors on 127.0.0.1; returns the site and ``stop``."""
    site = MirrorSite()
    app = web.Application()
    app[SITE_KEY] = site
    app.router.add_get("/robots.txt", _robots)
    app.router.add_get("/{mirror}/{name}", _page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    site.port = runner.addresses[0][1]
    return site, runner.cleanup


async def _robots(_: web.Request) -> web.Response:
    return web.Response(text="User-agent: *\nAllow: /\n")
