"""The dashboard's numbers over time: a ring of overview samples kept by ``serve``, pure.

Every ``sample_every`` seconds ``serve`` adds the newest :class:`~crawlfleet.overview.Overview`;
:meth:`History.as_json` turns the ring into aligned series for the charts (``t`` in epoch
seconds, ``None`` where a series has no value): rates between two samples (pages/s, the shares
of the pages fetched in between that succeeded and were blocked, of the records produced that
failed validation) and levels (backlog, oldest ready age, per job backlog, per domain recent
block rate and pages/s, per worker pages/s).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from crawlfleet.monitor.metrics import FETCHED, SUCCESS

if TYPE_CHECKING:
    from crawlfleet.monitor.overview import Overview

__all__ = ["History", "Point"]

#: most series per chart (jobs, domains, workers): the busiest
SERIES: Final = 8


@dataclass(frozen=True, slots=True)
class Point:
    t: float
    fetched: float
    ok: float
    blocked: float
    records: float
    quarantined: float
    backlog: int
    oldest_age: float
    jobs: dict[str, float] = field(default_factory=dict)
    domain_blocks: dict[str, float] = field(default_factory=dict)
    domain_pages: dict[str, float] = field(default_factory=dict)
    workers: dict[str, float] = field(default_factory=dict)


def point_of(ov: Overview) -> Point:
    active = [d for d in ov.domains if d.recent_attempts > 0 or d.backlog][:SERIES]
    return Point(
        t=ov.at,
        fetched=ov.pages(FETCHED),
        ok=ov.pages(SUCCESS),
        blocked=ov.pages(("blocked",)),
        records=sum(j.records_made for j in ov.jobs),
        quarantined=sum(j.quarantined_made for j in ov.jobs),
        backlog=ov.backlog,
        oldest_age=ov.oldest_age,
        jobs={j.name: j.stats.queued + j.stats.waiting for j in ov.jobs[:SERIES]},
        domain_blocks={d.domain: d.block_ratio for d in active},
        domain_pages={d.domain: d.pages for d in ov.domains},
        workers={w.stats.worker: w.pages_per_second for w in ov.workers if w.alive},
    )


class History:
    """The newest ``size`` points."""

    def __init__(self, size: int = 720) -> None:
        self.points: deque[Point] = deque(maxlen=size)

    def add(self, ov: Overview) -> None:
        if self.points and ov.at <= self.points[-1].t:
            return  # the same overview twice (a cached one): no new interval
        self.points.append(point_of(ov))

    def domain_rates(self) -> dict[str, float]:
        """Pages/s of each domain between the two newest points."""
        if len(self.points) < 2:
            return {}
        a, b = self.points[-2], self.points[-1]
        dt = b.t - a.t
        return {
            d: max(0.0, (n - a.domain_pages.get(d, 0.0)) / dt) for d, n in b.domain_pages.items()
        }

    def as_json(self) -> dict[str, Any]:
        pts = list(self.points)
        pairs = list(zip([None, *pts], pts, strict=False))  # (previous, point)
        return {
            "t": [p.t for p in pts],
            "throughput": [_rate(a, b, "fetched") for a, b in pairs],
            "success": [_share(a, b, "ok", ("fetched",)) for a, b in pairs],
            "block_rate": [_share(a, b, "blocked", ("fetched",)) for a, b in pairs],
            "validation": [
                _share(a, b, "quarantined", ("records", "quarantined")) for a, b in pairs
            ],
            "backlog": [p.backlog for p in pts],
            "oldest_age": [p.oldest_age for p in pts],
            "jobs": _series(pts, "jobs"),
            "domains": _series(pts, "domain_blocks"),
            "workers": _series(pts, "workers"),
        }


def _rate(a: Point | None, b: Point, name: str) -> float | None:
    if a is None or b.t <= a.t:
        return None
    return max(0.0, (float(getattr(b, name)) - float(getattr(a, name))) / (b.t - a.t))


def _share(a: Point | None, b: Point, part: str, whole: tuple[str, ...]) -> float | None:
    if a is None:
        return None
    total = sum(float(getattr(b, w)) - float(getattr(a, w)) for w in whole)
    if total <= 0:
        return None
    return (float(getattr(b, part)) - float(getattr(a, part))) / total


def _series(pts: list[Point], name: str) -> dict[str, list[float | None]]:
    names: dict[str, None] = {}
    for p in pts:
        names.update(dict.fromkeys(getattr(p, name)))
    return {n: [getattr(p, name).get(n) for p in pts] for n in list(names)[:SERIES]}
