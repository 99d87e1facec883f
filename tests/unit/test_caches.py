"""Caches keyed on something coarser than the request never stand in for the request's own work.

A page's output depends on its URL (relative links resolve against it); a request's identity is
its canonical URL, method and body. Each worker-side cache here is pinned: two requests that
differ in what their result depends on never share a cache entry.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from crawlfleet.cache import MIN_CACHE_MEMORY, BoundedMap, BoundedSet, share, sizes
from crawlfleet.data.captures import Captures
from crawlfleet.data.warc import Capture
from crawlfleet.frontier.sqlite import SQLiteFrontier
from crawlfleet.model import Job, JobSpec, JobState
from crawlfleet.spider import Request, Spider
from crawlfleet.urls import LinkCanonicalizer
from crawlfleet.worker.extract import JobRuntime, PageOutput


class Site(Spider):
    name = "site"
    start_urls = ["http://a.example/", "http://a.example:8080/"]


def runtime() -> JobRuntime:
    return JobRuntime(Job(1, "site", "site.py", JobState.RUNNING, {}, 0.0), Site)


def discovered(rt: JobRuntime, *requests: Request) -> list[str]:
    out = PageOutput()
    for req in requests:
        rt.link(req, 1, out)
    return [r.url for r in out.discovered]


def test_judged_links__same_relative_href_on_two_pages__two_links() -> None:
    rt = runtime()
    got = discovered(
        rt,
        Request.link("item-1.html", None, "http://a.example/a/index.html"),
        Request.link("item-1.html", None, "http://a.example/b/index.html"),
        Request.link("item-1.html", None, "http://a.example/a/page-2.html"),  # same as the first
    )
    assert got == ["http://a.example/a/item-1.html", "http://a.example/b/item-1.html"]


def test_judged_links__root_relative_href_keeps_each_base_port() -> None:
    rt = runtime()
    got = discovered(
        rt,
        Request.link("/x", None, "http://a.example/p"),
        Request.link("/x", None, "http://a.example:8080/p"),
    )
    assert got == ["http://a.example/x", "http://a.example:8080/x"]


def test_link_canonicalizer__cache_key_differs_by_base_where_the_result_does() -> None:
    links = LinkCanonicalizer()
    assert links.key("/x", "http://a.example/p") != links.key("/x", "http://a.example:8080/p")
    assert links.key("y", "http://a.example/p/") != links.key("y", "http://a.example/q/")
    assert links.key("/x", "http://a.example/p") == links.key("/x", "http://a.example/q")


def test_seen_set__same_url_with_another_method_or_body_is_another_request() -> None:
    rt = runtime()
    url = "http://a.example/search"
    out = PageOutput()
    for req in (
        Request(url),
        Request(url, method="POST", body=b"q=1"),
        Request(url, method="POST", body=b"q=2"),
        Request(url, method="POST", body=b"q=1"),  # the same as the second
    ):
        rt.link(req, 1, out)
    assert [(r.method, r.body) for r in out.discovered] == [
        ("GET", None),
        ("POST", b"q=1"),
        ("POST", b"q=2"),
    ]


def test_captures__bounded_and_a_miss_is_only_a_full_copy() -> None:
    captures = Captures(max_size=2)
    one, two, three = (Capture(None, f"<urn:uuid:{n}>", f"http://a/{n}", "d") for n in "123")
    captures.remember(b"h1", one)
    captures.remember(b"h1", two)  # the first capture of a payload stays the one referred to
    captures.remember(b"h2", two)
    assert captures.get(b"h1") == one  # used: now the most recent
    captures.remember(b"h3", three)
    assert (captures.get(b"h1"), captures.get(b"h2"), captures.get(b"h3")) == (one, None, three)
    assert len(captures) == 2


def test_captures__parsed_only_once_the_store_confirmed_it() -> None:
    captures = Captures()
    capture = Capture(None, "<urn:uuid:1>", "http://a/1", "d")
    captures.confirm(b"h")  # nothing remembered: nothing to confirm
    captures.remember(b"h", capture)
    assert captures.get(b"h") == capture and not captures.parsed(b"h")
    captures.confirm(b"h")
    assert captures.parsed(b"h")


def test_captures__cleared_when_the_warc_stream_is_cut() -> None:
    captures = Captures()
    capture = Capture(None, "<urn:uuid:1>", "http://a/1", "d")
    captures.remember(b"h", capture)
    captures.confirm(b"h")
    captures.clear()  # the file that held the capture may have lost its tail
    assert (captures.get(b"h"), captures.parsed(b"h"), len(captures)) == (None, False, 0)
    captures.remember(b"h", capture)  # and it is remembered again from the next copy
    assert captures.get(b"h") == capture


def test_captures__by_the_bytes_archived_parsed_by_the_page_s_content() -> None:
    captures = Captures(max_size=2)
    gz, br = (Capture(None, f"<urn:uuid:{n}>", "http://a/", "d") for n in "12")
    captures.remember(b"gzip-bytes", gz, b"page")  # one page, archived coded two ways
    captures.remember(b"br-bytes", br, b"page")
    assert captures.get(b"gzip-bytes") == gz and captures.get(b"br-bytes") == br
    assert captures.get(b"page") is None  # a revisit stands for the same bytes only
    captures.confirm(b"page")
    assert captures.parsed(b"page")
    captures.remember(b"other", gz)  # the gzip copy goes: the page is still remembered
    assert captures.parsed(b"page")
    captures.remember(b"another", gz)  # and the br one: forgotten
    assert not captures.parsed(b"page") and len(captures) == 2


HREFS = ["/x", "http://a.example/y", "https://b.example/", "rel/z", "//c.example/p", "/\tx", "?q=1"]
BASES = ["http://a.example/p/", "http://a.example:8080/p", "https://u:pw@a.example/"]


def test_unknown_links__agrees_with_the_key_of_each_link() -> None:
    links = LinkCanonicalizer()
    for base in BASES:
        for href in HREFS:
            key = links.key(href, base)
            assert links.unknown([href], base, {key}) == [], (href, base)
            assert links.unknown([href], base, set()) == [href], (href, base)


def test_follow_all__skips_links_the_crawl_judged_already() -> None:
    from crawlfleet.response import Response

    rt = runtime()
    body = b'<a href="/x">x</a><a href="/y">y</a><a href="rel">r</a>'
    first = Response("http://a.example/p/", 200, {}, body, unknown_links=rt.unknown_links)
    out = PageOutput()
    for req in first.follow_all("a"):
        rt.link(req, 1, out)
    assert len(out.discovered) == 3
    again = Response("http://a.example/q/", 200, {}, body, unknown_links=rt.unknown_links)
    # /x and /y were judged on the first page; "rel" resolves elsewhere from this page
    assert [r.href for r in again.follow_all("a")] == ["rel"]


# -- bounded by [worker] cache_memory, and a miss is only work ----------------------------------


def test_bounded_set__holds_at_most_its_capacity_and_keeps_what_is_used() -> None:
    keys: BoundedSet[int] = BoundedSet(100)
    keys.add(-1)
    for i in range(10_000):
        keys.add(i)
        assert -1 in keys  # used all along: never forgotten
        assert len(keys) <= 100
    assert 9_999 in keys and 0 not in keys


def test_bounded_map__holds_at_most_its_capacity_and_keeps_what_is_used() -> None:
    cache: BoundedMap[int, str] = BoundedMap(10)
    cache.put(-1, "kept")
    for i in range(1_000):
        cache.put(i, str(i))
        assert cache.get(-1) == "kept"
        assert len(cache) <= 10
    assert cache.get(999) == "999" and cache.get(0) is None


def test_cache_sizes__grow_with_the_budget() -> None:
    small, large = sizes(MIN_CACHE_MEMORY), sizes(64 * MIN_CACHE_MEMORY)
    assert 0 < small.seen < large.seen and 0 < small.handled < large.handled
    assert 0 < small.links < large.links and 0 < small.captures < large.captures


def test_job_caches__stay_within_cache_memory_however_many_links_a_crawl_finds() -> None:
    budget = MIN_CACHE_MEMORY
    rt = JobRuntime(Job(1, "site", "site.py", JobState.RUNNING, {}, 0.0), Site, None, budget)
    hrefs = [f"/p/{i}" for i in range(24_000)] + [f"p{i}.html" for i in range(6_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, len(hrefs), 50):  # a page of 50 new links at a time
            out = PageOutput()
            base = f"http://a.example/list/{start}/"
            for href in hrefs[start : start + 50]:
                rt.link(Request.link(href, None, base), 1, out)
            assert len(out.discovered) == 50
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    size = sizes(budget)
    assert len(rt.seen) <= size.seen and len(rt.handled) <= size.handled
    assert len(rt.links) <= size.links
    assert grown <= budget, f"the caches took {grown:,} bytes of a {budget:,} budget"


def test_bounded_set_and_map__resized_smaller_forget_at_once_and_stay_bounded() -> None:
    keys: BoundedSet[int] = BoundedSet(1_000)
    cache: BoundedMap[int, int] = BoundedMap(1_000)
    for i in range(999):
        keys.add(i)
        cache.put(i, i)
    keys.resize(100)
    cache.resize(100)
    assert len(keys) <= 100 and len(cache) <= 100
    for i in range(1_000, 3_000):
        keys.add(i)
        cache.put(i, i)
        assert len(keys) <= 100 and len(cache) <= 100
    assert 2_999 in keys and cache.get(2_999) == 2_999


def test_worker_cache_budget__is_shared_by_the_jobs_it_runs() -> None:
    # a worker running four jobs keeps four quarters of its budget, not four budgets
    budget = 8 * MIN_CACHE_MEMORY
    assert share(budget, 4) * 4 <= budget and share(budget, 0) == share(budget, 1) == budget
    rt = JobRuntime(Job(1, "site", "site.py", JobState.RUNNING, {}, 0.0), Site, None, budget)
    out = PageOutput()
    for i in range(40_000):
        rt.link(Request.link(f"/p/{i}", None, "http://a.example/"), 1, out)
        rt.captures.remember(i.to_bytes(20, "big"), Capture(None, f"<urn:{i}>", "http://a/", "d"))
    rt.resize(share(budget, 4))
    quarter = sizes(share(budget, 4))
    assert len(rt.seen) <= quarter.seen and len(rt.handled) <= quarter.handled
    assert len(rt.links) <= quarter.links and len(rt.captures) <= quarter.captures


def test_job_caches__a_forgotten_link_is_sent_again_the_same_and_the_store_keeps_one() -> None:
    rt = JobRuntime(Job(1, "site", "site.py", JobState.RUNNING, {}, 0.0), Site)
    rt.seen, rt.handled = BoundedSet(2), BoundedSet(2)
    rt.links = LinkCanonicalizer(max_cache=2)
    page = "http://a.example/list/"
    hrefs = ["/x", "item-1.html", "http://a.example/y?b=2&a=1", "/z#top"]
    first = discovered(rt, *(Request.link(h, None, page) for h in hrefs))
    for i in range(10):  # enough other links to push the first ones out of every cache
        discovered(rt, Request.link(f"/other/{i}", None, page))
    again = discovered(rt, *(Request.link(h, None, page) for h in hrefs))
    fresh = discovered(runtime(), *(Request.link(h, None, page) for h in hrefs))
    assert (
        first
        == again
        == fresh
        == [
            "http://a.example/x",
            "http://a.example/list/item-1.html",
            "http://a.example/y?b=2&a=1",  # as written: fetched as given
            "http://a.example/z",
        ]
    )


async def test_job_caches__the_store_drops_what_a_forgotten_cache_sends_again(
    tmp_path: Path,
) -> None:
    rt = JobRuntime(Job(1, "site", "site.py", JobState.RUNNING, {}, 0.0), Site)
    rt.seen, rt.handled = BoundedSet(2), BoundedSet(2)
    async with SQLiteFrontier(tmp_path / "q.db") as store:
        await store.submit_job(JobSpec("site", "site.py"))
        added = 0
        for _ in range(3):
            out = PageOutput()
            for i in range(5):
                rt.link(Request.link(f"/p/{i}", None, "http://a.example/"), 1, out)
            added += await store.enqueue("site", out.discovered)
        assert added == 5
        assert (await store.stats("site")).queued == 5


async def test_worker_cache_budget__a_second_job_halves_the_first_ones_caches(
    tmp_path: Path,
) -> None:
    from crawlfleet.config import Settings
    from crawlfleet.worker.jobs import JobContexts

    spider = tmp_path / "site.py"
    spider.write_text(
        "from crawlfleet import Spider\n\n"
        "class Site(Spider):\n"
        "    name = 'site'\n"
        "    start_urls = ['http://a.example/']\n"
    )
    settings = Settings().with_overrides(
        {"worker.cache_memory": 8 * MIN_CACHE_MEMORY, "store.raw": str(tmp_path / "warc")}
    )
    store = SQLiteFrontier(tmp_path / "queue.db")
    await store.open()
    contexts = JobContexts(store, settings, worker_id="w")
    try:
        for name in ("a", "b"):
            await store.submit_job(JobSpec(name, str(spider)))
        a = await contexts.get("a")
        assert a is not None and a.runtime.seen.capacity == sizes(8 * MIN_CACHE_MEMORY).seen
        b = await contexts.get("b")
        assert b is not None
        half = sizes(4 * MIN_CACHE_MEMORY)
        for context in (a, b):
            assert context.runtime.seen.capacity == half.seen
            assert context.runtime.captures.max_size == half.captures
    finally:
        await contexts.close()
        await store.close()


def test_new_request__built_positionally_in_its_field_order() -> None:
    # JobRuntime._new passes NewRequest's fields by position (the hot path of discovery): a
    # field moved in the dataclass must move there too
    from dataclasses import fields

    from crawlfleet.model import NewRequest

    assert [f.name for f in fields(NewRequest)] == [
        "url", "fingerprint", "domain", "priority", "depth", "callback", "meta", "method",
        "body", "fetcher", "max_attempts", "trap", "headers", "pool", "found_by", "lastmod",
        "listed",
    ]  # fmt: skip
    rt = runtime()
    out = PageOutput(found_by=41, listed=True)
    req = Request.link("/p/1", "parse_item", "http://a.example/")
    req.lastmod = 1.5
    req.priority, req.meta, req.max_attempts = 5, {"k": "v"}, 7
    rt.spider.parse_item = lambda response: None  # type: ignore[attr-defined]
    rt.link(req, 2, out, cookiejar="jar")
    (new,) = out.discovered
    assert (new.url, new.domain, new.priority, new.depth, new.callback) == (
        "http://a.example/p/1",
        "a.example",
        5,
        2,
        "parse_item",
    )
    assert (new.meta, new.method, new.body, new.max_attempts) == (
        {"k": "v", "cookiejar": "jar"},
        "GET",
        None,
        7,
    )
    assert (new.fetcher, new.trap, new.headers, new.pool) == ("http", None, None, ())
    assert (new.found_by, new.lastmod, new.listed) == (41, 1.5, True)
