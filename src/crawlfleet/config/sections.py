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
    "NotifySettings",
    "PacingSettings",
    "QualitySettings",
    "RetrySettings",
    "RoutesSettings",
    "SinkSettings",
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
#: seconds after which a host whose robots.txt stays unreachable (5xx, 429) has its requests
#: end ``dead(robots_unavailable)`` (``[pacing] robots_give_up``): minutes, within a crawl's life
ROBOTS_GIVE_UP: Final = 120.0
#: seconds between two tries of a host that cannot be connected to at all: refused, no DNS
#: name, no connection in time (``[pacing] host_recheck``) ...
HOST_RECHECK: Final = 2.5
#: ... and after which its requests end ``dead(host_unreachable)`` (``[pacing] host_give_up``),
#: counted from the fleet's first failure, once tried three times at least (a connect that
#: times out may be a busy host): a broad crawl's end follows its last page by seconds (a dead
#: seed holds the crawl's end this long after its first try), not half a minute
HOST_GIVE_UP: Final = 10.0


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
        elif f.name in _ENDPOINT_FIELDS and value:
            if isinstance(value, tuple):
                shown = repr(tuple(masked_endpoint(u) for u in value))
            else:
                shown = repr(masked_endpoint(value))
        elif isinstance(value, str):
            shown = repr(mask_credentials(value))
        else:
            shown = repr(value)
        parts.append(f"{f.name}={shown}")
    return f"{type(obj).__name__}({', '.join(parts)})"


_SECRET_FIELDS: Final = frozenset({"token", "password", "secret"})
#: fields holding endpoints the user configured: shown as scheme://host:port/… only (a webhook's
#: path or query often is its secret: Slack's and Discord's are)
_ENDPOINT_FIELDS: Final = frozenset({"webhook", "slack_webhook", "smtp", "url"})


def masked_endpoint(url: str) -> str:
    """``url`` as it may be shown: its scheme, host and port, the rest hidden."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "[secure]"
    if not parts.scheme or not host:
        return "[secure]"
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}{port}/…"


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
    #: most idle keep-alive connections a worker keeps open (its sockets: concurrency + this)
    max_idle_connections: int = 16
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
    #: seconds a worker (and ``crawl``) waits out a queue store that is away -- refused, cut,
    #: restarting, out of connections -- reconnecting with backoff, before it gives up and exits
    store_outage_grace: float = 600.0

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
    ``robots_recheck``, ``robots_give_up``, ``host_recheck`` and ``host_give_up``."""

    robots_recheck: float = ROBOTS_RECHECK
    robots_give_up: float = ROBOTS_GIVE_UP
    host_recheck: float = HOST_RECHECK
    host_give_up: float = HOST_GIVE_UP


@dataclass(frozen=True)
class TrapSettings(TrapRules):
    """``[traps]``: the trap guards a job gets where its spider sets none (``None``: no limit)."""

    max_depth: int | None = 50
    host_page_budget: int | None = 100_000
    #: none by default: a catalogue of one URL shape is not a trap (depth, repeated segments
    #: and the host budget end a generator of endless URLs)
    pattern_budget: int | None = None
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


@dataclass(frozen=True)
class QualitySettings:
    """``[quality]``: the data-quality monitors of every run (see :mod:`crawlfleet.monitor.
    quality`). A threshold set to ``None`` (``false`` in the file) turns its monitor off. Shares
    are from 0 to 1; ``coverage_drop`` is in points of coverage (0.1: ten points)."""

    check_every: float = 60.0  # seconds between two checks of a running run (fleet-wide)
    baseline_runs: int = 5  # finished runs before this one whose median is the baseline
    min_records: int = 20  # records a run needs before its shares are judged
    item_drop: float | None = 0.3  # records fell by more than this share of the baseline
    pages_drop: float | None = 0.3  # pages fetched likewise
    coverage_drop: float | None = 0.1  # a field's coverage fell by more than this
    coverage: Mapping[str, float] = field(default_factory=dict)  # least coverage per field
    validation_rate: float | None = 0.05  # share of records quarantined
    block_rate: float | None = 0.2  # share of attempts blocked
    dead_rate: float | None = 0.1  # share of finished requests given up
    retry_depth: float | None = 1.0  # mean retries per finished request
    zero_records: bool = True  # a run that finished with no record
    max_run_time: float | None = None  # seconds a run may take
    examples: int = 5  # examples a breach links to

    def __post_init__(self) -> None:
        if self.check_every <= 0:
            raise ValueError("check_every must be more than 0 seconds")
        if self.baseline_runs < 1 or self.min_records < 0 or self.examples < 0:
            raise ValueError("baseline_runs must be at least 1, min_records and examples >= 0")
        for name in (
            "item_drop",
            "pages_drop",
            "coverage_drop",
            "validation_rate",
            "block_rate",
            "dead_rate",
        ):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} is a share from 0 to 1, not {value!r}")
        for name, least in self.coverage.items():
            if (
                not isinstance(least, int | float)
                or isinstance(least, bool)
                or not (0.0 <= least <= 1.0)
            ):
                raise ValueError(f"coverage of {name!r} is a share from 0 to 1, not {least!r}")


#: the events a destination of ``[notify]`` gets unless it says otherwise (``events``)
NOTIFY_EVENTS: Final = ("alert", "run_finished")
EVENT_KINDS: Final = ("alert", "run_finished", "changes")


@dataclass(frozen=True, repr=False)
class NotifySettings:
    """``[notify]``: where alerts and run summaries go, through the store's outbox (at least
    once, retried with backoff, signed with ``secret`` when set)."""

    webhook: tuple[str, ...] = ()  # JSON POST per event
    secret: str = ""  # HMAC-SHA256 of the body: X-Crawlfleet-Signature
    slack_webhook: tuple[str, ...] = ()  # Slack incoming webhooks
    smtp: str = ""  # smtp://user:pass@host:port (STARTTLS when offered) or smtps://
    email_to: tuple[str, ...] = ()
    email_from: str = "crawlfleet@localhost"
    events: tuple[str, ...] = NOTIFY_EVENTS  # what these destinations get
    tries: int = 20  # tries before a delivery is dead (~2.7 hours of backoff)
    backoff: float = 5.0  # seconds before the first retry, doubled each time ...
    backoff_cap: float = 600.0  # ... up to this
    timeout: float = 10.0  # seconds one delivery may take
    delivery_lease: float = 60.0  # a delivery held this long by a process that died is taken over
    keep_delivered: float = 7 * 86400.0  # seconds delivered events stay in the store

    __repr__ = masked_repr

    def __post_init__(self) -> None:
        if self.tries < 1:
            raise ValueError("tries must be at least 1")
        if min(self.backoff, self.backoff_cap, self.timeout, self.delivery_lease) <= 0:
            raise ValueError("backoff, backoff_cap, timeout and delivery_lease must be more than 0")
        if self.delivery_lease < 2 * self.timeout:
            raise ValueError("delivery_lease must be at least twice timeout")
        if "changes" in self.events:
            raise ValueError('changes go to records sinks: [[sink]] kind = "webhook"')
        unknown = [e for e in self.events if e not in NOTIFY_EVENTS]
        if unknown:
            raise ValueError(f"unknown event {unknown[0]!r} (events: {', '.join(NOTIFY_EVENTS)})")
        if self.email_to and not self.smtp:
            raise ValueError("email_to needs smtp (smtp://host:port)")
        for url in (*self.webhook, *self.slack_webhook):
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"a webhook is an http(s) URL, not {masked_endpoint(url)!r}")
        if self.smtp and not self.smtp.startswith(("smtp://", "smtps://")):
            raise ValueError("smtp is smtp://host:port or smtps://host:port")


@dataclass(frozen=True, repr=False)
class SinkSettings:
    """One ``[[sink]]``: where each run's changed records go, in batches, through the outbox."""

    kind: str = "webhook"
    url: str = ""
    secret: str = ""
    batch: int = 500  # records per POST
    name: str = ""  # how status names it (default: its kind and host)

    __repr__ = masked_repr

    def __post_init__(self) -> None:
        if self.kind != "webhook":
            raise ValueError(f"unknown sink kind {self.kind!r} (kinds: webhook)")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError('a webhook sink needs url = "https://..."')
        if not 1 <= self.batch <= 100_000:
            raise ValueError("batch is from 1 to 100000 records")
