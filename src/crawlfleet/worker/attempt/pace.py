"""The first step: wait for the lease's pacing slot (the store spaces a lane's starts), unless
the lane was told to wait (a 429 came back through it): then the lease goes back unfetched."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from crawlfleet.worker.attempt.state import Attempt, GiveBack, Verdict

__all__ = ["HOLD_CAP", "HOLD_DEFAULT", "SLOT_CATCH_UP", "PaceSlot", "slot_start"]

#: share of a slot's spacing kept when a worker starts late slots (see :class:`PaceSlot`)
SLOT_CATCH_UP = 0.9
#: seconds a 429 without a usable Retry-After holds its lane here, and the most any does: past
#: the report that carries the 429, the store holds the lane itself (its pacing) and leases
#: nothing of it before then, so a longer local hold would only give back what it never gets
HOLD_DEFAULT = 1.0
HOLD_CAP = 60.0
_LANES_MAX = 10_000


def slot_start(slot: float, last: tuple[float, float] | None, now: float) -> float:
    """When a request of pacing slot ``slot`` starts, given the lane's previous slot here and
    its actual start (``last``): at its slot, or now if that has passed, but never closer to
    the previous start than :data:`SLOT_CATCH_UP` of the slots' spacing."""
    start = max(slot, now)
    if last is not None and slot > last[0]:
        start = max(start, last[1] + (slot - last[0]) * SLOT_CATCH_UP)
    return start


class PaceSlot:
    """Wait for the lease's slot. A worker that fell behind (a busy CPU, a pause) must not
    start its late slots all at once: that burst is what a per-second rate limit answers with
    429. A slot keeps at least :data:`SLOT_CATCH_UP` of its spacing from the lane's previous
    start here, so the lag is made up gently, below the pace the store set.

    A 429 through a lane (:meth:`hold`) stops this worker's starts on it at once, before the
    store hears of it: the leases it already holds for the lane were spaced at the pace the
    host just refused, and each would earn another 429 (a limiter that counts refusals turns
    them into a captcha wall for the route). Those whose slot comes while the lane is held go
    back unfetched (no attempt used), to be leased again at the pace the store sets after the
    429, on this route or another."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        #: per lane: the last slot this worker honoured, and when that request actually started
        self._slots: dict[tuple[str, str], tuple[float, float]] = {}
        #: per lane: no request starts on it here before this time (a 429's Retry-After)
        self._held: dict[tuple[str, str], float] = {}

    def hold(self, lane: tuple[str, str], seconds: float | None) -> None:
        """A 429 came back through ``lane`` saying ``seconds`` (its Retry-After; None:
        :data:`HOLD_DEFAULT`): start nothing more on it here until then."""
        now = self.clock()
        wait = HOLD_DEFAULT if seconds is None else min(max(seconds, 0.0), HOLD_CAP)
        if len(self._held) >= _LANES_MAX:
            self._held = {k: v for k, v in self._held.items() if v > now}
        self._held[lane] = max(self._held.get(lane, 0.0), now + wait)

    def held(self, lane: tuple[str, str]) -> bool:
        """Whether ``lane`` is on hold here now."""
        until = self._held.get(lane)
        if until is None:
            return False
        if until <= self.clock():
            del self._held[lane]
            return False
        return True

    async def __call__(self, a: Attempt) -> Verdict | None:
        if self.held(a.lane):
            return GiveBack(a.lease.ref, "lane on hold: a 429 came back through it")
        slot, now = a.lease.start_at, self.clock()
        start = slot_start(slot, self._slots.get(a.lane), now)
        if len(self._slots) >= _LANES_MAX:
            self._slots.clear()
        self._slots[a.lane] = (slot, start)  # before the wait: the lane's next lease reads it
        wait = start - now
        if wait > 0:
            await asyncio.sleep(wait)
            if self.held(a.lane):  # a 429 came while this one waited for its slot
                return GiveBack(a.lease.ref, "lane on hold: a 429 came back through it")
        return None
