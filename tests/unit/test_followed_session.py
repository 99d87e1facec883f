"""The session a page's requests follow: kept with the request in the store (beside its
cb_kwargs, out of the spider's ``meta``), never over a session the request names."""

from __future__ import annotations

from typing import Any

from crawlfleet.model import Job, JobState
from crawlfleet.request import STORED
from crawlfleet.response import Response
from crawlfleet.spider import Request, Spider
from crawlfleet.worker.extract import JobRuntime, PageOutput

PAGE = "http://a.test/gate"


class Site(Spider):
    name = "site"
    start_urls = [PAGE]

    def parse(self, response: Response) -> None:
        return None

    def page(self, response: Response, n: int) -> None:
        return None


def linked(req: Request, **kw: Any) -> dict[str, Any] | None:
    rt = JobRuntime(Job(1, "site", "site.py", JobState.RUNNING, {}, 0.0), Site)
    out = PageOutput()
    rt.link(req, 1, out, **kw)
    (new,) = out.discovered
    return new.meta


def test_a_followed_session_is_stored_with_the_request_out_of_its_meta() -> None:
    req = Request("http://a.test/p/1", callback="page", cb_kwargs={"n": 1}, meta={"k": "v"})
    meta = linked(req, session="s-1")
    assert meta == {"k": "v", STORED: {"cb_kwargs": {"n": 1}, "session": "s-1"}}
    response = Response("http://a.test/p/1", 200, {}, b"", meta=meta)
    assert (response.meta, response.cb_kwargs) == ({"k": "v"}, {"n": 1})
    assert req.meta == {"k": "v"}, "the spider's request is left as it was"


def test_a_named_session_wins_over_a_followed_one() -> None:
    assert linked(Request("http://a.test/p/1"), cookiejar="jar", session="s-1") == {
        "cookiejar": "jar"
    }
    own = Request("http://a.test/p/2", meta={"cookiejar": "mine"})
    assert linked(own, cookiejar="jar", session="s-1") == {"cookiejar": "mine"}
    assert linked(Request("http://a.test/p/3")) is None
