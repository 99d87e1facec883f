"""The attempt pipeline on a scripted fetcher: every ending, and the one event each emits.

No sockets and no sleeps: the fetcher answers from a function, the clock is passed in, the WARC
goes to a temporary directory, events are collected in a list.
"""

from __future__ import annotations

import gzip
import logging
import random
from collections.abc import Iterator
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import FakeClock

from crawlfleet.config import Settings
from crawlfleet.data.rawstore import open_raw_store
from crawlfleet.errors import FetchTimeout, HostUnreachable, LocalResourceError
from crawlfleet.events import AttemptEvent, Event, EventBus
from crawlfleet.fetch.base import FetcherPool, FetchRequest, FetchResult
from crawlfleet.fetch.robots import RobotsCache, RobotsGate
from crawlfleet.fetch.scripted import ScriptedFetcher, page
from crawlfleet.model import Completion, DeadReason, Failure, Job, JobState, Lease, Outcome
from crawlfleet.policy.traps import page_type
from crawlfleet.spider import Spider
from crawlfleet.worker.attempt import GiveBack, Pipeline, slot_start
from crawlfleet.worker.attempt.escalate import JUDGING_AT_ONCE
from crawlfleet.worker.extract import JobRuntime
from crawlfleet.worker.jobs import JobContext

SITE = "http://shop.test"
PRODUCT = b"""<html><body><a href="/p/2">next</a><a href="/p/3">more</a>
<h1>Kettle</h1><span class="sku">S-1</span></body></html>"""
CAPTCHA = (
    b'<html><head><title>Just a moment...</title></head><body><div class="g-recaptcha" '
    b'data-sitekey="x"></div>Please verify you are human.</body></html>'
)


class Shop(Spider):
    name = "shop"
    start_urls = [SITE + "/"]

    def parse(self, response: Any) -> Iterator[Any]:
        yield from response.follow_all("a")
        sku = response.css(".sku::text").get()
        if sku:
            yield {"sku": sku}

    def broken(self, response: Any) -> Iterator[Any]:
        yield from response.follow_all("a")
        raise RuntimeError("a bug in the spider")


def handler(request: FetchRequest) -> FetchResult:
    path = request.url.removeprefix(SITE)
    if path == "/robots.txt":
        return page(request.url, 200, b"User-agent: *\nDisallow: /private\n", [])
    if path == "/gone":
        return page(request.url, 404, b"<html><body>no such page</body></html>")
    if path == "/busy":
        return page(request.url, 503, b"", [("Retry-After", "7")])
    if path == "/limited":
        return page(request.url, 429, b"", [("Retry-After", "2")])
    if path == "/captcha":
        return page(request.url, 200, CAPTCHA)
    if path == "/slow":
        raise FetchTimeout("timed out after 30s")
    if path == "/forbidden":
        said = b"403 Forbidden: CSRF token missing or wrong\nmore detail"
        return page(request.url, 403, said, [("Content-Type", "text/plain; charset=utf-8")])
    if "/coded/" in path:  # the product page, gzip-coded as the site sent it
        coded = page(request.url, 200, PRODUCT, [("Content-Encoding", "gzip")])
        coded.raw_body = gzip.compress(PRODUCT, mtime=int(path.rsplit("/", 1)[1]))
        return coded
    return page(request.url, 200, PRODUCT)


class Harness:
    def __init__(self, tmp: Path, clock: FakeClock, robots: bool = False) -> None:
        self.clock = clock
        self.events: list[Event] = []
        self.fetcher = ScriptedFetcher(handler)
        raw = open_raw_store(str(tmp / "warc"))
        raw.open()
        runtime = JobRuntime(Job(1, "shop", "shop.py", JobState.RUNNING, {}, 0.0), Shop)
        gate = None
        if robots:
            cache = RobotsCache(self.fetcher, user_agent="crawlfleet-test", clock=clock)
            gate = RobotsGate(cache, _NoPacing(), recheck=60.0, clock=clock)
        warc = raw.writer("shop-w1", max_size=1 << 30, gzip_level=1)
        settings = Settings()
        self.job = JobContext(runtime, FetcherPool([self.fetcher]), gate, warc, raw, settings)
        self.pipeline = Pipeline(
            settings, EventBus(self.events.append), clock=clock, rng=random.Random(1)
        )
        self._id = 0

    def lease(self, path: str, *, callback: str | None = None, attempts: int = 1) -> Lease:
        self._id += 1
        now = self.clock()
        return Lease(
            self._id, "shop", SITE + path, "shop.test", 0, 0, callback, {}, "GET", None,
            "http", attempts, 5, 1, now + 60, now,
        )  # fmt: skip

    async def run(self, path: str, **kw: Any) -> Completion | Failure | GiveBack:
        return await self.pipeline.run(self.job, self.lease(path, **kw))

    @property
    def attempts(self) -> list[AttemptEvent]:
        return [e for e in self.events if isinstance(e, AttemptEvent)]


class _NoPacing:
    async def set_crawl_delay(self, domain: str, seconds: float | None) -> None:
        raise AssertionError("no Crawl-delay in this robots.txt")


@pytest.fixture
def h(tmp_path: Path, clock: FakeClock) -> Iterator[Harness]:
    harness = Harness(tmp_path, clock)
    yield harness
    harness.job.warc.close()


async def test_page__records_and_links_one_event(h: Harness) -> None:
    verdict = await h.run("/p/1")
    assert isinstance(verdict, Completion)
    assert [r.data for r in verdict.records] == [{"sku": "S-1"}]
    assert sorted(r.url for r in verdict.discovered) == [SITE + "/p/2", SITE + "/p/3"]
    assert verdict.records[0].warc_record_id is not None
    (event,) = h.attempts
    assert (event.outcome, event.status, event.records, event.fetcher) == (
        Outcome.OK,
        200,
        1,
        "http",
    )
    assert (event.domain, event.job, event.duplicate, event.gone) == (
        "shop.test",
        "shop",
        False,
        False,
    )


async def test_final_answer__done_with_its_status_not_a_dead_letter(h: Harness) -> None:
    verdict = await h.run("/gone")
    assert isinstance(verdict, Completion)
    assert (verdict.status, verdict.records, verdict.discovered) == (404, (), ())
    (event,) = h.attempts
    assert (event.outcome, event.gone, event.dead_reason) == (Outcome.GONE, True, None)


async def test_push_back__retried_after_retry_after(h: Harness, clock: FakeClock) -> None:
    verdict = await h.run("/busy")
    assert isinstance(verdict, Failure)
    assert verdict.retry_at is not None and verdict.retry_at >= clock() + 7
    assert (verdict.status, verdict.retry_after, verdict.outcome) == (
        503,
        7.0,
        Outcome.RETRYABLE_ERROR,
    )
    assert h.attempts[0].retry


async def test_fetch_error__retryable_with_its_kind(h: Harness) -> None:
    verdict = await h.run("/slow")
    assert isinstance(verdict, Failure) and verdict.retry_at is not None
    assert verdict.error.startswith("timeout:") and verdict.status is None
    assert h.attempts[0].error_kind == "timeout"


async def test_fetch_error__on_the_last_attempt_is_dead(h: Harness) -> None:
    verdict = await h.run("/slow", attempts=5)
    assert isinstance(verdict, Failure)
    assert (verdict.retry_at, verdict.dead_reason) == (None, DeadReason.TOO_MANY_RETRIES)
    assert h.attempts[0].dead_reason is DeadReason.TOO_MANY_RETRIES


async def test_block_page__never_parsed_reason_kept_its_snapshot_marked(
    h: Harness, tmp_path: Path
) -> None:
    from warcio.archiveiterator import ArchiveIterator

    verdict = await h.run("/captcha")
    assert isinstance(verdict, Failure) and verdict.outcome is Outcome.BLOCKED
    (event,) = h.attempts
    assert event.records == 0 and event.block_reason is not None
    # the dead letter says why, as `crawlfleet fetch` does: the classifier's reason
    assert verdict.error == f"HTTP {event.status} (block page: {event.block_reason})"
    assert isinstance(await h.run("/p/1"), Completion)  # a page: no mark
    h.job.warc.close()
    records = []
    for path in (tmp_path / "warc").glob("*.warc.gz"):
        with path.open("rb") as fh:
            for r in ArchiveIterator(fh):
                records.append((r.rec_type, r.rec_headers, r.content_stream().read()))
    responses = {hd.get_header("WARC-Record-ID"): b for t, hd, b in records if t == "response"}
    assert len(responses) == 2, "the block page's snapshot is kept"
    (mark,) = [(hd, b) for t, hd, b in records if t == "metadata"]
    assert b"verify you are human" in responses[mark[0].get_header("WARC-Refers-To")].lower()
    assert mark[0].get_header("Content-Type") == "application/warc-fields"
    assert mark[1] == f"crawlfleet-block: {event.block_reason}\r\n".encode()


async def test_block_through_a_proxy__retried_without_using_an_attempt_up_to_a_bound(
    h: Harness,
) -> None:
    from crawlfleet.routes.pools import Route
    from crawlfleet.worker.attempt import FREE_BLOCKS

    route = Route("dc/1", "dc", "http://127.0.0.2:3128")
    h.job.routes = {route.id: route}
    lease = replace(h.lease("/captcha", attempts=5), route=route.id)  # its last attempt
    verdicts = [await h.pipeline.run(h.job, lease) for _ in range(FREE_BLOCKS + 1)]
    for verdict in verdicts[:-1]:
        assert isinstance(verdict, Failure) and verdict.outcome is Outcome.BLOCKED
        assert not verdict.count_attempt and verdict.retry_at is not None
        assert verdict.dead_reason is None and verdict.route_signal == "block"
    last = verdicts[-1]
    assert isinstance(last, Failure) and last.count_attempt, "past the bound: an attempt used"
    assert last.dead_reason is DeadReason.BLOCKED
    direct = await h.run("/captcha")  # the machine's own address: no other way to try
    assert isinstance(direct, Failure) and direct.count_attempt


async def test_parse_error__dead_parse_error(h: Harness) -> None:
    verdict = await h.run("/p/1", callback="broken")
    assert isinstance(verdict, Failure)
    assert verdict.dead_reason is DeadReason.PARSE_ERROR
    assert "a bug in the spider" in verdict.error


async def test_same_bytes_under_another_url__parsed_and_marked_duplicate(h: Harness) -> None:
    first, second = await h.run("/p/1"), await h.run("/mirror/p/1")
    assert isinstance(first, Completion) and isinstance(second, Completion)
    assert [r.data for r in second.records] == [{"sku": "S-1"}]
    assert second.records[0].warc_refers_to == first.records[0].warc_record_id
    assert [e.duplicate for e in h.attempts] == [False, True]


async def test_same_page_coded_otherwise__a_full_record_the_same_coded_bytes_a_revisit(
    h: Harness,
) -> None:
    plain, coded, again, other = [
        await h.run(p) for p in ("/p/1", "/coded/1", "/mirror/coded/1", "/coded/2")
    ]
    assert all(isinstance(v, Completion) for v in (plain, coded, again, other))
    # one content hash for all four (the page hash a recrawl compares), but a revisit only
    # where the payload archived is the same bytes: the WARC's payload digests say so
    assert {v.content_hash for v in (plain, coded, again, other)} == {plain.content_hash}
    refers = [v.records[0].warc_refers_to for v in (plain, coded, again, other)]
    assert refers == [None, None, coded.records[0].warc_record_id, None]


async def test_robots_gate__disallowed_dead_robots_allowed_fetched(
    tmp_path: Path, clock: FakeClock
) -> None:
    h = Harness(tmp_path, clock, robots=True)
    try:
        denied = await h.run("/private/x")
        assert isinstance(denied, Failure) and denied.dead_reason is DeadReason.ROBOTS
        assert isinstance(await h.run("/p/1"), Completion)
        assert [c.request.url for c in h.fetcher.calls] == [SITE + "/robots.txt", SITE + "/p/1"]
        assert h.fetcher.calls[1].request.check_hop is not None  # redirects are checked too
    finally:
        h.job.warc.close()


JS_PAGE = b"""<html><body><div id="app"></div>
<script>document.getElementById('app').innerHTML = '<span class="sku">S-9</span>'</script>
</body></html>"""


class AutoShop(Shop):
    fetcher = "auto"


def js_handler(request: FetchRequest) -> FetchResult:
    if request.url.endswith("/js"):
        return page(request.url, 200, JS_PAGE)
    return handler(request)


async def test_auto__a_scripted_page_http_gives_nothing_from_goes_to_the_browser(
    tmp_path: Path, clock: FakeClock
) -> None:
    h = Harness(tmp_path, clock)
    try:
        h.job.runtime = JobRuntime(h.job.runtime.job, AutoShop)
        h.fetcher.handler = js_handler
        verdict = await h.pipeline.run(h.job, replace(h.lease("/js"), fetcher="auto"))
        assert isinstance(verdict, Failure)
        assert (verdict.refetch_with, verdict.count_attempt) == ("browser", False)
        # a suspicion, judged in the browser: nothing is stored yet
        assert verdict.page_type is None and not h.job.runtime.page_types
        assert ("shop.test", "shop.test/js") in h.job.runtime.suspected
        static = await h.pipeline.run(h.job, replace(h.lease("/p/1"), fetcher="auto"))
        assert isinstance(static, Completion) and static.records, "a static page stays on HTTP"
        h.job.runtime.page_types[("shop.test", "shop.test/js")] = "http"
        judged = await h.pipeline.run(h.job, replace(h.lease("/js"), fetcher="auto"))
        # a type judged fine over HTTP is not sent again (this empty shell is then a block)
        assert isinstance(judged, Failure) and judged.refetch_with is None
    finally:
        h.job.warc.close()


def rendering(dom_of: dict[str, str]) -> ScriptedFetcher:
    """A browser-kind fetcher: the raw document as ``handler``/``js_handler`` gives it, and the
    rendered DOM from ``dom_of`` by path (the raw body where the path is not listed)."""
    from crawlfleet.fetch.browser.result import BrowserResult

    fields = ("url", "status", "reason", "http_version", "headers", "body", "elapsed")

    def render(request: FetchRequest) -> FetchResult:
        base = js_handler(request)
        copied = {f: getattr(base, f) for f in (*fields, "remote_ip", "request_headers")}
        path = request.url.removeprefix(SITE)
        dom = dom_of.get(path, base.body.decode())
        return BrowserResult(**copied, rendered_html=dom)

    return ScriptedFetcher(render, kind="browser")


@pytest.mark.parametrize(
    ("path", "dom", "needs"),
    [
        # the record is only in the rendered page
        ("/js", '<html><body><span class="sku">S-9</span></body></html>', "browser"),
        # links only in the rendered page (a listing a script writes)
        ("/js", "<html><body>" + "".join(f'<a href="/p/{i}">p</a>' for i in range(9)), "browser"),
        # the same content either way: HTTP will do
        ("/p/1", None, "http"),
        # a script that adds one link (a banner) is not content
        ("/p/1", PRODUCT.decode().replace("</body>", '<a href="/promo">%</a></body>'), "http"),
    ],
)
async def test_auto__the_browser_judges_a_page_type_by_the_spider_s_take_from_raw_and_rendered(
    tmp_path: Path,
    clock: FakeClock,
    path: str,
    dom: str | None,
    needs: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="crawlfleet.worker")
    h = Harness(tmp_path, clock)
    try:
        h.job.runtime = JobRuntime(h.job.runtime.job, AutoShop)
        browser = rendering({path: dom} if dom is not None else {})
        h.job = replace(h.job, fetchers=FetcherPool([h.fetcher, browser]))
        h.job.runtime.suspected.add(("shop.test", page_type(SITE + path)))
        verdict = await h.pipeline.run(h.job, replace(h.lease(path), fetcher="browser"))
        assert isinstance(verdict, Completion)
        assert verdict.page_type == (page_type(SITE + path), needs)
        assert h.job.runtime.page_types[("shop.test", page_type(SITE + path))] == needs
        assert not h.job.runtime.suspected
        assert h.attempts[-1].escalated == needs  # the event (and so the metric)
        learnt = [r.getMessage() for r in caplog.records if "page type" in r.getMessage()]
        assert learnt == [f"job shop: page type {page_type(SITE + path)} now fetched by {needs} "
                          f"({SITE + path})"]  # fmt: skip
        again = await h.pipeline.run(h.job, replace(h.lease(path), fetcher="browser"))
        assert isinstance(again, Completion) and again.page_type is None, "stored once"
        assert len([r for r in caplog.records if "page type" in r.getMessage()]) == 1
    finally:
        h.job.warc.close()


async def test_browser_result__parsed_from_the_rendered_dom_and_archived_beside_it(
    tmp_path: Path, clock: FakeClock
) -> None:
    from crawlfleet.fetch.browser.result import BrowserResult

    fields = ("url", "status", "reason", "http_version", "headers", "body", "elapsed")
    dom = '<html><body><span class="sku">S-9</span></body></html>'

    def rendered(request: FetchRequest) -> FetchResult:
        base = page(request.url, 200, JS_PAGE)
        copied = {f: getattr(base, f) for f in (*fields, "remote_ip", "request_headers")}
        return BrowserResult(**copied, rendered_html=dom)

    h = Harness(tmp_path, clock)
    try:
        h.fetcher.handler = rendered
        verdict = await h.run("/js")
        assert isinstance(verdict, Completion)
        assert [r.data for r in verdict.records] == [{"sku": "S-9"}]
    finally:
        h.job.warc.close()
    from warcio.archiveiterator import ArchiveIterator

    kinds = []
    for path in (tmp_path / "warc").glob("*.warc.gz"):
        with path.open("rb") as fh:
            kinds += [r.rec_type for r in ArchiveIterator(fh)]
    assert kinds.count("resource") == 1 and kinds.count("response") == 1


@pytest.mark.parametrize(("kind", "paced_on"), [("browser", 5.0), ("http", None)])
async def test_browser_latency__pacing_sees_the_document_s_answer_time(
    tmp_path: Path, clock: FakeClock, kind: str, paced_on: float | None
) -> None:
    # A browser fetch also waits for a free context and renders the page: this worker's time.
    # The latency the store paces on is the document's answer (the result's elapsed, here 5 s
    # against the microseconds the scripted fetch takes).
    from crawlfleet.fetch.browser.result import BrowserResult

    def rendered(request: FetchRequest) -> FetchResult:
        base = page(request.url, 200, PRODUCT)
        fields = ("url", "status", "reason", "http_version", "headers", "body", "remote_ip")
        copied = {f: getattr(base, f) for f in (*fields, "request_headers")}
        return BrowserResult(**copied, elapsed=5.0, rendered_html="")

    h = Harness(tmp_path, clock)
    try:
        h.fetcher.handler, h.fetcher.kind = rendered, kind
        verdict = await h.run("/p/1")
        assert isinstance(verdict, Completion)
        if paced_on is None:
            assert verdict.elapsed < 1.0  # measured around the fetch
        else:
            assert verdict.elapsed == paced_on
    finally:
        h.job.warc.close()


def test_slot_start__late_slots_keep_most_of_their_spacing_and_the_lag_shrinks() -> None:
    # ten slots 25 ms apart, all due 1 s ago: started 22.5 ms apart, not at once
    now, last = 101.0, None
    starts = []
    for i in range(10):
        slot = 100.0 + i * 0.025
        start = slot_start(slot, last, now)
        starts.append(start)
        last = (slot, start)
    gaps = [b - a for a, b in pairwise(starts)]
    assert starts[0] == now
    assert all(abs(g - 0.0225) < 1e-9 for g in gaps)
    lag = [s - (100.0 + i * 0.025) for i, s in enumerate(starts)]
    assert lag == sorted(lag, reverse=True), "the lag shrinks"
    # on time: each at its slot
    assert slot_start(105.0, (104.975, 104.975), 104.0) == 105.0
    # an earlier slot than the last one (leases overtaking): only now bounds it
    assert slot_start(100.0, (101.0, 101.5), 102.0) == 102.0


async def test_429__holds_its_lane_here_leases_of_it_go_back_unfetched_until_retry_after(
    h: Harness, clock: FakeClock
) -> None:
    verdict = await h.run("/limited")
    assert isinstance(verdict, Failure) and verdict.status == 429
    fetched = len(h.attempts)
    # the next lease of the lane comes back unfetched, no attempt used, while the hold lasts
    held = await h.run("/p/1")
    assert isinstance(held, GiveBack) and "429" in held.why
    assert h.attempts[fetched].status is None  # given back before any fetch
    other = replace(h.lease("/p/1"), domain="other.test")  # another lane: not held
    assert isinstance(await h.pipeline.run(h.job, other), Completion)
    # a 503, even with Retry-After, holds its own request only (the retry policy)
    clock.advance(2.0)
    assert isinstance(await h.run("/p/1"), Completion)
    await h.run("/busy")
    assert isinstance(await h.run("/p/1"), Completion)


class Pipelined(Shop):
    def parse(self, response: Any) -> Iterator[Any]:
        yield {"sku": "drop-me"}
        yield from super().parse(response)

    def process_record(self, record: Any) -> Any:
        if record["sku"] == "drop-me":
            return None
        return {**record, "sku": record["sku"].lower(), "seen": True}


async def test_process_record__transforms_or_drops_a_record_before_validation(h: Harness) -> None:
    h.job.runtime = JobRuntime(h.job.runtime.job, Pipelined)
    verdict = await h.run("/p/1")
    assert isinstance(verdict, Completion)
    assert [r.data for r in verdict.records] == [{"sku": "s-1", "seen": True}]
    assert len(verdict.discovered) == 2


async def test_plain_text_4xx__its_first_line_goes_with_the_failure(h: Harness) -> None:
    verdict = await h.run("/forbidden")
    assert isinstance(verdict, Failure)
    assert verdict.error == "HTTP 403: 403 Forbidden: CSRF token missing or wrong"


# -- the ladder: http -> impersonate -> browser ---------------------------------------------

CHALLENGE = (
    b"<html><head><title>Just a moment...</title><script>window._cf_chl_opt={}</script>"
    b"</head><body>Checking your browser</body></html>"
)


def walled(request: FetchRequest) -> FetchResult:
    """A bot wall that answers a 403 challenge to everything: whichever fetcher asks."""
    if request.url.endswith("/busy"):
        return page(request.url, 429, b"<html><body>slow down</body></html>")
    return page(request.url, 403, CHALLENGE)


def ladder(h: Harness, handlers: dict[str, Any]) -> None:
    h.job.runtime = JobRuntime(h.job.runtime.job, AutoShop)
    fetchers = [ScriptedFetcher(handler, kind=kind) for kind, handler in handlers.items()]
    h.job = replace(h.job, fetchers=FetcherPool(fetchers))


@pytest.mark.parametrize(("fetcher", "up"), [("auto", "impersonate"), ("impersonate", "browser")])
async def test_ladder__a_challenged_page_climbs_a_rung_and_raises_its_domain(
    tmp_path: Path, clock: FakeClock, fetcher: str, up: str
) -> None:
    h = Harness(tmp_path, clock)
    try:
        ladder(h, {"http": walled, "impersonate": walled, "browser": walled})
        verdict = await h.pipeline.run(h.job, replace(h.lease("/"), fetcher=fetcher))
        assert isinstance(verdict, Failure)
        assert (verdict.refetch_with, verdict.count_attempt) == (up, False)
        assert verdict.page_type == ("", up)  # the domain's rung, for the fleet
        assert h.job.runtime.page_types[("shop.test", "")] == up
        event = h.attempts[-1]
        assert (event.outcome, event.fetcher) == (
            Outcome.BLOCKED,
            "http" if fetcher == "auto" else fetcher,
        )
        again = await h.pipeline.run(h.job, replace(h.lease("/p/1"), fetcher=fetcher))
        assert isinstance(again, Failure) and again.refetch_with == up
        assert again.page_type is None, "the domain's rung is stored once"
    finally:
        h.job.warc.close()


async def test_ladder__the_top_rung_and_load_do_not_climb(tmp_path: Path, clock: FakeClock) -> None:
    h = Harness(tmp_path, clock)
    try:
        ladder(h, {"http": walled, "browser": walled})
        on_top = await h.pipeline.run(h.job, replace(h.lease("/"), fetcher="browser"))
        assert isinstance(on_top, Failure) and on_top.refetch_with is None  # retried as a block
        busy = await h.pipeline.run(h.job, replace(h.lease("/busy"), fetcher="auto"))
        assert isinstance(busy, Failure) and busy.refetch_with is None  # a 429 is pacing's
        assert ("shop.test", "") not in h.job.runtime.page_types
    finally:
        h.job.warc.close()


async def test_ladder__a_spider_that_is_not_auto_never_climbs(h: Harness) -> None:
    h.fetcher.handler = walled
    verdict = await h.run("/")
    assert isinstance(verdict, Failure) and verdict.refetch_with is None
    assert verdict.outcome is Outcome.BLOCKED


async def test_ladder__a_probe_down_that_gets_through_lowers_the_domain(
    tmp_path: Path, clock: FakeClock
) -> None:
    h = Harness(tmp_path, clock)
    try:
        ladder(h, {"http": handler, "impersonate": handler})
        h.job.runtime.page_types[("shop.test", "")] = "impersonate"
        on_rung = await h.pipeline.run(h.job, replace(h.lease("/p/1"), fetcher="impersonate"))
        assert isinstance(on_rung, Completion) and on_rung.page_type is None
        probe = await h.pipeline.run(h.job, replace(h.lease("/p/2"), fetcher="auto"))
        assert isinstance(probe, Completion) and probe.records
        assert probe.page_type == ("", "http")
        assert h.job.runtime.page_types[("shop.test", "")] == "http"
    finally:
        h.job.warc.close()


async def test_ladder__pages_of_a_type_being_judged_wait_for_the_judgement(
    tmp_path: Path, clock: FakeClock
) -> None:
    h = Harness(tmp_path, clock)
    try:
        ladder(h, {"http": js_handler, "browser": js_handler})
        first = await h.pipeline.run(h.job, replace(h.lease("/js"), fetcher="auto"))
        assert isinstance(first, Failure) and first.refetch_with == "browser"
        second = await h.pipeline.run(h.job, replace(h.lease("/js"), fetcher="auto"))
        assert isinstance(second, Failure) and second.refetch_with is None
        assert second.count_attempt is False and second.retry_at is not None
        assert second.retry_at > clock()  # fetched again raw once the type is judged
        h.job.runtime.page_types[("shop.test", "shop.test/js")] = "browser"
        judged = await h.pipeline.run(h.job, replace(h.lease("/js"), fetcher="auto"))
        assert isinstance(judged, Failure) and judged.refetch_with == "browser"
    finally:
        h.job.warc.close()


SCRIPTED_LISTING = b"""<html><body><a href="/list/2">next</a><a href="/p/7">kettle</a>
<a href="/p/8">pan</a><script>window.dataLayer = []</script></body></html>"""


def listing_handler(request: FetchRequest) -> FetchResult:
    if "/list/" in request.url:
        return page(request.url, 200, SCRIPTED_LISTING)
    return handler(request)


async def test_ladder__a_page_sent_to_the_browser_queues_the_links_it_came_with(
    tmp_path: Path, clock: FakeClock
) -> None:
    # a scripted listing (links, no record) over HTTP goes to the browser to be judged, and so
    # do the others of its type wait for the judgement: the links of each, as it came, go to
    # the store with the failure that sends it on (the crawl goes on raw meanwhile), and the
    # site's answer teaches the lane's pacing (the page itself is not done: no outcome)
    h = Harness(tmp_path, clock)
    try:
        ladder(h, {"http": listing_handler, "browser": listing_handler})
        raw_links = {SITE + "/list/2", SITE + "/p/7", SITE + "/p/8"}
        sent = await h.pipeline.run(h.job, replace(h.lease("/list/1"), fetcher="auto"))
        assert isinstance(sent, Failure) and sent.refetch_with == "browser"
        assert {r.url for r in sent.discovered} == raw_links
        # a guess pins nothing to the browser: the links of the type being judged start raw
        assert {r.fetcher for r in sent.discovered} == {"auto"}
        assert (sent.outcome, sent.status, sent.count_attempt) == (Outcome.OK, 200, False)
        assert sent.latency is not None and sent.started_at is not None
        assert h.attempts[-1].outcome is None
        waiting = await h.pipeline.run(h.job, replace(h.lease("/list/2"), fetcher="auto"))
        assert isinstance(waiting, Failure) and waiting.refetch_with is None
        assert waiting.retry_at is not None and waiting.retry_at > clock()
        # its links are those of /list/1 here: sent once already, not twice
        assert waiting.discovered == [] and waiting.outcome is Outcome.OK
        h.job.runtime.page_types[("shop.test", page_type(SITE + "/list/1"))] = "http"
        judged = await h.pipeline.run(h.job, replace(h.lease("/list/3"), fetcher="auto"))
        assert isinstance(judged, Completion) and judged.discovered == []
    finally:
        h.job.warc.close()


async def test_ladder__a_worker_judges_a_few_page_types_of_a_domain_at_once(
    tmp_path: Path, clock: FakeClock
) -> None:
    # each page in the browser holds one of the domain's slots while it renders: the pages of
    # further new types wait their turn (their links queued), and go once a judgement is in
    h = Harness(tmp_path, clock)
    try:
        ladder(h, {"http": listing_handler, "browser": listing_handler})
        kinds = ["audio", "bath", "books", "pets", "toys"]  # a page type each: /audio/*
        sent = [
            await h.pipeline.run(h.job, replace(h.lease(f"/{kind}/list/1"), fetcher="auto"))
            for kind in kinds[: JUDGING_AT_ONCE + 1]
        ]
        assert [isinstance(v, Failure) and v.refetch_with for v in sent] == [
            *["browser"] * JUDGING_AT_ONCE,
            None,
        ]
        turn = sent[-1]
        assert isinstance(turn, Failure) and "other page types" in turn.error
        assert turn.retry_at is not None and turn.retry_at > clock() and not turn.count_attempt
        # another domain's types are judged meanwhile
        other = replace(h.lease("/toys/list/1"), domain="other.test", fetcher="auto")
        away = await h.pipeline.run(h.job, other)
        assert isinstance(away, Failure) and away.refetch_with == "browser"
        h.job.runtime.page_types[("shop.test", page_type(SITE + "/audio/list/1"))] = "http"
        again = await h.pipeline.run(h.job, replace(h.lease(f"/{kinds[2]}/list/2"), fetcher="auto"))
        assert isinstance(again, Failure) and again.refetch_with == "browser"
        # a type judged to need the browser waits for no turn
        h.job.runtime.page_types[("shop.test", page_type(SITE + "/pets/list/1"))] = "browser"
        known = await h.pipeline.run(h.job, replace(h.lease("/pets/list/1"), fetcher="auto"))
        assert isinstance(known, Failure) and known.refetch_with == "browser"
    finally:
        h.job.warc.close()


async def test_ladder__a_blocked_page_queues_none_of_its_links(
    tmp_path: Path, clock: FakeClock
) -> None:
    # a challenge page's links are the wall's, not the site's: it climbs with none
    h = Harness(tmp_path, clock)
    try:
        ladder(h, {"http": walled, "impersonate": walled})
        climbed = await h.pipeline.run(h.job, replace(h.lease("/list/1"), fetcher="auto"))
        assert isinstance(climbed, Failure) and climbed.refetch_with == "impersonate"
        assert climbed.discovered == () and climbed.outcome is None
    finally:
        h.job.warc.close()


def _robots_failing(error: Exception | None) -> Any:
    """A handler whose robots.txt raises ``error`` (None: answers as ``handler`` does)."""

    def answer(request: FetchRequest) -> FetchResult:
        if request.url.endswith("/robots.txt") and error is not None:
            raise error
        return handler(request)

    return answer


async def test_robots_gate__a_host_refusing_connections_ends_dead_after_its_short_give_up(
    tmp_path: Path, clock: FakeClock
) -> None:
    h = Harness(tmp_path, clock, robots=True)
    h.fetcher.handler = _robots_failing(HostUnreachable("connection refused: nothing listens"))
    try:
        first = await h.run("/p/1")
        assert isinstance(first, Failure) and first.dead_reason is None
        assert first.retry_at == clock() + 5.0  # the host's recheck, not robots_recheck (60)
        assert not first.count_attempt
        clock.advance(31.0)  # past the give-up (30), but tried twice only: a third try
        second = await h.run("/p/1")
        assert isinstance(second, Failure) and second.dead_reason is None
        assert second.retry_at == clock() + 5.0
        clock.advance(5.0)
        last = await h.run("/p/1")
        assert isinstance(last, Failure) and last.dead_reason is DeadReason.HOST_UNREACHABLE
        assert "connection refused" in last.error
        assert len(h.fetcher.calls) == 3  # robots.txt three times, the page never
    finally:
        h.job.warc.close()


async def test_robots_gate__robots_txt_answering_5xx_keeps_rfc_9309_wait(
    tmp_path: Path, clock: FakeClock
) -> None:
    h = Harness(tmp_path, clock, robots=True)

    def busy(request: FetchRequest) -> FetchResult:
        if request.url.endswith("/robots.txt"):
            return page(request.url, 503, b"")
        return handler(request)

    h.fetcher.handler = busy
    try:
        first = await h.run("/p/1")
        assert isinstance(first, Failure) and first.dead_reason is None
        assert first.retry_at == clock() + 60.0
        clock.advance(31.0)  # past a dead host's give-up, not a 5xx one's
        again = await h.run("/p/1")
        assert isinstance(again, Failure) and again.dead_reason is None
    finally:
        h.job.warc.close()


async def test_out_of_file_descriptors__the_workers_fault_no_attempt_no_host_blamed(
    tmp_path: Path, clock: FakeClock
) -> None:
    h = Harness(tmp_path, clock, robots=True)
    h.fetcher.handler = _robots_failing(LocalResourceError("this worker: EMFILE"))
    try:
        robots = await h.run("/p/1")
        assert isinstance(robots, Failure) and robots.dead_reason is None
        assert robots.outcome is None and not robots.count_attempt
        assert robots.retry_at is not None and robots.retry_at <= clock() + 1.0
        assert h.job.robots is not None and h.job.robots.cache.unreachable_for(SITE) == 0.0
        h.fetcher.handler = handler  # descriptors free again: robots.txt read, page fetched
        assert isinstance(await h.run("/p/1"), Completion)

        def emfile(request: FetchRequest) -> FetchResult:
            if request.url.endswith("/p/2"):
                raise LocalResourceError("this worker: EMFILE (Too many open files)")
            return handler(request)

        h.fetcher.handler = emfile
        page_failure = await h.run("/p/2", attempts=5)  # its last attempt: still not dead
        assert isinstance(page_failure, Failure) and page_failure.dead_reason is None
        assert page_failure.outcome is None and not page_failure.count_attempt
        assert page_failure.route_signal is None
    finally:
        h.job.warc.close()
