"""``Request(pool=...)``: what it accepts, and a pool the worker does not have refusing that
request alone (a page's other links are kept), in one line."""

from __future__ import annotations

import pytest

from crawlfleet.errors import UsageError
from crawlfleet.intake import seed_requests
from crawlfleet.model import Job, JobState
from crawlfleet.spider import Request, Spider
from crawlfleet.worker.extract import JobRuntime, PageOutput


class Shop(Spider):
    name = "shop"
    start_urls = ["http://shop.test/"]


@pytest.mark.parametrize(
    ("pool", "names"),
    [
        (None, ()),
        ("res", ("res",)),
        (["dc", "res"], ("dc", "res")),
        (("res", "dc", "res"), ("res", "dc")),  # each once, in the order given
        (["dc_2", "Res-1"], ("dc_2", "Res-1")),
    ],
)
def test_pool_takes_a_name_or_a_list_of_names(pool: object, names: tuple[str, ...]) -> None:
    assert Request("http://shop.test/", pool=pool).pool == names  # type: ignore[arg-type]


@pytest.mark.parametrize("pool", ["", [], ["dc", ""], ["two words"], ["-dc"], [3], "a/b", [None]])
def test_pool_refuses_what_is_not_a_pool_name(pool: object) -> None:
    with pytest.raises(ValueError, match="pool must") as refused:
        Request("http://shop.test/", pool=pool)  # type: ignore[arg-type]
    assert "\n" not in str(refused.value)


def test_a_link_is_pinned_by_default_to_nothing() -> None:
    assert Request.link("/a", None, "http://shop.test/").pool == ()
    assert Request("http://shop.test/", pool="dc").pool == ("dc",)


def _runtime() -> JobRuntime:
    runtime = JobRuntime(Job(1, "shop", "shop.py", JobState.RUNNING, {}, 0.0), Shop)
    runtime.pools = frozenset({"direct", "dc", "res"})
    return runtime


def test_an_unknown_pool_refuses_that_request_alone_in_one_line() -> None:
    runtime, out = _runtime(), PageOutput()
    runtime.link(Request("http://shop.test/a", pool="rez"), 1, out)
    runtime.link(Request("http://shop.test/b", pool=["res", "dc"]), 1, out)
    runtime.link(Request("http://shop.test/c"), 1, out)
    assert out.pool_refused == [
        "request http://shop.test/a refused: no route pool named 'rez' (did you mean 'res'?)"
    ]
    assert [(r.url, r.pool) for r in out.discovered] == [
        ("http://shop.test/b", ("res", "dc")),
        ("http://shop.test/c", ()),
    ]


def test_an_unknown_pool_on_a_start_request_is_one_line() -> None:
    seeds = seed_requests([Request("http://shop.test/", pool="dc")], pools=["direct", "dc"])
    assert seeds[0].pool == ("dc",)
    with pytest.raises(UsageError, match=r"'http://shop.test/x': no route pool named 'dx'"):
        seed_requests([Request("http://shop.test/x", pool="dx")], pools=["direct", "dc"])
