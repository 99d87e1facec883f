"""Settings: defaults < ``crawlfleet.toml`` < ``CRAWLFLEET_*`` environment < command-line flags.

``crawlfleet.toml`` (all keys optional)::

    queue = "sqlite:///.crawlfleet/queue.db"      # or postgresql://user:pass@host/db

    [store]
    raw = ".crawlfleet/warc"                       # WARC directory, or s3://bucket/prefix
    s3_endpoint = "http://127.0.0.1:9000"          # S3-compatible server (default: AWS)
    raw_spool = ".crawlfleet/spool"                # local WARC files waiting for upload to S3
    warc_max_size = 1073741824
    warc_gzip_level = 1

    [worker]
    concurrency = 64          # requests in flight per worker process
    lease_ttl = 60            # seconds; heartbeats extend it every lease_ttl/3
    lease_batch = 100
    fetch_timeout = 30
    max_body = 16777216
    max_redirects = 20
    user_agent = "crawlfleet/0.1"

    [retry]
    base = 2.0                # first backoff, doubled per attempt, with jitter
    cap = 600.0

    [pacing]                  # adaptive pacing of each lane (domain), applied by the store
    max_delay = 60.0          # slowest pace (seconds between request starts) push-back can set
    pushback_share = 0.25     # share of push-back (429/503/blocks/no answer) among recent ...
    pushback_window = 25      # ... responses (EWMA) that slows a lane down; a lone 503 does not
    slowdown_factor = 2.0     # delay multiplier when it does
    recover_factor = 0.5      # delay multiplier per second without push-back
    recover_every = 0.25      # seconds per doubling of concurrency while healthy
    start_concurrency = 4     # a new lane's width; it doubles from there
    limit_fraction = 0.85     # after a 429, go on at this share of the rate it accepted ...
    probe = 0.02              # ... and probe upward by this fraction a second
    limit_hold = 600.0        # seconds the 429 ceiling holds without further push-back
    latency_ratio = 1.5       # typical latency past this x the lane's unloaded one is load
    crawl_delay_cap = 30.0    # robots.txt Crawl-delay is a delay floor, capped here
    retry_after_cap = 3600.0
    circuit_threshold = 5     # failures in a row (no response or 5xx) that close a host ...
    circuit_base = 30.0       # ... for this long, doubling per reopening that fails ...
    circuit_cap = 3600.0      # ... up to this
    robots_recheck = 60.0     # seconds a host waits while its robots.txt is unreachable

    [traps]                   # trap guards (a spider's own attributes take precedence)
    max_depth = 50            # links from a seed
    max_url_length = 2083
    max_repeated_segments = 2 # one path segment repeated more often: /a/b/a/b/a/b
    host_page_budget = 100000 # most requests per host per job, counted fleet-wide
    pattern_budget = 10000    # most requests per URL shape (digits and ids erased)

    [domains."shop.example"]  # politeness for one domain, across the whole fleet
    concurrency = 4
    rate = 2.0                # requests per second

Environment: ``CRAWLFLEET_QUEUE``, ``CRAWLFLEET_RAW``, ``CRAWLFLEET_S3_ENDPOINT``,
``CRAWLFLEET_RAW_SPOOL``, ``CRAWLFLEET_CONCURRENCY``, ``CRAWLFLEET_LEASE_TTL``,
``CRAWLFLEET_FETCH_TIMEOUT``. S3 credentials come from the usual ``AWS_*`` variables (or any other
source boto3 reads); they are not settings and never printed.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from crawlfleet.data.rawstore import check_raw_url
from crawlfleet.errors import ConfigError
from crawlfleet.model import DomainLimits
from crawlfleet.policy.pacing import PacingConfig
from crawlfleet.policy.traps import TrapRules

DEFAULT_QUEUE = "sqlite:///.crawlfleet/queue.db"
DEFAULT_RAW = ".crawlfleet/warc"
DEFAULT_SPOOL = ".crawlfleet/spool"
#: seconds a host waits while its robots.txt is unreachable (``[pacing] robots_recheck``)
ROBOTS_RECHECK = 60.0
_PACING_KEYS = {f.name for f in fields(PacingConfig)} - {"min_delay", "max_concurrency"} | {
    "robots_recheck"
}
_TRAP_KEYS = {f.name for f in fields(TrapRules)}


@dataclass(frozen=True)
class Settings:
    queue: str = DEFAULT_QUEUE
    raw: str = DEFAULT_RAW
    s3_endpoint: str = ""
    raw_spool: str = DEFAULT_SPOOL
    warc_max_size: int = 1 << 30
    warc_gzip_level: int = 1
    concurrency: int = 64
    lease_ttl: float = 60.0
    lease_batch: int = 100
    fetch_timeout: float = 30.0
    max_body: int = 16 << 20
    max_redirects: int = 20
    user_agent: str = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"
    retry_base: float = 2.0
    retry_cap: float = 600.0
    report_interval: float = 0.002
    domains: Mapping[str, DomainLimits] = field(default_factory=dict)
    pacing: Mapping[str, float] = field(default_factory=dict)  # [pacing]: PacingConfig fields
    traps: Mapping[str, int | None] = field(default_factory=dict)  # [traps]: TrapRules fields

    def check(self) -> Settings:
        """Refuse settings that cannot work; returns self."""
        if self.lease_ttl < self.fetch_timeout:
            raise ConfigError(
                f"lease_ttl ({self.lease_ttl:g}s) is shorter than fetch_timeout "
                f"({self.fetch_timeout:g}s): a slow fetch would be taken over while it runs"
            )
        if self.concurrency < 1 or self.lease_batch < 1:
            raise ConfigError("concurrency and lease_batch must be at least 1")
        check_raw_url(self.raw)
        self.pacing_config()
        self.trap_rules()
        return self

    @property
    def robots_recheck(self) -> float:
        """Seconds a host waits, and its robots.txt is fetched again, while it is unreachable."""
        return float(self.pacing.get("robots_recheck", ROBOTS_RECHECK))

    def pacing_config(self) -> PacingConfig:
        """The ``[pacing]`` section as the store applies it (per-domain limits come from rows)."""
        values: dict[str, Any] = {k: v for k, v in self.pacing.items() if k != "robots_recheck"}
        try:
            return PacingConfig(**values)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"[pacing]: {exc}") from None

    def trap_rules(self, **spider: int | None) -> TrapRules:
        """The ``[traps]`` section, overridden by a spider's own (not None) attributes."""
        values: dict[str, Any] = {
            **self.traps,
            **{k: v for k, v in spider.items() if v is not None},
        }
        try:
            return TrapRules(**values)
        except TypeError as exc:
            raise ConfigError(f"[traps]: {exc}") from None

    def for_spider(self, custom_settings: Mapping[str, Any], spider: str) -> Settings:
        """These settings with a spider's ``custom_settings`` applied, checked like the rest
        (a spider cannot raise ``fetch_timeout`` past ``lease_ttl`` behind the command's back).
        Keys that are not worker settings are left to the spider."""
        known = {k: v for k, v in custom_settings.items() if k in _FIELDS}
        try:
            return self.with_overrides(known).check()
        except ConfigError as exc:
            raise ConfigError(f"spider {spider}: {exc}") from None

    def with_overrides(self, overrides: Mapping[str, Any]) -> Settings:
        known = {f.name: f.type for f in fields(self)}
        clean: dict[str, Any] = {}
        for key, value in overrides.items():
            if value is None:
                continue
            if key not in known:
                raise ConfigError(f"unknown setting {key!r}")
            clean[key] = _coerce(key, value, getattr(self, key))
        return replace(self, **clean)


_FIELDS = frozenset(f.name for f in fields(Settings))


def _coerce(key: str, value: Any, current: Any) -> Any:
    if isinstance(current, Mapping):
        return value
    try:
        if isinstance(current, bool):
            return str(value).lower() in {"1", "true", "yes", "on"}
        return type(current)(value)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {key!r}: {value!r} is not a {type(current).__name__}") from None


_SECTIONS = {
    "store": {"raw", "s3_endpoint", "raw_spool", "warc_max_size", "warc_gzip_level"},
    "worker": {
        "concurrency",
        "lease_ttl",
        "lease_batch",
        "fetch_timeout",
        "max_body",
        "max_redirects",
        "user_agent",
        "report_interval",
    },
    "retry": {"base", "cap"},
}
_ENV = {
    "CRAWLFLEET_QUEUE": "queue",
    "CRAWLFLEET_RAW": "raw",
    "CRAWLFLEET_S3_ENDPOINT": "s3_endpoint",
    "CRAWLFLEET_RAW_SPOOL": "raw_spool",
    "CRAWLFLEET_CONCURRENCY": "concurrency",
    "CRAWLFLEET_LEASE_TTL": "lease_ttl",
    "CRAWLFLEET_FETCH_TIMEOUT": "fetch_timeout",
}


def _from_toml(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "queue":
            out["queue"] = value
        elif key in _SECTIONS:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: [{key}] must be a table")
            for sub, v in value.items():
                if sub not in _SECTIONS[key]:
                    raise ConfigError(f"{where}: unknown key {key}.{sub}")
                out[f"retry_{sub}" if key == "retry" else sub] = v
        elif key == "domains":
            out["domains"] = {d: _domain_limits(d, v, where) for d, v in value.items()}
        elif key in ("pacing", "traps"):
            out[key] = _table(key, value, _PACING_KEYS if key == "pacing" else _TRAP_KEYS, where)
        elif key in {"routes", "pools", "control"}:
            continue  # read by the route layer and the control plane
        else:
            raise ConfigError(f"{where}: unknown key {key!r}")
    return out


def _table(name: str, value: Any, known: set[str], where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [{name}] must be a table")
    unknown = sorted(set(value) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key {name}.{unknown[0]}")
    for key, v in value.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ConfigError(f"{where}: {name}.{key} must be a number")
    return dict(value)


def _domain_limits(domain: str, value: Mapping[str, Any], where: str) -> DomainLimits:
    try:
        rate = value.get("rate")
        return DomainLimits(
            max_in_flight=int(value.get("concurrency", 8)),
            min_delay=1.0 / float(rate) if rate else 0.0,
        )
    except (TypeError, ValueError, ZeroDivisionError):
        raise ConfigError(f"{where}: bad limits for domain {domain!r}") from None


def load_settings(
    config: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Build the settings from the config file (``config`` or ./crawlfleet.toml if present)."""
    path = Path(config) if config else Path("crawlfleet.toml")
    values: dict[str, Any] = {}
    if config and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        values.update(_from_toml(data, str(path)))
    for env, key in _ENV.items():
        if os.environ.get(env):
            values[key] = os.environ[env]
    settings = Settings().with_overrides(values)
    return settings.with_overrides(overrides or {})
