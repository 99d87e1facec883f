"""The first step: wait for the lease's pacing slot (the store spaces a lane's starts)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from crawlfleet.worker.attempt.state import Attempt, Verdict

__all__ = ["SLOT_CATCH_UP", "PaceSlot", "slot_start"]

#: share of a slot's spacing kept when a worker starts late slots (see :class:`PaceSlot`)
SLOT_CATCH_UP = 0.9
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
    start here, so the lag is made up gently, below the pace the store set."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        #: per lane: the last slot this worker honoured, and when that request actually started
        self._slots: dict[tuple[str, str], tuple[float, float]] = {}

    async def __call__(self, a: Attempt) -> Verdict | None:
        slot, now = a.lease.start_at, self.clock()
        start = slot_start(slot, self._slots.get(a.lane), now)
        if len(self._slots) >= _LANES_MAX:
            self._slots.clear()
        self._slots[a.lane] = (slot, start)
        wait = start - now
        if wait > 0:
            await asyncio.sleep(wait)
        return None
