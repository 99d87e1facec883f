"""``auto`` spiders: which fetcher each page type (domain and URL pattern) needs, learnt as the
crawl goes and remembered in the store, fleet-wide and across crawls. All of the escalation is
here: the suspicion over HTTP, the hand-over to a browser worker, and the judgement in the
browser (the pure rule of which fetcher a new request starts with is
:mod:`crawlfleet.policy.fetchers`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from crawlfleet.errors import TooComplex
from crawlfleet.model import Failure
from crawlfleet.policy.traps import page_type
from crawlfleet.worker.attempt.page import page, rendered_body
from crawlfleet.worker.attempt.state import Attempt, Verdict
from crawlfleet.worker.offloop import OffLoop

__all__ = ["Escalate"]

log = logging.getLogger("crawlfleet.worker")

#: bytes of a page looked at for a <script> when deciding whether it needs the browser
_SCRIPT_SCAN = 256 * 1024


class Escalate:
    """The last step for ``auto`` spiders (a no-op for the others).

    Over HTTP, a scripted page the spider got no record from is a suspect, unless its type was
    judged fine over HTTP: it goes to a browser worker (no attempt used). In the browser, the
    spider's callback also runs on the document as it arrived (a dry run, its output dropped):
    a type needs the browser when the rendered page gives more records or more links than the
    raw one, and HTTP will do otherwise. The callback thus runs twice on an ``auto`` spider's
    browser pages (keep callbacks free of side effects)."""

    def __init__(self, offloop: OffLoop, clock: Callable[[], float]) -> None:
        self.offloop = offloop
        self.clock = clock

    async def __call__(self, a: Attempt) -> Verdict | None:
        lease, out, result = a.lease, a.output, a.result
        rt = a.job.runtime
        if rt.spider_cls.fetcher != "auto" or out is None or result is None or a.fetcher is None:
            return None
        pattern = page_type(lease.url)
        key = (lease.domain, pattern)
        known = rt.page_types.get(key)
        if a.fetcher.kind == "browser":
            try:
                verdict = await self.offloop.run(lambda _: self._judge(a), rt.parse_timeout)
            except TooComplex:
                verdict = None
            rt.suspected.discard(key)
            if verdict is not None and verdict != known:
                self._learnt(a, key, verdict)
            return None
        if lease.fetcher != "auto":
            return None
        if out.records or out.quarantined:
            if known == "browser":  # a probe over HTTP gave records: HTTP will do again
                self._learnt(a, key, "http")
            return None
        if self.suspect(a) and b"<script" in result.body[:_SCRIPT_SCAN].lower():
            return self.to_browser(a, "no record over HTTP from a scripted page")
        return None

    @staticmethod
    def suspect(a: Attempt) -> bool:
        """An ``auto`` page over HTTP whose type was not judged fine over HTTP already."""
        if a.lease.fetcher != "auto" or a.fetcher is None or a.fetcher.kind != "http":
            return False
        key = (a.lease.domain, page_type(a.lease.url))
        return a.job.runtime.page_types.get(key) != "http"

    def to_browser(self, a: Attempt, why: str) -> Failure:
        """Send an ``auto`` request to the browser, where its page type is judged; until then,
        new links of that type are sent there too (this worker's guess, not stored)."""
        pattern = page_type(a.lease.url)
        rt = a.job.runtime
        rt.suspected.add((a.lease.domain, pattern))
        if a.output is not None:  # dropped with this attempt: its links must be sendable again
            rt.forget(a.output.discovered)
        a.outcome = None
        return Failure(
            a.lease.ref,
            f"needs the browser: {why}",
            retry_at=self.clock(),
            count_attempt=False,
            refetch_with="browser",
        )

    @staticmethod
    def _learnt(a: Attempt, key: tuple[str, str], fetcher: str) -> None:
        """Every change of a page type's fetcher is logged (and counted: its attempt's event)."""
        a.job.runtime.page_types[key] = fetcher
        a.learnt = (key[1], fetcher)
        log.info("job %s: page type %s now fetched by %s (%s)", a.job.name, *a.learnt, a.lease.url)

    @staticmethod
    def _judge(a: Attempt) -> str | None:
        """The fetcher a browser page's type needs: the callback's take from the rendered page
        against its take from the raw document (None when there is no raw document)."""
        result, rt = a.result, a.job.runtime
        assert result is not None
        rendered = getattr(result, "rendered_html", None)
        if not isinstance(rendered, str) or not result.body:
            return None

        def sample(body: bytes, encoding: str | None) -> tuple[int, int]:
            response = page(a, body, encoding, _none_unknown)
            return rt.sample(response, a.lease.callback)

        raw_items, raw_links = sample(result.body, None)
        items, links = sample(*rendered_body(rendered))
        # a script that adds a link or two (a banner, a chat widget) is not content
        if items > raw_items or links > raw_links + max(2, raw_links // 10):
            return "browser"
        return "http"


def _none_unknown(hrefs: list[str], base: str) -> list[str]:
    return []  # a dry run: links are counted, no Request is built
