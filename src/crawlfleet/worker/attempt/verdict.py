"""How an attempt's ending becomes its verdict for the store, and its one event.

:class:`Verdicts` turns a failure into a :class:`~crawlfleet.model.Failure` with the pure retry
policy's decision, the route blamed when the route was at fault, and the blocks through a proxy
route that leave a request's attempts alone (:data:`FREE_BLOCKS`, counted per worker); a page
into a :class:`~crawlfleet.model.Completion`. :func:`event` is the attempt as observers see it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from crawlfleet.data.warc import Capture
from crawlfleet.errors import LocalResourceError, ProxyError
from crawlfleet.events import AttemptEvent
from crawlfleet.model import Completion, DeadReason, Failure, Outcome
from crawlfleet.policy.retry import RetryDecision, decide
from crawlfleet.worker.attempt.state import Attempt, GiveBack, Verdict
from crawlfleet.worker.revisit import page_after, revisit_rule, visit_of

if TYPE_CHECKING:
    from crawlfleet.config import Settings

__all__ = ["FREE_BLOCKS", "Verdicts", "event"]

#: blocks through a proxy route that a request may meet without using up an attempt (the route
#: or its session was at fault, not the request; counted per worker, so bounded)
FREE_BLOCKS = 3
#: most requests whose free blocks a worker remembers
_REMEMBERED_MAX = 10_000


class Verdicts:
    """The verdicts of one worker's attempts; owns the count of free blocks per request."""

    def __init__(self, settings: Settings, clock: Callable[[], float], rng: random.Random) -> None:
        self.settings = settings
        self.clock = clock
        self.rng = rng
        self._free_blocks: dict[int, int] = {}

    def completion(self, a: Attempt, *, carry: bool = False) -> Completion:
        """The attempt's completion, with what the page keeps for the next run (validators,
        body hash, revisit interval, last capture) and what this visit found; ``carry``: the
        page was not parsed, its records of the last run are carried over."""
        result, out = a.result, a.output
        assert result is not None
        visit = visit_of(a.lease, result.status, a.digest)
        capture = a.earlier
        if a.warc is not None and not a.warc.revisit:
            ref = a.warc
            capture = Capture(a.job.raw.locate(ref.file), ref.record_id, ref.target_uri, ref.date)
        page, interval = page_after(
            a.lease,
            visit,
            status=result.status,
            headers=result.header_map,
            digest=a.digest,
            rule=revisit_rule(a.job.runtime.spider_cls, a.lease.callback),
            capture=capture,
        )
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
            page=page,
            visit=visit,
            carry=carry,
            revisit=interval,
        )

    def fail(
        self,
        a: Attempt,
        outcome: Outcome,
        error: str,
        *,
        kind: str | None = None,
        retry: float | None = None,
        dead: DeadReason | None = None,
    ) -> Failure:
        """The attempt failed with ``outcome``: retry later or dead (``dead`` forces it), as
        the retry policy decides; a failure of the route uses no attempt of the request."""
        a.outcome = outcome
        status = a.result.status if a.result is not None else None
        if isinstance(a.error, LocalResourceError):
            # the worker ran out (file descriptors, ports): not the host's fault nor the
            # request's; no attempt used, nothing for the lane's pacing or the route to learn
            a.outcome = None
            a.decision = RetryDecision(self.clock() + self.settings.retry_base, None, error)
            return Failure(
                a.lease.ref,
                error[:1000],
                retry_at=a.decision.retry_at,
                outcome=None,
                started_at=a.started_at,
                count_attempt=False,
            )
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
        if len(self._free_blocks) >= _REMEMBERED_MAX:
            self._free_blocks.clear()
        self._free_blocks[a.lease.id] = seen + 1
        return True


def _refetch(verdict: Verdict) -> bool:
    return isinstance(verdict, Failure) and verdict.refetch_with is not None


def event(a: Attempt, verdict: Verdict) -> AttemptEvent:
    """The attempt as it ended, for the observers (metrics, logs): one per attempt."""
    result, out = a.result, a.output
    dead = verdict.dead_reason if isinstance(verdict, Failure) else None
    if isinstance(verdict, Failure) and verdict.retry_at is None and dead is None:
        dead = DeadReason.TOO_MANY_RETRIES
    return AttemptEvent(
        job=a.job.name,
        domain=a.lease.domain,
        fetcher=a.fetcher.kind if a.fetcher is not None else "none",
        # given back, or sent to another fetcher: nothing happened to this attempt's outcome
        # (a page sent up the ladder was blocked: it counts as such, on its rung)
        outcome=None
        if isinstance(verdict, GiveBack) or (_refetch(verdict) and a.outcome is None)
        else a.outcome,
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
