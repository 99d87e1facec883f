"""The impersonating fetcher against a real bot wall: a TLS front that reads each ClientHello
(tests/sites/gate.py) and passes only browser-like ones to the demo shop, with real
certificates made here; an HTTP/2-only site; real proxies (tinyproxy, microsocks)."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import pytest
from aiohttp import web
from tests.proxies import ProxyFleet, free_port, proxy_fleet
from tests.sites.gate import GatedShop, start_gated_shop
from tests.sites.h2site import start_h2_site
from tests.tls import LocalCA, make_ca

from crawlfleet.demo.catalog import Catalog
from crawlfleet.errors import (
    AddressRefused,
    BodyTooLarge,
    ProxyError,
    TooLarge,
    TooManyRedirects,
)
from crawlfleet.fetch.base import FetchRequest
from crawlfleet.fetch.http import FetchSettings, HttpClient
from crawlfleet.fetch.impersonate import ImpersonateClient, ImpersonateFetcher
from crawlfleet.fetch.profiles import family_profiles
from crawlfleet.policy.classify import classify
from crawlfleet.routes.pools import Route
from crawlfleet.routes.sessions import Session

LOCAL = frozenset({"localhost", "127.0.0.1"})


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> LocalCA:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture
async def shop(ca: LocalCA) -> AsyncIterator[GatedShop]:
    gated = await start_gated_shop(ca, Catalog(n_products=40))
    yield gated
    await gated.close()


def settings(ca: LocalCA, **changes: object) -> FetchSettings:
    base = FetchSettings(timeout=15.0, private_ok_hosts=LOCAL, ca_file=str(ca.ca_file))
    return replace(base, **changes)  # type: ignore[arg-type]


async def test_a_python_client_gets_the_challenge_and_every_profile_the_shop(
    shop: GatedShop, ca: LocalCA
) -> None:
    async with HttpClient(settings(ca)) as http:
        result = await http.fetch(shop.base + "/")
    verdict = classify(result.status, result.header_map, result.body)
    assert result.status == 403 and verdict.block.blocked, verdict
    assert shop.gate.seen[-1].family is None
    for family, judged in (("chrome", "chromium"), ("safari", "safari"), ("firefox", "firefox")):
        async with ImpersonateClient(settings(ca, impersonate=family)) as client:
            for profile in client.profiles:
                result = await client.fetch(shop.base + "/", profile=profile)
                assert result.status == 200 and b"product" in result.body, profile
                assert shop.gate.seen[-1].family == judged, (profile, shop.gate.seen[-1])
                agent = dict((k.lower(), v) for k, v in result.request_headers)["user-agent"]
                assert family.capitalize() in agent or (family == "chrome" and "Chrome" in agent)


async def test_the_session_keeps_its_profile_and_user_agent(shop: GatedShop, ca: LocalCA) -> None:
    route = Route("direct", "direct", None)
    seen_agents: dict[str, set[str]] = {}
    async with ImpersonateClient(settings(ca, impersonate="chrome")) as client:
        fetcher = ImpersonateFetcher(client)
        for n in range(12):
            session = Session.new(f"s{n}", route, 0.0, user_agent="crawlfleet/0.1")
            for path in ("/", "/robots.txt", "/"):
                result = await fetcher.fetch(FetchRequest(shop.base + path), session=session)
                assert result.status == 200
                agent = dict((k.lower(), v) for k, v in result.request_headers)["user-agent"]
                assert "crawlfleet" not in agent  # the worker's agent would give it away
                seen_agents.setdefault(session.id, set()).add(agent)
    # one agent (one profile) per session for its whole life, and the fleet's sessions spread
    # over the family's versions
    assert all(len(agents) == 1 for agents in seen_agents.values()), seen_agents
    assert len({next(iter(a)) for a in seen_agents.values()}) >= 2
    assert len(family_profiles("chrome")) >= 2


async def test_http2_only_site(ca: LocalCA) -> None:
    site = await start_h2_site(ca.server_context())
    try:
        async with ImpersonateClient(settings(ca)) as client:
            for path in ("/", "/gz"):
                result = await client.fetch(f"https://localhost:{site.port}{path}")
                assert result.status == 200 and result.http_version == "HTTP/2"
                assert f"{path} over h2".encode() in result.body  # /gz decoded by us
        assert site.paths == ["/", "/gz"]
    finally:
        await site.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyFleet]:
    with proxy_fleet(tmp_path_factory.mktemp("proxies"), http=1, socks=1, auth=(0, 1)) as f:
        yield f


async def test_through_a_proxy_in_front(shop: GatedShop, ca: LocalCA, fleet: ProxyFleet) -> None:
    async with ImpersonateClient(settings(ca)) as client:
        for proxy in fleet.all:  # CONNECT through tinyproxy, SOCKS5 through microsocks
            result = await client.fetch(shop.base + "/", proxy=proxy.url)
            assert result.status == 200 and shop.gate.seen[-1].family == "chromium"
            sent = dict((k.lower(), v) for k, v in result.request_headers)
            assert "proxy-authorization" not in sent
        http = fleet.http[0]
        assert http.password is not None
        wrong = http.url.replace(http.password, "not-the-password")
        with pytest.raises(ProxyError) as info:
            await client.fetch(shop.base + "/", proxy=wrong)
        assert info.value.reason == "auth" and "not-the-password" not in str(info.value)
        with pytest.raises(AddressRefused):  # the guard holds through a proxy too
            await client.fetch("http://10.1.2.3/", proxy=fleet.socks[0].url)


async def _limits_site() -> tuple[str, web.AppRunner]:
    async def bomb(request: web.Request) -> web.Response:
        body = gzip.compress(b"a" * (4 << 20))
        return web.Response(body=body, headers={"Content-Encoding": "gzip"})

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def login(request: web.Request) -> web.Response:
        response = web.HTTPFound("/echo")
        response.set_cookie("sid", "s3cret")
        raise response

    async def echo(request: web.Request) -> web.Response:
        return web.json_response(dict(request.headers))

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"b" * 5000, headers={"X-Pad": "p" * 3000})

    app = web.Application()
    routes = (("/bomb", bomb), ("/loop", loop), ("/login", login), ("/echo", echo), ("/big", big))
    for path, handler in routes:
        app.router.add_get(path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return f"http://localhost:{port}", runner


async def test_the_http_fetchers_limits_hold(ca: LocalCA) -> None:
    base, runner = await _limits_site()
    try:
        async with ImpersonateClient(settings(ca, max_body=1 << 20)) as client:
            with pytest.raises(BodyTooLarge):  # 4 MiB inflated from a few kB: stopped at 1 MiB
                await client.fetch(base + "/bomb")
            cut = await client.fetch(base + "/bomb", max_body=1000, truncate=True)
            assert (cut.truncated, cut.body) == (True, b"a" * 1000)  # robots.txt reads so
            with pytest.raises(TooManyRedirects):
                await client.fetch(base + "/loop")
            with pytest.raises(BodyTooLarge):  # announced by its Content-Length: not read
                await client.fetch(base + "/big", max_body=4000)
            big = await client.fetch(base + "/big", max_body=4000, truncate=True)
            assert (big.truncated, big.header("x-pad"), big.reason) == (True, "p" * 3000, "OK")
            route = Route("direct", "direct", None)
            session = Session.new("jar", route, 0.0, user_agent="x")
            fetcher = ImpersonateFetcher(client)
            result = await fetcher.fetch(FetchRequest(base + "/login"), session=session)
            assert json.loads(result.body).get("Cookie") == "sid=s3cret"  # the hop's cookie
            assert result.redirects == [base + "/login"]
            for n in range(3):  # a reused handle sends this request's headers, no others'
                echoed = await client.fetch(base + "/echo", headers={"X-N": str(n)})
                sent = json.loads(echoed.body)
                assert sent.get("X-N") == str(n), sent
            assert (await client.fetch(base + "/echo", method="HEAD")).body == b""
            alone = json.loads((await client.fetch(base + "/echo")).body)  # a GET after a HEAD
            assert "X-N" not in alone and "Cookie" not in alone, alone
        async with ImpersonateClient(settings(ca, max_header_bytes=2000)) as client:
            with pytest.raises(TooLarge):  # the response head over its cap
                await client.fetch(base + "/big")
        only_ip = settings(ca, private_ok_hosts=frozenset({"127.0.0.1"}))
        async with ImpersonateClient(only_ip) as client:
            with pytest.raises(AddressRefused):  # a name resolving to loopback, not a seed
                await client.fetch(base + "/echo")
    finally:
        await runner.cleanup()
