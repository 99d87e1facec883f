"""A job's store-side defaults (politeness limits, attempts, trap budgets), as both backends keep
them: in the job's stored settings under private keys, read back into :class:`JobDefaults`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crawlfleet.model import DIRECT_ROUTE, DomainLimits, JobSpec, RoutePlan
from crawlfleet.policy.traps import TrapRules

DIRECT = DIRECT_ROUTE.pool

__all__ = ["JobDefaults", "defaults_from_settings", "settings_with_defaults"]


@dataclass(frozen=True, slots=True)
class JobDefaults:
    default: DomainLimits
    per_domain: Mapping[str, DomainLimits]
    max_attempts: int
    traps: TrapRules = field(default_factory=TrapRules)
    routes: tuple[RoutePlan, ...] = ()
    #: versions of a record kept before its current one (the spider's ``record_history``)
    record_history: int = 1

    @property
    def budgeted(self) -> bool:
        """Whether new requests are counted against a host or URL-pattern budget."""
        return self.traps.host_page_budget is not None or self.traps.pattern_budget is not None

    def limits_for(self, domain: str) -> DomainLimits:
        return self.per_domain.get(domain, self.default)

    def lanes_for(self, domain: str) -> list[RoutePlan]:
        """The routes a new domain gets a lane through: those of the pools that claim it, else
        those of the pools that claim no domain (every tier: the domain starts on the lowest).
        Routes only for pinned requests are not among them (see :meth:`pinned_lanes`)."""
        routes = [r for r in self.routes if not r.pinned]
        if not routes:
            return [DIRECT_ROUTE]
        host = domain.lower().rstrip(".")
        claimed = [r for r in routes if any(host == d or host.endswith("." + d) for d in r.domains)]
        return claimed or [r for r in routes if not r.domains] or [DIRECT_ROUTE]

    def pinned_lanes(self, pools: Iterable[str]) -> list[RoutePlan]:
        """The routes of ``pools`` (``Request(pool=...)``), for any domain: a domain gets a lane
        through each for the requests pinned to them."""
        names = set(pools)
        routes = [r for r in self.routes if r.pool in names]
        if DIRECT in names and not any(r.pool == DIRECT for r in routes):
            routes.append(DIRECT_ROUTE)
        return routes


def settings_with_defaults(spec: JobSpec) -> dict[str, Any]:
    """The settings to store with the job: its own, plus the defaults the store enforces."""
    settings = dict(spec.settings)
    settings["_limits"] = {
        "default": [spec.default_limits.max_in_flight, spec.default_limits.min_delay],
        "domains": {d: [v.max_in_flight, v.min_delay] for d, v in spec.domain_limits.items()},
    }
    settings["_budgets"] = [spec.page_budget, spec.pattern_budget]
    if spec.record_history != 1:
        settings["_history"] = spec.record_history
    if spec.routes:
        settings["_routes"] = [
            [r.id, r.pool, r.tier, r.max_in_flight, r.min_delay, r.cost, list(r.domains), r.pinned]
            for r in spec.routes
        ]
    return settings


def defaults_from_settings(settings: dict[str, Any], max_attempts: int) -> JobDefaults:
    """Take the store's private keys out of ``settings`` (in place) as JobDefaults."""
    limits = settings.pop("_limits", None) or {"default": [8, 0.0], "domains": {}}
    page, pattern = settings.pop("_budgets", None) or (None, None)
    history = int(settings.pop("_history", 1))
    routes = tuple(
        RoutePlan(rid, pool, tier, cap, delay, cost, tuple(domains), *pinned)
        for rid, pool, tier, cap, delay, cost, domains, *pinned in settings.pop("_routes", None)
        or ()
    )
    return JobDefaults(
        DomainLimits(*limits["default"]),
        {d: DomainLimits(*v) for d, v in limits["domains"].items()},
        max_attempts,
        TrapRules(host_page_budget=page, pattern_budget=pattern),
        routes,
        history,
    )
