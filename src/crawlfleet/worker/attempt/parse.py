"""The parse step: the spider's callback on the page, in the worker's callback thread with its
time budget; what the page produced (records, quarantine, new links) and what it lost to the
caps, said in the log."""

from __future__ import annotations

import logging
from collections.abc import Callable

from crawlfleet.data.captures import Provenance
from crawlfleet.data.warc import Capture
from crawlfleet.errors import ParseError, SitemapError, TooComplex, TooManyItems
from crawlfleet.model import DeadReason, Outcome, Visit
from crawlfleet.urls import mask_credentials
from crawlfleet.worker.attempt.page import response_of
from crawlfleet.worker.attempt.state import Attempt, Verdict
from crawlfleet.worker.attempt.verdict import Verdicts
from crawlfleet.worker.extract import PageOutput
from crawlfleet.worker.offloop import OffLoop
from crawlfleet.worker.revisit import visit_of

__all__ = ["Parse"]

log = logging.getLogger("crawlfleet.worker")


class Parse:
    def __init__(self, verdicts: Verdicts, offloop: OffLoop, clock: Callable[[], float]) -> None:
        self.verdicts = verdicts
        self.offloop = offloop
        self.clock = clock

    async def __call__(self, a: Attempt) -> Verdict | None:
        """Run the spider on the page: records, quarantine, links (every page is parsed)."""
        rt, ref = a.job.runtime, a.warc
        assert ref is not None
        assert a.digest is not None
        warc = Provenance(
            a.job.raw.locate(ref.file),
            ref.record_id,
            a.earlier.file if a.earlier else None,
            a.earlier.record_id if a.earlier else None,
        )
        if a.earlier is None:  # later pages with these bytes are archived as revisits of this
            capture = Capture(warc.file, ref.record_id, ref.target_uri, ref.date)
            rt.captures.remember(a.payload_digest or a.digest, capture, a.digest)
        elif rt.spider_cls.skip_duplicate_content and rt.captures.parsed(a.digest):
            return self.verdicts.completion(a)  # the spider's own opt-in, never a default
        status = a.result.status if a.result is not None else 0
        if rt.spider_cls.skip_unchanged_content and (
            visit_of(a.lease, status, a.digest) is Visit.UNCHANGED
        ):
            return self.verdicts.completion(a, carry=True)  # its records of the last run stay
        response, robots, lease = response_of(a), a.job.robots, a.lease
        fetched_at = self.clock()
        cookiejar, session = a.named_session(), _page_session(a)

        def run(deadline: float) -> PageOutput:
            return rt.process(
                response,
                robots=robots,
                page_url=lease.url,
                callback=lease.callback,
                depth=lease.depth,
                fetched_at=fetched_at,
                warc=warc,
                cookiejar=cookiejar,
                session=session,
                deadline=deadline,
                found_by=lease.id,
            )

        fail = self.verdicts.fail
        try:
            a.output = await self.offloop.run(run, rt.parse_timeout)
        except TooComplex as exc:
            dead = DeadReason.TOO_COMPLEX
            return fail(a, Outcome.PERMANENT_ERROR, f"too complex: {exc}", dead=dead)
        except TooManyItems as exc:
            dead = DeadReason.TOO_MANY_ITEMS
            return fail(a, Outcome.PERMANENT_ERROR, f"too many items: {exc}", dead=dead)
        except SitemapError as exc:
            log.warning("%s is not a sitemap: %s", mask_credentials(lease.url), exc)
            dead = DeadReason.BAD_SITEMAP
            return fail(a, Outcome.PERMANENT_ERROR, f"SitemapError: {exc}", dead=dead)
        except ParseError as exc:
            dead = DeadReason.PARSE_ERROR
            return fail(a, Outcome.PERMANENT_ERROR, f"parse error: {exc}", dead=dead)
        _report_cuts(a)
        if a.output.refused:
            log.warning(
                "%s yielded items it cannot use on %s: %s",
                rt.spider_cls.__name__,
                mask_credentials(lease.url),
                "; ".join(f"{n} x {why}" for why, n in a.output.refused.most_common(5)),
            )
        return None


def _page_session(a: Attempt) -> str | None:
    """The session the page's requests go on with: the one that fetched the page, once it
    holds cookies (those it came with or those the answer set, on any redirect hop). An age
    gate's or a currency link's cookie reaches the pages it links; a form's CSRF token is tied
    to the cookie that came with the form; a login's answer sets the cookie its follow-ups
    need."""
    if a.session is None:
        return None
    result = a.result
    got = result is not None and (result.hop_cookies or "set-cookie" in result.header_map)
    return a.session.id if a.session.cookies or got else None


def _report_cuts(a: Attempt) -> None:
    """Say what a page lost to the caps: requests refused for themselves (an unknown pool),
    links over ``max_links_per_page``, and everything past the parse limit
    (``Response.max_parse_size``)."""
    out, response = a.output, a.response
    url = mask_credentials(a.lease.url)
    for line in out.pool_refused if out is not None else ():
        log.warning("%s (on %s)", line, url)
    if out is not None and out.links_dropped:
        cap = a.job.runtime.traps.max_links_per_page
        log.warning(
            "%d links dropped on %s: over max_links_per_page (%s)", out.links_dropped, url, cap
        )
    if response is not None and response.parse_truncated:
        log.warning(
            "%s is over the %d-byte parse limit: links and fields past it were not seen",
            url,
            response.max_parse_size,
        )
