"""One attempt at a leased request, through its steps, to a verdict for the store::

    pace slot → robots gate → fetch → snapshot → classify → parse → verdict

An :class:`Attempt` is the value that travels (the lease, its job, route and session, what came
back, its WARC record); each step reads it, adds to it, and either passes it on or ends the
attempt with its verdict: a :class:`~crawlfleet.model.Completion` (data, or a final answer such
as a 404), a :class:`~crawlfleet.model.Failure` (retry later, or dead, as the pure retry policy
decides), or :class:`GiveBack` (release unfetched: the job cannot run here, or robots.txt's
Crawl-delay came after the lease). Whatever the ending, one
:class:`~crawlfleet.events.AttemptEvent` goes to the observers. The worker's loops only start
attempts and carry their verdicts to the store.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawlfleet.data.captures import Provenance
from crawlfleet.data.warc import Capture, WarcRef, mask_form_secrets
from crawlfleet.errors import (
    FetchError,
    OutOfScope,
    ParseError,
    ProxyError,
    TooComplex,
    TooManyItems,
)
from crawlfleet.events import AttemptEvent, EventBus
from crawlfleet.fetch.base import Fetcher, FetchRequest, HopCheck
from crawlfleet.fetch.robots import Gate
from crawlfleet.model import Completion, DeadReason, Failure, Lease, LeaseRef, Outcome
from crawlfleet.policy.blocks import Verdict as BlockKind
from crawlfleet.policy.classify import classify, outcome_for_error
from crawlfleet.policy.retry import RetryDecision, decide, parse_retry_after
from crawlfleet.policy.traps import page_type
from crawlfleet.response import Response
from crawlfleet.routes.identities import Identities
from crawlfleet.routes.pools import DIRECT
from crawlfleet.urls import host_of, in_scope, mask_credentials, origin_of
from crawlfleet.worker.extract import PageOutput
from crawlfleet.worker.offloop import OffLoop

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.fetch.base import FetchResult
    from crawlfleet.routes.pools import Route
    from crawlfleet.routes.sessions import Session
    from crawlfleet.worker.jobs import JobContext

__all__ = ["Attempt", "GiveBack", "Pipeline", "Verdict"]

log = logging.getLogger("crawlfleet.worker")

#: seconds before a request of a route this worker does not know is offered again
UNKNOWN_ROUTE_WAIT = 60.0
#: bytes of a page looked at for a <script> when deciding whether it needs the browser
_SCRIPT_SCAN = 256 * 1024
#: share of a slot's spacing kept when a worker starts late slots (see ``Pipeline.pace_slot``)
SLOT_CATCH_UP = 0.9
_SLOTS_MAX = 10_000
#: blocks through a proxy route that a request may meet without using up an attempt (the route
#: or its session was at fault, not the request; counted per worker, so bounded)
FREE_BLOCKS = 3
#: most bytes of a plain-text error answer quoted in its failure
_PLAIN_REASON_MAX = 300


@dataclass(frozen=True, slots=True)
class GiveBack:
    """Release the lease unfetched: no attempt used."""

    lease: LeaseRef
    why: str


Verdict = Completion | Failure | GiveBack


@dataclass(slots=True)
class Attempt:
    """One attempt as it goes through the steps (fields fill in as it goes)."""

    lease: Lease
    job: JobContext
    fetcher: Fetcher | None = None
    route: Route | None = None
    session: Session | None = None
    started_at: float | None = None  # when the request was sent (epoch seconds)
    elapsed: float | None = None  # response time
    result: FetchResult | None = None
    error: FetchError | None = None
    warc: WarcRef | None = None
    digest: bytes | None = None
    earlier: Capture | None = None  # the first capture of the same payload, if any
    outcome: Outcome | None = None
    block_reason: str | None = None
    output: PageOutput | None = None
    decision: RetryDecision | None = None
    response: Response | None = None  # built once: the spider's block test and parse share it
    learnt: tuple[str, str] | None = None  # a page type's fetcher learnt here (auto)

    @property
    def lane(self) -> str:
        """The unit of pacing the lease belongs to (today its domain)."""
        return self.lease.domain


class Pipeline:
    """The steps of an attempt; one per worker. ``clock`` and ``rng`` are for tests."""

    def __init__(
        self,
        settings: Settings,
        events: EventBus,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        identities: Identities | None = None,
    ) -> None:
        self.settings = settings
        self.events = events
        self.clock = clock
        self.rng = rng or random.Random()
        self.identities = identities
        #: the thread spider callbacks run in (the event loop keeps answering meanwhile)
        self.offloop = OffLoop()
        # per lane: the last slot this worker honoured, and when that request actually started
        self._slots: dict[tuple[str, str], tuple[float, float]] = {}
        # per request: the blocks it met on proxy routes here without using up an attempt
        self._free_blocks: dict[int, int] = {}

    async def run(self, job: JobContext, lease: Lease) -> Verdict:
        """The whole life of one attempt; emits its event and returns its verdict."""
        attempt = Attempt(lease, job)
        verdict = await self._steps(attempt)
        self._fold_session(attempt)
        self.events.emit(_event(attempt, verdict))
        return verdict

    def _fold_session(self, a: Attempt) -> None:
        """The attempt's session learns its cookies and whether it went well (retired on a
        block: the site knows this identity)."""
        if self.identities is None or a.session is None:
            return
        cookies: list[str] = []
        if a.result is not None:
            cookies = list(a.result.header_map.getall("set-cookie", []))
        verdicts = {Outcome.OK: "ok", Outcome.GONE: "ok", Outcome.BLOCKED: "blocked"}
        outcome = verdicts.get(a.outcome, "neutral") if a.outcome else "neutral"
        url = a.result.url if a.result is not None else a.lease.url
        self.identities.after(
            a.job.name,
            a.route,
            a.session,
            url=url,
            set_cookies=cookies,
            outcome=outcome,
            hop_cookies=a.result.hop_cookies if a.result is not None else (),
        )

    async def _steps(self, a: Attempt) -> Verdict:
        await self.pace_slot(a)
        return (
            await self.robots_gate(a)
            or await self.fetch(a)
            or self.snapshot(a)
            or self.classify(a)
            or await self.parse(a)
            or await self.learn_fetcher(a)
            or self.done(a)
        )

    # -- the steps, in order --------------------------------------------------------------------

    async def pace_slot(self, a: Attempt) -> None:
        """Wait for the lease's pacing slot (the store spaces a lane's request starts).

        A worker that fell behind (a busy CPU, a pause) must not start its late slots all at
        once: that burst is what a per-second rate limit answers with 429. A slot keeps at least
        :data:`SLOT_CATCH_UP` of its spacing from the lane's previous start here, so the lag is
        made up gently, below the pace the store set."""
        slot, now = a.lease.start_at, self.clock()
        lane = (a.lease.domain, a.lease.route)
        start = slot_start(slot, self._slots.get(lane), now)
        if len(self._slots) >= _SLOTS_MAX:
            self._slots.clear()
        self._slots[lane] = (slot, start)
        wait = start - now
        if wait > 0:
            await asyncio.sleep(wait)

    async def robots_gate(self, a: Attempt) -> Verdict | None:
        gate = a.job.robots
        if gate is None:
            return None
        match await gate.check(a.lease):
            case Gate.ALLOW:
                return None
            case Gate.GIVE_BACK:
                return GiveBack(a.lease.ref, "robots.txt Crawl-delay: paced again")
            case Gate.UNREACHABLE:
                recheck = gate.recheck
                a.outcome = Outcome.ROBOTS
                return Failure(
                    a.lease.ref,
                    "robots.txt unreachable: host postponed",
                    retry_at=self.clock() + recheck,
                    outcome=Outcome.ROBOTS,
                    retry_after=recheck,
                    count_attempt=False,
                )
            case Gate.UNAVAILABLE:
                return self._fail(
                    a,
                    Outcome.ROBOTS,
                    f"robots.txt unreachable for over {gate.give_up:g}s: given up",
                    dead=DeadReason.ROBOTS_UNAVAILABLE,
                )
        return self._fail(a, Outcome.ROBOTS, "robots.txt disallows this URL")

    async def fetch(self, a: Attempt) -> Verdict | None:
        lease = a.lease
        if lease.route != DIRECT:
            a.route = a.job.routes.get(lease.route)
            if a.route is None:  # a fleet's workers must share their [[routes.pool]]
                log.error("route %s is not configured on this worker", lease.route)
                return Failure(
                    lease.ref,
                    f"route {lease.route} is not configured on this worker",
                    retry_at=self.clock() + UNKNOWN_ROUTE_WAIT,
                    count_attempt=False,
                )
        a.fetcher = a.job.fetchers.for_request(lease.fetcher)
        if self.identities is not None:
            a.session = await self.identities.pick(
                a.job.name, a.route, _named(lease), since=lease.start_at
            )
        authorization = a.job.runtime.authorization.get(origin_of(lease.url))
        request = FetchRequest(
            lease.url,
            method=lease.method,
            body=lease.body,
            headers=_with_authorization(lease.headers, authorization),
            check_hop=self._hop_check(a),
        )
        if a.fetcher.kind == "browser":
            request = _browser_request(request, a)
        a.started_at = self.clock()
        started = time.perf_counter()
        try:
            a.result = await a.fetcher.fetch(request, route=a.route, session=a.session)
        except FetchError as exc:
            a.elapsed = time.perf_counter() - started
            a.error = exc
            return self._fail(a, outcome_for_error(exc), f"{exc.kind}: {exc}", kind=exc.kind)
        a.elapsed = time.perf_counter() - started
        if a.fetcher.kind == "browser" and a.result.elapsed > 0:
            # the document's answer time: the wait for a free context and the rendering are
            # this worker's, and pacing would read them as the site's load
            a.elapsed = a.result.elapsed
        return None

    @staticmethod
    def _hop_check(a: Attempt) -> HopCheck:
        """What every redirect hop must pass before it is fetched: the crawl's scope (or the
        request's own host: a seed may lie outside ``allowed_domains``), then robots.txt."""
        gate, scope = a.job.robots, a.job.runtime.scope
        own = a.lease.domain

        async def check(url: str) -> None:
            try:
                host = host_of(url)
            except ValueError:
                return  # not http(s): the fetcher refuses it itself
            if host != own and not in_scope(host, scope):
                raise OutOfScope(f"the redirect to {host} leaves the crawl's scope")
            if gate is not None:
                await gate.check_hop(url)

        return check

    def snapshot(self, a: Attempt) -> Verdict | None:
        """Archive the exchange; a payload archived before becomes a revisit record of it."""
        result, rt = a.result, a.job.runtime
        assert result is not None
        a.digest = rt.content_hash(result.body)
        a.earlier = rt.captures.get(a.digest)
        a.warc = a.job.warc.write(
            url=result.url,
            method=a.lease.method,
            request_headers=result.request_headers,
            status=result.status,
            reason=result.reason,
            http_version=result.http_version,
            response_headers=result.headers,
            body=result.body,
            fetched_at=self.clock(),
            ip=result.remote_ip,
            request_body=_archived_body(a.lease),
            revisit_of=a.earlier,
            payload_sha1=a.digest,
        )
        rendered = getattr(result, "rendered_html", None)
        if isinstance(rendered, str) and rendered:  # what the browser made of it, linked
            a.job.warc.write_resource(
                url=result.url,
                body=rendered.encode("utf-8", "surrogatepass"),
                content_type="text/html; charset=utf-8; crawlfleet=rendered-dom",
                fetched_at=self.clock(),
                concurrent_to=a.warc.record_id,
            )
        return None

    def classify(self, a: Attempt) -> Verdict | None:
        """Data, a final answer, a block or an error: only data goes on to be parsed."""
        result, rt = a.result, a.job.runtime
        assert result is not None
        try:
            verdict = rt.spider.is_blocked(self._response(a))
        except Exception:  # a broken hook must not pass a block page as data
            log.exception("%s.is_blocked raised", rt.spider_cls.__name__)
            verdict = None
        found = classify(
            result.status,
            result.header_map,
            self._response(a).body,  # the rendered DOM for a browser fetch
            spider_verdict=verdict,
            attempts=a.lease.attempts,
        )
        a.outcome = found.outcome
        if found.verdict.blocked:
            a.block_reason = found.verdict.reason
            if found.verdict.reason == "structure:scripts-only" and self._suspect(a):
                # a shell that scripts fill: for an auto spider, a page for the browser
                return self._to_browser(a, "a scripted shell over HTTP")
            self._mark_block(a)
        if found.outcome is Outcome.OK:
            return None
        if found.outcome is Outcome.GONE:
            return self._completion(a)
        if found.verdict.verdict is BlockKind.EMPTY:  # one retry (classify), then dead(empty)
            final = found.outcome is Outcome.PERMANENT_ERROR
            dead = DeadReason.EMPTY if final else None
            return self._fail(a, found.outcome, f"HTTP {result.status} (empty page)", dead=dead)
        retry_after = parse_retry_after(result.header_map.get("retry-after"), self.clock())
        blocked = " (block page)" if found.outcome is Outcome.BLOCKED else ""
        said = _plain_reason(result) if found.outcome is Outcome.PERMANENT_ERROR else ""
        return self._fail(
            a, found.outcome, f"HTTP {result.status}{blocked}{said}", retry=retry_after
        )

    def _mark_block(self, a: Attempt) -> None:
        """The archived response was a block page: a metadata record says so (and why), so
        the snapshot is kept, never taken for the page."""
        if a.warc is None or a.result is None:
            return
        fields = [("crawlfleet-block", a.block_reason or "blocked")]
        if a.route is not None:
            fields.append(("crawlfleet-route", a.route.id))
        a.job.warc.write_metadata(
            url=a.result.url, fields=fields, fetched_at=self.clock(), refers_to=a.warc.record_id
        )

    async def parse(self, a: Attempt) -> Verdict | None:
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
            rt.captures.remember(
                a.digest, Capture(warc.file, ref.record_id, ref.target_uri, ref.date)
            )
        elif rt.spider_cls.skip_duplicate_content and rt.captures.parsed(a.digest):
            return self._completion(a)  # the spider's own opt-in, never a default
        response, robots, lease = self._response(a), a.job.robots, a.lease
        fetched_at = self.clock()

        def run(deadline: float) -> PageOutput:
            return rt.process(
                response,
                robots=robots,
                page_url=lease.url,
                callback=lease.callback,
                depth=lease.depth,
                fetched_at=fetched_at,
                warc=warc,
                cookiejar=_named(a.lease),
                form_cookiejar=_form_cookiejar(a),
                deadline=deadline,
            )

        try:
            a.output = await self.offloop.run(run, rt.parse_timeout)
        except TooComplex as exc:
            return self._fail(
                a, Outcome.PERMANENT_ERROR, f"too complex: {exc}", dead=DeadReason.TOO_COMPLEX
            )
        except TooManyItems as exc:
            dead = DeadReason.TOO_MANY_ITEMS
            return self._fail(a, Outcome.PERMANENT_ERROR, f"too many items: {exc}", dead=dead)
        except ParseError as exc:
            return self._fail(
                a, Outcome.PERMANENT_ERROR, f"parse error: {exc}", dead=DeadReason.PARSE_ERROR
            )
        _report_cuts(a)
        if a.output.refused:
            log.warning(
                "%s yielded items it cannot use on %s: %s",
                rt.spider_cls.__name__,
                mask_credentials(lease.url),
                "; ".join(f"{n} x {why}" for why, n in a.output.refused.most_common(5)),
            )
        return None

    async def learn_fetcher(self, a: Attempt) -> Verdict | None:
        """``auto``: which fetcher each page type (domain and URL pattern) needs, learnt as the
        crawl goes and remembered in the store, fleet-wide and across crawls.

        Over HTTP, a scripted page the spider got no record from is a suspect, unless its type
        was judged fine over HTTP: it goes to a browser worker (no attempt used). In the
        browser, the spider's callback also runs on the document as it arrived (a dry run, its
        output dropped): a type needs the browser when the rendered page gives more records or
        more links than the raw one, and HTTP will do otherwise. The callback thus runs twice on
        an ``auto`` spider's browser pages (keep callbacks free of side effects)."""
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
                rt.page_types[key] = verdict
                a.learnt = (pattern, verdict)
                _log_learnt(a)
            return None
        if lease.fetcher != "auto":
            return None
        if out.records or out.quarantined:
            if known == "browser":  # a probe over HTTP gave records: HTTP will do again
                rt.page_types[key] = "http"
                a.learnt = (pattern, "http")
                _log_learnt(a)
            return None
        if self._suspect(a) and b"<script" in result.body[:_SCRIPT_SCAN].lower():
            return self._to_browser(a, "no record over HTTP from a scripted page")
        return None

    def _judge(self, a: Attempt) -> str | None:
        """The fetcher a browser page's type needs: the callback's take from the rendered page
        against its take from the raw document (None when there is no raw document)."""
        result, rt = a.result, a.job.runtime
        assert result is not None
        rendered = getattr(result, "rendered_html", None)
        if not isinstance(rendered, str) or not result.body:
            return None

        def sample(body: bytes, encoding: str | None) -> tuple[int, int]:
            response = _page(a, body, encoding, _none_unknown)
            return rt.sample(response, a.lease.callback)

        raw_items, raw_links = sample(result.body, None)
        items, links = sample(*_rendered_body(rendered))
        # a script that adds a link or two (a banner, a chat widget) is not content
        if items > raw_items or links > raw_links + max(2, raw_links // 10):
            return "browser"
        return "http"

    def done(self, a: Attempt) -> Verdict:
        return self._completion(a)

    @staticmethod
    def _suspect(a: Attempt) -> bool:
        """An ``auto`` page over HTTP whose type was not judged fine over HTTP already."""
        if a.lease.fetcher != "auto" or a.fetcher is None or a.fetcher.kind != "http":
            return False
        key = (a.lease.domain, page_type(a.lease.url))
        return a.job.runtime.page_types.get(key) != "http"

    def _to_browser(self, a: Attempt, why: str) -> Failure:
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

    # -- verdicts -------------------------------------------------------------------------------

    def _response(self, a: Attempt) -> Response:
        if a.response is not None:
            return a.response
        result = a.result
        assert result is not None
        body, encoding = result.body, None
        rendered = getattr(result, "rendered_html", None)  # a browser fetch: parse the DOM
        if isinstance(rendered, str) and rendered:
            body, encoding = _rendered_body(rendered)
        a.response = _page(a, body, encoding, a.job.runtime.unknown_links)
        return a.response

    def _completion(self, a: Attempt) -> Completion:
        result, out = a.result, a.output
        assert result is not None
        return Completion(
            a.lease.ref,
            result.status,
            records=out.records if out else (),
            quarantined=out.quarantined if out else (),
            discovered=out.discovered if out else (),
            content_hash=a.digest,
            elapsed=a.elapsed or 0.0,
            nbytes=len(result.body),
            started_at=a.started_at,
            page_type=a.learnt,
        )

    def _fail(
        self,
        a: Attempt,
        outcome: Outcome,
        error: str,
        *,
        kind: str | None = None,
        retry: float | None = None,
        dead: DeadReason | None = None,
    ) -> Failure:
        a.outcome = outcome
        status = a.result.status if a.result is not None else None
        if dead is not None:
            a.decision = RetryDecision(None, dead, error)
        else:
            a.decision = decide(
                outcome=outcome,
                attempts=a.lease.attempts,
                max_attempts=a.lease.max_attempts,
                now=self.clock(),
                rand=self.rng.random(),
                status=status,
                error_kind=kind,
                retry_after=retry,
                base=self.settings.retry_base,
                cap=self.settings.retry_cap,
            )
        proxy = a.error if isinstance(a.error, ProxyError) else None
        signal = None
        if proxy is not None:  # the route failed, not the request: no attempt used
            signal = "refused" if proxy.reason in ("refused", "unreachable") else "error"
        elif outcome is Outcome.BLOCKED:
            signal = "block"
        free = proxy is not None or (signal == "block" and self._free_block(a))
        retry_at = a.decision.retry_at
        if free and retry_at is None:
            retry_at = self.clock() + self.settings.retry_base  # another route will carry it
        return Failure(
            a.lease.ref,
            error[:1000],
            retry_at=retry_at,
            dead_reason=None if free else a.decision.dead_reason,
            status=status,
            route=a.route.id if a.route is not None else None,
            outcome=outcome,
            latency=a.elapsed if a.result is not None else None,
            retry_after=retry,
            started_at=a.started_at,
            count_attempt=not free,
            route_signal=signal,
        )

    def _free_block(self, a: Attempt) -> bool:
        """Whether this block through a proxy route leaves the request's attempts alone: its
        session is retired and another route (or identity) tries it, up to :data:`FREE_BLOCKS`
        times per request."""
        if a.route is None or a.route.is_direct:
            return False
        seen = self._free_blocks.get(a.lease.id, 0)
        if seen >= FREE_BLOCKS:
            return False
        if len(self._free_blocks) >= _SLOTS_MAX:
            self._free_blocks.clear()
        self._free_blocks[a.lease.id] = seen + 1
        return True


def _log_learnt(a: Attempt) -> None:
    """Every change of a page type's fetcher is logged (and counted: its attempt's event)."""
    assert a.learnt is not None
    log.info("job %s: page type %s now fetched by %s (%s)", a.job.name, *a.learnt, a.lease.url)


def slot_start(slot: float, last: tuple[float, float] | None, now: float) -> float:
    """When a request of pacing slot ``slot`` starts, given the lane's previous slot here and
    its actual start (``last``): at its slot, or now if that has passed, but never closer to
    the previous start than :data:`SLOT_CATCH_UP` of the slots' spacing."""
    start = max(slot, now)
    if last is not None and slot > last[0]:
        start = max(start, last[1] + (slot - last[0]) * SLOT_CATCH_UP)
    return start


def _archived_body(lease: Lease) -> bytes | None:
    """The request body as archived: a form's password masked. The request's own Content-Type
    says whether it is a form (the final hop of a redirected POST sent none)."""
    if not lease.body:
        return lease.body
    return mask_form_secrets(lease.body, list((lease.headers or {}).items()))


def _rendered_body(rendered: str) -> tuple[bytes, str]:
    """A browser's rendered DOM as a page body and its encoding."""
    return rendered.encode("utf-8", "surrogatepass"), "utf-8"


def _page(
    a: Attempt,
    body: bytes,
    encoding: str | None,
    unknown_links: Callable[[list[str], str], list[str]] | None,
) -> Response:
    """The spider's Response for the attempt's result, with ``body`` as the page."""
    result = a.result
    assert result is not None
    return Response(
        result.url,
        result.status,
        result.header_map,
        body,
        encoding=encoding,
        meta=a.lease.meta,
        depth=a.lease.depth,
        request_url=a.lease.url,
        unknown_links=unknown_links,
    )


def _with_authorization(
    headers: Mapping[str, str] | None, authorization: str | None
) -> Mapping[str, str] | None:
    """The request's own headers, with the Basic credentials of its origin (split off its start
    URL at intake) unless the request sets ``Authorization`` itself."""
    if not authorization:
        return headers
    if headers and any(name.lower() == "authorization" for name in headers):
        return headers
    return {**(headers or {}), "Authorization": authorization}


def _plain_reason(result: FetchResult) -> str:
    """A short plain-text answer's first line (``": CSRF token missing"``): what a 4xx said
    about the request is worth keeping with its dead letter."""
    content_type = (result.header("content-type") or "").lower()
    if not content_type.startswith("text/plain") or len(result.body) > _PLAIN_REASON_MAX:
        return ""
    line = result.body.decode("utf-8", "replace").strip().split("\n", 1)[0].strip()
    return f": {line}" if line else ""


def _named(lease: Lease) -> str | None:
    """The session a request names (``meta["cookiejar"]``), if any."""
    name = lease.meta.get("cookiejar")
    return None if name is None else str(name)


def _form_cookiejar(a: Attempt) -> str | None:
    """The session a form the page submits names: the one that fetched the page, once it holds
    cookies (a CSRF token is tied to the cookie that came with the form; a login's answer sets
    the cookie its follow-ups need)."""
    if a.session is None:
        return None
    result = a.result
    got = result is not None and (result.hop_cookies or "set-cookie" in result.header_map)
    return a.session.id if a.session.cookies or got else None


def _browser_request(request: FetchRequest, a: Attempt) -> FetchRequest:
    """What the spider asks of the browser for this page: a selector to wait for (the
    request's ``meta["wait_for"]``, else the spider's ``wait_for``) and its ``page_actions``."""
    from dataclasses import fields

    from crawlfleet.fetch.browser.request import BrowserRequest

    spider = a.job.runtime.spider
    wait_for = a.lease.meta.get("wait_for") or getattr(spider, "wait_for", None)
    actions = getattr(spider, "page_actions", None)
    plain = {f.name: getattr(request, f.name) for f in fields(request)}
    return BrowserRequest(**plain, wait_for=wait_for, actions=actions)


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


def _none_unknown(hrefs: list[str], base: str) -> list[str]:
    return []  # a dry run: links are counted, no Request is built


def _refetch(verdict: Verdict) -> bool:
    return isinstance(verdict, Failure) and verdict.refetch_with is not None


def _event(a: Attempt, verdict: Verdict) -> AttemptEvent:
    result, out = a.result, a.output
    dead = verdict.dead_reason if isinstance(verdict, Failure) else None
    if isinstance(verdict, Failure) and verdict.retry_at is None and dead is None:
        dead = DeadReason.TOO_MANY_RETRIES
    return AttemptEvent(
        job=a.job.name,
        lane=a.lane,
        domain=a.lease.domain,
        fetcher=a.fetcher.kind if a.fetcher is not None else "none",
        # given back, or sent to another fetcher: nothing happened to this attempt's outcome
        outcome=None if isinstance(verdict, GiveBack) or _refetch(verdict) else a.outcome,
        route=a.route.id if a.route is not None else None,
        status=result.status if result is not None else None,
        error_kind=a.error.kind if a.error is not None else None,
        latency=a.elapsed,
        nbytes=len(result.body) if result is not None else 0,
        records=len(out.records) if out else 0,
        quarantined=len(out.quarantined) if out else 0,
        traps=out.traps if out else 0,
        robots_dropped=out.robots_dropped if out else 0,
        links_dropped=out.links_dropped if out else 0,
        refused=sum(out.refused.values()) if out else 0,
        duplicate=a.earlier is not None,
        gone=a.outcome is Outcome.GONE,
        retry=isinstance(verdict, Failure) and verdict.retry_at is not None,
        dead_reason=dead,
        attempts=a.lease.attempts,
        block_reason=a.block_reason,
        escalated=a.learnt[1] if a.learnt else None,
    )
