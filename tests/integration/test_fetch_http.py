"""HttpClient against the hostile site over real sockets (H1-H3, H6, H8)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from urllib.parse import quote

import pytest
from tests.sites.hostile import BOMB_SIZE, HostileSite, hostile_site, page_bytes

from crawlfleet.errors import (
    AddressRefused,
    BodyTooLarge,
    DataLoss,
    FetchTimeout,
    InvalidURL,
    TooLarge,
    TooManyRedirects,
    UnsupportedScheme,
)
from crawlfleet.fetch import FetchSettings, HttpClient
from crawlfleet.fetch.base import FetchRequest
from crawlfleet.fetch.http import HttpFetcher
from crawlfleet.policy.blocks import is_html
from crawlfleet.response import Response
from crawlfleet.routes.pools import DIRECT, Route
from crawlfleet.routes.sessions import Session
from crawlfleet.urls import request_identity

__all__ = ["hostile_site"]  # the imported fixture is used by name

CAP = 1_000_000
LOOPBACK = frozenset({"127.0.0.1", "localhost"})


def settings(**overrides: object) -> FetchSettings:
    base: dict[str, object] = {"max_body": CAP, "timeout": 5.0, "private_ok_hosts": LOOPBACK}
    base.update(overrides)
    return FetchSettings(**base)  # type: ignore[arg-type]


@pytest.fixture
async def fetcher() -> AsyncIterator[HttpClient]:
    async with HttpClient(settings()) as f:
        yield f


async def test_normal_page(hostile_site: HostileSite, fetcher: HttpClient) -> None:
    result = await fetcher.fetch(hostile_site.url("/page?size=4321"))
    assert result.status == 200
    assert result.body == page_bytes(4321)
    assert result.http_version == "HTTP/1.1"
    assert result.remote_ip == "127.0.0.1"
    assert (result.header("content-type") or "").startswith("text/html")
    assert ("Content-Length", "4321") in result.headers
    assert result.redirects == []
    assert result.nbytes_wire == 4321
    assert result.elapsed > 0
    sent = dict(result.request_headers)
    assert sent["User-Agent"] == FetchSettings().user_agent
    assert "zstd" in sent["Accept-Encoding"]


async def test_non_2xx_is_a_result(hostile_site: HostileSite, fetcher: HttpClient) -> None:
    result = await fetcher.fetch(hostile_site.url("/nowhere"))
    assert result.status == 404


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "rawdeflate", "br", "zstd"])
async def test_encoded_pages_are_decoded(
    hostile_site: HostileSite, fetcher: HttpClient, encoding: str
) -> None:
    result = await fetcher.fetch(hostile_site.url(f"/encoded/{encoding}?size=200000"))
    assert result.body == page_bytes(200_000)
    assert result.nbytes_wire < 10_000


@pytest.mark.parametrize(
    ("given", "target"),
    [
        ("/page?url=/get&status_code=307", "/page?url=/get&status_code=307"),
        ("/page?sort=price&sort=name", "/page?sort=price&sort=name"),
        ("/page?q=%7e&r=a+b&s=%2F&t=it%27s&&z", "/page?q=%7e&r=a+b&s=%2F&t=it%27s&&z"),
        ("/page?sessionid=abc&id=1#frag", "/page?sessionid=abc&id=1"),
        ("/page?q=a b&w=é", "/page?q=a%20b&w=%C3%A9"),  # escaped as a browser escapes them
    ],
)
async def test_the_request_line_is_the_url_as_given(
    hostile_site: HostileSite, fetcher: HttpClient, given: str, target: str
) -> None:
    """What a spider asks for is what the server receives: stored as request_identity gives it,
    fetched as it is stored (no query sorted, no escape decoded)."""
    url, _, _ = request_identity(hostile_site.url(given))
    result = await fetcher.fetch(url)
    assert result.status == 200
    assert hostile_site.request_lines == [f"GET {target} HTTP/1.1"]


async def test_a_redirect_target_is_fetched_as_the_location_gives_it(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    location = quote("/page?b=2&a=1&a=0&q=%7e", safe="")
    result = await fetcher.fetch(hostile_site.url(f"/redirect-to?url={location}"))
    assert result.status == 200
    assert hostile_site.request_lines[-1] == "GET /page?b=2&a=1&a=0&q=%7e HTTP/1.1"


async def test_the_last_content_type_is_the_pages(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    result = await fetcher.fetch(hostile_site.url("/two-content-types"))
    assert [v for k, v in result.headers if k.lower() == "content-type"] == [
        "text/plain; charset=utf-8",
        "text/html; charset=iso-8859-1",
    ]
    response = Response(result.url, result.status, result.header_map, result.body)
    assert response.encoding == "cp1252"  # WHATWG's iso-8859-1
    assert response.css("h1::text").get() == "Café"
    assert is_html(result.header_map, result.body)  # read as a page, not as text/plain


# H1: size caps


@pytest.mark.parametrize("path", ["/page", "/chunked", "/encoded/gzip", "/encoded/zstd"])
async def test_exactly_max_passes_and_one_more_fails(
    hostile_site: HostileSite, fetcher: HttpClient, path: str
) -> None:
    result = await fetcher.fetch(hostile_site.url(f"{path}?size={CAP}"))
    assert result.body == page_bytes(CAP)
    with pytest.raises(TooLarge):
        await fetcher.fetch(hostile_site.url(f"{path}?size={CAP + 1}"))


async def test_content_length_over_cap_is_refused_before_reading(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    with pytest.raises(BodyTooLarge) as info:
        await fetcher.fetch(hostile_site.url("/lying-length"))
    assert info.value.seen == 0


async def test_chunked_body_over_cap_is_aborted(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    with pytest.raises(BodyTooLarge) as info:
        await fetcher.fetch(hostile_site.url(f"/chunked?size={5 * CAP}"))
    assert CAP < info.value.seen <= 1.1 * CAP


async def test_per_call_cap_and_truncation(hostile_site: HostileSite, fetcher: HttpClient) -> None:
    with pytest.raises(TooLarge):
        await fetcher.fetch(hostile_site.url("/page?size=5000"), max_body=4999)
    result = await fetcher.fetch(hostile_site.url("/page?size=5000"), max_body=3000, truncate=True)
    assert result.body == page_bytes(3000)
    assert result.truncated


async def test_oversized_header_line(hostile_site: HostileSite) -> None:
    async with HttpClient(settings(max_header_bytes=16 * 1024)) as fetcher:
        assert (await fetcher.fetch(hostile_site.url("/big-header?size=8000"))).status == 200
        with pytest.raises(TooLarge):
            await fetcher.fetch(hostile_site.url("/big-header?size=20000"))


async def test_many_small_headers_over_the_total(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    assert (await fetcher.fetch(hostile_site.url("/many-headers?count=100"))).status == 200
    with pytest.raises(TooLarge):
        await fetcher.fetch(hostile_site.url("/many-headers?count=1000"))  # ~100 kB


# H2: decompression bombs


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "rawdeflate", "br", "zstd"])
async def test_bombs_stop_early(
    hostile_site: HostileSite, fetcher: HttpClient, encoding: str
) -> None:
    with pytest.raises(BodyTooLarge) as info:
        await fetcher.fetch(hostile_site.url(f"/bomb/{encoding}"))
    assert CAP < info.value.seen <= 1.1 * CAP < BOMB_SIZE


# H3: redirects


async def test_redirect_chain_within_limit(hostile_site: HostileSite, fetcher: HttpClient) -> None:
    result = await fetcher.fetch(hostile_site.url("/redirect/20"))
    assert result.body == b"arrived"
    assert result.url == hostile_site.url("/redirect/0")
    assert len(result.redirects) == 20
    assert result.redirects[0] == hostile_site.url("/redirect/20")


async def test_redirect_chain_over_limit(hostile_site: HostileSite, fetcher: HttpClient) -> None:
    with pytest.raises(TooManyRedirects):
        await fetcher.fetch(hostile_site.url("/redirect/21"))
    assert hostile_site.hits["/redirect/0"] == 0


async def test_redirect_loop(hostile_site: HostileSite, fetcher: HttpClient) -> None:
    with pytest.raises(TooManyRedirects):
        await fetcher.fetch(hostile_site.url("/loop/a"))
    assert hostile_site.hits["/loop/a"] == 1  # caught on the revisit, not after 20 hops


def redirect(site: HostileSite, target: str, status: int = 302, host: str | None = None) -> str:
    from urllib.parse import quote

    return site.url(f"/redirect-to?status={status}&url={quote(target, safe='')}", host=host)


async def echoed(fetcher: HttpClient, url: str, **kwargs: object) -> dict[str, object]:
    result = await fetcher.fetch(url, **kwargs)  # type: ignore[arg-type]
    data: dict[str, object] = json.loads(result.body)
    data["headers"] = {k.lower(): v for k, v in data["headers"]}  # type: ignore[attr-defined]
    return data


SECRETS = {"Authorization": "Bearer s3cret", "Cookie": "session=s3cret", "X-Keep": "yes"}


async def test_cross_origin_redirect_drops_credentials(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    # 127.0.0.1:P and localhost:P are different origins on the same server.
    url = redirect(hostile_site, hostile_site.url("/echo", host="localhost"))
    data = await echoed(fetcher, url, headers=SECRETS)
    headers = data["headers"]
    assert isinstance(headers, dict)
    assert "authorization" not in headers
    assert "cookie" not in headers
    assert headers["x-keep"] == "yes"


async def test_same_origin_redirect_keeps_credentials(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    data = await echoed(fetcher, redirect(hostile_site, "/echo"), headers=SECRETS)
    headers = data["headers"]
    assert isinstance(headers, dict)
    assert headers["authorization"] == "Bearer s3cret"
    assert headers["cookie"] == "session=s3cret"


@pytest.mark.parametrize(
    ("status", "method", "body"),
    [
        (303, "GET", ""),
        (302, "GET", ""),
        (301, "GET", ""),
        (307, "POST", "x=1"),
        (308, "POST", "x=1"),
    ],
)
async def test_redirect_method_rewriting(
    hostile_site: HostileSite, fetcher: HttpClient, status: int, method: str, body: str
) -> None:
    url = redirect(hostile_site, "/echo", status=status)
    data = await echoed(
        fetcher, url, method="POST", body=b"x=1", headers={"Content-Type": "text/plain"}
    )
    assert (data["method"], data["body"]) == (method, body)


async def test_redirect_to_other_scheme_is_refused(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    with pytest.raises(UnsupportedScheme):
        await fetcher.fetch(redirect(hostile_site, "file:///etc/passwd"))


async def test_unparseable_redirect_is_invalid_url(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    with pytest.raises(InvalidURL):
        await fetcher.fetch(redirect(hostile_site, "http://[::1"))


# H6: slow and broken servers


async def test_trickle_hits_the_total_deadline(hostile_site: HostileSite) -> None:
    async with HttpClient(settings(timeout=0.7)) as fetcher:
        with pytest.raises(FetchTimeout):
            await fetcher.fetch(hostile_site.url("/trickle?size=100&delay=0.2"))


@pytest.mark.parametrize("path", ["/cut", "/broken-chunked", "/truncated-chunked"])
async def test_broken_responses_are_data_loss(
    hostile_site: HostileSite, fetcher: HttpClient, path: str
) -> None:
    with pytest.raises(DataLoss):
        await fetcher.fetch(hostile_site.url(path))


async def test_connection_refused_is_connect_error(fetcher: HttpClient) -> None:
    from crawlfleet.errors import ConnectError

    with pytest.raises(ConnectError):
        await fetcher.fetch("http://127.0.0.1:9/")  # discard port: nothing listens


# H8: address guard


async def test_loopback_refused_by_default(hostile_site: HostileSite) -> None:
    async with HttpClient(settings(private_ok_hosts=frozenset())) as fetcher:
        for host in ("localhost", "127.0.0.1"):
            with pytest.raises(AddressRefused):
                await fetcher.fetch(hostile_site.url("/page", host=host))
    assert hostile_site.hits["/page"] == 0


async def test_only_listed_hosts_may_be_loopback(hostile_site: HostileSite) -> None:
    async with HttpClient(settings(private_ok_hosts=frozenset({"localhost"}))) as fetcher:
        assert (await fetcher.fetch(hostile_site.url("/page", host="localhost"))).status == 200
        with pytest.raises(AddressRefused):
            await fetcher.fetch(hostile_site.url("/page", host="127.0.0.1"))


async def test_allow_private_addresses(hostile_site: HostileSite) -> None:
    async with HttpClient(
        settings(private_ok_hosts=frozenset(), allow_private_addresses=True)
    ) as f:
        assert (await f.fetch(hostile_site.url("/page", host="localhost"))).status == 200


async def test_redirect_to_loopback_name_is_refused(hostile_site: HostileSite) -> None:
    # The start host (127.0.0.1) may be loopback; a redirect to another name for it may not.
    async with HttpClient(settings(private_ok_hosts=frozenset({"127.0.0.1"}))) as fetcher:
        with pytest.raises(AddressRefused):
            await fetcher.fetch(redirect(hostile_site, hostile_site.url("/echo", host="localhost")))
    assert hostile_site.hits["/echo"] == 0


async def test_a_named_loopback_host_is_allowed_on_any_port(hostile_site: HostileSite) -> None:
    """The allowance for a start URL's host is per host, not per port (README, Hostile sites):
    a redirect to another port of it is followed, to another name for it is not."""
    from tests.sites.hostile import start_site

    other, stop = await start_site()
    try:
        async with HttpClient(settings(private_ok_hosts=frozenset({"127.0.0.1"}))) as fetcher:
            result = await fetcher.fetch(redirect(hostile_site, other.url("/page?size=10")))
            assert result.status == 200 and result.url == other.url("/page?size=10")
            with pytest.raises(AddressRefused):
                await fetcher.fetch(redirect(hostile_site, other.url("/page", host="localhost")))
        assert other.hits["/page"] == 1
    finally:
        await stop()


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://10.0.0.1/",
    ],
)
async def test_redirect_to_private_literal_is_refused(
    hostile_site: HostileSite, target: str
) -> None:
    async with HttpClient(settings(private_ok_hosts=frozenset({"localhost"}))) as fetcher:
        with pytest.raises(AddressRefused):
            await fetcher.fetch(redirect(hostile_site, target, host="localhost"))


async def test_non_http_scheme(fetcher: HttpClient) -> None:
    with pytest.raises(UnsupportedScheme):
        await fetcher.fetch("ftp://example.com/file")


async def test_keep_alive_reuses_connections(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    for _ in range(20):
        await fetcher.fetch(hostile_site.url("/page?size=45000"))
    session = fetcher._session
    assert session is not None
    connector = session.connector
    assert connector is not None
    # All 20 sequential fetches went over one pooled connection.
    assert sum(len(v) for v in connector._conns.values()) == 1


async def test_proxy_on_loopback_is_allowed(hostile_site: HostileSite) -> None:
    # The proxy is the user's own configuration; the hostile site answers absolute-form
    # requests like a forward proxy would. The target name is resolved by the proxy.
    async with HttpClient(settings(private_ok_hosts=frozenset())) as fetcher:
        result = await fetcher.fetch("http://shop.example/echo", proxy=hostile_site.base_url)
    assert json.loads(result.body)["method"] == "GET"
    assert hostile_site.hits["/echo"] == 1


async def test_http_fetcher__request_headers_win_session_cookies_go_and_a_redirects_cookie_too(
    hostile_site: HostileSite, fetcher: HttpClient
) -> None:
    now = time.time()
    session = Session.new("s1", Route(DIRECT, DIRECT), now, user_agent="ua-session")
    session = session.with_cookies(["csrf=t0k3n; Path=/"], hostile_site.url("/login"), now)
    url = hostile_site.url("/login-redirect?to=/echo")
    request = FetchRequest(
        url,
        method="POST",
        body=b"user=ann",
        headers={"Accept-Encoding": "gzip", "X-Form": "yes", "User-Agent": "ua-request"},
    )
    result = await HttpFetcher(fetcher).fetch(request, session=session)
    data = json.loads(result.body)
    headers = {k.lower(): v for k, v in data["headers"]}
    assert data["method"] == "GET", "a 303 after the POST"
    assert headers["accept-encoding"] == "gzip", "exactly what the request asked"
    assert (headers["x-form"], headers["user-agent"]) == ("yes", "ua-request")
    assert headers["cookie"] == "csrf=t0k3n; login=ok", "the redirect's cookie on the next hop"
    assert result.hop_cookies == [(url, "login=ok; Path=/")]
    sent = dict(result.request_headers)
    assert sent["Cookie"] == "csrf=t0k3n; login=ok"
