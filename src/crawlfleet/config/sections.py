"""The sections of the settings, one frozen dataclass per table of ``crawlfleet.toml``, and the
defaults they start from. Every repr masks URL passwords and tokens."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final

from crawlfleet.cache import DEFAULT_CACHE_MEMORY
from crawlfleet.policy.pacing import PacingConfig
from crawlfleet.policy.traps import TrapRules

if TYPE_CHECKING:
    from crawlfleet.monitor.alerts import AlertRules
    from crawlfleet.routes.pools import RoutesConfig

__all__ = [
    "BrowserSection",
    "ControlSettings",
    "FetchSection",
    "PacingSettings",
    "RetrySettings",
    "RoutesSettings",
    "StoreSettings",
    "TrapSettings",
    "WorkerSettings",
    "masked_repr",
]

DEFAULT_QUEUE: Final = "sqlite:///.crawlfleet/queue.db"
DEFAULT_RAW: Final = ".crawlfleet/warc"
DEFAULT_SPOOL: Final = ".crawlfleet/spool"
DEFAULT_USER_AGENT: Final = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"
#: seconds a host waits while its robots.txt is unreachable (``[pacing] robots_recheck``)
ROBOTS_RECHECK: Final = 60.0
#: seconds after which a host whose robots.txt stays unreachable has its requests end
#: ``dead(robots_unavailable)`` (``[pacing] robots_give_up``)
ROBOTS_GIVE_UP: Final = 600.0


def masked_repr(obj: Any) -> str:
    """``Name(field=value, ...)`` with URL passwords and tokens masked."""
    from crawlfleet.urls import mask_credentials

    parts = []
    for f in fields(obj):
        if not f.repr:
            continue
        value = getattr(obj, f.name)
        if f.name in _SECRET_FIELDS and value:
            shown = "'[secure]'"
        elif isinstance(value, str):
            shown = repr(mask_credentials(value))
        else:
            shown = repr(value)
        parts.append(f"{f.name}={shown}")
    return f"{type(obj).__name__}({', '.join(parts)})"


_SECRET_FIELDS: Final = frozenset({"token", "password"})


@dataclass(frozen=True, repr=False)
class StoreSettings:
    """``[store]``: where WARC files go."""

    raw: str = DEFAULT_RAW
    s3_endpoint: str = ""
    raw_spool: str = DEFAULT_SPOOL
    warc_max_size: int = 1 << 30
    warc_gzip_level: int = 1

    __repr__ = masked_repr


@dataclass(frozen=True, repr=False)
class WorkerSettings:
    """``[worker]``: one worker process."""

    concurrency: int = 64
    lease_ttl: float = 60.0
    lease_batch: int = 100
    fetch_timeout: float = 30.0
    max_body: int = 16 << 20
    max_redirects: int = 20
    user_agent: str = DEFAULT_USER_AGENT
    #: most seconds a busy worker lets its finished pages gather before it reports them (see
    #: ``worker.loops.gathers``): one store transaction and one WARC sync for many pages
    report_interval: float = 0.05
    stats_every: float = 5.0
    #: most items (records and requests) one page's callback may yield
    max_yields_per_page: int = 100_000
    #: most seconds one page's callback may run (it runs off the event loop)
    parse_timeout: float = 30.0
    cache_memory: int = DEFAULT_CACHE_MEMORY  # bytes of the worker's caches, shared by its jobs

    __repr__ = masked_repr


@dataclass(frozen=True)
class RetrySettings:
    """``[retry]``: backoff of retried requests (capped, exponential, jittered)."""

    base: float = 2.0
    cap: float = 600.0


@dataclass(frozen=True)
class PacingSettings(PacingConfig):
    """``[pacing]``: :class:`~crawlfleet.policy.pacing.PacingConfig` (but its per-domain
    ``min_delay`` and ``max_concurrency``, which come from the domain's limits) and
    ``robots_recheck`` and ``robots_give_up``."""

    robots_recheck: float = ROBOTS_RECHECK
    robots_give_up: float = ROBOTS_GIVE_UP


@dataclass(frozen=True)
class TrapSettings(TrapRules):
    """``[traps]``: the trap guards a job gets where its spider sets none (``None``: no limit)."""

    max_depth: int | None = 50
    host_page_budget: int | None = 100_000
    pattern_budget: int | None = 10_000
    max_links_per_page: int | None = 10_000


@dataclass(frozen=True)
class FetchSection:
    """``[fetch]``: HTTPS and impersonation, for every fetcher of a job (a spider's
    ``tls_verify`` and ``impersonate`` attributes win over these)."""

    ca_file: str = ""
    """A PEM file of authorities trusted besides the system's and ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``'s (a private CA, a TLS-inspecting proxy)."""
    tls_verify: bool = True
    """False: certificates are not checked (a warning once per host)."""
    impersonate: str = "chrome"
    """The impersonating fetcher's browser: ``chrome``, ``safari``, ``firefox`` (a recent
    version each, one per session) or one of curl_cffi's targets (``chrome146``)."""


@dataclass(frozen=True)
class BrowserSection:
    """``[browser]``: the browser pool of a worker that runs the browser kind (one Chromium per
    worker process; see :class:`~crawlfleet.fetch.browser.BrowserSettings`). Sizes are bytes."""

    executable: str = "/usr/bin/chromium"
    contexts: int = 4
    pages_per_context: int = 50
    pages_per_browser: int = 2000
    memory_budget: int = 2 << 30

    def __post_init__(self) -> None:
        if min(self.contexts, self.pages_per_context, self.pages_per_browser) < 1:
            raise ValueError("contexts, pages_per_context and pages_per_browser must be >= 1")
        if self.memory_budget < 1 << 20:
            raise ValueError("memory_budget is in bytes and must be at least 1 MiB")


@dataclass(frozen=True, repr=False)
class ControlSettings:
    """``[control]``: the control API and dashboard (``crawlfleet serve``)."""

    host: str = "127.0.0.1"
    port: int = 8686
    token: str = ""
    allowed_hosts: str = ""
    alert_oldest_age: float = 600.0
    alert_block_rate: float = 0.2
    alert_validation_rate: float = 0.05
    alive_after: float = 30.0

    __repr__ = masked_repr

    def alert_rules(self) -> AlertRules:
        from crawlfleet.monitor.alerts import AlertRules

        return AlertRules(self.alert_oldest_age, self.alert_block_rate, self.alert_validation_rate)


@dataclass(frozen=True)
class RoutesSettings:
    """``[routes]``: the raw table as written (for the route layer) and its parsed pools (whose
    reprs mask proxy passwords; the table itself is never shown)."""

    table: Mapping[str, Any] = field(default_factory=dict, repr=False)
    pools: RoutesConfig | None = None  # None: no [routes] table (the direct route only)
