"""The robots gate: robots.txt (RFC 9309) allows the URL, postpones its host, or refuses it."""

from __future__ import annotations

from collections.abc import Callable

from crawlfleet.fetch.robots import Gate
from crawlfleet.model import DeadReason, Failure, Outcome
from crawlfleet.worker.attempt.state import Attempt, GiveBack, Verdict
from crawlfleet.worker.attempt.verdict import Verdicts

__all__ = ["LOCAL_RETRY", "RobotsGate"]

#: seconds before a request whose robots.txt the worker could not fetch (its own fault) is
#: tried again
LOCAL_RETRY = 1.0


class RobotsGate:
    def __init__(self, verdicts: Verdicts, clock: Callable[[], float]) -> None:
        self.verdicts = verdicts
        self.clock = clock

    async def __call__(self, a: Attempt) -> Verdict | None:
        gate = a.job.robots
        if gate is None:
            return None
        match await gate.check(a.lease):
            case Gate.ALLOW:
                return None
            case Gate.GIVE_BACK:
                return GiveBack(a.lease.ref, "robots.txt Crawl-delay: paced again")
            case Gate.LOCAL:
                # the worker's fault (out of descriptors): no attempt used, nothing for the
                # host's pacing to learn, tried again soon
                return Failure(
                    a.lease.ref,
                    f"robots.txt not fetched ({gate.why(a.lease.url)}): retried",
                    retry_at=self.clock() + LOCAL_RETRY,
                    outcome=None,
                    count_attempt=False,
                )
            case Gate.HOST_DOWN:
                return self.verdicts.fail(
                    a,
                    Outcome.RETRYABLE_ERROR,
                    f"host unreachable for over {gate.down_give_up:g}s "
                    f"({gate.why(a.lease.url)}): given up",
                    dead=DeadReason.HOST_UNREACHABLE,
                )
            case Gate.UNREACHABLE:
                recheck = gate.recheck_for(a.lease.url)
                a.outcome = Outcome.ROBOTS
                # the store names the hosts whose requests wait so (progress line, status): a
                # request never waits unseen, and the line says why
                return Failure(
                    a.lease.ref,
                    f"robots.txt unreachable ({gate.why(a.lease.url)}): host postponed",
                    retry_at=self.clock() + recheck,
                    outcome=Outcome.ROBOTS,
                    retry_after=recheck,
                    count_attempt=False,
                )
            case Gate.UNAVAILABLE:
                return self.verdicts.fail(
                    a,
                    Outcome.ROBOTS,
                    f"robots.txt unreachable for over {gate.give_up:g}s "
                    f"({gate.why(a.lease.url)}): given up",
                    dead=DeadReason.ROBOTS_UNAVAILABLE,
                )
        return self.verdicts.fail(a, Outcome.ROBOTS, "robots.txt disallows this URL")
