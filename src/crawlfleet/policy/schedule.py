"""When a schedule's next run is due: every N seconds, or at the times a cron line names.

``crawlfleet schedule add SPIDER --every 6h`` or ``--cron "0 6 * * *"``. A schedule is a value
(:class:`Timing`) and :func:`next_due` the time of its first run after a moment; the store keeps
that time, and whoever runs with the store starts the run once it has passed (exactly once
across the fleet: the store's transaction advances it). Pure: the clock is passed in.

* ``every``: a run every interval, counted from the schedule's start (its anchor), so the runs
  keep their times of day however late each one was started: an ``--every 6h`` added at 09:10
  runs at 15:10, 21:10, 03:10... A scheduler that was down for a day starts one run, not four.
* ``cron``: five fields (minute, hour, day of month, month, day of week; ``*``, lists, ranges,
  steps, names: ``0 6 * * mon-fri``), in the schedule's time zone (UTC unless ``--tz`` names
  one; daylight saving time handled by the zone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from crawlfleet.policy.revisit import LONGEST, parse_duration

__all__ = ["OVERLAPS", "Timing", "next_due", "parse_timing"]

#: what a due run does while the schedule's last run is still going: ``skip`` it (the
#: default), or ``queue`` it (started as soon as the last one finished; at most one waits)
OVERLAPS: Final = ("skip", "queue")
#: the shortest interval of ``--every`` (a schedule is not a loop)
SHORTEST: Final = 60.0


@dataclass(frozen=True, slots=True)
class Timing:
    """``every`` seconds from ``anchor``, or the ``cron`` line in zone ``tz``."""

    every: float | None = None
    cron: str | None = None
    tz: str = "UTC"
    anchor: float = 0.0

    def describe(self) -> str:
        if self.every is not None:
            return f"every {_seconds(self.every)}"
        zone = "" if self.tz == "UTC" else f" ({self.tz})"
        return f'cron "{self.cron}"{zone}'


def _seconds(value: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if value >= size and value % size == 0:
            return f"{int(value // size)}{unit}"
    return f"{value:g}s"


def _zone(name: str) -> tzinfo:
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (an IANA name: Europe/Paris)") from None


def parse_timing(
    every: str | None = None, cron: str | None = None, tz: str = "UTC", anchor: float = 0.0
) -> Timing:
    """A schedule's timing from ``--every`` or ``--cron`` (exactly one) and ``--tz``; raises
    ValueError with one line for a bad one."""
    if (every is None) == (cron is None):
        raise ValueError('give --every (6h, 30m, 1d) or --cron ("0 6 * * *"), one of them')
    _zone(tz)
    if every is not None:
        seconds = parse_duration(every)
        if seconds < SHORTEST:
            raise ValueError(f"--every {every}: the shortest interval is {SHORTEST:g}s")
        if seconds > LONGEST:
            raise ValueError(f"--every {every}: over ten years")
        return Timing(every=seconds, tz=tz, anchor=anchor)
    assert cron is not None
    line = " ".join(cron.split())
    from croniter import croniter

    if len(line.split()) != 5 or not croniter.is_valid(line):
        raise ValueError(
            f'--cron "{cron}": not a cron line of five fields (minute hour day month weekday)'
        )
    return Timing(cron=line, tz=tz, anchor=anchor)


def next_due(timing: Timing, after: float) -> float:
    """The first time a run is due strictly after ``after`` (epoch seconds; finite)."""
    if not math.isfinite(after):
        after = 0.0
    if timing.every is not None:
        every = min(max(timing.every, SHORTEST), LONGEST)
        if after < timing.anchor:
            return timing.anchor
        steps = math.floor((after - timing.anchor) / every) + 1
        return timing.anchor + steps * every
    from croniter import croniter

    zone = _zone(timing.tz)
    try:
        start = datetime.fromtimestamp(after, zone)
    except (OverflowError, OSError, ValueError):
        start = datetime.fromtimestamp(0.0, zone)
    due = croniter(timing.cron, start).get_next(float)
    return float(due)
