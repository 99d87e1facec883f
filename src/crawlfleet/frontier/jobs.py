"""A job's store-side defaults (politeness limits, attempts, trap budgets), as both backends keep
them: in the job's stored settings under private keys, read back into :class:`JobDefaults`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crawlfleet.model import DomainLimits, JobSpec
from crawlfleet.policy.traps import TrapRules

__all__ = ["JobDefaults", "defaults_from_settings", "settings_with_defaults"]


@dataclass(frozen=True, slots=True)
class JobDefaults:
    default: DomainLimits
    per_domain: Mapping[str, DomainLimits]
    max_attempts: int
    traps: TrapRules = field(default_factory=TrapRules)

    @property
    def budgeted(self) -> bool:
        """Whether new requests are counted against a host or URL-pattern budget."""
        return self.traps.host_page_budget is not None or self.traps.pattern_budget is not None

    def limits_for(self, domain: str) -> DomainLimits:
        return self.per_domain.get(domain, self.default)


def settings_with_defaults(spec: JobSpec) -> dict[str, Any]:
    """The settings to store with the job: its own, plus the defaults the store enforces."""
    settings = dict(spec.settings)
    settings["_limits"] = {
        "default": [spec.default_limits.max_in_flight, spec.default_limits.min_delay],
        "domains": {d: [v.max_in_flight, v.min_delay] for d, v in spec.domain_limits.items()},
    }
    settings["_budgets"] = [spec.page_budget, spec.pattern_budget]
    return settings


def defaults_from_settings(settings: dict[str, Any], max_attempts: int) -> JobDefaults:
    """Take the store's private keys out of ``settings`` (in place) as JobDefaults."""
    limits = settings.pop("_limits", None) or {"default": [8, 0.0], "domains": {}}
    page, pattern = settings.pop("_budgets", None) or (None, None)
    return JobDefaults(
        DomainLimits(*limits["default"]),
        {d: DomainLimits(*v) for d, v in limits["domains"].items()},
        max_attempts,
        TrapRules(host_page_budget=page, pattern_budget=pattern),
    )
