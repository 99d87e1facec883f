"""The loop every process that runs with the store may run: keep the runs' quality (checks,
closing finished runs, the sinks' batches) and deliver the outbox.

::

    await keep(store, settings, owner=worker_id)     # until cancelled (or ``stop`` is set)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Final

from crawlfleet.errors import StoreError
from crawlfleet.notify.deliver import Deliverer
from crawlfleet.notify.destinations import destinations
from crawlfleet.notify.keeper import QualityKeeper

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.frontier.ports import Frontier

__all__ = ["KEEP_EVERY", "emit_fleet_alerts", "finish_job", "keep"]

log = logging.getLogger("crawlfleet.notify")

#: seconds between two looks at the runs (a run's checks are every [quality] check_every)
KEEP_EVERY: Final = 5.0
#: seconds between two prunes of the outbox by one process
PRUNE_EVERY: Final = 3600.0
#: seconds between two looks of one process at the fleet's alerts (status's, the dashboard's)
FLEET_EVERY: Final = 60.0
#: a fleet alert that keeps firing is sent again after this many seconds (its key's period)
FLEET_REPEAT: Final = 3600.0
#: the fleet alerts sent through the outbox here (worker_local_fault is sent by its worker)
FLEET_RULES: Final = ("no_worker_alive", "worker_stale", "oldest_queued_age")


async def keep(
    store: Frontier,
    settings: Settings,
    *,
    owner: str,
    jobs: Sequence[str] | None = None,
    every: float = KEEP_EVERY,
    stop: asyncio.Event | None = None,
) -> None:
    """Keep the runs' quality and deliver the outbox until cancelled or ``stop`` is set."""
    stop = stop or asyncio.Event()
    dests = destinations(settings)
    keeper = QualityKeeper(store, settings, dests, jobs=jobs)
    async with Deliverer(store, dests, settings.notify, owner=owner) as deliverer:
        sending = asyncio.create_task(deliverer.run(stop), name="deliver")
        pruned = time.monotonic()
        fleet_at = -FLEET_EVERY
        try:
            while not stop.is_set():
                try:
                    await keeper.tick()
                    if time.monotonic() - pruned >= PRUNE_EVERY:
                        pruned = time.monotonic()
                        await store.prune_outbox(time.time() - settings.notify.keep_delivered)
                    if dests and time.monotonic() - fleet_at >= FLEET_EVERY:
                        fleet_at = time.monotonic()
                        await emit_fleet_alerts(store, settings, time.time())
                except StoreError as exc:  # the store is away: the other loops say so
                    log.debug("quality upkeep skipped: %s", exc)
                except Exception:  # never stop the process for it
                    log.exception("quality upkeep failed")
                with suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), every)
        finally:
            stop.set()
            with suppress(asyncio.CancelledError):
                await sending


async def emit_fleet_alerts(store: Frontier, settings: Settings, now: float) -> int:
    """Queue the fleet alerts firing now (:data:`FLEET_RULES`, as ``status`` shows them) for
    the destinations that take alerts; each subject at most once per :data:`FLEET_REPEAT`
    seconds across the fleet (the event's key). Returns how many were new."""
    from crawlfleet.frontier.outbox import OutboxEvent
    from crawlfleet.monitor.overview import read_overview
    from crawlfleet.notify.payloads import dumps, fleet_alert_body

    targets = tuple(d.id for d in destinations(settings) if d.wants("alert"))
    if not targets:
        return 0
    c = settings.control
    ov = await read_overview(store, now, rules=c.alert_rules(), alive_after=c.alive_after)
    events = []
    for a in ov.alerts:
        if a.rule not in FLEET_RULES:
            continue
        key = f"alert:fleet:{a.rule}:{a.subject}:{int(now // FLEET_REPEAT)}"
        job = a.subject.split("/", 1)[0] if a.rule == "oldest_queued_age" else None
        body = fleet_alert_body(
            key, a.rule, a.subject, a.message, value=a.value, threshold=a.threshold, at=now, job=job
        )
        events.append(
            OutboxEvent(key, "alert", dumps(body), targets, job, None, settings.notify.tries)
        )
    return await store.emit(events) if events else 0


async def finish_job(
    store: Frontier, settings: Settings, job: str, *, owner: str, deliver_for: float = 10.0
) -> bool:
    """Close the job's finished run now (if no one did), feed its sinks, and deliver what is
    due for up to ``deliver_for`` seconds (what is left waits in the outbox for the next
    process); returns whether nothing was left due."""
    dests = destinations(settings)
    keeper = QualityKeeper(store, settings, dests, jobs=[job])
    await keeper.tick()
    if not dests:
        return True
    async with Deliverer(store, dests, settings.notify, owner=owner) as deliverer:
        return await deliverer.drain(deliver_for)
