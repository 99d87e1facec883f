"""``BrowserPool``: one Chromium per worker process, N contexts, bounded memory.

A context is one session identity (cookies, user agent, proxy) with one page in flight at a
time, so N is also the pool's concurrency. The page of a context is reused from fetch to fetch
(opening one costs ~50 ms of browser time); the context is closed after M pages, when its
session is retired, when a fetch discards it (timeout, crash) or to make room for another
identity. The browser is restarted after K pages, past its memory budget (the memory of its
process group by ``memory_metric``, sampled from /proc at most every ``memory_interval``, just
before an admission) or when it broke; a
restart drains: new pages wait until the ones in flight are done. Above ``admit_fraction`` of
the budget a page starts only when none is in flight. A budget too small for N fresh contexts
lowers N (a restart would not help), rather than restarting again and again. The decisions are in
:mod:`~crawlfleet.fetch.browser.budget`; how no Chromium outlives its worker is in
:mod:`~crawlfleet.fetch.browser.procs`.

Usage::

    async with BrowserPool(BrowserSettings(contexts=4)) as pool:
        async with pool.page(ContextKey(session="s1")) as lease:
            await lease.page.goto(url)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Self

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import async_playwright

from crawlfleet.errors import FetchError
from crawlfleet.fetch.browser import procs
from crawlfleet.fetch.browser.budget import (
    Admission,
    PoolState,
    RestartReason,
    SlotChoice,
    SlotView,
    admission,
    choose_slot,
    context_spent,
    contexts_after_restart,
    restart_reason,
    sample_due,
)
from crawlfleet.fetch.browser.launcher import (
    ContextKey,
    LaunchedBrowser,
    check_executable,
    launch,
)
from crawlfleet.fetch.browser.lease import PageLease, PoolStats, Slot
from crawlfleet.fetch.browser.request import ContextSeed
from crawlfleet.fetch.browser.routing import GuardPolicy, RouteGuard
from crawlfleet.fetch.browser.settings import BrowserSettings
from crawlfleet.fetch.browser.trust import TrustHome, make_trust_home
from crawlfleet.fetch.tls import extra_authorities

if TYPE_CHECKING:
    from playwright.async_api import Browser, Playwright

__all__ = ["BrowserPool", "ContextKey", "PageLease", "PoolStats"]

log = logging.getLogger(__name__)


class BrowserPool:
    """One browser per worker process with N contexts; see the module docstring."""

    def __init__(
        self,
        settings: BrowserSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or BrowserSettings()
        self.stats = PoolStats(contexts_limit=self.settings.contexts)
        self._clock = clock
        self._guards: dict[GuardPolicy, RouteGuard] = {}
        self._cond = asyncio.Condition()
        self._slots: list[Slot] = []
        self._pw: Playwright | None = None
        self._browser: LaunchedBrowser | None = None
        self._runtime = procs.runtime_dir(self.settings.runtime_dir)
        self._trust: TrustHome | None = None  # the HOME whose NSS store trusts more CAs
        self._generation = 0
        self._pages_on_browser = 0
        self._in_flight = 0
        self._broken = False
        self._closed = False
        self._last_sample: float | None = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Sweep orphaned browsers of dead workers, then launch the browser."""
        if self._pw is not None:
            return
        check_executable(self.settings.executable)
        report = await asyncio.to_thread(procs.sweep_orphans, self._runtime)
        self.stats.swept = len(report.killed)
        if report.killed:
            log.warning("killed %d Chromium processes left by dead workers", len(report.killed))
        authorities = extra_authorities(self.settings.ca_file)
        self._trust = await asyncio.to_thread(
            make_trust_home, authorities, self.settings.runtime_dir
        )
        self._pw = await async_playwright().start()
        async with self._cond:
            await self._launch()

    async def close(self) -> None:
        """Close every context and the browser; no Chromium process of this pool survives."""
        if self._closed:
            return
        self._closed = True
        async with self._cond:
            self._cond.notify_all()
            slots, self._slots = self._slots, []
        for slot in slots:
            await self._close_slot(slot, "close")
        await self._close_browser()
        if self._trust is not None:
            self._trust.close()
        if self._pw is not None:
            with contextlib.suppress(PlaywrightError):
                await self._pw.stop()
            self._pw = None

    @property
    def browser_pid(self) -> int | None:
        """Process id of the running browser (its process group's leader), if known."""
        return self._browser.pid if self._browser else None

    @property
    def generation(self) -> int:
        """How many times the browser was launched."""
        return self._generation

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def contexts(self) -> list[tuple[ContextKey, int, bool]]:
        """``(key, pages served, busy)`` of every open context."""
        return [(s.key, s.pages, s.busy) for s in self._slots]

    def measure(self) -> procs.Memory | None:
        """Memory of the browser's processes now (blocking /proc read; None if unknown)."""
        browser = self._browser
        return browser.memory() if browser else None

    def browser_pss(self) -> int:
        """Summed proportional set size of the browser's processes (shared pages split)."""
        browser = self._browser
        return browser.pss() if browser else 0

    # -- pages -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def page(
        self, key: ContextKey | None = None, seed: ContextSeed | None = None
    ) -> AsyncIterator[PageLease]:
        """Check out a page of session identity ``key``, waiting for admission (``seed``:
        what the context starts with, if it has to be opened)."""
        slot = await self._checkout(key or ContextKey(), seed)
        lease = PageLease(slot)
        try:
            yield lease
        except BaseException as exc:
            if lease.discard_reason is None and not isinstance(exc, FetchError):
                # Cancelled, or failed in the caller's code: the page's state is unknown.
                lease.discard("aborted")
            raise
        finally:
            if lease.fresh_page and lease.discard_reason is None:
                await self._close_page(slot)
            await self._checkin(slot, lease.discard_reason)

    async def retire(self, session: str) -> int:
        """End session identity ``session``: its contexts are closed (busy ones once their
        page is done). Returns how many contexts it had."""
        async with self._cond:
            mine = [s for s in self._slots if s.key.session == session]
            idle = [s for s in mine if not s.busy]
            for s in mine:
                s.retired = True
            for s in idle:
                self._slots.remove(s)
        for s in idle:
            await self._close_slot(s, "retired")
        if idle:
            async with self._cond:
                self._cond.notify_all()
        return len(mine)

    async def _checkout(self, key: ContextKey, seed: ContextSeed | None) -> Slot:
        waited = False
        async with self._cond:
            while True:
                if self._closed or self._pw is None:
                    raise RuntimeError("BrowserPool used before start() or after close()")
                await self._maybe_sample()
                state = self._state()
                decision = admission(state, self.settings, self.stats.contexts_limit)
                if decision is Admission.RESTART:
                    await self._restart(restart_reason(state, self.settings))
                    continue
                choice = None
                if decision is Admission.ADMIT:
                    choice = choose_slot(self._views(), key, self.stats.contexts_limit)
                if choice is not None:
                    break
                waited = True
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settings.memory_interval):
                        await self._cond.wait()
            slot, victim = self._claim(choice, key)
            slot.pages += 1
            self._in_flight += 1
            self._pages_on_browser += 1
            self.stats.pages += 1
            self.stats.admission_waits += waited
        if victim is not None:
            await self._close_slot(victim, "evicted")
        try:
            await self._prepare(slot, seed)
        except BaseException:
            await self._checkin(slot, "failed")
            raise
        return slot

    def _claim(self, choice: SlotChoice, key: ContextKey) -> tuple[Slot, Slot | None]:
        victim = None
        if choice.action == "reuse":
            assert choice.index is not None
            slot = self._slots[choice.index]
            slot.busy = True
            return slot, None
        if choice.action == "evict":
            assert choice.index is not None
            victim = self._slots.pop(choice.index)
        slot = Slot(key, self._generation)
        self._slots.append(slot)
        return slot, victim

    async def _prepare(self, slot: Slot, seed: ContextSeed | None) -> None:
        """Open the slot's context and page if it has none yet."""
        if slot.context is None:
            assert self._browser is not None
            slot.context, slot.router = await self._browser.new_context(
                slot.key, self._guard_for(slot.key.guard), self.settings, seed
            )
            self.stats.contexts_opened += 1
        if slot.page is None or slot.page.is_closed():
            slot.page = await slot.context.new_page()

    def _guard_for(self, policy: GuardPolicy | None) -> RouteGuard:
        policy = policy or GuardPolicy.of(self.settings)
        guard = self._guards.get(policy)
        if guard is None:
            guard = self._guards[policy] = RouteGuard(policy, clock=self._clock)
        return guard

    async def _checkin(self, slot: Slot, discard: str | None) -> None:
        reason = discard
        if reason is None and slot.retired:
            reason = "retired"
        elif reason is None and context_spent(slot.pages, self.settings):
            reason = "recycled"
        elif reason is None and slot.generation != self._generation:
            reason = "restart"
        if reason is not None:
            await self._close_slot(slot, reason)
        async with self._cond:
            self._in_flight -= 1
            if reason is not None:
                with contextlib.suppress(ValueError):
                    self._slots.remove(slot)
            else:
                slot.busy = False
                slot.last_used = self._clock()
            self._cond.notify_all()

    def _views(self) -> list[SlotView]:
        return [SlotView(s.key, s.busy or s.retired, s.last_used) for s in self._slots]

    def _state(self) -> PoolState:
        mem, value = self.stats.memory, None
        if mem is not None:
            value = mem.anon if self.settings.memory_metric == "anon" else mem.rss
        return PoolState(self._in_flight, self._pages_on_browser, value, self._broken)

    async def _maybe_sample(self) -> None:
        now = self._clock()
        if not sample_due(self._last_sample, now, self.settings.memory_interval):
            return
        self._last_sample = now
        mem = await asyncio.to_thread(self.measure)
        self.stats.memory = mem
        if mem is not None:
            self.stats.peak_rss = max(self.stats.peak_rss, mem.rss)
            self.stats.peak_anon = max(self.stats.peak_anon, mem.anon)

    # -- contexts and the browser ----------------------------------------------------------------

    async def _close_page(self, slot: Slot) -> None:
        page, slot.page = slot.page, None
        if page is None:
            return
        try:
            async with asyncio.timeout(self.settings.close_timeout):
                await page.close()
        except (TimeoutError, PlaywrightError):
            slot.retired = True  # a context whose page will not close is closed with it

    async def _close_slot(self, slot: Slot, reason: str) -> None:
        context, slot.context, slot.page = slot.context, None, None
        if context is None:
            return
        self.stats.contexts_closed[reason] += 1
        try:
            async with asyncio.timeout(self.settings.close_timeout):
                await context.close()
        except TimeoutError:
            log.warning(
                "closing a browser context took over %ss: restarting the browser",
                self.settings.close_timeout,
            )
            self._broken = True
        except PlaywrightError:
            pass  # the browser went away with it

    async def _launch(self) -> None:
        assert self._pw is not None
        home = self._trust.path if self._trust is not None else None
        self._browser = await launch(
            self._pw, self.settings, self._runtime, self._on_disconnected, home=home
        )
        self._generation += 1
        self._pages_on_browser = 0
        self._broken = False
        self._last_sample = None
        self.stats.memory = None
        self.stats.launches += 1

    def _on_disconnected(self, browser: Browser) -> None:
        if self._browser is not None and browser is self._browser.browser and not self._closed:
            log.warning("the browser disconnected (crashed or killed): restarting it")
            self._broken = True

    async def _restart(self, reason: RestartReason | None) -> None:
        """Close every context and the browser, and launch it again (nothing is in flight)."""
        name = reason.value if reason is not None else "unknown"
        self.stats.restarts[name] += 1
        log.info("restarting the browser (%s) after %d pages", name, self._pages_on_browser)
        if reason is not None:
            limit = self.stats.contexts_limit
            self.stats.contexts_limit = contexts_after_restart(
                limit, reason, self._pages_on_browser, self.settings
            )
            if self.stats.contexts_limit < limit:
                log.warning(
                    "the browser passed its memory budget (%d MiB) after %d pages: %d contexts"
                    " from now on",
                    self.settings.memory_budget >> 20,
                    self._pages_on_browser,
                    self.stats.contexts_limit,
                )
        slots, self._slots = self._slots, []
        for slot in slots:
            await self._close_slot(slot, "restart")
        await self._close_browser()
        await self._launch()

    async def _close_browser(self) -> None:
        browser, self._browser = self._browser, None
        if browser is not None:
            await browser.close(self.settings.close_timeout)
