"""``Settings``: every setting, by section, with the checks a crawl needs before it starts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from crawlfleet.cache import MIN_CACHE_MEMORY
from crawlfleet.config.keys import SECTIONS, check_queue, convert, resolve_key
from crawlfleet.config.sections import (
    DEFAULT_QUEUE,
    BrowserSection,
    ControlSettings,
    FetchSection,
    NotifySettings,
    PacingSettings,
    QualitySettings,
    RetrySettings,
    RoutesSettings,
    SinkSettings,
    StoreSettings,
    TrapSettings,
    WorkerSettings,
    masked_repr,
)
from crawlfleet.errors import ConfigError
from crawlfleet.model import Default, DomainLimits
from crawlfleet.policy.pacing import PacingConfig
from crawlfleet.policy.traps import TrapRules, spider_overrides

__all__ = ["Settings"]


@dataclass(frozen=True, repr=False)
class Settings:
    """Every setting, by section. Build with :func:`load_settings` or :meth:`of`."""

    queue: str = DEFAULT_QUEUE
    store: StoreSettings = field(default_factory=StoreSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    pacing: PacingSettings = field(default_factory=PacingSettings)
    traps: TrapSettings = field(default_factory=TrapSettings)
    domains: Mapping[str, DomainLimits] = field(default_factory=dict)
    routes: RoutesSettings = field(default_factory=RoutesSettings)
    control: ControlSettings = field(default_factory=ControlSettings)
    browser: BrowserSection = field(default_factory=BrowserSection)
    quality: QualitySettings = field(default_factory=QualitySettings)
    notify: NotifySettings = field(default_factory=NotifySettings)
    sinks: tuple[SinkSettings, ...] = ()
    fetch: FetchSection = field(default_factory=FetchSection)

    __repr__ = masked_repr

    @classmethod
    def of(cls, **overrides: Any) -> Settings:
        """Defaults with ``overrides`` applied (keys as in :meth:`with_overrides`)."""
        return cls().with_overrides(overrides)

    def check(self) -> Settings:
        """Refuse settings that cannot work; returns self."""
        from crawlfleet.data.rawstore import check_raw_url

        w = self.worker
        if w.lease_ttl < w.fetch_timeout:
            raise ConfigError(
                f"lease_ttl ({w.lease_ttl:g}s) is shorter than fetch_timeout "
                f"({w.fetch_timeout:g}s): a slow fetch would be taken over while it runs"
            )
        if w.concurrency < 1 or w.lease_batch < 1:
            raise ConfigError("concurrency and lease_batch must be at least 1")
        if w.max_idle_connections < 0:
            raise ConfigError("worker.max_idle_connections must be 0 or more")
        if w.stats_every <= 0:
            raise ConfigError("worker.stats_every must be more than 0 seconds")
        if w.store_outage_grace < 0:
            raise ConfigError("worker.store_outage_grace must be 0 seconds or more")
        if self.pacing.robots_give_up < 0:
            raise ConfigError("pacing.robots_give_up must be 0 seconds or more")
        if self.pacing.host_give_up < 0 or self.pacing.host_recheck <= 0:
            raise ConfigError(
                "pacing.host_give_up must be 0 seconds or more, pacing.host_recheck more than 0"
            )
        if self.traps.max_links_per_page is not None and self.traps.max_links_per_page < 1:
            raise ConfigError("traps.max_links_per_page must be at least 1 (false: no limit)")
        if w.cache_memory < MIN_CACHE_MEMORY:
            raise ConfigError(
                f"worker.cache_memory must be at least {MIN_CACHE_MEMORY} bytes (1 MiB), "
                f"not {w.cache_memory}"
            )
        check_raw_url(self.store.raw)
        self._check_fetch()
        self.pacing_config()
        return self

    def _check_fetch(self) -> None:
        from crawlfleet.fetch.profiles import check_profile

        f = self.fetch
        if f.ca_file and not os.path.isfile(f.ca_file):
            raise ConfigError(f"fetch.ca_file {f.ca_file!r} is not a file")
        try:
            check_profile(f.impersonate)
        except ValueError as exc:
            raise ConfigError(f"fetch.impersonate: {exc}") from None

    def pacing_config(self) -> PacingConfig:
        """The ``[pacing]`` section as the store applies it (per-domain limits come from rows)."""
        p = self.pacing
        try:
            return PacingConfig(**{f.name: getattr(p, f.name) for f in fields(PacingConfig)})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"[pacing]: {exc}") from None

    def trap_rules(self, **spider: int | Default | None) -> TrapRules:
        """The ``[traps]`` section, overridden by a spider's own attributes (those not left at
        :data:`~crawlfleet.model.DEFAULT`; None: no limit)."""
        values = {**asdict(self.traps), **spider_overrides(spider)}
        try:
            return TrapRules(**values)
        except TypeError as exc:
            raise ConfigError(f"[traps]: {exc}") from None

    def with_overrides(self, overrides: Mapping[str, Any]) -> Settings:
        """These settings with ``overrides`` applied: ``queue``, ``domains`` (a mapping of
        :class:`DomainLimits`), ``section.key`` or a bare unambiguous key. A string value is
        converted to the key's type; None leaves a key as it is."""
        changes: dict[str, dict[str, Any]] = {}
        top: dict[str, Any] = {}
        for key, value in overrides.items():
            if value is None:
                continue
            if key in ("queue", "domains"):
                top[key] = check_queue(value) if key == "queue" else dict(value)
                continue
            section, name = resolve_key(key)
            cls = SECTIONS[section]
            changes.setdefault(section, {})[name] = convert(cls, name, value, key)
        updated = {}
        for section, change in changes.items():
            try:
                updated[section] = replace(getattr(self, section), **change)
            except (TypeError, ValueError) as exc:  # the section's own checks
                raise ConfigError(f"[{section}]: {exc}") from None
        return replace(self, **top, **updated)

    # -- shorthands for what a worker reads on its hot path (the sections hold the values) ----

    @property
    def raw(self) -> str:
        return self.store.raw

    @property
    def s3_endpoint(self) -> str:
        return self.store.s3_endpoint

    @property
    def raw_spool(self) -> str:
        return self.store.raw_spool

    @property
    def warc_max_size(self) -> int:
        return self.store.warc_max_size

    @property
    def warc_gzip_level(self) -> int:
        return self.store.warc_gzip_level

    @property
    def concurrency(self) -> int:
        return self.worker.concurrency

    @property
    def max_idle_connections(self) -> int:
        return self.worker.max_idle_connections

    @property
    def lease_ttl(self) -> float:
        return self.worker.lease_ttl

    @property
    def lease_batch(self) -> int:
        return self.worker.lease_batch

    @property
    def fetch_timeout(self) -> float:
        return self.worker.fetch_timeout

    @property
    def max_body(self) -> int:
        return self.worker.max_body

    @property
    def max_redirects(self) -> int:
        return self.worker.max_redirects

    @property
    def user_agent(self) -> str:
        return self.worker.user_agent

    @property
    def report_interval(self) -> float:
        return self.worker.report_interval

    @property
    def retry_base(self) -> float:
        return self.retry.base

    @property
    def retry_cap(self) -> float:
        return self.retry.cap

    @property
    def robots_recheck(self) -> float:
        """Seconds a host waits, and its robots.txt is fetched again, while it is unreachable."""
        return self.pacing.robots_recheck

    @property
    def robots_give_up(self) -> float:
        """Seconds a host's robots.txt may stay unreachable before its requests end dead."""
        return self.pacing.robots_give_up

    @property
    def host_recheck(self) -> float:
        """Seconds between two tries of a host that cannot be connected to at all."""
        return self.pacing.host_recheck

    @property
    def host_give_up(self) -> float:
        """Seconds a host may stay unconnectable before its requests end dead."""
        return self.pacing.host_give_up
