"""What a page's links become in the store, by the spider's own attributes: its session-id
parameters, and the start URLs and allowed domains its ``__init__`` sets (Scrapy's ``-a`` way)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawlfleet.data.captures import Provenance
from crawlfleet.model import Job, JobState
from crawlfleet.response import Response
from crawlfleet.spider import Spider
from crawlfleet.worker.extract import JobRuntime, PageOutput

PAGE = "http://shop.test/list"
LINKS = [
    "/p?sessionkey=1",
    "/p?sessionkey=2",
    "/story?sid=1",
    "/story?sid=2",
    "/cart;jsessionid=AB12",
    "/cart;jsessionid=CD34",
    "/q?sid=3f9a0c1e7b2d4f6a8c0e",
    "/q?sid=Zx81Qp02Lm93Kd47Hg55",
    "http://other.test/x",
]


class Shop(Spider):
    name = "shop"
    start_urls = [PAGE]
    session_params = ["SessionKey"]

    def parse(self, response: Response) -> Iterator[Any]:
        yield from response.follow_all(LINKS)


class Late(Spider):
    """Start URLs from an argument, set in ``__init__`` (the class has none)."""

    name = "late"

    def __init__(self, site: str = "http://other.test/", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [site]

    def parse(self, response: Response) -> Iterator[Any]:
        yield from response.follow_all(LINKS)


def page(spider_cls: type[Spider]) -> PageOutput:
    rt = JobRuntime(Job(1, spider_cls.name, "x.py", JobState.RUNNING, {}, 0.0), spider_cls)
    response = Response(PAGE, 200, {"content-type": "text/html"}, b"<p>x</p>")
    return rt.process(
        response, page_url=PAGE, callback=None, depth=0, fetched_at=1.0, warc=Provenance()
    )


def test_session_ids_by_name_or_by_value__short_ids_are_pages__a_spider_adds_names() -> None:
    out = page(Shop)
    assert [r.url for r in out.discovered] == [
        "http://shop.test/p?sessionkey=1",  # the spider's name: one page whatever the value
        "http://shop.test/story?sid=1",  # a short sid is a story: two pages
        "http://shop.test/story?sid=2",
        "http://shop.test/cart;jsessionid=AB12",  # a session's name: one page, fetched as given
        "http://shop.test/q?sid=3f9a0c1e7b2d4f6a8c0e",  # a sid that looks like a token: one
    ]


def test_start_urls_set_in_init__are_the_scope() -> None:
    out = page(Late)
    assert [r.url for r in out.discovered] == ["http://other.test/x"]


def test_the_hosts_a_spider_may_reach_are_its_instances() -> None:
    spider = Late(site="http://127.0.0.1:8080/")
    assert (spider.seed_hosts(), spider.scope_hosts()) == ({"127.0.0.1"}, ["127.0.0.1"])
