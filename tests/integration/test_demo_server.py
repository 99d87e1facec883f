"""The demo shop over real sockets: every fault switch, the admin endpoints, the CLI."""

from __future__ import annotations

import asyncio
import math
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urljoin, urlsplit

import aiohttp
import pytest
from parsel import Selector
from w3lib.url import canonicalize_url, url_query_cleaner
from yarl import URL

from crawlfleet.demo import forms as demo_forms
from crawlfleet.demo.catalog import Catalog
from crawlfleet.demo.faults import Faults, selected
from crawlfleet.demo.server import start_demo_server
from crawlfleet.demo.spider import LINK_CSS, Product, extract_product, parse_price
from crawlfleet.response import Response
from crawlfleet.spider import Request

CATALOG = Catalog(n_products=240)
SKU = "CF-000003"


class Shop:
    """A running in-process shop and a client session for it."""

    def __init__(self, base: str, session: aiohttp.ClientSession) -> None:
        self.base = base
        self.session = session

    async def get(self, path: str) -> tuple[int, str, dict[str, str]]:
        async with self.session.get(self.base + path) as resp:
            return resp.status, await resp.text(), dict(resp.headers)

    async def post(self, path: str, json: object = None) -> tuple[int, object]:
        async with self.session.post(self.base + path, json=json) as resp:
            body = await resp.json() if resp.status == 200 else await resp.text()
            return resp.status, body

    async def stats(self) -> dict[str, object]:
        async with self.session.get(self.base + "/__admin/stats") as resp:
            data: dict[str, object] = await resp.json()
            return data


async def _start(faults: Faults) -> AsyncIterator[Shop]:
    base, runner = await start_demo_server(CATALOG, faults)
    try:
        async with aiohttp.ClientSession() as session:
            yield Shop(base, session)
    finally:
        await runner.cleanup()


@pytest.fixture
async def shop(request: pytest.FixtureRequest) -> AsyncIterator[Shop]:
    faults = getattr(request, "param", Faults())
    async for s in _start(faults):
        yield s


def with_faults(**switches: object) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("shop", [Faults(**switches)], indirect=True)  # type: ignore[arg-type]


async def test_pages_and_404s(shop: Shop) -> None:
    status, _, headers = await shop.get("/")
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    assert (await shop.get(f"/product/{SKU}"))[0] == 200
    assert (await shop.get("/category/kitchen?sort=price&page=1"))[0] == 200
    assert (await shop.get("/product/CF-999999"))[0] == 404
    assert (await shop.get("/category/kitchen?page=99"))[0] == 404
    assert (await shop.get("/category/kitchen?page=x"))[0] == 404
    assert (await shop.get("/calendar/2024/01"))[0] == 404  # no trap unless switched on
    status, robots, _ = await shop.get("/robots.txt")
    assert status == 200
    assert "Disallow: /cart/" in robots


async def test_stats_count_requests_and_canonical_pages(shop: Shop) -> None:
    for path in (f"/product/{SKU}", f"/product/{SKU}?sid=abc123", f"/product/{SKU};jsessionid=X"):
        await shop.get(path)
    await shop.get("/category/kitchen?sort=name&page=1")
    stats = await shop.stats()
    assert stats["requests"] == 4
    assert stats["pages"] == {f"/product/{SKU}": 3, "/category/kitchen?page=1&sort=name": 1}
    assert stats["clients"] == {"127.0.0.1": 4}
    assert stats["statuses"] == {"200": 4}
    assert sum(stats["per_second"]["127.0.0.1"].values()) == 4  # type: ignore[index]
    await shop.post("/__admin/reset-stats")
    assert (await shop.stats())["requests"] == 0


@with_faults(transient_503=1.0)
async def test_transient_503_then_ok(shop: Shop) -> None:
    status, _, headers = await shop.get(f"/product/{SKU}")
    assert status == 503
    assert headers["Retry-After"] == "1"
    assert (await shop.get(f"/product/{SKU}?sid=other"))[0] == 200  # same page, second request
    assert (await shop.stats())["faults"] == {"transient_503": 1}


async def test_transient_503_hits_the_chosen_fraction() -> None:
    async for shop in _start(Faults(transient_503=0.25)):
        statuses = [(await shop.get(p.path))[0] for p in CATALOG.products[:80]]
        assert 8 <= statuses.count(503) <= 32
        again = [(await shop.get(p.path))[0] for p in CATALOG.products[:80]]
        assert again == [200] * 80


@with_faults(cut=1.0)
async def test_cut_connection_raises_then_ok(shop: Shop) -> None:
    with pytest.raises(aiohttp.ClientPayloadError):
        await shop.get(f"/product/{SKU}")
    status, html, _ = await shop.get(f"/product/{SKU}")
    assert status == 200
    assert html.endswith("</html>")


@with_faults(captcha=1.0)
async def test_captcha_page_then_real_page(shop: Shop) -> None:
    status, html, _ = await shop.get(f"/product/{SKU}")
    assert status == 200
    assert "captcha" in html.lower()
    assert 'class="product"' not in html
    assert 'class="product"' in (await shop.get(f"/product/{SKU}"))[1]


@with_faults(slow=1.0, slow_delay=0.3)
async def test_slow_pages(shop: Shop) -> None:
    started = time.monotonic()
    assert (await shop.get(f"/product/{SKU}"))[0] == 200
    assert time.monotonic() - started >= 0.3


@with_faults(rate_limit=5)
async def test_rate_limit_answers_429_with_retry_after(shop: Shop) -> None:
    results = [await shop.get("/") for _ in range(20)]
    limited = [headers for status, _, headers in results if status == 429]
    assert len(limited) >= 10  # at most two one-second windows of 5 can pass
    assert all(h["Retry-After"] == "1" for h in limited)
    stats = await shop.stats()
    assert stats["statuses"]["200"] <= 10  # type: ignore[index]
    assert stats["max_per_second"]["127.0.0.1"] >= 6  # type: ignore[index]
    assert stats["faults"]["rate_limited"] == len(limited)  # type: ignore[index]


@with_faults(always_500=[f"/product/{SKU}"])
async def test_always_500_until_fixed(shop: Shop) -> None:
    assert [(await shop.get(f"/product/{SKU}"))[0] for _ in range(3)] == [500, 500, 500]
    assert (await shop.get("/product/CF-000004"))[0] == 200
    assert (await shop.post("/__admin/fix"))[0] == 200
    assert (await shop.get(f"/product/{SKU}"))[0] == 200


@with_faults(robots_503=True)
async def test_robots_503_until_ok(shop: Shop) -> None:
    assert (await shop.get("/robots.txt"))[0] == 503
    assert (await shop.post("/__admin/robots-ok"))[0] == 200
    status, robots, _ = await shop.get("/robots.txt")
    assert status == 200
    assert "Disallow: /cart/" in robots


@with_faults(trap=True)
async def test_trap_is_endless(shop: Shop) -> None:
    _, html, _ = await shop.get("/")
    path = Selector(text=html).css("nav.events a::attr(href)").get()
    seen = set()
    for _ in range(30):
        assert path is not None
        status, html, _ = await shop.get(path)
        assert status == 200
        seen.add(path)
        path = Selector(text=html).css("a.next::attr(href)").get()
    assert len(seen) == 30
    assert "/calendar/2026/06" in seen


async def test_faults_switch_at_runtime(shop: Shop) -> None:
    assert (await shop.get("/calendar/2024/01"))[0] == 404
    status, switches = await shop.post("/__admin/faults", {"trap": True, "transient_503": 1.0})
    assert status == 200
    assert isinstance(switches, dict)
    assert switches["trap"] is True
    assert (await shop.get("/calendar/2024/01"))[0] == 200
    assert 'href="/calendar/2024/01"' in (await shop.get("/"))[1]
    assert (await shop.get(f"/product/{SKU}"))[0] == 503
    assert (await shop.post("/__admin/faults", {"nonsense": 1}))[0] == 400


def _canonical(url: str) -> str:
    url = url.split("#", 1)[0]
    parts = urlsplit(url)
    url = parts._replace(path=parts.path.split(";", 1)[0]).geturl()
    return canonicalize_url(url_query_cleaner(url, ["sid"], remove=True))


async def test_link_rules_reach_every_product_once(shop: Shop) -> None:
    """A breadth-first crawl with the demo spider's link CSS and extraction finds the whole
    shop; duplicate spellings collapse; robots-disallowed links are the only ones left out."""
    start = shop.base + "/"
    queue, seen, records, skipped = [start], {start}, [], set()
    while queue:
        batch, queue = queue[:32], queue[32:]
        pages = await asyncio.gather(*(shop.get(urlsplit(u).path + _qs(u)) for u in batch))
        for url, (status, html, _) in zip(batch, pages, strict=True):
            assert status == 200, url
            page = Selector(text=html)
            if (record := extract_product(page)) is not None:
                records.append(record)
            for href in page.css(LINK_CSS).css("::attr(href)").getall():
                link = _canonical(urljoin(url, href))
                if urlsplit(link).path.startswith(("/cart/", "/account/")):
                    skipped.add(link)
                elif link not in seen:
                    seen.add(link)
                    queue.append(link)
    valid = [r for r in records if _valid(r)]
    assert sorted(valid, key=lambda r: r["sku"]) == CATALOG.expected_records()
    assert sorted(r["sku"] for r in records if not _valid(r)) == CATALOG.invalid_skus()
    assert skipped
    stats = await shop.stats()
    assert max(stats["pages"].values()) == 1  # type: ignore[attr-defined]


def _qs(url: str) -> str:
    query = urlsplit(url).query
    return "?" + query if query else ""


def _valid(record: dict[str, object]) -> bool:
    try:
        Product.model_validate(record)
    except ValueError:
        return False
    return True


@pytest.fixture
def server_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crawlfleet.demo.server",
            "--port",
            "0",
            "--products",
            "100",
            "--transient-503",
            "1.0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:")
        yield proc, line.removeprefix("listening on ")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()


async def test_server_process_serves_and_stops_on_sigterm(
    server_process: tuple[subprocess.Popen[str], str],
) -> None:
    proc, base = server_process
    async with aiohttp.ClientSession() as session:
        async with session.get(base + "/product/CF-000001") as resp:
            assert resp.status == 503
        async with session.get(base + "/product/CF-000001") as resp:
            assert resp.status == 200
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0
    assert proc.stdout is not None
    assert proc.stdout.read() == ""  # exactly one line was printed


@with_faults(rate_limit=20)
async def test_rate_limit_is_a_sliding_second_of_accepted_requests(shop: Shop) -> None:
    """Over 1.5 s of a client asking far too fast, no second-long window, wherever it starts,
    holds more than 20 accepted requests; a 429's Retry-After says when a slot frees."""
    accepted: list[float] = []
    started = time.monotonic()
    while time.monotonic() - started < 1.5:
        status, _, headers = await shop.get("/")
        if status == 200:
            accepted.append(time.monotonic())
        else:
            assert status == 429 and headers["Retry-After"] == "1"
    assert 20 < len(accepted) <= 40
    for i, t in enumerate(accepted):
        # seen from the client, a late answer moves its time: a tenth of a second of slack
        assert sum(1 for u in accepted[i:] if u < t + 0.9) <= 20
    per_client = (await shop.stats())["per_client"]["127.0.0.1"]  # type: ignore[index]
    assert per_client["max_accepted_per_second"] == 20
    assert per_client["rate_limited"] > 20
    assert per_client["captchas"] == 0


@with_faults(rate_limit=5, captcha_after=3, captcha_window=10.0, captcha_for=1.0)
async def test_a_client_that_keeps_pushing_gets_captcha_pages_for_a_while(shop: Shop) -> None:
    statuses = [(await shop.get("/"))[0] for _ in range(9)]
    assert statuses == [200] * 5 + [429] * 4, "the fourth refusal is one too many"
    status, html, _ = await shop.get(f"/product/{SKU}")
    assert status == 200 and "captcha" in html.lower() and 'class="product"' not in html
    assert (await shop.get("/robots.txt"))[0] == 200, "robots.txt is never a captcha"
    await asyncio.sleep(1.1)
    _, html, _ = await shop.get(f"/product/{SKU}")
    assert 'class="product"' in html, "the captcha wall ends"
    stats = await shop.stats()
    assert stats["per_client"]["127.0.0.1"]["captchas"] == 2  # type: ignore[index]
    assert stats["faults"]["captcha_wall"] == 1  # type: ignore[index]


@with_faults(latency=0.01, latency_per_request=0.01)
async def test_latency_grows_with_the_requests_in_flight(shop: Shop) -> None:
    started = time.monotonic()
    await shop.get(f"/product/{SKU}")
    alone = time.monotonic() - started
    started = time.monotonic()
    await asyncio.gather(*(shop.get(f"/product/{SKU}") for _ in range(10)))
    together = time.monotonic() - started
    assert 0.02 <= alone < 0.1
    assert together >= 0.1, "ten at once: the last one in waits 10 ms + 10 x 10 ms"
    load = (await shop.stats())["load"]
    assert load["max_in_flight"] == 10  # type: ignore[index]
    assert load["in_flight_at_arrival"]["1"] >= 1  # type: ignore[index]
    assert load["unloaded_latency"] == pytest.approx(0.02)  # type: ignore[index]
    assert load["median_latency"] > load["unloaded_latency"]  # type: ignore[index,operator]


async def test_faults_at_the_noise_rates_of_a_real_site() -> None:
    """5% 503s, 2% cut connections, 2% three-second pages, all by page: each on its share."""
    faults = Faults(transient_503=0.05, cut=0.02, slow=0.02, slow_delay=3.0)
    keys = [p.path for p in CATALOG.products]
    for kind, share in (("transient_503", 0.05), ("cut", 0.02), ("slow", 0.02)):
        hit = sum(1 for k in keys if selected(kind, k, getattr(faults, kind)))
        assert abs(hit - share * len(keys)) <= 3 * math.sqrt(share * len(keys)) + 1, kind
    async for shop in _start(faults):
        slow = next(k for k in keys if selected("slow", k, 0.02))
        started = time.monotonic()
        assert (await shop.get(slow))[0] in (200, 503)
        assert time.monotonic() - started >= 3.0


@with_faults(captcha_clients=["127.0.0.1"])
async def test_a_flagged_client_address_gets_only_captcha_pages(shop: Shop) -> None:
    for path in ("/", f"/product/{SKU}", "/category/kitchen"):
        status, html, _ = await shop.get(path)
        assert status == 200 and "captcha" in html.lower() and "<nav" not in html
    assert (await shop.get("/robots.txt"))[0] == 200, "robots.txt is never a captcha"
    await shop.post("/__admin/faults", {"captcha_clients": ["127.0.0.9"]})
    assert 'class="product"' in (await shop.get(f"/product/{SKU}"))[1], "another address is"
    assert (await shop.stats())["faults"]["captcha_wall"] == 3  # type: ignore[index]


@with_faults(session_cookie=True)
async def test_session_cookie__given_once_logged_per_request_and_a_flagged_one_gets_captchas(
    shop: Shop,
) -> None:
    async def get(path: str, sid: str | None = None) -> tuple[int, str, str | None]:
        headers = {"Cookie": f"shopsid={sid}"} if sid else {}
        async with shop.session.get(shop.base + path, headers=headers) as resp:
            given = resp.cookies.get("shopsid")
            return resp.status, await resp.text(), given.value if given else None

    status, _, sid = await get("/")
    assert status == 200 and sid
    assert (await get(f"/product/{SKU}", sid))[2] is None, "a known session keeps its cookie"
    await shop.post("/__admin/faults", {"captcha_sessions": [sid]})
    status, html, again = await get(f"/product/{SKU}", sid)
    assert status == 200 and "captcha" in html.lower() and again is None
    status, html, fresh = await get(f"/product/{SKU}")  # a new identity: a new cookie, the page
    assert 'class="product"' in html and fresh and fresh != sid
    log = (await shop.stats())["sessions"]
    assert [row[1:] for row in log] == [  # type: ignore[union-attr]
        ["127.0.0.1", None, sid, 200],
        ["127.0.0.1", sid, None, 200],
        ["127.0.0.1", sid, None, 200],
        ["127.0.0.1", None, fresh, 200],
    ]


# -- the forms: a login with a CSRF token, the orders behind it, the ViewState search ----------


class Browser:
    """A client that keeps cookies (IP hosts too) and submits forms as follow_form builds them."""

    def __init__(self, base: str, session: aiohttp.ClientSession) -> None:
        self.base = base
        self.session = session

    async def get(self, path: str) -> tuple[int, Response]:
        async with self.session.get(self.base + path) as resp:
            page = Response(str(resp.url), resp.status, dict(resp.headers), await resp.read())
            return resp.status, page

    async def submit(self, request: Request) -> tuple[int, Response]:
        async with self.session.request(
            request.method, request.url, data=request.body, headers=request.headers
        ) as resp:
            page = Response(str(resp.url), resp.status, dict(resp.headers), await resp.read())
            return resp.status, page


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    base, runner = await start_demo_server(CATALOG)
    try:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
            yield Browser(base, session)
    finally:
        await runner.cleanup()


LOGIN = {"username": demo_forms.USERNAME, "password": demo_forms.PASSWORD}


async def test_login__csrf_token_and_signed_cookie_then_every_order(browser: Browser) -> None:
    status, form_page = await browser.get("/login")
    assert status == 200
    assert form_page.css("form.login input[name=csrf_token]::attr(value)").get()
    assert (await browser.get("/account/orders"))[0] == 403, "not signed in yet"
    status, orders = await browser.submit(form_page.follow_form("form.login", formdata=LOGIN))
    assert status == 200 and orders.url == browser.base + "/account/orders"  # after the 303
    seen = []
    while True:
        for link in orders.css("a.order::attr(href)").getall():
            status, detail = await browser.get(link)
            assert status == 200
            seen.append(
                {
                    "order": detail.css("article.order::attr(data-id)").get(),
                    "date": detail.css("time.date::text").get(),
                    "skus": detail.css("td.sku::text").getall(),
                    "total": parse_price(detail.css(".total::text").get()),
                }
            )
        following = orders.css("a.next::attr(href)").get()
        if following is None:
            break
        orders = (await browser.get(following))[1]
    assert seen == demo_forms.expected_orders(CATALOG)


@pytest.mark.parametrize(
    ("formdata", "cookie", "said"),
    [
        ({**LOGIN, "csrf_token": "forged"}, True, "CSRF token missing or wrong"),
        ({**LOGIN, "csrf_token": None}, True, "CSRF token missing or wrong"),
        (LOGIN, False, "no valid session cookie (load the login form first)"),
        ({**LOGIN, "password": "nope"}, True, "wrong user name or password"),
    ],
)
async def test_login__a_wrong_token_cookie_or_password_is_a_403(
    browser: Browser, formdata: dict[str, str | None], cookie: bool, said: str
) -> None:
    _, form_page = await browser.get("/login")
    if not cookie:
        browser.session.cookie_jar.clear()
    status, answer = await browser.submit(form_page.follow_form("form.login", formdata=formdata))
    assert (status, answer.text) == (403, f"403 Forbidden: {said}")
    assert (await browser.get("/account/orders"))[0] == 403


async def test_login__a_tampered_session_cookie_is_refused(browser: Browser) -> None:
    _, form_page = await browser.get("/login")
    token = form_page.css("input[name=csrf_token]::attr(value)").get()
    forged = demo_forms._sign(b"another key", {"sid": "x", "csrf": token, "user": "demo"})
    browser.session.cookie_jar.clear()
    browser.session.cookie_jar.update_cookies({demo_forms.COOKIE: forged}, URL(browser.base))
    assert (await browser.get("/account/orders"))[0] == 403
    status, _ = await browser.submit(form_page.follow_form(formid="login", formdata=LOGIN))
    assert status == 403


async def test_viewstate_search__two_postbacks_give_the_categorys_products(
    browser: Browser,
) -> None:
    _, step1 = await browser.get("/search-vs")
    slugs = step1.css("#ddlCategory option::attr(value)").getall()
    assert slugs == [c.slug for c in CATALOG.categories]
    assert step1.css("input[name=__VIEWSTATE]::attr(value)").get()
    field = demo_forms.CATEGORY_FIELD
    for slug in slugs[:3]:
        status, step2 = await browser.submit(
            step1.follow_form("#aspnetForm", formdata={field: slug})
        )
        assert status == 200 and step2.css("input[name=__EVENTVALIDATION]")
        _, results = await browser.submit(step2.follow_form("#aspnetForm"))
        assert results.css("tr.result .sku::text").getall() == demo_forms.expected_search(
            CATALOG, slug
        )
        _, in_stock = await browser.submit(
            step2.follow_form("#aspnetForm", formdata={demo_forms.STOCK_FIELD: "on"})
        )
        assert in_stock.css("tr.result .sku::text").getall() == demo_forms.expected_search(
            CATALOG, slug, in_stock_only=True
        )


async def test_viewstate_search__a_stale_missing_or_forged_state_gets_the_error_page(
    browser: Browser,
) -> None:
    _, step1 = await browser.get("/search-vs")
    field = demo_forms.CATEGORY_FIELD
    _, step2 = await browser.submit(step1.follow_form("#aspnetForm", formdata={field: "kitchen"}))
    stale = step2.follow_form(
        "#aspnetForm",
        formdata={"__VIEWSTATE": step1.css("#__VIEWSTATE::attr(value)").get()},
    )
    for request in (
        stale,  # the first step's state posted with the second's button
        step1.follow_form("#aspnetForm", formdata={field: "kitchen", "__VIEWSTATE": None}),
        step1.follow_form("#aspnetForm", formdata={field: "not-a-category"}),
        step1.follow_form("#aspnetForm", formdata={field: "kitchen", "__VIEWSTATE": "dGFt.cGVy"}),
    ):
        status, page = await browser.submit(request)
        assert status == 400
        assert "The state information is invalid" in page.text
