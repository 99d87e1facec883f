"""One attempt at a leased request, through its steps, to a verdict for the store::

    pace slot → robots gate → fetch → not modified → snapshot → classify → parse → escalate
    → verdict (→ errback, when the verdict is a dead letter)

An :class:`Attempt` (``state.py``) is the value that travels: the lease, its job, route and
session, what came back, its WARC record. Each step is a small object (a module each, listed
once in :class:`Pipeline` in the order they run) that reads it, adds to it, and either passes it
on (returns None) or ends the attempt with its verdict: a :class:`~crawlfleet.model.Completion`
(data, or a final answer such as a 404), a :class:`~crawlfleet.model.Failure` (retry later, or
dead, as the pure retry policy decides: ``verdict.py``), or :class:`GiveBack` (release
unfetched: the job cannot run here, or robots.txt's Crawl-delay came after the lease). Whatever
the ending, one :class:`~crawlfleet.events.AttemptEvent` goes to the observers. The worker's
loops only start attempts and carry their verdicts to the store.

The steps are built once per worker and own their state (the lanes' last slots, the free blocks
per request, the callback thread): an attempt allocates nothing but itself.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from crawlfleet.events import EventBus
from crawlfleet.model import Failure, Outcome
from crawlfleet.policy.retry import parse_retry_after
from crawlfleet.routes.identities import Identities
from crawlfleet.worker.attempt.classify import Classify
from crawlfleet.worker.attempt.errback import Errback
from crawlfleet.worker.attempt.escalate import Escalate
from crawlfleet.worker.attempt.fetch import Fetch
from crawlfleet.worker.attempt.gate import RobotsGate
from crawlfleet.worker.attempt.not_modified import NotModified
from crawlfleet.worker.attempt.pace import PaceSlot, slot_start
from crawlfleet.worker.attempt.parse import Parse
from crawlfleet.worker.attempt.snapshot import Snapshot
from crawlfleet.worker.attempt.state import Attempt, GiveBack, Verdict
from crawlfleet.worker.attempt.verdict import FREE_BLOCKS, Verdicts, event
from crawlfleet.worker.offloop import OffLoop

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.model import Lease
    from crawlfleet.worker.jobs import JobContext

__all__ = ["FREE_BLOCKS", "Attempt", "GiveBack", "Pipeline", "Step", "Verdict", "slot_start"]


class Step(Protocol):
    """One step of an attempt: None passes the attempt on, a verdict ends it."""

    async def __call__(self, a: Attempt, /) -> Verdict | None: ...


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
        self.identities = identities
        #: the thread spider callbacks run in (the event loop keeps answering meanwhile)
        self.offloop = OffLoop()
        self.verdicts = Verdicts(settings, clock, rng or random.Random())
        escalate = Escalate(self.offloop, clock)
        #: after the verdict: a dead request's errback
        self.errback = Errback(self.offloop)
        #: the first step: it also holds a lane a 429 came back through (see ``run``)
        self.pace = PaceSlot(clock)
        self.fetch = Fetch(self.verdicts, clock, identities)
        #: the steps, in the order they run
        self.steps: tuple[Step, ...] = (
            self.pace,
            RobotsGate(self.verdicts, clock),
            self.fetch,
            NotModified(self.verdicts, clock),
            Snapshot(clock),
            Classify(self.verdicts, escalate, clock),
            Parse(self.verdicts, self.offloop, clock),
            escalate,
        )

    async def run(self, job: JobContext, lease: Lease) -> Verdict:
        """The whole life of one attempt; emits its event and returns its verdict."""
        a = Attempt(lease, job)
        verdict: Verdict | None = None
        for step in self.steps:
            verdict = await step(a)
            if a.result is not None and a.result.status == 429 and step is self.fetch:
                # the host refused the lane's pace: its other leases here wait, from now on,
                # not from when this answer has been archived and classified (PaceSlot.hold)
                said = parse_retry_after(a.result.header_map.get("retry-after"), self.clock())
                self.pace.hold(a.lane, said)
            if verdict is not None:
                break
        else:
            verdict = self.verdicts.completion(a)
        if isinstance(verdict, Failure) and verdict.dead_reason is not None:
            await self.errback(a, verdict)
        self._fold_session(a)
        self.events.emit(event(a, verdict))
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
