"""When a recrawl revisits a page: every run by default, or on an interval per page that adapts.

A run of a job (``crawl --recrawl``, a schedule) revisits the pages the job knows. Without a
rule every known page is revisited every run: its validators (``ETag``, ``Last-Modified``) make
an unchanged page cost a ``304``. With a :class:`RevisitRule` (the spider's ``revisit_min`` /
``revisit_max``) each page has an interval of its own that adapts to what the page does:

* unchanged (a ``304``, or the same body as last time) → the interval grows (times ``grow``, 1.5)
  up to ``max``;
* changed → it shrinks (``÷ shrink``, 2) down to ``min``;
* a page fetched for the first time starts at ``min``.

A run then revisits the pages that are due (``fetched_at + interval <= now``), and always the
seeds (start URLs and sitemaps: the way in to what is new) and the hubs (pages whose last parse
yielded links the job did not know: where new pages appear). A page a sitemap lists is pulled
forward when its ``lastmod`` moved past what the job saw (:func:`lastmod_moved`), whatever its
interval says.

Pure functions of their inputs and a clock passed in (the store keeps each page's interval and
due time, computed here at completion; the backends select due pages with the same rule in SQL,
and a contract test holds both to :func:`is_due`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "Change",
    "PageVisit",
    "RevisitRule",
    "due_at",
    "is_due",
    "lastmod_moved",
    "next_interval",
    "parse_duration",
]

#: the longest interval a rule may set (ten years): a due time stays a finite epoch
LONGEST: Final = 10 * 365 * 86_400.0

_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3_600.0, "d": 86_400.0, "w": 604_800.0}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


class Change(StrEnum):
    """What a page did since its last fetch."""

    NEW = "new"  # fetched for the first time
    CHANGED = "changed"
    UNCHANGED = "unchanged"  # a 304, or the same body


def parse_duration(value: str | float | int) -> float:
    """Seconds in ``value``: a number of seconds, or text such as ``"90s"``, ``"15m"``,
    ``"6h"``, ``"1d12h"``, ``"2w"``. Raises ValueError (one line) for anything else, and for
    zero, negative or non-finite durations."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip().lower().replace(" ", "")
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise ValueError(
                    f"not a duration: {value!r} (use seconds, or 90s, 15m, 6h, 1d, 2w, 1d12h)"
                ) from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a duration must be positive: {value!r}")
    return seconds


@dataclass(frozen=True, slots=True)
class RevisitRule:
    """Adaptive revisit of a page: its interval between ``min`` and ``max`` seconds, times
    ``grow`` after an unchanged visit, divided by ``shrink`` after a change."""

    min: float
    max: float
    grow: float = 1.5
    shrink: float = 2.0

    def __post_init__(self) -> None:
        for name in ("min", "max"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"revisit_{name} must be a positive number of seconds: {value!r}")
        if self.min > self.max:
            raise ValueError(
                f"revisit_min ({self.min:g}s) is longer than revisit_max ({self.max:g}s)"
            )
        if self.max > LONGEST:
            raise ValueError(f"revisit_max is over ten years: {self.max:g}s")
        if not (math.isfinite(self.grow) and self.grow >= 1.0):
            raise ValueError(f"the growth factor must be at least 1: {self.grow!r}")
        if not (math.isfinite(self.shrink) and self.shrink >= 1.0):
            raise ValueError(f"the shrink factor must be at least 1: {self.shrink!r}")

    @classmethod
    def of(cls, minimum: str | float | None, maximum: str | float | None) -> RevisitRule | None:
        """The rule of a spider's ``revisit_min`` / ``revisit_max`` (durations, see
        :func:`parse_duration`); None when neither is set (every run revisits every page). One
        alone sets both ends."""
        if minimum is None and maximum is None:
            return None
        low = parse_duration(minimum if minimum is not None else maximum)  # type: ignore[arg-type]
        high = parse_duration(maximum if maximum is not None else minimum)  # type: ignore[arg-type]
        return cls(low, high)


def _clamp(rule: RevisitRule, seconds: float) -> float:
    if not math.isfinite(seconds):
        return rule.max if seconds > 0 else rule.min
    return min(rule.max, max(rule.min, seconds))


def next_interval(rule: RevisitRule, interval: float | None, change: Change) -> float:
    """The page's interval after a visit that found ``change``, from its ``interval`` so far
    (None, or nonsense from an old store: a first visit)."""
    if change is Change.NEW or interval is None or not math.isfinite(interval) or interval <= 0:
        return rule.min
    if change is Change.UNCHANGED:
        return _clamp(rule, interval * rule.grow)
    return _clamp(rule, interval / rule.shrink)


def due_at(fetched_at: float, interval: float) -> float:
    """When a page fetched at ``fetched_at`` with ``interval`` is due again (finite)."""
    if not math.isfinite(fetched_at):
        fetched_at = 0.0
    if not math.isfinite(interval) or interval < 0:
        interval = 0.0
    return fetched_at + min(interval, LONGEST)


@dataclass(frozen=True, slots=True)
class PageVisit:
    """What the store knows of a page when a run starts: when it is due (None: no interval,
    revisited every run), and whether it is a seed or a hub."""

    due_at: float | None = None
    seed: bool = False
    hub: bool = False


def is_due(page: PageVisit, now: float) -> tuple[bool, str]:
    """Whether a run starting at ``now`` revisits ``page``, and why (``"every run"``,
    ``"seed"``, ``"hub"``, ``"due"``; ``"not yet"`` when it does not). The SQL of the run
    start (``start_run`` in both backends) is this rule."""
    if page.due_at is None:
        return True, "every run"
    if page.seed:
        return True, "seed"
    if page.hub:
        return True, "hub"
    if page.due_at <= now:
        return True, "due"
    return False, "not yet"


def lastmod_moved(listed: float | None, known: float | None) -> bool:
    """Whether a sitemap's ``lastmod`` for a page (``listed``) is newer than the one the job
    kept for it (``known``): such a page is revisited in this run, due or not. A sitemap
    without ``lastmod`` never pulls a page forward."""
    if listed is None or not math.isfinite(listed):
        return False
    return known is None or not math.isfinite(known) or listed > known
