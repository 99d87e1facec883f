"""What one ``serve`` holds: the store, the newest overview (read at most once a second, however
many pages, API clients and Prometheus ask), and the history the charts draw."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from crawlfleet.control.history import History
from crawlfleet.errors import CrawlfleetError
from crawlfleet.monitor.overview import Overview, read_overview

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.frontier.ports import Frontier

__all__ = ["ControlState"]

log = logging.getLogger("crawlfleet.control")

#: seconds an overview is served before the store is read again
REFRESH: Final = 1.0


class ControlState:
    """The store, its newest overview and its history, for the handlers of one ``serve``."""

    def __init__(
        self,
        store: Frontier,
        settings: Settings,
        *,
        history: int = 720,
        refresh: float = REFRESH,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.settings = settings
        self.rules = settings.control.alert_rules()
        self.alive_after = settings.control.alive_after
        pools = settings.routes.pools
        # the masked proxy URL of every route this process knows (never its password)
        self.proxies = {r.id: r.display for r in pools.routes()} if pools is not None else {}
        self.history = History(history)
        self.refresh = refresh
        self.clock = clock
        self._overview: Overview | None = None
        self._lock = asyncio.Lock()

    async def overview(self, max_age: float | None = None) -> Overview:
        """The newest overview, read again when older than ``max_age`` (default: a second)."""
        limit = self.refresh if max_age is None else max_age
        async with self._lock:
            ov = self._overview
            if ov is None or self.clock() - ov.at >= limit:
                ov = self._overview = await read_overview(
                    self.store,
                    self.clock(),
                    rules=self.rules,
                    alive_after=self.alive_after,
                    proxies=self.proxies,
                )
            return ov

    def changed(self) -> None:
        """A change was made (pause, replay...): the next read goes to the store."""
        self._overview = None

    async def sample(self, every: float) -> None:
        """Add an overview to the history every ``every`` seconds, until cancelled."""
        while True:
            try:
                self.history.add(await self.overview(max_age=0))
            except CrawlfleetError as exc:  # a store hiccup: the next sample tries again
                log.warning("cannot read the store: %s", exc)
            await asyncio.sleep(every)
