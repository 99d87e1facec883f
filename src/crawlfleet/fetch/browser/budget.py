"""The pool's decisions, as plain functions of its state (no browser, no clock of their own).

* **Admission**: may one more page start now, must it wait, or must the browser be restarted
  first (after K pages, past the memory budget, or after a crash)?
* **Recycling**: is a context spent (M pages), and which context does a page get: an idle one
  of the same session identity, a new one, or an idle one of another identity closed for it?
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from crawlfleet.fetch.browser.settings import BrowserSettings


class Admission(enum.Enum):
    ADMIT = "admit"
    WAIT = "wait"
    """Wait for a page in flight to finish (or the next memory sample), then ask again."""
    RESTART = "restart"
    """Nothing is in flight and the browser must go: restart it, then ask again."""


class RestartReason(enum.Enum):
    PAGES = "pages"
    MEMORY = "memory"
    BROKEN = "broken"
    """The browser crashed, or closing a page or context hung."""


@dataclass(frozen=True, slots=True)
class PoolState:
    """What admission looks at."""

    in_flight: int
    """Pages admitted and not yet released."""
    pages_on_browser: int
    """Pages admitted since the browser was launched."""
    memory: int | None
    """Last sample of the browser's memory, by ``memory_metric`` (None: not measured)."""
    broken: bool = False


def restart_reason(state: PoolState, settings: BrowserSettings) -> RestartReason | None:
    """Why the browser must be restarted before more pages, or None."""
    if state.broken:
        return RestartReason.BROKEN
    if state.pages_on_browser >= settings.pages_per_browser:
        return RestartReason.PAGES
    # A browser that has served nothing yet is as small as it gets: restarting it for memory
    # would loop forever under a budget set too low, so it admits pages one at a time instead.
    over = state.memory is not None and state.memory >= settings.memory_budget
    if over and state.pages_on_browser:
        return RestartReason.MEMORY
    return None


def admission(
    state: PoolState, settings: BrowserSettings, contexts: int | None = None
) -> Admission:
    """May a page start now, with at most ``contexts`` pages in flight (default: the
    settings')? Pages in flight always finish before a restart (a drain)."""
    if restart_reason(state, settings) is not None:
        return Admission.RESTART if state.in_flight == 0 else Admission.WAIT
    if state.in_flight >= (settings.contexts if contexts is None else contexts):
        return Admission.WAIT
    budget = settings.memory_budget * settings.admit_fraction
    tight = state.memory is not None and state.memory >= budget
    if tight and state.in_flight > 0:
        # Memory is tight: let the pages in flight finish (and free what they hold) first.
        return Admission.WAIT
    return Admission.ADMIT


def contexts_after_restart(
    contexts: int, reason: RestartReason, pages_on_browser: int, settings: BrowserSettings
) -> int:
    """How many contexts the relaunched browser may have.

    A browser over its budget before each of its contexts served two pages cannot be helped by
    a restart (it would be over again at once): one context fewer. A restart after K pages,
    with memory to spare, gives one back.
    """
    if reason is RestartReason.MEMORY and pages_on_browser < 2 * contexts:
        return max(1, contexts - 1)
    if reason is RestartReason.PAGES:
        return min(settings.contexts, contexts + 1)
    return contexts


def sample_due(last_sample: float | None, now: float, interval: float) -> bool:
    """True if the browser's memory should be measured again."""
    return last_sample is None or now - last_sample >= interval


def context_spent(pages: int, settings: BrowserSettings) -> bool:
    """True once a context has served its M pages (it is closed, not reused)."""
    return pages >= settings.pages_per_context


@dataclass(frozen=True, slots=True)
class SlotView:
    """One open context as the slot choice sees it."""

    key: Hashable
    busy: bool
    last_used: float


@dataclass(frozen=True, slots=True)
class SlotChoice:
    action: str
    """``reuse`` (the idle context at ``index``), ``create`` (a new context), or ``evict``
    (close the idle context at ``index``, then create one)."""
    index: int | None = None


def choose_slot(slots: Sequence[SlotView], key: Hashable, capacity: int) -> SlotChoice | None:
    """Where a page of session identity ``key`` runs; None if every context is busy.

    An idle context of the same identity is reused (its cookies are the session); else a new
    one is opened while there is room; else the least recently used idle context of another
    identity is closed to make room.
    """
    same = [i for i, s in enumerate(slots) if not s.busy and s.key == key]
    if same:
        return SlotChoice("reuse", max(same, key=lambda i: slots[i].last_used))
    if len(slots) < capacity:
        return SlotChoice("create")
    idle = [i for i, s in enumerate(slots) if not s.busy]
    if not idle:
        return None
    return SlotChoice("evict", min(idle, key=lambda i: slots[i].last_used))
