"""HttpClient through real proxies (tinyproxy, microsocks) to real servers on loopback.

Every proxy leaves from its own source address (127.0.0.2, ...), so the servers tell routes
apart by client address. One HTTP and one SOCKS proxy require a password.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from tests.proxies import ProxyFleet, ProxyServer, free_port, proxy_fleet
from tests.tls import LocalCA, make_ca

from crawlfleet.data.warc import WarcWriter
from crawlfleet.demo.catalog import Catalog
from crawlfleet.demo.server import start_demo_server
from crawlfleet.errors import AddressRefused, FetchError, ProxyError
from crawlfleet.fetch import FetchResult, FetchSettings, HttpClient
from crawlfleet.routes.pools import parse_routes

LOOPBACK = frozenset({"127.0.0.1", "localhost"})


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyFleet]:
    # http[0] and socks[0] want a password; http[1] and socks[1] are open.
    with proxy_fleet(tmp_path_factory.mktemp("proxies"), http=2, socks=2, auth=(0, 2)) as f:
        yield f


def settings(**overrides: object) -> FetchSettings:
    base: dict[str, object] = {"timeout": 10.0, "private_ok_hosts": LOOPBACK}
    base.update(overrides)
    return FetchSettings(**base)  # type: ignore[arg-type]


@dataclass
class Echo:
    """A server that answers with what it got: method, headers, client address."""

    base: str
    seen: list[dict[str, object]]


async def _echo(request: web.Request) -> web.Response:
    seen = {"headers": dict(request.headers), "remote": request.remote, "path": request.path}
    request.app[SEEN].append(seen)
    return web.json_response(seen)


SEEN = web.AppKey("seen", list)


async def _serve_echo(ssl_context: object = None) -> tuple[Echo, web.AppRunner]:
    app = web.Application()
    app[SEEN] = []
    app.router.add_get("/{tail:.*}", _echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ssl_context).start()  # type: ignore[arg-type]
    scheme = "https" if ssl_context is not None else "http"
    return Echo(f"{scheme}://localhost:{port}", app[SEEN]), runner


async def _stop(runner: web.AppRunner) -> None:
    # A proxy closes its side of a tunnel a moment after the client closes its own; stopping
    # before it did would leave a half-closed TLS transport for the garbage collector.
    server = runner.server
    for _ in range(100):
        if server is None or not server.connections:
            break
        await asyncio.sleep(0.02)
    await runner.cleanup()


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    site, runner = await _serve_echo()
    yield site
    await _stop(runner)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> LocalCA:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture
async def tls_echo(ca: LocalCA) -> AsyncIterator[Echo]:
    site, runner = await _serve_echo(ca.server_context())
    yield site
    await _stop(runner)


async def test_the_shop_sees_each_proxy_by_its_source_address(fleet: ProxyFleet) -> None:
    base, runner = await start_demo_server(Catalog())
    try:
        async with HttpClient(settings()) as fetcher:
            for proxy in fleet.all:
                for _ in range(3):
                    result = await fetcher.fetch(base + "/", proxy=proxy.url)
                    assert result.status == 200 and b"<nav" in result.body
            await fetcher.fetch(base + "/")  # and one direct
            stats = json.loads((await fetcher.fetch(base + "/__admin/stats")).body)
            # A connection pool per proxy, keeping its connections alive between fetches.
            pools = list(fetcher._proxy_sessions.values())
            assert len(pools) == len(fleet.all)
            for session in pools:
                assert session.connector is not None
                assert session.connector._conns  # type: ignore[attr-defined]
    finally:
        await runner.cleanup()
    expected = {p.source: 3 for p in fleet.all} | {"127.0.0.1": 1}
    assert stats["clients"] == expected


@pytest.mark.parametrize("index", [0, 1, 2, 3])
async def test_https_through_connect_and_socks5(
    fleet: ProxyFleet, tls_echo: Echo, ca: LocalCA, index: int
) -> None:
    proxy = fleet.all[index]
    async with HttpClient(settings(ca_file=str(ca.ca_file))) as fetcher:
        result = await fetcher.fetch(tls_echo.base + "/secure", proxy=proxy.url)
    seen = json.loads(result.body)
    assert result.status == 200 and seen["path"] == "/secure"
    assert seen["remote"] == proxy.source  # the tunnel left from the proxy's own address
    assert not any(k.lower() == "proxy-authorization" for k in seen["headers"])


async def test_tls_to_the_origin_is_still_verified_through_a_proxy(
    fleet: ProxyFleet, tls_echo: Echo
) -> None:
    async with HttpClient(settings()) as fetcher:  # the test CA is not trusted here
        for proxy in (fleet.http[1], fleet.socks[1]):
            with pytest.raises(FetchError, match=r"(?i)certificate"):
                await fetcher.fetch(tls_echo.base + "/", proxy=proxy.url)


async def test_proxy_credentials_go_to_the_proxy_only(
    fleet: ProxyFleet, echo: Echo, tmp_path: Path
) -> None:
    proxy = fleet.http[0]
    async with HttpClient(settings()) as fetcher:
        result = await fetcher.fetch(
            echo.base + "/page",
            proxy=proxy.url,
            headers={"Proxy-Authorization": "Basic c3RvbGVuOnNlY3JldA=="},  # never forwarded
        )
        direct = await fetcher.fetch(
            echo.base + "/direct", headers={"Proxy-Authorization": "Basic c3RvbGVuOnNlY3JldA=="}
        )
    assert json.loads(result.body)["remote"] == proxy.source
    for response in (result, direct):
        headers = json.loads(response.body)["headers"]
        assert not any(k.lower() == "proxy-authorization" for k in headers)
        assert not any(k.lower() == "proxy-authorization" for k, _ in response.request_headers)
    warc = _archive(tmp_path, result)
    assert proxy.password is not None and proxy.password.encode() not in warc
    assert b"proxy-authorization" not in warc.lower()


def _archive(directory: Path, result: FetchResult) -> bytes:
    import gzip

    with WarcWriter(directory, prefix="proxied") as writer:
        writer.write(
            url=result.url,
            method="GET",
            request_headers=result.request_headers,
            status=result.status,
            reason=result.reason,
            http_version=result.http_version,
            response_headers=result.headers,
            body=result.body,
            fetched_at=time.time(),
            ip=result.remote_ip,
        )
    return b"".join(gzip.decompress(p.read_bytes()) for p in directory.glob("*.warc.gz"))


async def test_a_wrong_or_missing_password_is_a_proxy_auth_error(
    fleet: ProxyFleet, echo: Echo, tls_echo: Echo
) -> None:
    http, socks = fleet.http[0], fleet.socks[0]
    assert http.password is not None and socks.password is not None
    cases = [
        (socks.url.replace(socks.password, "not-the-password"), echo.base + "/"),
        (socks.url.replace(socks.password, "not-the-password"), tls_echo.base + "/"),
        (http.url.replace(http.password, "not-the-password"), tls_echo.base + "/"),  # CONNECT
        (http.url.replace(f"route:{http.password}@", ""), echo.base + "/"),  # 407
        (http.url.replace(f"route:{http.password}@", ""), tls_echo.base + "/"),
    ]
    async with HttpClient(settings()) as fetcher:
        for proxy, target in cases:
            with pytest.raises(ProxyError) as info:
                await fetcher.fetch(target, proxy=proxy)
            assert info.value.reason == "auth", str(info.value)
            assert "not-the-password" not in _everything_about(info.value)
        # tinyproxy answers a plain-HTTP request with wrong credentials 401 (not 407), which
        # looks like any origin's 401: a response, but one that never reached the origin.
        wrong = http.url.replace(http.password, "not-the-password")
        assert (await fetcher.fetch(echo.base + "/", proxy=wrong)).status == 401
    assert echo.seen == [] and tls_echo.seen == []


async def test_a_killed_proxy_is_a_quick_proxy_error_and_back_once_restarted(
    fleet: ProxyFleet, echo: Echo, tmp_path: Path
) -> None:
    for proxy in (
        ProxyServer("http", free_port(), "127.0.0.20", tmp_path / "h", password="pw-kill-1"),
        ProxyServer("socks5", free_port(), "127.0.0.21", tmp_path / "s", password="pw-kill-2"),
    ):
        proxy.start()
        try:
            async with HttpClient(settings()) as fetcher:
                assert (await fetcher.fetch(echo.base + "/", proxy=proxy.url)).status == 200
                proxy.stop()
                started = time.monotonic()
                with pytest.raises(ProxyError) as info:
                    await fetcher.fetch(echo.base + "/", proxy=proxy.url)
                assert time.monotonic() - started < 1.0
                assert info.value.reason == "refused" and info.value.kind == "proxy"
                assert "pw-kill" not in _everything_about(info.value)
                proxy.start()
                result = await fetcher.fetch(echo.base + "/again", proxy=proxy.url)
                assert json.loads(result.body)["remote"] == proxy.source
        finally:
            proxy.stop()


async def test_the_address_guard_still_applies_to_the_target(fleet: ProxyFleet) -> None:
    only_127 = settings(private_ok_hosts=frozenset({"127.0.0.1"}))
    async with HttpClient(only_127) as fetcher:
        for proxy in (fleet.http[1], fleet.socks[1]):
            for target in ("http://10.1.2.3/", "http://localhost:8080/", "http://0x0a.1/"):
                with pytest.raises(AddressRefused):
                    await fetcher.fetch(target, proxy=proxy.url)


async def test_a_proxy_password_appears_nowhere(
    fleet: ProxyFleet, echo: Echo, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)
    http, socks = fleet.http[0], fleet.socks[0]
    secrets = [p.password for p in (http, socks) if p.password]
    config = parse_routes({"routes": {"pool": [{"name": "dc", "proxies": [http.url, socks.url]}]}})
    texts = [repr(config), str(config), *(repr(r) for r in config.routes())]
    async with HttpClient(settings()) as fetcher:
        for route in config.routes()[1:]:
            assert route.proxy_url is not None
            result = await fetcher.fetch(echo.base + "/ok", proxy=route.proxy_url)
            texts += [repr(result), json.dumps(result.request_headers)]
            texts.append(_archive(tmp_path / route.id.replace("/", "-"), result).decode("latin-1"))
            closed = route.proxy_url.rsplit(":", 1)[0] + f":{free_port()}"
            for broken in (closed, closed.replace(":1", ":99999", 1), closed + "/x?y#z"):
                try:
                    await fetcher.fetch(echo.base + "/", proxy=broken)
                except FetchError as exc:
                    logging.getLogger("crawlfleet.test").exception("fetch failed: %s", exc)
                    texts.append(_everything_about(exc))
    texts.append(caplog.text)
    assert "fetch failed" in caplog.text  # the failures were logged, with their tracebacks
    for secret in secrets:
        assert secret is not None
        assert not [t for t in texts if secret in t]


def _everything_about(exc: BaseException) -> str:
    """str, repr and the whole formatted chain of causes: what a log line could show."""
    return "\n".join([str(exc), repr(exc), *traceback.format_exception(exc)])
