"""The browser fetcher with the real Chromium, against the demo shop and the hostile site.

The JS pages must give the same records as their static twins; hung pages time out and close
what they opened; contexts and browsers are recycled; and no Chromium process outlives its pool
or its worker, even one killed with SIGKILL. (A worker's memory over a thousand pages is in
test_browser_crawl.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from tests.sites.hostile import HostileSite, start_site

from crawlfleet.demo.catalog import Catalog
from crawlfleet.demo.jspages import scroll_to_end
from crawlfleet.demo.server import start_demo_server
from crawlfleet.demo.spider import extract_product
from crawlfleet.errors import AddressRefused, FetchTimeout, RobotsDisallowed, UnsupportedScheme
from crawlfleet.fetch import FetchSettings, HttpClient
from crawlfleet.fetch.base import FetchRequest, FetchResult
from crawlfleet.fetch.browser import (
    BrowserFetcher,
    BrowserRequest,
    BrowserResult,
    BrowserSettings,
    procs,
)
from crawlfleet.response import Response
from crawlfleet.routes.pools import Route
from crawlfleet.routes.sessions import Session

pytestmark = pytest.mark.asyncio(loop_scope="module")

CATALOG = Catalog(n_products=600)  # 12 categories of ~50 products: 2-3 listing pages each
SEEDS = frozenset({"127.0.0.1"})
READY = "article.product[data-ready]"
SKU_IN_HREF = re.compile(r"CF-\d{6}")
WORKER = Path(__file__).with_name("browser_worker.py")


def settings(tmp: Path, **overrides: Any) -> BrowserSettings:
    base: dict[str, Any] = {"private_ok_hosts": SEEDS, "runtime_dir": str(tmp / "runtime")}
    base.update(overrides)
    return BrowserSettings(**base)


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("browser")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shop() -> AsyncIterator[str]:
    base, runner = await start_demo_server(CATALOG)
    yield base
    await runner.cleanup()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def hostile() -> AsyncIterator[HostileSite]:
    site, stop = await start_site()
    yield site
    await stop()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def browser(module_tmp: Path) -> AsyncIterator[BrowserFetcher]:
    async with BrowserFetcher(settings(module_tmp, contexts=2)) as fetcher:
        yield fetcher


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def http() -> AsyncIterator[HttpClient]:
    async with HttpClient(FetchSettings(private_ok_hosts=SEEDS)) as fetcher:
        yield fetcher


def rendered(result: BrowserResult) -> Response:
    """The rendered DOM as crawlfleet's Response, as a spider would see it."""
    return Response(
        result.url,
        result.status,
        result.header_map,
        result.rendered_html.encode(),
        encoding="utf-8",
    )


def raw(result: FetchResult) -> Response:
    return Response(result.url, result.status, result.header_map, result.body)


def linked_skus(page: Response) -> list[str]:
    hrefs = page.css("a.product-link::attr(href)").getall()
    return [m.group(0) for h in hrefs if (m := SKU_IN_HREF.search(h))]


def products_to_check() -> list[str]:
    """A few valid products and one of each way a product is broken."""
    valid = [p.sku for p in CATALOG.products if p.valid][:4]
    broken: dict[str, str] = {}
    for p in CATALOG.products:
        if p.invalid_reason is not None:
            broken.setdefault(p.invalid_reason, p.sku)
    assert len(broken) == 3
    return valid + list(broken.values())


# -- the same records as the static twins --------------------------------------------------------


async def test_js_products_give_the_records_of_their_static_twins(
    shop: str, browser: BrowserFetcher, http: HttpClient
) -> None:
    for sku in products_to_check():
        result = await browser.render(f"{shop}/js/product/{sku}", wait_for=READY)
        static = extract_product(raw(await http.fetch(f"{shop}/product/{sku}")))
        assert static is not None
        assert extract_product(rendered(result)) == static, sku
        # Over plain HTTP the script-written article is not there: no record at all.
        assert extract_product(raw(result)) is None
        assert result.status == 200 and result.remote_ip == "127.0.0.1"
        assert result.body.startswith(b"<!DOCTYPE html>")


async def test_js_listings_link_what_their_static_twins_link(
    shop: str, browser: BrowserFetcher, http: HttpClient
) -> None:
    for category in CATALOG.categories[:4]:
        for page in range(1, CATALOG.page_count(category.slug) + 1):
            js = rendered(await browser.render(f"{shop}/js/category/{category.slug}?page={page}"))
            static = raw(await http.fetch(f"{shop}/category/{category.slug}?page={page}"))
            assert linked_skus(js) == linked_skus(static) != []
            has_next = bool(static.css("a.next"))
            assert bool(js.css("a.next")) == has_next
            if has_next:
                assert js.css("a.next::attr(href)").get() == (
                    f"/js/category/{category.slug}?page={page + 1}"
                )


async def test_the_price_appears_only_after_its_delay(shop: str, browser: BrowserFetcher) -> None:
    sku = next(p.sku for p in CATALOG.products if p.valid)
    url = f"{shop}/js/product/{sku}?delay=1500"
    early = await browser.render(url, wait_until="domcontentloaded")
    record = extract_product(rendered(early))
    assert record is not None and record["price"] is None  # the article, not yet its price
    late = await browser.render(url, wait_until="domcontentloaded", wait_for=READY)
    assert extract_product(rendered(late)) == CATALOG.product(sku).record()  # type: ignore[union-attr]
    assert late.timings.wait >= 1.0
    # the site's answer time is the document's, not the page's: what pacing is fed
    assert 0 < late.elapsed < min(late.timings.navigation, 1.0) + 0.01


async def test_infinite_scroll_is_fed_by_captured_xhr_json(
    shop: str, browser: BrowserFetcher, http: HttpClient
) -> None:
    category = next(c.slug for c in CATALOG.categories if CATALOG.page_count(c.slug) >= 3)
    pages = CATALOG.page_count(category)
    static: list[str] = []
    for page in range(1, pages + 1):
        static += linked_skus(raw(await http.fetch(f"{shop}/category/{category}?page={page}")))

    unscrolled = await browser.render(f"{shop}/js/scroll/{category}", wait_for="#feed[data-loaded]")
    assert len(unscrolled.xhr) == 1 and len(linked_skus(rendered(unscrolled))) == 24

    result = await browser.render(f"{shop}/js/scroll/{category}", actions=scroll_to_end)
    assert linked_skus(rendered(result)) == static
    assert [x.url for x in result.xhr] == [
        f"{shop}/js/api/category/{category}?page={n}" for n in range(1, pages + 1)
    ]
    fed: list[str] = []
    for xhr in result.xhr:
        assert xhr.status == 200 and "json" in xhr.content_type and xhr.body is not None
        fed += [p["sku"] for p in json.loads(xhr.body)["products"]]
    assert fed == static
    assert result.timings.actions > 0 and result.timings.total >= result.timings.actions


async def test_xhr_capture_is_bounded(shop: str, module_tmp: Path) -> None:
    category = next(c.slug for c in CATALOG.categories if CATALOG.page_count(c.slug) >= 3)
    small = int(1.5 * 1024)  # below the API's ~2 KB pages: every body too big to keep
    for cap, kept_bodies in ((None, 2), (small, 0)):
        limits: dict[str, Any] = {"max_xhr": 2} | ({"max_xhr_body": cap} if cap else {})
        async with BrowserFetcher(settings(module_tmp, contexts=1, **limits)) as fetcher:
            result = await fetcher.render(f"{shop}/js/scroll/{category}", actions=scroll_to_end)
        assert len(result.xhr) == 2 and result.xhr_dropped == CATALOG.page_count(category) - 2
        assert sum(x.body is not None for x in result.xhr) == kept_bodies
        assert all(x.status == 200 for x in result.xhr)


async def test_a_missing_page_is_a_result(shop: str, browser: BrowserFetcher) -> None:
    result = await browser.render(f"{shop}/js/product/CF-999999")
    assert result.status == 404


# -- the address guard, proxies, the document request ------------------------------------------


async def test_guard_refuses_what_is_not_a_seed(
    hostile: HostileSite, browser: BrowserFetcher
) -> None:
    # localhost resolves to loopback and is not a seed host: refused before any request.
    before = hostile.hits["/page"]
    with pytest.raises(AddressRefused, match="non-public"):
        await browser.render(hostile.url("/page?size=10", host="localhost"))
    with pytest.raises(AddressRefused):
        await browser.render("http://10.1.2.3/")
    with pytest.raises(UnsupportedScheme):
        await browser.render("file:///etc/passwd")
    assert hostile.hits["/page"] == before
    # A redirect hop to it: the chain is checked after the fact and the page refused.
    target = hostile.url("/page?size=10", host="localhost")
    with pytest.raises(AddressRefused, match="redirect"):
        await browser.render(hostile.url(f"/redirect-to?url={target}"))


async def test_routing_blocks_subrequests(hostile: HostileSite, browser: BrowserFetcher) -> None:
    outcome: dict[str, Any] = {}

    async def requests_from_the_page(page: Any) -> None:
        echo = hostile.url("/echo", host="localhost")
        outcome["cross"] = await page.evaluate(
            f"fetch('{echo}').then(() => 'sent', () => 'refused')"
        )
        outcome["image"] = await page.evaluate(
            "new Promise(r => { const i = new Image(); i.onload = () => r('loaded');"
            " i.onerror = () => r('blocked'); i.src = '/chunked?size=10'; })"
        )
        outcome["xhr"] = await page.evaluate("fetch('/redirect/0').then(r => r.status)")

    before = dict(hostile.hits)
    await browser.render(hostile.url("/page?size=100"), actions=requests_from_the_page)
    assert outcome == {"cross": "refused", "image": "blocked", "xhr": 200}
    assert hostile.hits["/echo"] == before.get("/echo", 0)  # never sent
    assert hostile.hits["/chunked"] == before.get("/chunked", 0)  # images are blocked
    assert hostile.hits["/redirect/0"] == before.get("/redirect/0", 0) + 1


async def test_proxy_and_a_changed_document_request(
    hostile: HostileSite, browser: BrowserFetcher
) -> None:
    # The hostile site answers absolute-form requests like a forward proxy: the name is never
    # resolved here, and only a request sent through the proxy can reach it.
    proxied = await browser.render(
        "http://shop.example/echo", proxy=hostile.base_url, session_key="via-proxy"
    )
    seen = json.loads(proxied.body)
    assert dict(seen["headers"])["Host"] == "shop.example"

    posted = await browser.render(
        hostile.url("/echo"), method="POST", body=b"a=1&b=2", headers={"X-Crawl": "yes"}
    )
    echo = json.loads(posted.body)
    assert echo["method"] == "POST" and echo["body"] == "a=1&b=2"
    assert dict(echo["headers"])["X-Crawl"] == "yes"
    assert ("X-Crawl", "yes") in posted.request_headers


async def test_the_fetcher_port_with_a_route_a_session_and_hop_checks(
    shop: str, hostile: HostileSite, browser: BrowserFetcher
) -> None:
    # The route's proxy is the context's; the session's user agent, headers and cookies are
    # what the context starts with; its cookies after the page come back with the result.
    route = Route("r-test", "test", hostile.base_url)
    now = time.time()
    session = Session.new(
        "s-port", route, now, user_agent="crawlfleet-test/1", headers={"X-S": "1"}
    )
    session = session.with_cookies(["sid=abc; Path=/"], "http://shop.example/", now)
    result = await browser.fetch(
        FetchRequest("http://shop.example/echo"), route=route, session=session
    )
    sent = dict(json.loads(result.body)["headers"])
    assert sent["Host"] == "shop.example" and sent["User-Agent"] == "crawlfleet-test/1"
    assert sent["X-S"] == "1" and "sid=abc" in sent["Cookie"]
    assert [c["value"] for c in result.cookies if c["name"] == "sid"] == ["abc"]

    # check_hop sees every redirect target, in order; its refusal is the fetch's error.
    seen: list[str] = []

    async def check_hop(url: str) -> None:
        seen.append(url)
        if url.endswith("/redirect/0"):
            raise RobotsDisallowed("disallowed by robots.txt")

    with pytest.raises(RobotsDisallowed):
        await browser.fetch(FetchRequest(hostile.url("/redirect/2"), check_hop=check_hop))
    assert seen == [hostile.url("/redirect/1"), hostile.url("/redirect/0")]
    # the hops are kept for the WARC, each with its status and Location (no body: a browser
    # keeps none of a redirect's)
    done = await browser.fetch(FetchRequest(hostile.url("/redirect/2")))
    assert [(h.url, h.status) for h in done.hops] == [
        (hostile.url("/redirect/2"), 302),
        (hostile.url("/redirect/1"), 302),
    ]
    locations = [dict((k.lower(), v) for k, v in h.headers)["location"] for h in done.hops]
    assert locations == ["/redirect/1", "/redirect/0"]
    assert done.url == hostile.url("/redirect/0") and done.status == 200

    # A BrowserRequest carries the wait (and actions) through the port.
    sku = products_to_check()[0]
    page = await browser.fetch(BrowserRequest(f"{shop}/js/product/{sku}", wait_for=READY))
    assert extract_product(rendered(page)) == CATALOG.product(sku).record()  # type: ignore[union-attr]


async def test_jobs_share_one_browser_each_with_its_own_guard(
    hostile: HostileSite, browser: BrowserFetcher
) -> None:
    # One browser per worker process: a second job's fetcher on the same pool, whose seeds
    # are "localhost" where the first job's are "127.0.0.1".
    other = BrowserFetcher(
        pool=browser.pool, guard=FetchSettings(private_ok_hosts=frozenset({"localhost"}))
    )
    await other.start()  # the pool is not its own: nothing to start...
    ok = await other.render(hostile.url("/page?size=10", host="localhost"), session_key="j")
    assert ok.status == 200
    with pytest.raises(AddressRefused):
        await other.render(hostile.url("/page?size=10"), session_key="j")
    with pytest.raises(AddressRefused):
        await browser.render(hostile.url("/page?size=10", host="localhost"), session_key="j")
    guards = {key.guard for key, _, _ in browser.pool.contexts() if key.session == "j"}
    assert guards == {other.guard, browser.guard}  # one context each: never shared
    await other.close()  # ...and nothing to close
    assert (await browser.render(hostile.url("/page?size=10"))).status == 200


# -- timeouts ----------------------------------------------------------------------------------


async def test_a_hung_page_times_out_and_the_pool_goes_on(shop: str, module_tmp: Path) -> None:
    # deadlines a busy machine still renders the good page within, far below the actions' 30 s
    s = settings(module_tmp, contexts=2, navigation_timeout=2.0, timeout=4.0)
    sku = products_to_check()[0]
    async with (
        BrowserFetcher(s) as fetcher,
        HttpClient(FetchSettings(private_ok_hosts=SEEDS)) as h,
    ):
        pool = fetcher.pool
        started = time.monotonic()
        with pytest.raises(FetchTimeout):
            await fetcher.render(f"{shop}/js/stuck/{sku}")  # its load event never comes
        assert 1.9 < time.monotonic() - started < 12.0  # the navigation deadline, not the load's
        assert pool.stats.contexts_closed["timeout"] == 1 and pool.contexts() == []
        # Closing the context closed its connections: the stalled request ended server-side.
        statuses = await _wait_for_status(h, shop, "204")
        assert statuses["204"] >= 1

        async def sleepy(page: Any) -> None:
            await asyncio.sleep(30)

        async def spin(page: Any) -> None:
            await page.evaluate("for (;;) {}")  # a renderer that never comes back

        for action in (sleepy, spin):
            started = time.monotonic()
            with pytest.raises(FetchTimeout):
                await fetcher.render(f"{shop}/js/product/{sku}", actions=action)
            assert time.monotonic() - started < 12.0  # the total deadline, not the action's 30 s
        with pytest.raises(FetchTimeout):
            await fetcher.render(f"{shop}/js/product/{sku}", wait_for="#never-there")
        assert pool.stats.contexts_closed["timeout"] == 4

        # The same page with a navigation that ends earlier renders fine, in the same pool.
        result = await fetcher.render(
            f"{shop}/js/stuck/{sku}", wait_until="domcontentloaded", wait_for=READY
        )
        assert extract_product(rendered(result)) is not None


async def _wait_for_status(h: HttpClient, shop: str, status: str) -> dict[str, int]:
    statuses: dict[str, int] = {}
    for _ in range(50):
        statuses = json.loads((await h.fetch(f"{shop}/__admin/stats")).body)["statuses"]
        if statuses.get(status):
            break
        await asyncio.sleep(0.1)
    return statuses


# -- recycling -----------------------------------------------------------------------------------


def _cookie(result: BrowserResult) -> str:
    return next((v for k, v in result.request_headers if k.lower() == "cookie"), "")


async def test_a_context_is_a_session_recycled_after_m_pages(shop: str, module_tmp: Path) -> None:
    async with BrowserFetcher(settings(module_tmp, contexts=2, pages_per_context=3)) as fetcher:
        pool, url = fetcher.pool, f"{shop}/js/"

        async def log_in(page: Any) -> None:
            await page.evaluate("document.cookie = 'sid=a1; path=/'")

        await fetcher.render(url, session_key="a", actions=log_in)
        assert _cookie(await fetcher.render(url, session_key="a")) == "sid=a1"
        assert _cookie(await fetcher.render(url, session_key="b")) == ""  # another identity
        assert _cookie(await fetcher.render(url, session_key="a")) == "sid=a1"  # a's 3rd page: M
        assert _cookie(await fetcher.render(url, session_key="a")) == ""  # a new context
        assert pool.stats.contexts_opened == 3 and pool.stats.contexts_closed["recycled"] == 1
        assert sorted((key.session, pages) for key, pages, _ in pool.contexts()) == [
            ("a", 1),
            ("b", 1),
        ]
        # Retired (e.g. after a block): closed now, the next page of "a" starts afresh.
        await fetcher.render(url, session_key="a", actions=log_in)
        await fetcher.retire("a")
        assert pool.stats.contexts_closed["retired"] == 1
        assert _cookie(await fetcher.render(url, session_key="a")) == ""
        # A third identity when both contexts are idle: the least recently used one makes room.
        await fetcher.render(url, session_key="c")
        assert pool.stats.contexts_closed["evicted"] == 1
        assert {key.session for key, _, _ in pool.contexts()} == {"a", "c"}


async def test_the_browser_is_restarted_after_k_pages(shop: str, module_tmp: Path) -> None:
    async with BrowserFetcher(settings(module_tmp, contexts=2, pages_per_browser=4)) as fetcher:
        pool = fetcher.pool
        browsers: list[procs.Proc] = []

        async def one(n: int) -> None:
            await fetcher.render(f"{shop}/js/category/kitchen?page=1&n={n}")
            pid = pool.browser_pid
            proc = procs.read_proc(pid) if pid else None
            if proc is not None and all(b.pid != proc.pid for b in browsers):
                browsers.append(proc)

        for batch in range(5):
            await asyncio.gather(one(2 * batch), one(2 * batch + 1))
        assert pool.stats.launches == 3 and pool.stats.restarts["pages"] == 2
        assert pool.stats.pages == 10 and pool.generation == 3
        assert len(browsers) == 3
        for old in browsers[:-1]:
            assert procs.browser_group(old.pid, old.start) == []  # nothing of it is left


# -- no Chromium survives --------------------------------------------------------------------------


async def test_no_chromium_survives_close(shop: str, module_tmp: Path) -> None:
    s = settings(module_tmp, contexts=2, runtime_dir=str(module_tmp / "runtime-close"))
    fetcher = BrowserFetcher(s)
    await fetcher.start()
    await fetcher.render(f"{shop}/js/")
    pid = fetcher.pool.browser_pid
    assert pid is not None
    browser = procs.read_proc(pid)
    assert browser is not None
    members = procs.browser_group(pid, browser.start)
    profile = procs.profile_dir(pid)
    assert len(members) >= 3 and profile and Path(profile).is_dir()
    assert list(Path(s.runtime_dir or "").glob("*.json"))
    await fetcher.close()
    assert [p for p in members if procs.read_proc(p.pid)] == []
    assert not Path(profile).exists()
    assert not list(Path(s.runtime_dir or "").glob("*.json"))


@contextlib.asynccontextmanager
async def worker_process(shop: str, runtime: Path) -> AsyncIterator[tuple[Any, dict[str, Any]]]:
    """A subprocess owning a pool (own session: killing its group spares this test)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), "own", str(runtime), f"{shop}/js/",
        stdout=asyncio.subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        yield proc, json.loads(line)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if procs.read_proc(pid) is not None]


async def _until_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while _alive(pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return _alive(pids)


async def test_kill_9_of_a_worker_takes_its_browser_along(shop: str, module_tmp: Path) -> None:
    async with worker_process(shop, module_tmp / "runtime-k9") as (proc, owned):
        assert _alive(owned["members"]) and _alive(owned["driver"])
        os.kill(proc.pid, signal.SIGKILL)  # the worker alone: its driver reads end-of-file
        assert await _until_gone(owned["driver"] + owned["members"], 10) == []


async def test_a_wedged_browser_of_a_killed_worker_is_swept_at_the_next_start(
    shop: str, module_tmp: Path
) -> None:
    runtime = module_tmp / "runtime-wedged"
    async with worker_process(shop, runtime) as (proc, owned):
        # A stopped browser cannot notice that its driver is gone: the orphan a sweep is for.
        os.kill(owned["browser"], signal.SIGSTOP)
        os.killpg(proc.pid, signal.SIGKILL)  # the worker and its driver
        await proc.wait()
        assert await _until_gone(owned["driver"], 10) == []
        await asyncio.sleep(0.5)
        assert owned["browser"] in _alive(owned["members"])  # still there, stopped
        assert Path(owned["profile"]).is_dir()
        async with BrowserFetcher(settings(module_tmp, runtime_dir=str(runtime))) as fetcher:
            assert fetcher.pool.stats.swept >= 1
            assert _alive(owned["members"]) == []
            assert not Path(owned["profile"]).exists()
            assert (await fetcher.render(f"{shop}/js/")).status == 200
