"""A site whose pages depend on a cookie, a real aiohttp server on a loopback port, as an age
gate or a locale or currency choice made by a GET link works:

* ``/gate`` sets a fresh ``gate`` cookie per visit and links ``/page/1`` .. ``/page/N``;
* ``/page/{n}`` says which ``gate`` cookie came with it (``none`` when none did) in
  ``<p id="gate">`` and records it in :attr:`CookieSite.seen`;
* ``/plain`` sets no cookie and links nothing; it answers slowly (``plain_delay``), so that a
  crawl starting on it and on the gate has both in flight at once (two workers: two sessions).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

__all__ = ["CookieSite", "cookie_site"]


@dataclass
class CookieSite:
    pages: int = 5
    page_delay: float = 1.0
    plain_delay: float = 1.5
    port: int = 0
    issued: list[str] = field(default_factory=list)  # the gate cookies set, in order
    seen: dict[str, str] = field(default_factory=dict)  # page path -> the gate cookie it got

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def gate(self, request: web.Request) -> web.Response:
        token = secrets.token_hex(8)
        self.issued.append(token)
        links = "".join(f'<a href="/page/{i}">page {i}</a>' for i in range(1, self.pages + 1))
        resp = _html(f"<title>gate</title><body>{links}</body>")
        resp.set_cookie("gate", token, path="/")
        return resp

    async def page(self, request: web.Request) -> web.Response:
        await asyncio.sleep(self.page_delay)
        got = request.cookies.get("gate", "none")
        self.seen[request.path] = got
        return _html(f'<title>{request.path}</title><body><p id="gate">{got}</p></body>')

    async def plain(self, request: web.Request) -> web.Response:
        await asyncio.sleep(self.plain_delay)
        return _html("<title>plain</title><body>nothing here</body>")


def _html(inner: str) -> web.Response:
    return web.Response(text=f"<html>{inner}</html>", content_type="text/html")


async def start_cookie_site(site: CookieSite) -> web.AppRunner:
    """Serve ``site`` on 127.0.0.1 (an OS-assigned port, set on ``site``); cleanup() stops it."""
    app = web.Application()
    app.router.add_get("/gate", site.gate)
    app.router.add_get("/page/{n}", site.page)
    app.router.add_get("/plain", site.plain)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    site.port = runner.addresses[0][1]
    return runner


@pytest.fixture
async def cookie_site() -> AsyncIterator[CookieSite]:
    site = CookieSite()
    runner = await start_cookie_site(site)
    try:
        yield site
    finally:
        await runner.cleanup()
