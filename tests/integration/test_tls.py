"""HTTPS as users meet it, for all three fetchers (HTTP, impersonating, browser) against real
TLS servers with certificates made here: a private CA trusted through ``SSL_CERT_FILE`` or
``ca_file``, the broken certificates (self-signed, expired, another host's) named as such, and
``tls_verify = False``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from aiohttp import web
from tests.integration.helpers import run
from tests.tls import LocalCA, make_broken, make_ca

from crawlfleet.errors import TlsError
from crawlfleet.fetch import tls
from crawlfleet.fetch.base import Fetcher, FetchRequest
from crawlfleet.fetch.browser import BrowserFetcher, BrowserSettings
from crawlfleet.fetch.http import FetchSettings, HttpClient, HttpFetcher
from crawlfleet.fetch.impersonate import ImpersonateClient, ImpersonateFetcher

pytestmark = pytest.mark.slow
LOCAL = frozenset({"localhost", "127.0.0.1"})
PAGE = b"<html><body><h1>private shop</h1><a href='/p/1'>one</a></body></html>"


@dataclass
class Sites:
    """One TLS server per certificate kind, all serving PAGE."""

    ca: LocalCA  # the private CA and the good certificate
    ports: dict[str, int]
    broken: dict[str, LocalCA]

    def url(self, kind: str) -> str:
        return f"https://localhost:{self.ports[kind]}/"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[LocalCA, dict[str, LocalCA]]:
    root = tmp_path_factory.mktemp("certs")
    kinds = ("self-signed", "expired", "other-host")
    return make_ca(root), {kind: make_broken(root, kind) for kind in kinds}


async def _page(request: web.Request) -> web.Response:
    return web.Response(body=PAGE, content_type="text/html")


@pytest.fixture
async def sites(certs: tuple[LocalCA, dict[str, LocalCA]]) -> AsyncIterator[Sites]:
    ca, broken = certs
    app = web.Application()
    app.router.add_get("/{tail:.*}", _page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    ports = {}
    for kind, cert in {"good": ca, **broken}.items():
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=cert.server_context())
        await site.start()
        ports[kind] = runner.addresses[-1][1]
    yield Sites(ca, ports, broken)
    await runner.cleanup()


Opener = Callable[[FetchSettings], Awaitable[Fetcher]]


async def _http(fs: FetchSettings) -> Fetcher:
    fetcher = HttpFetcher(HttpClient(fs))
    await fetcher.client.start()
    return fetcher


async def _impersonate(fs: FetchSettings) -> Fetcher:
    fetcher = ImpersonateFetcher(ImpersonateClient(fs))
    await fetcher.client.start()
    return fetcher


async def _browser(fs: FetchSettings) -> Fetcher:
    fetcher = BrowserFetcher(BrowserSettings(contexts=1, ca_file=fs.ca_file), guard=fs)
    await fetcher.start()
    return fetcher


FETCHERS = {"http": _http, "impersonate": _impersonate, "browser": _browser}


def _settings(**changes: object) -> FetchSettings:
    return replace(FetchSettings(timeout=20.0, private_ok_hosts=LOCAL), **changes)  # type: ignore[arg-type]


async def _get(open_fetcher: Opener, fs: FetchSettings, url: str) -> int:
    fetcher = await open_fetcher(fs)
    try:
        return (await fetcher.fetch(FetchRequest(url))).status
    finally:
        await fetcher.close()


@pytest.mark.parametrize("kind", FETCHERS)
async def test_a_private_ca_is_trusted_through_ssl_cert_file_and_ca_file(
    kind: str, sites: Sites, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    opener = FETCHERS[kind]
    with pytest.raises(TlsError):  # the system's authorities alone do not know it
        await _get(opener, _settings(), sites.url("good"))
    assert await _get(opener, _settings(ca_file=str(sites.ca.ca_file)), sites.url("good")) == 200
    monkeypatch.setenv("SSL_CERT_FILE", str(sites.ca.ca_file))
    assert await _get(opener, _settings(), sites.url("good")) == 200
    monkeypatch.delenv("SSL_CERT_FILE")
    directory = tmp_path / "certs"
    directory.mkdir()
    (directory / "private.pem").write_bytes(sites.ca.ca_file.read_bytes())
    monkeypatch.setenv("SSL_CERT_DIR", str(directory))
    assert await _get(opener, _settings(), sites.url("good")) == 200


# what each fetcher calls each broken certificate, its own authority trusted (Chromium names a
# self-signed leaf as it names any unknown authority)
EXPECTED = {
    "http": {"self-signed": tls.SELF_SIGNED, "expired": tls.EXPIRED, "other-host": tls.HOSTNAME},
    "impersonate": {
        "self-signed": tls.SELF_SIGNED,
        "expired": tls.EXPIRED,
        "other-host": tls.HOSTNAME,
    },
    "browser": {"self-signed": tls.UNKNOWN_CA, "expired": tls.EXPIRED, "other-host": tls.HOSTNAME},
}


@pytest.mark.parametrize("kind", FETCHERS)
async def test_a_broken_certificate_is_named_and_tls_verify_false_passes_it(
    kind: str, sites: Sites, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    opener = FETCHERS[kind]
    # the authorities of the expired and the other host's certificates trusted (the
    # self-signed one's would be the certificate itself: the private CA instead)
    bundle = tmp_path / "authorities.pem"
    cas = [sites.ca, sites.broken["expired"], sites.broken["other-host"]]
    bundle.write_bytes(b"".join(c.ca_file.read_bytes() for c in cas))
    fetcher = await opener(_settings(ca_file=str(bundle)))
    try:
        for broken in sites.broken:
            with pytest.raises(TlsError) as info:
                await fetcher.fetch(FetchRequest(sites.url(broken)))
            assert info.value.kind == "tls_error"
            assert str(info.value).startswith(EXPECTED[kind][broken]), str(info.value)
    finally:
        await fetcher.close()
    tls._warned.clear()
    with caplog.at_level(logging.WARNING, logger="crawlfleet.fetch"):
        fetcher = await opener(_settings(tls_verify=False))
        try:
            for broken in sites.broken:
                for _ in range(2):
                    result = await fetcher.fetch(FetchRequest(sites.url(broken) + "again"))
                    assert result.status == 200
        finally:
            await fetcher.close()
    warnings = [r for r in caplog.records if "TLS verification is off" in r.getMessage()]
    assert len(warnings) == 1  # once per host (every broken site is localhost)


async def test_crawlfleet_fetch_says_what_is_wrong_in_one_line(
    sites: Sites, tmp_path: Path
) -> None:
    """``crawlfleet fetch`` of a self-signed site: one line naming the certificate error (not
    ``invalid_url``), exit 1; with ``-s tls_verify=false`` the page."""
    url = sites.url("self-signed")
    for extra in ((), ("--impersonate",)):
        done = await asyncio.to_thread(run, ["fetch", url, *extra], tmp_path, 60)
        assert done.returncode == 1, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "tls_error: self-signed certificate" in lines[0], lines
        assert "invalid_url" not in done.stderr and "Traceback" not in done.stderr
        off = ["fetch", url, *extra, "-s", "tls_verify=false"]
        done = await asyncio.to_thread(run, off, tmp_path, 60)
        assert done.returncode == 0 and "private shop" in done.stdout, done.stderr
