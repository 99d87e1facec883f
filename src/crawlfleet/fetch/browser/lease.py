"""The pool's bookkeeping: one slot per context, the lease a fetch holds, the counters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crawlfleet.fetch.browser import procs
from crawlfleet.fetch.browser.launcher import ContextKey

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

    from crawlfleet.fetch.browser.routing import ContextRouter


@dataclass
class PoolStats:
    """Counters of one pool since it started."""

    launches: int = 0
    restarts: Counter[str] = field(default_factory=Counter)
    """By reason: ``pages``, ``memory``, ``broken``."""
    contexts_opened: int = 0
    contexts_closed: Counter[str] = field(default_factory=Counter)
    """By reason: ``recycled``, ``retired``, ``evicted``, ``timeout``, ``crash``, ``restart``..."""
    pages: int = 0
    admission_waits: int = 0
    swept: int = 0
    """Orphaned Chromium processes of dead workers killed when the pool started."""
    memory: procs.Memory | None = None
    """Last sample of the browser's memory."""
    peak_anon: int = 0
    peak_rss: int = 0
    """Peaks of the samples (taken at most every ``memory_interval``, before admissions)."""
    contexts_limit: int = 0
    """Contexts the browser may have now (fewer than ``contexts`` after a budget too small
    for them all)."""


class Slot:
    """One context of the pool (``context`` is None until it is opened)."""

    __slots__ = (
        "busy",
        "context",
        "generation",
        "key",
        "last_used",
        "page",
        "pages",
        "retired",
        "router",
    )

    def __init__(self, key: ContextKey, generation: int) -> None:
        self.key = key
        self.generation = generation
        self.context: BrowserContext | None = None
        self.page: Page | None = None
        self.router: ContextRouter | None = None
        self.pages = 0
        self.busy = True
        self.retired = False
        self.last_used = 0.0


class PageLease:
    """A page of the pool, checked out for one fetch."""

    __slots__ = ("_slot", "discard_reason", "fresh_page")

    def __init__(self, slot: Slot) -> None:
        self._slot = slot
        self.discard_reason: str | None = None
        self.fresh_page = False

    @property
    def page(self) -> Page:
        assert self._slot.page is not None  # opened before the lease is handed out
        return self._slot.page

    @property
    def router(self) -> ContextRouter:
        assert self._slot.router is not None
        return self._slot.router

    @property
    def key(self) -> ContextKey:
        return self._slot.key

    @property
    def context(self) -> BrowserContext:
        assert self._slot.context is not None
        return self._slot.context

    @property
    def context_pages(self) -> int:
        """Pages this context has served, this one included."""
        return self._slot.pages

    @property
    def generation(self) -> int:
        """Which launch of the browser this page belongs to (1 for the first)."""
        return self._slot.generation

    def discard(self, reason: str) -> None:
        """Close this page's context when the lease ends (after a timeout or a crash)."""
        self.discard_reason = reason

    def replace_page(self) -> None:
        """Close this page (not its context) when the lease ends: after a failed navigation
        the browser may still commit its error page, which would interrupt the next one."""
        self.fresh_page = True
