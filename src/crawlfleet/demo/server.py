"""The demo shop as an aiohttp server, with test-only fault switches.

Run it::

    python -m crawlfleet.demo.server --host 127.0.0.1 --port 0 --products 2000 --transient-503 0.05

It prints ``listening on http://HOST:PORT`` (a line per ``--host``), and serves until SIGTERM or
SIGINT.
In-process: ``base_url, runner = await start_demo_server(Catalog(), Faults())`` and
``await runner.cleanup()`` when done.

Faults are deterministic: whether a URL misbehaves depends on a hash of its canonical form, and
"transient" faults hit only the first request(s) of a URL, counted here, so a crawler that
retries always gets the page in the end. ``/__admin/`` (never linked, disallowed by robots.txt)
lets tests read request statistics and flip switches at runtime:

* ``GET /__admin/stats``: request counts per path, per canonical page, per status, per client
  address, per client per section of the shop (``sections``: ``product``, ``category``...),
  and per client per second; per client address the most requests accepted within
  one sliding second, its 429s and the captcha pages it earned (``per_client``); requests in
  flight at arrival and the latency they cost (``load``).
  With ``session_cookie`` on, ``sessions`` lists every request as ``[arrival, client, cookie
  sent, cookie given, status]`` (the ``shopsid`` values; null for none).
* ``POST /__admin/fix``: the ``always_500`` paths start answering normally.
* ``POST /__admin/robots-ok``: robots.txt starts answering 200.
* ``POST /__admin/faults``: a JSON object of ``Faults`` fields to change.
* ``POST /__admin/reset-stats``: forget all counts (fault attempt counters included).

The shop's forms (a login with a CSRF token and the account's orders behind it, a two-step
ASP.NET-style ViewState search) are :mod:`crawlfleet.demo.forms`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import secrets
import signal
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from crawlfleet.demo import forms, jspages
from crawlfleet.demo.catalog import Catalog
from crawlfleet.demo.faults import ClientLimits, Faults, Load, selected
from crawlfleet.demo.pages import DynamicLinks, Renderer, captcha_page, robots_txt
from crawlfleet.demo.stats import Stats

SESSION_COOKIE = "shopsid"
SESSION_PARAMS = frozenset({"sid", "jsessionid", "sessionid"})
HTML = "text/html"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def page_key(request: web.Request) -> str:
    """The request's URL as one page: session ids dropped, query sorted (the fragment never
    reaches a server)."""
    path = request.path.split(";", 1)[0]
    query = sorted((k, v) for k, v in request.query.items() if k.lower() not in SESSION_PARAMS)
    return path + ("?" + urlencode(query) if query else "")


class ShopState:
    """The running shop: catalog, switches, counters and the cache of rendered pages."""

    def __init__(self, catalog: Catalog, faults: Faults) -> None:
        self.catalog = catalog
        self.faults = faults
        self.stats = Stats()
        self.limits = ClientLimits()
        self.load = Load()
        self.fixed = False
        self.robots_ok = False
        self._renderer: Renderer | None = None
        self._cache: dict[str, bytes] = {}

    @property
    def renderer(self) -> Renderer:
        # Rebuilt when the trap switch flips, since the trap link is part of every page's header.
        if self._renderer is None or self._renderer.trap != self.faults.trap:
            self._renderer = Renderer(self.catalog, DynamicLinks(), trap=self.faults.trap)
            self._cache.clear()
        return self._renderer

    def cached(self, key: str, render: Callable[[Renderer], str | None]) -> bytes | None:
        """The page ``key``, rendered once and then served from memory."""
        renderer = self.renderer
        body = self._cache.get(key)
        if body is None:
            text = render(renderer)
            if text is None:
                return None
            body = self._cache[key] = text.encode()
        return body

    def first_attempts(self, key: str) -> bool:
        """True while page ``key`` is within its first ``transient_attempts`` requests."""
        return self.stats.pages[key] <= self.faults.transient_attempts


STATE = web.AppKey("state", ShopState)


def make_app(catalog: Catalog, faults: Faults | None = None) -> web.Application:
    """The shop as an aiohttp application (``faults`` defaults to all switches off)."""
    app = web.Application(middlewares=[_count_and_limit])
    app[STATE] = ShopState(catalog, faults or Faults())
    app.router.add_get("/", _home)
    app.router.add_get("/robots.txt", _robots)
    app.router.add_get("/category/{slug}", _category)
    app.router.add_get("/product/{sku}", _product)
    app.router.add_get(r"/calendar/{year:\d{4}}/{month:\d{2}}", _calendar)
    app.router.add_get("/__admin/stats", _admin_stats)
    app.router.add_post("/__admin/fix", _admin_fix)
    app.router.add_post("/__admin/robots-ok", _admin_robots_ok)
    app.router.add_post("/__admin/faults", _admin_faults)
    app.router.add_post("/__admin/reset-stats", _admin_reset)
    jspages.register(app, catalog)  # the JavaScript twins of the pages above, under /js/
    forms.register(app, catalog)  # /login, /account/orders, /search-vs
    return app


@web.middleware
async def _count_and_limit(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count every non-admin request, then apply the rate limit (and captcha rule),
    ``always_500`` and the latency of load."""
    if request.path.startswith("/__admin/"):
        return await handler(request)
    state, faults = request.app[STATE], request.app[STATE].faults
    client = request.remote or "unknown"
    arrival = state.stats.request(client, request.path_qs, page_key(request), int(time.time()))
    verdict, retry_after = state.limits.check(
        client,
        time.monotonic(),
        faults.rate_limit,
        faults.captcha_after,
        faults.captcha_window,
        faults.captcha_for,
    )
    sid = request.cookies.get(SESSION_COOKIE) if faults.session_cookie else None
    if request.path != "/robots.txt" and (
        client in faults.captcha_clients or (sid is not None and sid in faults.captcha_sessions)
    ):
        verdict = "captcha"  # a flagged address or identity: captchas, whatever it asks
    response: web.StreamResponse
    if verdict == "captcha" and request.path != "/robots.txt":
        state.stats.faults["captcha_wall"] += 1
        response = web.Response(text=captcha_page(), content_type=HTML)
    elif verdict == "limited":
        headers = {"Retry-After": str(retry_after)}
        response = _fault(state, "rate_limited", 429, headers=headers)
    elif not state.fixed and request.path.split(";", 1)[0] in faults.always_500:
        response = _fault(state, "always_500", 500)
    else:
        response = await _loaded(state, request, handler, arrival)
    state.stats.answered(arrival, response.status)
    if faults.session_cookie and request.path != "/robots.txt":
        given = None if sid is not None else secrets.token_hex(6)
        if given is not None:
            response.set_cookie(SESSION_COOKIE, given, path="/", httponly=True)
        state.stats.session(arrival, client, sid, given, response.status)
    return response


async def _loaded(
    state: ShopState, request: web.Request, handler: Handler, arrival: float
) -> web.StreamResponse:
    """The handler's answer, after the latency the requests in flight cost."""
    seconds = state.load.enter(state.faults.latency, state.faults.latency_per_request)
    try:
        if seconds:
            await asyncio.sleep(seconds)
        return await handler(request)
    except web.HTTPException as exc:
        state.stats.answered(arrival, exc.status)
        raise
    finally:
        state.load.leave()


def _fault(state: ShopState, kind: str, status: int, **kwargs: Any) -> web.Response:
    state.stats.faults[kind] += 1
    return web.Response(status=status, text=f"{status} ({kind})", **kwargs)


def _html(body: bytes | None) -> web.Response:
    if body is None:
        raise web.HTTPNotFound(text="not found")
    return web.Response(body=body, content_type=HTML, charset="utf-8")


async def _home(request: web.Request) -> web.StreamResponse:
    return _html(request.app[STATE].cached("home", lambda r: r.home()))


async def _robots(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    if state.faults.robots_503 and not state.robots_ok:
        return _fault(state, "robots_503", 503)
    return web.Response(text=robots_txt())


async def _category(request: web.Request) -> web.StreamResponse:
    slug = request.match_info["slug"].split(";", 1)[0]
    sort = request.query.get("sort", "name")
    try:
        page = int(request.query.get("page", "1"))
    except ValueError as exc:
        raise web.HTTPNotFound(text="no such page") from exc
    key = f"category:{slug}:{page}:{sort}"
    return _html(request.app[STATE].cached(key, lambda r: r.category(slug, page, sort)))


async def _product(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    sku = request.match_info["sku"].split(";", 1)[0]
    body = state.cached(f"product:{sku}", lambda r: r.product(sku))
    if body is None:
        raise web.HTTPNotFound(text="no such product")
    key, faults = page_key(request), state.faults
    if selected("slow", key, faults.slow):
        state.stats.faults["slow"] += 1
        await asyncio.sleep(faults.slow_delay)
    if state.first_attempts(key):
        if selected("transient_503", key, faults.transient_503):
            return _fault(state, "transient_503", 503, headers={"Retry-After": "1"})
        if selected("captcha", key, faults.captcha):
            state.stats.faults["captcha"] += 1
            return web.Response(text=captcha_page(), content_type=HTML)
        if selected("cut", key, faults.cut):
            state.stats.faults["cut"] += 1
            return await _cut(request, body)
    return _html(body)


async def _cut(request: web.Request, body: bytes) -> web.StreamResponse:
    """Announce the whole body, send half of it, then drop the connection."""
    response = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    if request.transport is not None:
        request.transport.close()
    return response


async def _calendar(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    year, month = int(request.match_info["year"]), int(request.match_info["month"])
    if not state.faults.trap or not 1 <= month <= 12:
        raise web.HTTPNotFound(text="no such month")
    return _html(state.cached(f"calendar:{year}:{month}", lambda r: r.calendar(year, month)))


async def _admin_stats(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    data = state.stats.as_json()
    data["per_client"] = state.limits.as_json()
    data["load"] = state.load.as_json(state.faults.latency, state.faults.latency_per_request)
    data["switches"] = dataclasses.asdict(state.faults)
    data["fixed"], data["robots_ok"] = state.fixed, state.robots_ok
    return web.json_response(data)


async def _admin_fix(request: web.Request) -> web.StreamResponse:
    request.app[STATE].fixed = True
    return web.json_response({"fixed": True})


async def _admin_robots_ok(request: web.Request) -> web.StreamResponse:
    request.app[STATE].robots_ok = True
    return web.json_response({"robots_ok": True})


async def _admin_faults(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    try:
        changes = await request.json()
        if not isinstance(changes, dict):
            raise ValueError("expected a JSON object")
        state.faults.update(changes)
    except ValueError as exc:
        raise web.HTTPBadRequest(text=str(exc)) from exc
    return web.json_response(dataclasses.asdict(state.faults))


async def _admin_reset(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    state.stats, state.limits = Stats(), ClientLimits()
    state.load.at_arrival.clear()
    state.load.peak = state.load.in_flight
    return web.json_response({"reset": True})


async def start_demo_server(
    catalog: Catalog,
    faults: Faults | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    also: Sequence[str] = (),
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[str, web.AppRunner]:
    """Serve the shop on ``host:port`` (0 = a free port); returns its base URL and the runner.

    ``also`` names more addresses (e.g. ``127.0.0.2``) serving the very same shop on the same
    port: one site with the same pages under several host names, as mirrors and sites that share
    templates are. Their base URLs are :func:`base_urls` of the runner. ``ssl_context``
    serves HTTPS. Call ``await runner.cleanup()`` to stop it.
    """
    runner = web.AppRunner(make_app(catalog, faults), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    bound_port = runner.addresses[0][1]
    for extra in also:
        await web.TCPSite(runner, extra, bound_port, ssl_context=ssl_context).start()
    base = base_urls(runner)[0]
    return ("https" + base[4:] if ssl_context is not None else base), runner


def base_urls(runner: web.AppRunner) -> list[str]:
    """The base URL of every address ``runner`` serves, in the order they were started."""
    urls = []
    for address in runner.addresses:
        bound_host, bound_port = address[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        urls.append(f"http://{shown}:{bound_port}")
    return urls


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m crawlfleet.demo.server", description=__doc__)
    p.add_argument(
        "--host",
        action="append",
        default=None,
        help="address to serve on (repeat it: the same shop on several hosts, one port)",
    )
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--products", type=int, default=2000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--transient-503", type=float, default=0.0, metavar="FRACTION")
    p.add_argument("--slow", type=float, default=0.0, metavar="FRACTION")
    p.add_argument("--slow-delay", type=float, default=1.0, metavar="SECONDS")
    p.add_argument("--cut", type=float, default=0.0, metavar="FRACTION")
    p.add_argument("--captcha", type=float, default=0.0, metavar="FRACTION")
    p.add_argument("--transient-attempts", type=int, default=1, metavar="N")
    p.add_argument("--rate-limit", type=int, default=None, metavar="N")
    p.add_argument("--captcha-after", type=int, default=None, metavar="K")
    p.add_argument("--captcha-window", type=float, default=10.0, metavar="SECONDS")
    p.add_argument("--captcha-for", type=float, default=60.0, metavar="SECONDS")
    p.add_argument("--latency", type=float, default=0.0, metavar="SECONDS")
    p.add_argument("--latency-per-request", type=float, default=0.0, metavar="SECONDS")
    p.add_argument(
        "--captcha-client",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="serve this client address captcha pages only (repeatable)",
    )
    p.add_argument(
        "--session-cookie",
        action="store_true",
        help="set a shopsid cookie on requests without one; log who sent which",
    )
    p.add_argument("--trap", action="store_true")
    p.add_argument("--always-500", action="append", default=[], metavar="PATH")
    p.add_argument("--robots-503", action="store_true")
    return p.parse_args(argv)


def faults_from_args(args: argparse.Namespace) -> Faults:
    return Faults(
        transient_503=args.transient_503,
        slow=args.slow,
        slow_delay=args.slow_delay,
        cut=args.cut,
        captcha=args.captcha,
        transient_attempts=args.transient_attempts,
        rate_limit=args.rate_limit,
        captcha_after=args.captcha_after,
        captcha_window=args.captcha_window,
        captcha_for=args.captcha_for,
        latency=args.latency,
        latency_per_request=args.latency_per_request,
        captcha_clients=list(args.captcha_client),
        session_cookie=args.session_cookie,
        trap=args.trap,
        always_500=list(args.always_500),
        robots_503=args.robots_503,
    )


async def serve(args: argparse.Namespace) -> None:
    """Serve until SIGTERM or SIGINT, announcing the address on stdout first."""
    catalog = Catalog(n_products=args.products, seed=args.seed)
    hosts = args.host or ["127.0.0.1"]
    _, runner = await start_demo_server(
        catalog, faults_from_args(args), hosts[0], args.port, also=hosts[1:]
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    for url in base_urls(runner):
        print(f"listening on {url}", flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.products < 1:
        print("error: --products must be at least 1", file=sys.stderr)
        return 2
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args))
    else:
        uvloop.run(serve(args))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
