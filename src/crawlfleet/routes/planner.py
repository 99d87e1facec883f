"""The capacity planner: what the route pools allow per domain, and what a target needs.

Pure arithmetic over the pools, each domain's limits and (optionally) what a running crawl
observed. For each domain, on the tier of pools it is crawled on (its lowest, or the one it was
escalated to), per pool ("lane" = domain x route):

* ``route_rate`` (requests/s through one route) = min(pool ``rate``, pool ``concurrency`` /
  latency); without either, one route is bound only by the domain's own caps;
* ``requests_per_s`` = min(sum of route_rate x healthy routes, domain ``rate``,
  1 / robots Crawl-delay, domain ``concurrency`` / latency); the binding term is the
  **bottleneck** (``routes``, ``route_concurrency``, ``domain_rate``, ``crawl_delay``,
  ``domain_concurrency``);
* ``pages_per_s`` = requests_per_s x (1 - block rate): blocked requests cost, but yield nothing;
* ``in_flight`` = requests_per_s x latency (Little's law): the concurrency it takes;
* ``routes_needed`` for a target (pages/s) = ceil(target / ((1 - block rate) x route_rate)) on
  the domain's first pool, or None when the domain's caps make the target unreachable (or
  routes are not what bounds it);
* ``drain_seconds`` = backlog / pages_per_s; ``cost_per_day`` = requests/s x 86,400 x ``cost``;
  sticky pools also need ``sessions_per_hour`` = requests/s x 3,600 / session uses.

A total target (``--target 2M/day`` for the whole crawl) is split over the domains in
proportion to their backlogs (equally when none is known).

:func:`plan_json` gives the plan as data. Keys: ``target_pages_per_s``, ``pages_per_s``,
``requests_per_s``, ``cost_per_day``, ``latency_assumed``, ``domains`` (a list); each domain:
``domain``, ``tier``, ``pages_per_s``, ``requests_per_s``, ``cap_requests_per_s`` (the
domain's own cap, or null), ``bottleneck``, ``block_rate``, ``latency``, ``in_flight``,
``backlog``, ``drain_seconds`` (null when nothing moves), ``target_pages_per_s``,
``routes_needed``, ``cost_per_day``, ``lanes`` (a list); each lane: ``pool``, ``routes``,
``healthy_routes``, ``route_rate`` (null: no cap of its own), ``requests_per_s``,
``pages_per_s``, ``cost_per_day``, ``sessions_per_hour`` (null unless sticky).
:func:`render_plan` gives the same as a text table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from crawlfleet.errors import ConfigError
from crawlfleet.routes.pools import Pool, PoolMode, RoutesConfig, select_pools

__all__ = [
    "DomainInput",
    "DomainPlan",
    "LanePlan",
    "Observed",
    "Plan",
    "make_plan",
    "parse_target",
    "plan_json",
    "render_plan",
]

DEFAULT_LATENCY: Final = 0.5
"""Seconds per request assumed when nothing was observed."""
_DEFAULT_SESSION_USES: Final = 50
_UNITS: Final = {"s": 1, "sec": 1, "min": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_SCALE: Final = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9}
_TARGET: Final = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([kmbg]?)\s*/\s*([a-z]+)\s*", re.IGNORECASE)


def parse_target(text: str) -> float:
    """Pages per second from ``"2M/day"``, ``"500k/h"``, ``"1.5/s"`` (k, M, B; s, min, h, day).

    Raises :class:`ConfigError` for anything else.
    """
    match = _TARGET.fullmatch(text)
    unit = match.group(3).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ConfigError(f"target {text!r}: expected a number per unit, like 2M/day or 50/s")
    count = float(match.group(1)) * _SCALE[match.group(2).lower()]
    return count / _UNITS[unit]


@dataclass(frozen=True, slots=True)
class DomainInput:
    """One domain to plan: its limits (as the spider and robots.txt set them) and its work."""

    domain: str
    concurrency: int | None = None
    """``domain_concurrency``: most requests in flight, fleet-wide."""
    rate: float | None = None
    """``domain_rate``: most requests/s, fleet-wide."""
    crawl_delay: float | None = None
    """robots.txt Crawl-delay, seconds."""
    backlog: int = 0
    target: float | None = None
    """Pages/s wanted for this domain."""
    pools: tuple[str, ...] | None = None
    """Pools the domain's requests ask for (the spider's ``route_pools``); None: by config."""
    tier: int | None = None
    """The tier the domain is crawled on now (after escalation); None: its lowest."""


@dataclass(frozen=True, slots=True)
class Observed:
    """What a running crawl measured for one (domain, pool); None where nothing was seen."""

    latency: float | None = None
    block_rate: float | None = None


@dataclass(frozen=True, slots=True)
class LanePlan:
    pool: str
    routes: int
    healthy_routes: int
    route_rate: float | None
    requests_per_s: float
    pages_per_s: float
    cost_per_day: float
    sessions_per_hour: float | None


@dataclass(frozen=True, slots=True)
class DomainPlan:
    domain: str
    tier: int
    pages_per_s: float
    requests_per_s: float
    cap_requests_per_s: float | None
    bottleneck: str
    block_rate: float
    latency: float
    in_flight: float
    backlog: int
    drain_seconds: float | None
    target_pages_per_s: float | None
    routes_needed: int | None
    cost_per_day: float
    lanes: tuple[LanePlan, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    domains: tuple[DomainPlan, ...]
    target_pages_per_s: float | None = None
    latency_assumed: float = DEFAULT_LATENCY
    pages_per_s: float = field(init=False)
    requests_per_s: float = field(init=False)
    cost_per_day: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pages_per_s", sum(d.pages_per_s for d in self.domains))
        object.__setattr__(self, "requests_per_s", sum(d.requests_per_s for d in self.domains))
        object.__setattr__(self, "cost_per_day", sum(d.cost_per_day for d in self.domains))


def make_plan(
    config: RoutesConfig,
    domains: Sequence[DomainInput],
    *,
    observed: Mapping[tuple[str, str], Observed] | None = None,
    healthy: Mapping[str, int] | None = None,
    target_total: float | None = None,
    latency: float = DEFAULT_LATENCY,
) -> Plan:
    """The plan for ``domains`` over ``config``'s pools.

    ``observed`` is keyed by (domain, pool name); ``healthy`` gives a pool's healthy routes
    (default: all of them); ``target_total`` (pages/s) is split over domains by backlog;
    ``latency`` is assumed where none was observed.
    """
    observed = observed or {}
    targets = _split_target(domains, target_total)
    plans = tuple(
        _plan_domain(config, d, targets[i], observed, healthy or {}, latency)
        for i, d in enumerate(domains)
    )
    return Plan(plans, target_total, latency)


def _split_target(domains: Sequence[DomainInput], total: float | None) -> list[float | None]:
    if total is None:
        return [d.target for d in domains]
    weights = [float(d.backlog) for d in domains]
    if not any(weights):
        weights = [1.0] * len(domains)
    return [total * w / sum(weights) for w in weights]


def _plan_domain(
    config: RoutesConfig,
    d: DomainInput,
    target: float | None,
    observed: Mapping[tuple[str, str], Observed],
    healthy: Mapping[str, int],
    default_latency: float,
) -> DomainPlan:
    pools = select_pools(config, domain=d.domain, spider_pools=d.pools)
    tier = d.tier if d.tier is not None else min(p.tier for p in pools)
    pools = tuple(p for p in pools if p.tier == tier)
    if not pools:
        raise ConfigError(f"no route pool of tier {tier} serves {d.domain}")
    seen = [observed.get((d.domain, p.name), Observed()) for p in pools]
    latency = _first([o.latency for o in seen], default_latency)
    block_rate = min(1.0, _first([o.block_rate for o in seen], 0.0))
    route_rates = [_route_rate(p, latency) for p in pools]
    lane_caps = [
        _times(rate, healthy.get(p.name, len(p.routes)))
        for p, rate in zip(pools, route_rates, strict=True)
    ]
    caps: dict[str, float | None] = {
        "routes": _sum_or_none(lane_caps),
        "domain_rate": d.rate,
        "crawl_delay": 1 / d.crawl_delay if d.crawl_delay else None,
        "domain_concurrency": d.concurrency / latency if d.concurrency else None,
    }
    bottleneck, requests = _binding(caps)
    if bottleneck == "routes" and any(p.concurrency and p.rate is None for p in pools):
        bottleneck = "route_concurrency"
    lanes = _lanes(pools, route_rates, lane_caps, healthy, requests, block_rate)
    pages = requests * (1 - block_rate)
    domain_caps = [c for k, c in caps.items() if k != "routes" and c is not None]
    return DomainPlan(
        domain=d.domain,
        tier=tier,
        pages_per_s=pages,
        requests_per_s=requests,
        cap_requests_per_s=min(domain_caps) if domain_caps else None,
        bottleneck=bottleneck,
        block_rate=block_rate,
        latency=latency,
        in_flight=requests * latency,
        backlog=d.backlog,
        drain_seconds=d.backlog / pages if pages > 0 else None,
        target_pages_per_s=target,
        routes_needed=_routes_needed(target, route_rates[0], block_rate, domain_caps),
        cost_per_day=sum(lane.cost_per_day for lane in lanes),
        lanes=lanes,
    )


def _route_rate(pool: Pool, latency: float) -> float | None:
    """Requests/s one route of ``pool`` may carry to one domain (None: no cap of its own)."""
    limits = [pool.rate, pool.concurrency / latency if pool.concurrency else None]
    known = [x for x in limits if x is not None]
    return min(known) if known else None


def _binding(caps: Mapping[str, float | None]) -> tuple[str, float]:
    known = {k: v for k, v in caps.items() if v is not None}
    if not known:
        return "unbounded", math.inf
    name = min(known, key=lambda k: known[k])
    return name, known[name]


def _lanes(
    pools: Sequence[Pool],
    route_rates: Sequence[float | None],
    lane_caps: Sequence[float | None],
    healthy: Mapping[str, int],
    requests: float,
    block_rate: float,
) -> tuple[LanePlan, ...]:
    # The domain's requests spread over its pools in proportion to what each can carry (by
    # healthy routes when a pool has no cap of its own).
    if any(c is None for c in lane_caps):
        weights = [float(healthy.get(p.name, len(p.routes))) for p in pools]
    else:
        weights = [float(c) for c in lane_caps if c is not None]
    total = sum(weights) or 1.0
    lanes = []
    for pool, rate, weight in zip(pools, route_rates, weights, strict=True):
        share = requests * weight / total
        uses = pool.session_uses or _DEFAULT_SESSION_USES
        lanes.append(
            LanePlan(
                pool=pool.name,
                routes=len(pool.routes),
                healthy_routes=healthy.get(pool.name, len(pool.routes)),
                route_rate=rate,
                requests_per_s=share,
                pages_per_s=share * (1 - block_rate),
                cost_per_day=share * 86400 * pool.cost,
                sessions_per_hour=share * 3600 / uses if pool.mode is PoolMode.STICKY else None,
            )
        )
    return tuple(lanes)


def _routes_needed(
    target: float | None, route_rate: float | None, block_rate: float, domain_caps: list[float]
) -> int | None:
    if target is None or route_rate is None or block_rate >= 1:
        return None
    if domain_caps and target > min(domain_caps) * (1 - block_rate):
        return None  # the domain's own limits forbid it, however many routes
    return max(1, math.ceil(target / ((1 - block_rate) * route_rate) - 1e-9))


def _first(values: Sequence[float | None], default: float) -> float:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else default


def _times(rate: float | None, routes: int) -> float | None:
    return None if rate is None else rate * routes


def _sum_or_none(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


# --- output -------------------------------------------------------------------------------------


def _num(value: float | None) -> float | None:
    if value is None or math.isinf(value):
        return None
    return round(value, 6)


def plan_json(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready data (keys in the module docstring; infinities are null)."""
    return {
        "target_pages_per_s": _num(plan.target_pages_per_s),
        "pages_per_s": _num(plan.pages_per_s),
        "requests_per_s": _num(plan.requests_per_s),
        "cost_per_day": _num(plan.cost_per_day),
        "latency_assumed": plan.latency_assumed,
        "domains": [_domain_json(d) for d in plan.domains],
    }


def _domain_json(d: DomainPlan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in DomainPlan.__dataclass_fields__:
        value = getattr(d, name)
        out[name] = _num(value) if isinstance(value, float) else value
    out["lanes"] = [
        {
            k: _num(getattr(lane, k)) if isinstance(getattr(lane, k), float) else getattr(lane, k)
            for k in LanePlan.__dataclass_fields__
        }
        for lane in d.lanes
    ]
    return out


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None or math.isinf(value):
        return "-"
    return f"{value:,.{digits}f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def render_plan(plan: Plan) -> str:
    """The plan as a text table: one line per domain, one indented line per pool."""
    head = (
        f"{'domain / pool':28} {'tier':>4} {'pages/s':>9} {'req/s':>9} {'bottleneck':>18} "
        f"{'routes':>7} {'need':>5} {'in flight':>9} {'drain':>9} {'cost/day':>10}"
    )
    lines = [head, "-" * len(head)]
    for d in plan.domains:
        lines.append(
            f"{d.domain:28} {d.tier:>4} {_fmt(d.pages_per_s):>9} {_fmt(d.requests_per_s):>9} "
            f"{d.bottleneck:>18} {sum(x.healthy_routes for x in d.lanes):>7} "
            f"{d.routes_needed if d.routes_needed is not None else '-':>5} "
            f"{_fmt(d.in_flight, 1):>9} {_duration(d.drain_seconds):>9} "
            f"{_fmt(d.cost_per_day):>10}"
        )
        for lane in d.lanes:
            per_route = _fmt(lane.route_rate)
            lines.append(
                f"  {lane.pool + ' (' + per_route + '/s per route)':26} {'':>4} "
                f"{_fmt(lane.pages_per_s):>9} {_fmt(lane.requests_per_s):>9} {'':>18} "
                f"{lane.healthy_routes:>7} {'':>5} {'':>9} {'':>9} {_fmt(lane.cost_per_day):>10}"
            )
    target = _fmt(plan.target_pages_per_s) if plan.target_pages_per_s is not None else "-"
    lines.append("-" * len(head))
    lines.append(
        f"total: {_fmt(plan.pages_per_s)} pages/s ({_fmt(plan.pages_per_s * 86400, 0)}/day), "
        f"target {target} pages/s, cost {_fmt(plan.cost_per_day)}/day; "
        f"latency {plan.latency_assumed:g} s where none was observed"
    )
    return "\n".join(lines)
