"""What one page of a bad spider produces: every bad item refused or quarantined alone, named;
an endless callback ended by the yield cap; a page too deep to parse named ``too_complex``."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from crawlfleet.data.captures import Provenance
from crawlfleet.errors import TooComplex, TooManyItems
from crawlfleet.model import Job, JobState
from crawlfleet.response import Response
from crawlfleet.spider import Request, Spider
from crawlfleet.worker.extract import JobRuntime, PageOutput

PAGE = "http://a.test/page"


def _deep(levels: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    node = top
    for _ in range(levels):
        node["x"] = {}
        node = node["x"]
    return top


class Item(BaseModel):
    name: str
    price: float = 0.0


class Bad(Spider):
    name = "bad"
    start_urls = [PAGE]
    item = Item

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"name": "first"}
        yield {"name": b"\xe9\xff"}  # bytes that are not text
        yield {"name": "deep", "extra": _deep(5_000)}  # extra fields are ignored by the model
        yield {"name": "nan", "price": float("nan")}
        yield {"name": response.headers["x-name"]}  # a lone surrogate
        yield Request(12345)  # type: ignore[arg-type]
        yield Request("http://a.test/next", callback="parse_missing")
        yield Request("http://a.test/meta", meta={"bad": "caf\udce9"})
        yield Request("http://a.test/ok", callback="parse")
        yield 42
        yield {"name": "last"}

    def parse_endless(self, response: Response) -> Iterator[Any]:
        for n in itertools.count():
            yield Request(f"/page/{n}")

    def parse_deep(self, response: Response) -> Iterator[Any]:
        with contextlib.suppress(Exception):  # a spider that swallows every error
            response.css("p").get()
        yield {"name": "after"}


def run(callback: str | None, body: bytes = b"<p>x</p>", **attrs: Any) -> PageOutput:
    rt = JobRuntime(Job(1, "bad", "bad.py", JobState.RUNNING, {}, 0.0), Bad)
    for name, value in attrs.items():
        setattr(rt, name, value)
    headers = {"content-type": "text/html", "x-name": b"caf\xe9".decode("utf-8", "surrogateescape")}
    response = Response(PAGE, 200, headers, body)
    return rt.process(
        response, page_url=PAGE, callback=callback, depth=0, fetched_at=1.0, warc=Provenance()
    )


def test_process__each_bad_item_alone_is_quarantined_or_refused_and_the_rest_kept() -> None:
    out = run(None)
    assert [r.data["name"] for r in out.records] == ["first", "deep", "last"]
    kinds = [q.errors[0]["type"] for q in out.quarantined]
    assert kinds == ["string_unicode", "non_finite_number", "lone_surrogate", "record_type"]
    assert [r.url for r in out.discovered] == ["http://a.test/ok"]
    assert out.refused == {
        "a Request URL must be a string, not int": 1,
        "unknown callback 'parse_missing'": 1,
        "meta that cannot be stored (lone_surrogate)": 1,
    }


def test_process__an_endless_callback_ends_at_the_yield_cap_with_a_named_error() -> None:
    started = time.perf_counter()
    with pytest.raises(TooManyItems, match="more than 1,000 items"):
        run("parse_endless", max_yields=1_000)
    assert time.perf_counter() - started < 1.0


def test_process__a_callback_past_its_deadline_ends_too_complex() -> None:
    rt = JobRuntime(Job(1, "bad", "bad.py", JobState.RUNNING, {}, 0.0), Bad)
    response = Response(PAGE, 200, {}, b"")
    with pytest.raises(TooComplex, match="ran past"):
        rt.process(
            response,
            page_url=PAGE,
            callback="parse_endless",
            depth=0,
            fetched_at=1.0,
            warc=Provenance(),
            deadline=time.monotonic() - 1,
        )


def test_process__a_page_too_deep_is_too_complex_even_if_the_spider_swallows_the_error() -> None:
    deep = b"<body>" + b"<div>" * 5000 + b"<p>x</p>" + b"</div>" * 5000
    with pytest.raises(TooComplex, match="nested more than"):
        run("parse_deep", deep)
    assert [r.data["name"] for r in run("parse_deep").records] == ["after"]


def test_prepare__a_start_request_naming_an_unknown_callback_is_refused_at_start() -> None:
    from crawlfleet.config import Settings
    from crawlfleet.errors import UsageError
    from crawlfleet.intake import prepare

    class Typo(Spider):
        name = "typo"
        start_urls = [PAGE]

        def start_requests(self) -> Iterator[Request]:
            yield Request(PAGE, callback="parse_itme")

        def parse_item(self, response: Response) -> None:
            return None

    with pytest.raises(UsageError) as refused:
        prepare("typo", "typo.py", Typo, Settings())
    assert str(refused.value) == (
        "spider Typo has no callback 'parse_itme' (named by its start request http://a.test/page)"
    )
