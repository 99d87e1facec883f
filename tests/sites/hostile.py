"""A site that misbehaves on purpose, served by aiohttp on 127.0.0.1 over real sockets.

Use it from any test file without a conftest::

    from tests.sites.hostile import hostile_site  # noqa: F401  (pytest fixture)

    async def test_x(hostile_site: HostileSite) -> None:
        url = hostile_site.url("/page?size=100")

or, outside pytest, ``base_url, stop = await start_hostile_site()``.

The same server answers as ``127.0.0.1`` and ``localhost`` (two origins, for cross-origin
tests). ``site.hits[path]`` counts requests per path; ``site.robots`` picks the robots.txt
scenario (see :data:`ROBOTS_MODES`).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache

import brotli
import pytest
import zstandard
from aiohttp import web
from multidict import CIMultiDict

BOMB_SIZE = 11 * 1024 * 1024
"""What every bomb decompresses to."""

ROBOTS_RULES = (
    "User-agent: *\n"
    "Disallow: /private\n"
    "Allow: /private/open\n"
    "\n"
    "User-agent: crawlfleet\n"
    "Disallow: /nocrawlfleet\n"
    "Disallow: /private\n"
    "Allow: /private/open\n"
    "Crawl-delay: 2.5\n"
)
ROBOTS_RULES_NO_DELAY = ROBOTS_RULES.replace("Crawl-delay: 2.5\n", "")
"""The same rules without the Crawl-delay (robots mode ``nodelay``: crawls at full speed)."""
ROBOTS_OTHER_AGENTS = (
    "User-agent: *\n"
    "Disallow: /private\n"
    "\n"
    "User-agent: crawl\n"
    "User-agent: github\n"
    "User-agent: HTTPS\n"
    "Disallow: /\n"
    "Crawl-delay: 30\n"
)
"""Groups for other crawlers whose names are words of crawlfleet's User-Agent header (mode
``others``): none of them is crawlfleet's (RFC 9309 matches the product token, whole)."""
ROBOTS_MODES = (
    "rules",
    "nodelay",
    "others",
    "404",
    "403",
    "500",
    "503",
    "429",
    "redirect5",
    "big",
    "slow",
    "cut",
)
AUTH_USER = "crawler"
AUTH_PASSWORD = "pw-7f3a9c1e-s3cret"
"""The Basic credentials ``/auth/...`` requires (a distinctive string: tests grep for it)."""
ROBOTS_BIG_LATE_RULE = "/late"
"""Disallowed only by a group that starts about 600 KiB into the ``big`` robots.txt."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def page_bytes(size: int) -> bytes:
    """A deterministic HTML-ish body of exactly ``size`` bytes."""
    unit = b"<p>crawlfleet hostile site filler text.</p>\n"
    return (unit * (size // len(unit) + 1))[:size]


def encode(data: bytes, encoding: str) -> bytes:
    """``data`` in the given content-coding (``deflate`` is zlib-wrapped, ``rawdeflate`` not)."""
    if encoding == "gzip":
        return gzip.compress(data, compresslevel=9, mtime=0)
    if encoding == "deflate":
        return zlib.compress(data, 9)
    if encoding == "rawdeflate":
        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
        return compressor.compress(data) + compressor.flush()
    if encoding == "br":
        return bytes(brotli.compress(data, quality=11))
    if encoding == "zstd":
        return bytes(zstandard.ZstdCompressor(level=19).compress(data))
    raise ValueError(encoding)


@cache
def bomb(encoding: str) -> bytes:
    """~11 MB of zeros, compressed (a few kB at most)."""
    return encode(b"\0" * BOMB_SIZE, encoding)


@dataclass
class HostileSite:
    """A running hostile site: where it is, what it was asked, how robots.txt behaves."""

    host: str
    port: int
    hits: Counter[str] = field(default_factory=Counter)
    #: requests per path and query, as asked (``/session?sessionid=1``)
    asked: Counter[str] = field(default_factory=Counter)
    #: every request line received, as it came (``GET /p?b=2&a=1 HTTP/1.1``)
    request_lines: list[str] = field(default_factory=list)
    robots: str = "rules"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str, *, host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}{path}"


def _size(request: web.Request, default: int = 1000) -> int:
    return int(request.query.get("size", default))


async def page(request: web.Request) -> web.StreamResponse:
    """``?size=N``: exactly N bytes with Content-Length."""
    return web.Response(body=page_bytes(_size(request)), content_type="text/html")


async def chunked(request: web.Request) -> web.StreamResponse:
    """``?size=N``: N bytes, chunked, no Content-Length."""
    response = web.StreamResponse(headers={"Content-Type": "text/html"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    body = page_bytes(_size(request))
    for start in range(0, len(body), 16 * 1024):
        await response.write(body[start : start + 16 * 1024])
    await response.write_eof()
    return response


async def encoded(request: web.Request) -> web.StreamResponse:
    """``/encoded/{encoding}?size=N``: N bytes of content in that content-coding."""
    encoding = request.match_info["encoding"]
    body = encode(page_bytes(_size(request)), encoding)
    header = "deflate" if encoding == "rawdeflate" else encoding
    return web.Response(body=body, headers={"Content-Encoding": header})


async def bomb_page(request: web.Request) -> web.StreamResponse:
    """``/bomb/{encoding}``: small on the wire, ``BOMB_SIZE`` bytes decoded."""
    encoding = request.match_info["encoding"]
    header = "deflate" if encoding == "rawdeflate" else encoding
    return web.Response(body=bomb(encoding), headers={"Content-Encoding": header})


async def lying_length(request: web.Request) -> web.StreamResponse:
    """Declares 1 GiB, sends 1 kB, then hangs up: a client must refuse from the header alone."""
    response = web.StreamResponse()
    response.content_length = 1 << 30
    await response.prepare(request)
    await response.write(page_bytes(1024))
    return _hang_up(request, response)


async def redirect_chain(request: web.Request) -> web.StreamResponse:
    """``/redirect/{n}``: n more hops (relative Locations), then a page."""
    hops = int(request.match_info["n"])
    if hops <= 0:
        return web.Response(text="arrived")
    raise web.HTTPFound(f"/redirect/{hops - 1}")


async def two_content_types(request: web.Request) -> web.StreamResponse:
    """``/two-content-types``: a latin-1 HTML page sent with two ``Content-Type`` headers, the
    first wrong (``text/plain; charset=utf-8``): the last one is the page's (Fetch standard)."""
    headers = CIMultiDict(
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Type", "text/html; charset=iso-8859-1"),
        ]
    )
    body = "<html><body><h1>Café</h1><a href='/page'>next</a></body></html>".encode("latin-1")
    return web.Response(body=body, headers=headers)


async def redirect_loop(request: web.Request) -> web.StreamResponse:
    """``/loop/a`` <-> ``/loop/b``."""
    other = "b" if request.match_info["side"] == "a" else "a"
    raise web.HTTPFound(f"/loop/{other}")


async def redirect_to(request: web.Request) -> web.StreamResponse:
    """``/redirect-to?url=U&status=302``: one hop anywhere (absolute or not)."""
    status = int(request.query.get("status", 302))
    return web.Response(status=status, headers={"Location": request.query["url"]})


async def login_redirect(request: web.Request) -> web.StreamResponse:
    """``/login-redirect?to=U``: a login's answer, a 303 to ``U`` that sets a cookie."""
    response = web.Response(status=303, headers={"Location": request.query["to"]})
    response.set_cookie("login", "ok", path="/")
    return response


async def echo(request: web.Request) -> web.StreamResponse:
    """The request as JSON: method, headers (as pairs), body."""
    body = await request.read()
    return web.json_response(
        {
            "method": request.method,
            "headers": [[k, v] for k, v in request.headers.items()],
            "body": body.decode("latin-1"),
        }
    )


async def trickle(request: web.Request) -> web.StreamResponse:
    """``?size=N&delay=S``: N bytes, one every S seconds (default 0.2)."""
    size, delay = _size(request, 100), float(request.query.get("delay", 0.2))
    response = web.StreamResponse()
    response.content_length = size
    await response.prepare(request)
    for _ in range(size):
        await response.write(b"x")
        await asyncio.sleep(delay)
    await response.write_eof()
    return response


async def cut(request: web.Request) -> web.StreamResponse:
    """Content-Length 10000, 5000 bytes sent, connection dropped."""
    response = web.StreamResponse()
    response.content_length = 10_000
    await response.prepare(request)
    await response.write(page_bytes(5_000))
    return _hang_up(request, response)


async def broken_chunked(request: web.Request) -> web.StreamResponse:
    """One good chunk, then a chunk-size line that is not hex, then hang up."""
    response = web.StreamResponse()
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write(page_bytes(2_000))
    assert request.transport is not None
    request.transport.write(b"zz-not-a-size\r\ngarbage\r\n")
    return _hang_up(request, response)


async def truncated_chunked(request: web.Request) -> web.StreamResponse:
    """One good chunk, then the connection drops before the terminating zero chunk."""
    response = web.StreamResponse()
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write(page_bytes(2_000))
    return _hang_up(request, response)


async def big_header(request: web.Request) -> web.StreamResponse:
    """``?size=N``: one header line of N bytes."""
    return web.Response(text="ok", headers={"X-Big": "a" * _size(request, 100_000)})


async def many_headers(request: web.Request) -> web.StreamResponse:
    """``?count=N``: N headers of ~100 bytes each (every line small, the total large)."""
    count = int(request.query.get("count", 1000))
    headers = [(f"X-Filler-{i}", "b" * 90) for i in range(count)]
    response = web.Response(text="ok")
    for name, value in headers:
        response.headers.add(name, value)
    return response


async def empty(request: web.Request) -> web.StreamResponse:
    """A 200 HTML page with an empty body."""
    return web.Response(body=b"", content_type="text/html")


async def private(request: web.Request) -> web.StreamResponse:
    """``/private/...``: what robots.txt disallows (a crawler that obeys never gets here)."""
    return web.Response(
        text="<html><title>secret</title><p>secret</p></html>", content_type="text/html"
    )


async def links(request: web.Request) -> web.StreamResponse:
    """``/links?n=N``: a page of N distinct links (``/links/leaf/0`` ...)."""
    count = int(request.query.get("n", 100))
    anchors = "".join(f'<a href="/links/leaf/{i}">{i}</a>\n' for i in range(count))
    return web.Response(text=f"<html><body>{anchors}</body></html>", content_type="text/html")


async def leaf(request: web.Request) -> web.StreamResponse:
    """``/links/leaf/{i}`` and other ends of a crawl: a small page with no link."""
    return web.Response(text="<html><title>leaf</title></html>", content_type="text/html")


async def auth(request: web.Request) -> web.StreamResponse:
    """``/auth/...``: Basic authentication as :data:`AUTH_USER` / :data:`AUTH_PASSWORD`, else
    401. ``/auth/`` links three pages; each page is a titled leaf."""

    expected = base64.b64encode(f"{AUTH_USER}:{AUTH_PASSWORD}".encode()).decode()
    if request.headers.get("Authorization") != f"Basic {expected}":
        return web.Response(
            status=401, text="who are you?", headers={"WWW-Authenticate": 'Basic realm="h"'}
        )
    tail = request.match_info["tail"]
    if not tail:
        anchors = "".join(f'<a href="/auth/page/{i}">{i}</a>' for i in range(3))
        return web.Response(
            text=f"<html><title>home</title>{anchors}</html>", content_type="text/html"
        )
    return web.Response(text=f"<html><title>{tail}</title></html>", content_type="text/html")


def nested_page(levels: int) -> bytes:
    """A page whose one paragraph sits ``levels`` ``<div>`` elements deep."""
    return (
        b"<html><body>"
        + b"<div>" * levels
        + b"<p class=deep>found</p>"
        + b"</div>" * levels
        + b"</body></html>"
    )


async def deep(request: web.Request) -> web.StreamResponse:
    """``/deep?levels=N``: N nested ``<div>`` around ``<p class=deep>`` (parsers pay for depth)."""
    body = nested_page(int(request.query.get("levels", 5000)))
    return web.Response(body=body, content_type="text/html")


async def latin1_header(request: web.Request) -> web.StreamResponse:
    """A page with ``X-Name: caf\\xe9``: one byte that is not UTF-8 in a header, written raw."""
    assert request.transport is not None
    body = b"<html><body><h1>latin-1 header</h1></body></html>"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Name: caf\xe9\r\n"
    head += b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    request.transport.write(head + body)
    response = web.StreamResponse()
    request.transport.close()
    return response


def _hang_up(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    # Abort (RST) so the client sees the cut now; aiohttp then skips finishing the response.
    assert request.transport is not None
    request.transport.abort()
    return response


async def robots(request: web.Request) -> web.StreamResponse:
    site: HostileSite = request.app[SITE_KEY]
    return await _ROBOTS[site.robots](request)


async def _robots_rules(request: web.Request) -> web.StreamResponse:
    return web.Response(text=ROBOTS_RULES)


def _robots_status(status: int) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, text=f"status {status}")

    return handler


async def _robots_redirect5(request: web.Request) -> web.StreamResponse:
    # /robots.txt -> /robots-hop/4 -> ... -> /robots-hop/0 -> /robots-final.txt: 5 hops.
    raise web.HTTPMovedPermanently("/robots-hop/4")


async def robots_hop(request: web.Request) -> web.StreamResponse:
    hops = int(request.match_info["n"])
    raise web.HTTPFound(f"/robots-hop/{hops - 1}" if hops > 0 else "/robots-final.txt")


async def _robots_big(request: web.Request) -> web.StreamResponse:
    filler = ("# " + "x" * 97 + "\n") * (600 * 1024 // 100)
    late = f"User-agent: *\nUser-agent: crawlfleet\nDisallow: {ROBOTS_BIG_LATE_RULE}\n"
    text = ROBOTS_RULES + filler + late
    return web.Response(text=text)


async def _robots_slow(request: web.Request) -> web.StreamResponse:
    return await trickle(request)


async def _robots_no_delay(request: web.Request) -> web.StreamResponse:
    return web.Response(text=ROBOTS_RULES_NO_DELAY)


async def _robots_other_agents(request: web.Request) -> web.StreamResponse:
    return web.Response(text=ROBOTS_OTHER_AGENTS)


_ROBOTS: dict[str, Handler] = {
    "rules": _robots_rules,
    "nodelay": _robots_no_delay,
    "others": _robots_other_agents,
    "404": _robots_status(404),
    "403": _robots_status(403),
    "500": _robots_status(500),
    "503": _robots_status(503),
    "429": _robots_status(429),
    "redirect5": _robots_redirect5,
    "big": _robots_big,
    "slow": _robots_slow,
    "cut": cut,
}

SITE_KEY = web.AppKey("site", HostileSite)


@web.middleware
async def _count(request: web.Request, handler: Handler) -> web.StreamResponse:
    request.app[SITE_KEY].hits[request.path] += 1
    request.app[SITE_KEY].asked[request.path_qs] += 1
    version = request.version
    line = f"{request.method} {request.raw_path} HTTP/{version.major}.{version.minor}"
    request.app[SITE_KEY].request_lines.append(line)
    return await handler(request)


def make_app(site: HostileSite) -> web.Application:
    """The hostile site's aiohttp application (routes documented on each handler)."""
    app = web.Application(middlewares=[_count])
    app[SITE_KEY] = site
    app.router.add_get("/page", page)
    app.router.add_get("/chunked", chunked)
    app.router.add_get("/encoded/{encoding}", encoded)
    app.router.add_get("/bomb/{encoding}", bomb_page)
    app.router.add_get("/lying-length", lying_length)
    app.router.add_get("/redirect/{n}", redirect_chain)
    app.router.add_get("/loop/{side}", redirect_loop)
    app.router.add_get("/two-content-types", two_content_types)
    app.router.add_route("*", "/redirect-to", redirect_to)
    app.router.add_route("*", "/echo", echo)
    app.router.add_route("*", "/login-redirect", login_redirect)
    app.router.add_get("/trickle", trickle)
    app.router.add_get("/cut", cut)
    app.router.add_get("/broken-chunked", broken_chunked)
    app.router.add_get("/truncated-chunked", truncated_chunked)
    app.router.add_get("/big-header", big_header)
    app.router.add_get("/many-headers", many_headers)
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/robots-hop/{n}", robots_hop)
    app.router.add_get("/robots-final.txt", _robots_rules)
    app.router.add_get("/empty", empty)
    app.router.add_get("/private/{tail:.*}", private)
    app.router.add_get("/links", links)
    app.router.add_get("/links/leaf/{i}", leaf)
    app.router.add_get("/leaf", leaf)
    app.router.add_get("/auth/{tail:.*}", auth)
    app.router.add_get("/deep", deep)
    app.router.add_get("/latin1-header", latin1_header)
    return app


async def start_site() -> tuple[HostileSite, Callable[[], Awaitable[None]]]:
    """Start a hostile site on 127.0.0.1 with an OS-assigned port; returns it and ``stop``."""
    site = HostileSite(host="127.0.0.1", port=0)
    runner = web.AppRunner(make_app(site), access_log=None, handler_cancellation=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    site.port = runner.addresses[0][1]
    return site, runner.cleanup


async def start_hostile_site() -> tuple[str, Callable[[], Awaitable[None]]]:
    """Start a hostile site; returns ``(base_url, stop)``."""
    site, stop = await start_site()
    return site.base_url, stop


@pytest.fixture
async def hostile_site() -> AsyncIterator[HostileSite]:
    """A fresh hostile site per test (fresh counters, robots mode ``rules``)."""
    site, stop = await start_site()
    try:
        yield site
    finally:
        await stop()
