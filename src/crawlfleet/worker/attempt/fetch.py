"""The fetch step: the lease's route and session, its origin's credentials, then the fetcher
of its kind; every redirect hop is checked against the crawl's scope and robots.txt first."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from crawlfleet.errors import FetchError, OutOfScope
from crawlfleet.fetch.base import FetchRequest, HopCheck
from crawlfleet.model import Failure
from crawlfleet.policy.classify import outcome_for_error
from crawlfleet.routes.identities import Identities
from crawlfleet.routes.pools import DIRECT
from crawlfleet.urls import host_of, in_scope, origin_of
from crawlfleet.worker.attempt.state import Attempt, Verdict
from crawlfleet.worker.attempt.verdict import Verdicts
from crawlfleet.worker.revisit import conditional_headers

__all__ = ["UNKNOWN_ROUTE_WAIT", "Fetch"]

log = logging.getLogger("crawlfleet.worker")

#: seconds before a request of a route this worker does not know is offered again
UNKNOWN_ROUTE_WAIT = 60.0


class Fetch:
    def __init__(
        self, verdicts: Verdicts, clock: Callable[[], float], identities: Identities | None
    ) -> None:
        self.verdicts = verdicts
        self.clock = clock
        self.identities = identities

    async def __call__(self, a: Attempt) -> Verdict | None:
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
                a.job.name,
                a.route,
                a.named_session(),
                since=lease.start_at,
                follow=a.followed_session(),
            )
        authorization = a.job.runtime.authorization.get(origin_of(lease.url))
        request = FetchRequest(
            lease.url,
            method=lease.method,
            body=lease.body,
            headers=_with_authorization(conditional_headers(lease, lease.headers), authorization),
            check_hop=_hop_check(a),
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
            return self.verdicts.fail(
                a, outcome_for_error(exc), f"{exc.kind}: {exc}", kind=exc.kind
            )
        a.elapsed = time.perf_counter() - started
        if a.fetcher.kind == "browser" and a.result.elapsed > 0:
            # the document's answer time: the wait for a free context and the rendering are
            # this worker's, and pacing would read them as the site's load
            a.elapsed = a.result.elapsed
        return None


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
