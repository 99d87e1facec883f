"""Settings: defaults < ``crawlfleet.toml`` < ``CRAWLFLEET_*`` environment < command-line flags.

One frozen :class:`Settings` of typed sections, one per table of the file. Every key is
optional; an unknown key or section is an error that names the nearest known one::

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
    max_depth = 50            # links from a seed (false: no limit, for any guard)
    max_url_length = 2083
    max_repeated_segments = 2 # one path segment repeated more often: /a/b/a/b/a/b
    host_page_budget = 100000 # most requests per host per job, counted fleet-wide
    pattern_budget = 10000    # most requests per URL shape (digits and ids erased)

    [domains."shop.example"]  # politeness for one domain, across the whole fleet
    concurrency = 4
    rate = 2.0                # requests per second

    [[routes.pool]]           # proxy pools: see crawlfleet.routes.pools
    name = "dc"
    proxies = ["http://user:pass@10.0.0.1:3128"]

    [control]                 # the control API and dashboard (crawlfleet serve)
    host = "127.0.0.1"
    port = 8686
    token = ""                # required to bind anywhere but loopback

Environment: ``CRAWLFLEET_QUEUE``, ``CRAWLFLEET_RAW``, ``CRAWLFLEET_S3_ENDPOINT``,
``CRAWLFLEET_RAW_SPOOL``, ``CRAWLFLEET_CONCURRENCY``, ``CRAWLFLEET_LEASE_TTL``,
``CRAWLFLEET_FETCH_TIMEOUT``. S3 credentials come from the usual ``AWS_*`` variables (or any other
source boto3 reads); they are not settings and never printed. Every repr masks the passwords of
the queue URL and of proxies, and the control token.

Overrides (flags, ``-s KEY=VALUE``, a spider's ``custom_settings``) name a key as
``section.key`` (``worker.concurrency``) or by its bare name where that is unambiguous
(``concurrency``); strings are converted to the key's type.
"""

from __future__ import annotations

import difflib
import os
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from crawlfleet.errors import ConfigError
from crawlfleet.model import DomainLimits
from crawlfleet.policy.pacing import PacingConfig
from crawlfleet.policy.traps import TrapRules

if TYPE_CHECKING:
    from crawlfleet.routes.pools import RoutesConfig

__all__ = [
    "ControlSettings",
    "PacingSettings",
    "RetrySettings",
    "RoutesSettings",
    "Settings",
    "StoreSettings",
    "TrapSettings",
    "WorkerSettings",
    "load_settings",
    "nearest",
]

DEFAULT_QUEUE: Final = "sqlite:///.crawlfleet/queue.db"
DEFAULT_RAW: Final = ".crawlfleet/warc"
DEFAULT_SPOOL: Final = ".crawlfleet/spool"
DEFAULT_USER_AGENT: Final = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"
#: seconds a host waits while its robots.txt is unreachable (``[pacing] robots_recheck``)
ROBOTS_RECHECK: Final = 60.0


def _masked(obj: Any) -> str:
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

    __repr__ = _masked


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
    report_interval: float = 0.002

    __repr__ = _masked


@dataclass(frozen=True)
class RetrySettings:
    """``[retry]``: backoff of retried requests (capped, exponential, jittered)."""

    base: float = 2.0
    cap: float = 600.0


@dataclass(frozen=True)
class PacingSettings(PacingConfig):
    """``[pacing]``: :class:`~crawlfleet.policy.pacing.PacingConfig` (but its per-domain
    ``min_delay`` and ``max_concurrency``, which come from the domain's limits) and
    ``robots_recheck``."""

    robots_recheck: float = ROBOTS_RECHECK


@dataclass(frozen=True)
class TrapSettings(TrapRules):
    """``[traps]``: the trap guards a job gets where its spider sets none (``None``: no limit)."""

    max_depth: int | None = 50
    host_page_budget: int | None = 100_000
    pattern_budget: int | None = 10_000


@dataclass(frozen=True, repr=False)
class ControlSettings:
    """``[control]``: the control API and dashboard (``crawlfleet serve``)."""

    host: str = "127.0.0.1"
    port: int = 8686
    token: str = ""

    __repr__ = _masked


@dataclass(frozen=True)
class RoutesSettings:
    """``[routes]``: the raw table as written (for the route layer) and its parsed pools (whose
    reprs mask proxy passwords; the table itself is never shown)."""

    table: Mapping[str, Any] = field(default_factory=dict, repr=False)
    pools: RoutesConfig | None = None  # None: no [routes] table (the direct route only)


#: the sections set by ``[name]`` tables and overrides, with the keys a file may set
_SECTIONS: Final[dict[str, type]] = {
    "store": StoreSettings,
    "worker": WorkerSettings,
    "retry": RetrySettings,
    "pacing": PacingSettings,
    "traps": TrapSettings,
    "control": ControlSettings,
}
#: fields of a section that are not settings (the pacing limits come from each domain's row)
_NOT_KEYS: Final = {"pacing": {"min_delay", "max_concurrency"}}
_ENV: Final = {
    "CRAWLFLEET_QUEUE": "queue",
    "CRAWLFLEET_RAW": "store.raw",
    "CRAWLFLEET_S3_ENDPOINT": "store.s3_endpoint",
    "CRAWLFLEET_RAW_SPOOL": "store.raw_spool",
    "CRAWLFLEET_CONCURRENCY": "worker.concurrency",
    "CRAWLFLEET_LEASE_TTL": "worker.lease_ttl",
    "CRAWLFLEET_FETCH_TIMEOUT": "worker.fetch_timeout",
}
#: sections a spider's ``custom_settings`` (and a job's ``-s``) may change for its own job
JOB_SECTIONS: Final = frozenset({"store", "worker", "retry"})


@dataclass(frozen=True, repr=False)
class Settings:
    """Every setting, by section. Build with :func:`load_settings` or :meth:`of`."""

    queue: str = DEFAULT_QUEUE
    store: StoreSettings = StoreSettings()
    worker: WorkerSettings = WorkerSettings()
    retry: RetrySettings = RetrySettings()
    pacing: PacingSettings = PacingSettings()
    traps: TrapSettings = TrapSettings()
    domains: Mapping[str, DomainLimits] = field(default_factory=dict)
    routes: RoutesSettings = RoutesSettings()
    control: ControlSettings = ControlSettings()

    __repr__ = _masked

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
        check_raw_url(self.store.raw)
        self.pacing_config()
        return self

    def pacing_config(self) -> PacingConfig:
        """The ``[pacing]`` section as the store applies it (per-domain limits come from rows)."""
        p = self.pacing
        try:
            return PacingConfig(**{f.name: getattr(p, f.name) for f in fields(PacingConfig)})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"[pacing]: {exc}") from None

    def trap_rules(self, **spider: int | None) -> TrapRules:
        """The ``[traps]`` section, overridden by a spider's own (not None) attributes."""
        values = {**asdict(self.traps), **{k: v for k, v in spider.items() if v is not None}}
        try:
            return TrapRules(**values)
        except TypeError as exc:
            raise ConfigError(f"[traps]: {exc}") from None

    def for_spider(self, custom_settings: Mapping[str, Any], spider: str) -> Settings:
        """These settings with a spider's ``custom_settings`` applied, checked like the rest
        (a spider cannot raise ``fetch_timeout`` past ``lease_ttl`` behind the command's back).

        Keys of the per-job sections (store, worker, retry) apply here; Scrapy's names map to
        them (``DOWNLOAD_TIMEOUT`` is ``worker.fetch_timeout``). Keys that are spider
        attributes (``DOWNLOAD_DELAY``, ``ROBOTSTXT_OBEY``, ``traps.max_depth``...) are applied
        to the spider class by :func:`crawlfleet.spiders.configure`, not here. Anything else is
        refused with one line naming the equivalent, or saying there is none.
        """
        from crawlfleet.custom_settings import split_custom_settings

        try:
            own = split_custom_settings(custom_settings).settings
            return self.with_overrides(own).check()
        except ConfigError as exc:
            raise ConfigError(f"spider {spider}: {exc}") from None

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
                top[key] = _queue(value) if key == "queue" else dict(value)
                continue
            section, name = resolve_key(key)
            cls = _SECTIONS[section]
            changes.setdefault(section, {})[name] = _convert(cls, name, value, key)
        updated = {s: replace(getattr(self, s), **c) for s, c in changes.items()}
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


# -- keys -----------------------------------------------------------------------------------------


def section_keys(section: str) -> list[str]:
    """The keys ``[section]`` may set."""
    skip = _NOT_KEYS.get(section, set())
    return [f.name for f in fields(_SECTIONS[section]) if f.name not in skip]


@cache
def _key_table() -> dict[str, tuple[str, str]]:
    """Every accepted override key: ``section.key``, unambiguous bare names, and the flat
    ``retry_base`` / ``retry_cap`` of earlier versions."""
    table: dict[str, tuple[str, str]] = {}
    bare: dict[str, list[tuple[str, str]]] = {}
    for section in _SECTIONS:
        for name in section_keys(section):
            table[f"{section}.{name}"] = (section, name)
            bare.setdefault(name, []).append((section, name))
    for name, places in bare.items():
        if len(places) == 1:
            table.setdefault(name, places[0])
    table["retry_base"], table["retry_cap"] = ("retry", "base"), ("retry", "cap")
    return table


def known_keys() -> list[str]:
    """Every key :meth:`Settings.with_overrides` accepts."""
    return ["queue", *_key_table()]


def resolve_key(key: str) -> tuple[str, str]:
    """``(section, field)`` of an override key; ConfigError naming the nearest key if unknown."""
    found = _key_table().get(key)
    if found is None:
        raise ConfigError(f"unknown setting {key!r}{nearest(key, known_keys())}")
    return found


def nearest(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``choices``, or ``""`` when none is close."""
    pool = list(choices)
    match = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not match:  # a bare name of a dotted key ("concurency" -> "worker.concurrency")
        tails = {c.rpartition(".")[2]: c for c in pool}
        close = difflib.get_close_matches(word.rpartition(".")[2], list(tails), n=1, cutoff=0.6)
        match = [tails[close[0]]] if close else []
    return f" (did you mean {match[0]!r}?)" if match else ""


def _queue(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError("queue must be a URL string")
    return value


# -- values ---------------------------------------------------------------------------------------

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})
_NONE: Final = frozenset({"none", "off", "false", "no"})


@cache
def _types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(cls: type, name: str, value: Any, label: str, *, parse: bool = True) -> Any:
    """``value`` as the type of ``cls.name``: strings are parsed (flags, environment, -s) unless
    ``parse`` is False; anything else must already have the type (a file's values)."""
    kind = _types(cls)[name]
    optional = isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind)
    if optional:
        kind = next(t for t in typing.get_args(kind) if t is not type(None))
        if value is False or (isinstance(value, str) and value.lower() in _NONE):
            return None
    try:
        if parse and isinstance(value, str) and kind is not str:
            return _parse(kind, value)
        return _typed(kind, value)
    except (TypeError, ValueError):
        what = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
        off = " (or false: no limit)" if optional else ""
        raise ConfigError(f"{label} must be {what.get(kind, kind)}{off}, not {value!r}") from None


def _parse(kind: Any, text: str) -> Any:
    if kind is bool:
        if text.lower() not in _TRUE | _FALSE:
            raise ValueError(text)
        return text.lower() in _TRUE
    return kind(text.replace("_", "")) if kind is int else kind(text)


def _typed(kind: Any, value: Any) -> Any:
    if isinstance(value, bool) and kind is not bool:
        raise TypeError(value)
    if kind is float and isinstance(value, int):
        return float(value)
    if not isinstance(value, kind):
        raise TypeError(value)
    return value


# -- the file -------------------------------------------------------------------------------------


def _from_toml(data: Mapping[str, Any], where: str, base_dir: Path) -> Settings:
    settings = Settings()
    for key, value in data.items():
        if key == "queue":
            settings = replace(settings, queue=_queue(value))
        elif key in _SECTIONS:
            section = _table(key, value, where)
            settings = replace(settings, **{key: _section(key, section, where)})
        elif key == "domains":
            domains = {d: _domain_limits(d, v, where) for d, v in _table(key, value, where).items()}
            settings = replace(settings, domains=domains)
        elif key == "routes":
            from crawlfleet.routes.pools import parse_routes

            pools = parse_routes(data, where=where, base_dir=base_dir)
            settings = replace(settings, routes=RoutesSettings(dict(value), pools))
        else:
            _unknown_top(key, value, where)
    return settings


def _unknown_top(key: str, value: Any, where: str) -> None:
    if isinstance(value, Mapping) or (isinstance(value, list) and value):
        tables = [*_SECTIONS, "domains", "routes"]
        hint = nearest(key, tables)
        raise ConfigError(f"{where}: unknown section [{key}]{hint}")
    hint = nearest(key, ["queue"]) or nearest(key, known_keys())
    raise ConfigError(f"{where}: unknown key {key!r}{hint}")


def _table(name: str, value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [{name}] must be a table")
    return value


def _section(name: str, table: Mapping[str, Any], where: str) -> Any:
    cls = _SECTIONS[name]
    keys = section_keys(name)
    values = {}
    for key, value in table.items():
        if key not in keys:
            hint = nearest(key, keys)
            hint = hint.replace("'", f"'{name}.", 1) if hint else ""
            raise ConfigError(f"{where}: unknown key {name}.{key}{hint}")
        values[key] = _convert(cls, key, value, f"{where}: {name}.{key}", parse=False)
    try:
        return cls(**values)
    except ValueError as exc:  # a section that checks its own values (pacing)
        raise ConfigError(f"{where}: [{name}]: {exc}") from None


def _domain_limits(domain: str, value: Any, where: str) -> DomainLimits:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [domains.{domain!r}] must be a table")
    unknown = sorted(set(value) - {"concurrency", "rate"})
    if unknown:
        hint = nearest(unknown[0], ["concurrency", "rate"])
        raise ConfigError(f"{where}: unknown key domains.{domain!r}.{unknown[0]}{hint}")
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
    """Build the settings from the config file (``config`` or ./crawlfleet.toml if present),
    the environment and ``overrides`` (see :meth:`Settings.with_overrides`)."""
    path = Path(config) if config else Path("crawlfleet.toml")
    if config and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    settings = Settings()
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        settings = _from_toml(data, str(path), path.parent)
    env = {key: os.environ[name] for name, key in _ENV.items() if os.environ.get(name)}
    return settings.with_overrides(env).with_overrides(overrides or {})
