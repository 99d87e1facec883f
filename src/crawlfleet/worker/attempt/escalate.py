"""``auto`` spiders: which fetcher each domain and page type needs, learnt as the crawl goes
and remembered in the store, fleet-wide and across crawls. All of the escalation is here: the
climb up the ladder (``http → impersonate → browser``) of a page blocked on its rung and its
domain with it, the probe back down, the suspicion over HTTP, the hand-over to a browser
worker, and the judgement in the browser (the pure rules of which fetcher a new request starts
with, and of which blocks climb, are :mod:`crawlfleet.policy.fetchers`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from crawlfleet.errors import TooComplex
from crawlfleet.model import Failure, NewRequest, Outcome
from crawlfleet.policy.fetchers import DOMAIN, climbs, higher, rung_above
from crawlfleet.policy.traps import page_type
from crawlfleet.worker.attempt.page import page, rendered_body
from crawlfleet.worker.attempt.state import Attempt, Verdict
from crawlfleet.worker.offloop import OffLoop

__all__ = ["Escalate"]

log = logging.getLogger("crawlfleet.worker")

#: bytes of a page looked at for a <script> when deciding whether it needs the browser
_SCRIPT_SCAN = 256 * 1024
#: seconds a page of a type being judged in the browser waits before it is fetched again, and
#: how many times it may wait
JUDGE_WAIT = 1.0
JUDGE_WAITS = 30
_WAITS_MAX = 10_000
#: most page types of one domain judged in a worker's browser at once (see _judging_full)
JUDGING_AT_ONCE = 2
#: the fetchers of an ``auto`` spider's requests below the top rung: the pipeline judges them
_ON_THE_LADDER = frozenset({"auto", "impersonate"})


class Escalate:
    """The last step for ``auto`` spiders (a no-op for the others), and the climb the classify
    step asks of it (:meth:`climb`).

    A page fetched below its domain's rung (a probe down) that got through lowers the rung.
    Over HTTP (or impersonating), a scripted page the spider got no record from is a suspect,
    unless its type was judged fine over HTTP: it goes to a browser worker (no attempt used).
    In the browser, the spider's callback also runs on the document as it arrived (a dry run,
    its output dropped): a type needs the browser when the rendered page gives more records or
    more links than the raw one, and HTTP will do otherwise. The callback thus runs twice on an
    ``auto`` spider's browser pages (keep callbacks free of side effects)."""

    def __init__(self, offloop: OffLoop, clock: Callable[[], float]) -> None:
        self.offloop = offloop
        self.clock = clock
        # per request: how often it waited for its page type's judgement here
        self._waits: dict[int, int] = {}

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
        if lease.fetcher not in _ON_THE_LADDER:
            return None
        self._probed_down(a)
        if out.records or out.quarantined:
            if known == "browser":  # a probe over HTTP gave records: HTTP will do again
                self._learnt(a, key, "http")
            return None
        if self.suspect(a) and b"<script" in result.body[:_SCRIPT_SCAN].lower():
            return self.to_browser(a, "no record over HTTP from a scripted page")
        return None

    def _may_wait(self, request: int) -> bool:
        """Whether a request may wait once more for its type's judgement (bounded: a judgement
        that never comes, a browser that keeps failing, sends it to the browser after all)."""
        waited = self._waits.get(request, 0)
        if waited >= JUDGE_WAITS:
            return False
        if len(self._waits) >= _WAITS_MAX:
            self._waits.clear()
        self._waits[request] = waited + 1
        return True

    def wait_for_judgement(self, a: Attempt, why: str | None = None) -> Failure:
        """A page of a type that is being judged in the browser (another page of it went
        there): fetched again raw once the judgement is in, rather than rendered too, no
        attempt used. If the type needs the browser, it goes there then; if not, it is done
        raw. So a type costs the browser one page, not every page in flight meanwhile. A page
        of a type not judged yet waits the same way for its turn while the browser judges
        other types of its domain (:func:`_judging_full`; ``why`` says so). The links of the
        page as it came are queued now (:func:`_raw_links`)."""
        answered = _answered(a)
        a.outcome = None
        return Failure(
            a.lease.ref,
            why or "its page type is being judged in the browser",
            retry_at=self.clock() + JUDGE_WAIT,
            count_attempt=False,
            discovered=_raw_links(a),
            **answered,
        )

    @staticmethod
    def suspect(a: Attempt) -> bool:
        """An ``auto`` page fetched raw (over HTTP, or impersonating) whose type was not judged
        fine without the browser already."""
        if a.lease.fetcher not in _ON_THE_LADDER or a.fetcher is None:
            return False
        if a.fetcher.kind == "browser" or a.job.runtime.spider_cls.fetcher != "auto":
            return False
        key = (a.lease.domain, page_type(a.lease.url))
        return a.job.runtime.page_types.get(key) != "http"

    def climb(self, a: Attempt, reason: str | None) -> Failure | None:
        """A page blocked on its rung with evidence that the rung was judged (a challenge, a
        denial: :func:`~crawlfleet.policy.fetchers.climbs`) goes one rung up at once, no
        attempt used, and its domain's rung is raised (this worker's at once, the fleet's
        through the store): a crawl never dies ``blocked`` on a rung it has not tried. None
        for other spiders and blocks, and on the top rung."""
        rt, lease = a.job.runtime, a.lease
        if rt.spider_cls.fetcher != "auto" or lease.fetcher not in _ON_THE_LADDER:
            return None
        if a.fetcher is None or not climbs(reason):
            return None
        up = rung_above(a.fetcher.kind)
        if up is None:
            return None
        key = (lease.domain, DOMAIN)
        known = rt.page_types.get(key)
        if known is not None and higher(known, a.fetcher.kind) != a.fetcher.kind:
            # a probe down (or a page leased before the rise) blocked: probe less often
            rt.blocked_probes[lease.domain] = rt.blocked_probes.get(lease.domain, 0) + 1
        if higher(known, up) != known:
            rt.page_types[key] = up
            a.learnt = (DOMAIN, up)
            log.info(
                "job %s: domain %s now fetched by %s (%s: blocked, %s)",
                a.job.name,
                lease.domain,
                up,
                a.fetcher.kind,
                reason,
            )
        return Failure(
            lease.ref,
            f"blocked on {a.fetcher.kind} ({reason}): fetched again by {up}",
            retry_at=self.clock(),
            count_attempt=False,
            refetch_with=up,
            page_type=a.learnt,
        )

    @staticmethod
    def _probed_down(a: Attempt) -> None:
        """A page fetched below its domain's rung (a probe down) that got through: the rung it
        was fetched on will do for the domain again."""
        rt, kind = a.job.runtime, a.fetcher.kind if a.fetcher is not None else None
        key = (a.lease.domain, DOMAIN)
        known = rt.page_types.get(key)
        if kind is None or known is None or higher(known, kind) == kind or a.learnt:
            return
        rt.page_types[key] = kind
        rt.blocked_probes.pop(a.lease.domain, None)
        a.learnt = (DOMAIN, kind)
        log.info("job %s: domain %s now fetched by %s again", a.job.name, a.lease.domain, kind)

    def to_browser(self, a: Attempt, why: str) -> Failure:
        """Send an ``auto`` request to the browser, where its page type is judged; until then,
        pages of that type fetched raw wait for the judgement (:meth:`wait_for_judgement`), and
        new links of it start raw all the same (a guess pins nothing to the browser). The
        page's links as it came are queued now (:func:`_raw_links`)."""
        pattern = page_type(a.lease.url)
        rt = a.job.runtime
        key = (a.lease.domain, pattern)
        if key not in rt.page_types:  # to be judged: by a page in the browser now, or next
            turn = key in rt.suspected or _judging_full(a)
            if turn and self._may_wait(a.lease.id):
                turn_of = None if key in rt.suspected else "other page types of its site are judged"
                return self.wait_for_judgement(a, turn_of)
        rt.suspected.add((a.lease.domain, pattern))
        answered = _answered(a)
        a.outcome = None
        return Failure(
            a.lease.ref,
            f"needs the browser: {why}",
            retry_at=self.clock(),
            count_attempt=False,
            refetch_with="browser",
            discovered=_raw_links(a),
            **answered,
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


def _judging_full(a: Attempt) -> bool:
    """Whether this worker's browser is judging :data:`JUDGING_AT_ONCE` page types of the
    page's domain already. Pages of a domain's new types beyond those wait their turn (their
    links queued, as the others'): every page in the browser holds one of the domain's slots
    for as long as it renders, and a crawl's first pages, of as many types, would take the
    whole of a lane still at its start-up width, stalling the pages over HTTP behind them.
    Only a worker that runs the browser itself counts (it learns each judgement at once; one
    without waits for the fleet's, so its guesses would hold the turns for long)."""
    rt, domain = a.job.runtime, a.lease.domain
    if "browser" not in a.job.fetchers.kinds:
        return False
    judging = sum(1 for key in rt.suspected if key[0] == domain and key not in rt.page_types)
    return judging >= JUDGING_AT_ONCE


def _raw_links(a: Attempt) -> list[NewRequest]:
    """The links the spider found on a page fetched raw that goes to the browser (or waits for
    its type's judgement there): queued with the failure that sends it on, so the crawl keeps
    going on the cheaper rung meanwhile rather than stall behind the render. They are links the
    page has as it arrived, whatever the render adds (its own links, sent with its completion;
    those already sent are not sent twice). Its records are none: a page with records is never
    sent to the browser."""
    out = a.output
    return [] if out is None else list(out.discovered)


def _answered(a: Attempt) -> dict[str, Any]:
    """What a page fetched raw and sent on (to the browser, or to wait for its type's
    judgement) tells its lane's pacing: the site answered it, healthy, in this time. Pages that
    go on teach the pace as those that complete do: were they nothing to it, a crawl whose first
    pages are judged in the browser would stay at the start-up width until the renders came
    back (the event's outcome stays None: the page itself is not done)."""
    result = a.result
    healthy = a.outcome is Outcome.OK or a.block_reason == "structure:scripts-only"
    if result is None or not healthy or not 200 <= result.status < 300:
        return {}
    return {
        "outcome": Outcome.OK,
        "status": result.status,
        "latency": a.elapsed,
        "started_at": a.started_at,
    }


def _none_unknown(hrefs: list[str], base: str) -> list[str]:
    return []  # a dry run: links are counted, no Request is built
