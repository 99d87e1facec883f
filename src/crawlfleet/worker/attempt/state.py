"""The value an attempt carries through its steps, and the verdicts it can end with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawlfleet.model import Completion, Failure, Lease, LeaseRef, Outcome
from crawlfleet.request import STORED

if TYPE_CHECKING:
    from crawlfleet.data.warc import Capture, WarcRef
    from crawlfleet.errors import FetchError
    from crawlfleet.fetch.base import Fetcher, FetchResult
    from crawlfleet.policy.retry import RetryDecision
    from crawlfleet.response import Response
    from crawlfleet.routes.pools import Route
    from crawlfleet.routes.sessions import Session
    from crawlfleet.worker.extract import PageOutput
    from crawlfleet.worker.jobs import JobContext

__all__ = ["Attempt", "GiveBack", "Verdict"]


@dataclass(frozen=True, slots=True)
class GiveBack:
    """Release the lease unfetched: no attempt used."""

    lease: LeaseRef
    why: str


#: how an attempt ends: a completion, a failure (retry or dead), or the lease given back
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
    digest: bytes | None = None  # the decoded body's SHA-1: the page's content hash
    payload_digest: bytes | None = None  # the archived payload's (as received): the WARC's
    earlier: Capture | None = None  # the first capture of the same payload, if any
    outcome: Outcome | None = None
    block_reason: str | None = None
    output: PageOutput | None = None
    decision: RetryDecision | None = None
    response: Response | None = None  # built once: the spider's block test and parse share it
    learnt: tuple[str, str] | None = None  # a page type's fetcher learnt here (auto)

    @property
    def domain(self) -> str:
        """The domain of the lease's lane (its route is ``lease.route``)."""
        return self.lease.domain

    @property
    def lane(self) -> tuple[str, str]:
        """The unit of pacing the lease belongs to: (domain, route)."""
        return (self.lease.domain, self.lease.route)

    def named_session(self) -> str | None:
        """The session the request names (``meta["cookiejar"]``), if any."""
        name = self.lease.meta.get("cookiejar")
        return None if name is None else str(name)

    def followed_session(self) -> str | None:
        """The session of the page that yielded the request, when it held cookies (the
        request goes on with them: see ``crawlfleet.routes.identities``), if any."""
        own = self.lease.meta.get(STORED) if self.lease.meta else None
        name = own.get("session") if isinstance(own, dict) else None
        return None if name is None else str(name)
