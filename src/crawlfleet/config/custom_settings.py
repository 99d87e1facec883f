"""What a spider's ``custom_settings`` (and ``crawl``/``submit -s KEY=VALUE``) may hold.

Three kinds of key, each applied where it belongs:

* settings of the per-job sections (``worker.fetch_timeout``, ``store.raw``, ``retry.base``, or
  their bare names): applied to the job's settings by ``Settings.for_spider`` in every worker;
* spider attributes (``obey_robots``, ``domain_concurrency``, ``domain_rate``, ``max_attempts``,
  the trap guards, also as ``traps.max_depth``...): set on the spider class by
  ``crawlfleet.spiders.configure``, so the job's politeness, budgets and robots rule follow;
* Scrapy's names, mapped to one of the two where crawlfleet has an equivalent
  (:data:`SCRAPY`), refused with the reason where it has none (:data:`NO_EQUIVALENT`).

Nothing is silently ignored: any other key is a one-line error naming the nearest known one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from crawlfleet.config.keys import JOB_SECTIONS, known_keys, nearest, resolve_key
from crawlfleet.errors import ConfigError

if TYPE_CHECKING:
    from crawlfleet.config import Settings

__all__ = [
    "NO_EQUIVALENT",
    "SCRAPY",
    "SPIDER_ATTRIBUTES",
    "CustomSettings",
    "split_custom_settings",
]


@dataclass(frozen=True)
class CustomSettings:
    """``settings``: keys for ``Settings.with_overrides``; ``attributes``: spider attributes."""

    settings: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise ValueError(value)


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(value)
    return int(value)


def _limit(value: Any) -> int | None:
    if value is None or value is False or str(value).lower() in {"none", "off", "false"}:
        return None  # on a spider, None is no limit
    return _int(value)


def _rate(value: Any) -> float | None:
    if value is None or str(value).lower() in {"none", "off"}:
        return None
    rate = float(value)
    if rate <= 0:
        raise ValueError(value)
    return rate


def _fetcher(value: Any) -> str:
    from crawlfleet.request import FETCHERS

    if value not in FETCHERS:
        raise ValueError(value)
    return str(value)


def _profile(value: Any) -> str:
    from crawlfleet.fetch.profiles import check_profile

    check_profile(str(value))
    return str(value)


#: spider attributes settable from custom_settings / -s, with their converters
SPIDER_ATTRIBUTES: Final[dict[str, Callable[[Any], Any]]] = {
    "obey_robots": _bool,
    "domain_concurrency": _int,
    "domain_rate": _rate,
    "max_attempts": _int,
    "allow_private_addresses": _bool,
    "skip_duplicate_content": _bool,
    "fetcher": _fetcher,
    "tls_verify": _bool,
    "impersonate": _profile,
    "max_depth": _limit,
    "max_url_length": _int,
    "max_repeated_segments": _int,
    "host_page_budget": _limit,
    "pattern_budget": _limit,
    "max_links_per_page": _limit,
}


@dataclass(frozen=True)
class _Maps:
    """A Scrapy key's crawlfleet equivalent: a spider attribute or a setting, and the value."""

    target: str
    convert: Callable[[Any], Any]
    attribute: bool = True


def _delay_to_rate(value: Any) -> float | None:
    delay = float(value)
    if delay < 0:
        raise ValueError(value)
    return 1.0 / delay if delay > 0 else None


def _depth(value: Any) -> int | None:
    depth = _int(value)
    return depth if depth > 0 else None  # Scrapy: 0 means no limit


def _retry_times(value: Any) -> int:
    return _int(value) + 1  # Scrapy counts retries; crawlfleet counts attempts


def _retry_enabled(value: Any) -> int | None:
    return None if _bool(value) else 1


def _positive(value: Any) -> int:
    size = _int(value)
    if size <= 0:
        raise ValueError(value)
    return size


#: Scrapy settings with a crawlfleet equivalent
SCRAPY: Final[dict[str, _Maps]] = {
    "CONCURRENT_REQUESTS": _Maps("worker.concurrency", _int, attribute=False),
    "CONCURRENT_REQUESTS_PER_DOMAIN": _Maps("domain_concurrency", _int),
    "DOWNLOAD_DELAY": _Maps("domain_rate", _delay_to_rate),
    "DOWNLOAD_TIMEOUT": _Maps("worker.fetch_timeout", float, attribute=False),
    "DOWNLOAD_MAXSIZE": _Maps("worker.max_body", _positive, attribute=False),
    "ROBOTSTXT_OBEY": _Maps("obey_robots", _bool),
    "USER_AGENT": _Maps("worker.user_agent", str, attribute=False),
    "DEPTH_LIMIT": _Maps("max_depth", _depth),
    "RETRY_TIMES": _Maps("max_attempts", _retry_times),
    "RETRY_ENABLED": _Maps("max_attempts", _retry_enabled),
    "REDIRECT_MAX_TIMES": _Maps("worker.max_redirects", _int, attribute=False),
}

_PACING = "pacing is adaptive and held in the store for the whole fleet: see [pacing] in "
_PACING += "crawlfleet.toml, and domain_concurrency / domain_rate on the spider"
#: Scrapy settings crawlfleet has no equivalent for, and why
NO_EQUIVALENT: Final[dict[str, str]] = {
    "AUTOTHROTTLE_ENABLED": _PACING,
    "AUTOTHROTTLE_START_DELAY": _PACING,
    "AUTOTHROTTLE_MAX_DELAY": "use max_delay in [pacing] of crawlfleet.toml",
    "AUTOTHROTTLE_TARGET_CONCURRENCY": _PACING,
    "AUTOTHROTTLE_DEBUG": "use -v",
    "RANDOMIZE_DOWNLOAD_DELAY": "no equivalent (the store spaces request starts per domain)",
    "CONCURRENT_REQUESTS_PER_IP": "no equivalent: politeness is per domain "
    "(CONCURRENT_REQUESTS_PER_DOMAIN, i.e. domain_concurrency)",
    "CONCURRENT_ITEMS": "no equivalent",
    "DNS_TIMEOUT": "no equivalent (DOWNLOAD_TIMEOUT bounds the whole fetch)",
    "DOWNLOAD_WARNSIZE": "no equivalent (DOWNLOAD_MAXSIZE stops a body)",
    "DEPTH_PRIORITY": "no equivalent (Request(priority=...) orders a crawl)",
    "DEPTH_STATS_VERBOSE": "no equivalent",
    "RETRY_HTTP_CODES": "no equivalent (timeouts, 5xx, 408 and 429 are retried)",
    "RETRY_PRIORITY_ADJUST": "no equivalent",
    "HTTPERROR_ALLOWED_CODES": "no equivalent",
    "HTTPERROR_ALLOW_ALL": "no equivalent",
    "REDIRECT_ENABLED": "no equivalent (set REDIRECT_MAX_TIMES)",
    "COOKIES_ENABLED": "no equivalent yet",
    "DEFAULT_REQUEST_HEADERS": "no equivalent yet",
    "ITEM_PIPELINES": "no equivalent yet",
    "DOWNLOADER_MIDDLEWARES": "no equivalent",
    "SPIDER_MIDDLEWARES": "no equivalent",
    "EXTENSIONS": "no equivalent",
    "DOWNLOAD_HANDLERS": "no equivalent (fetcher = 'http' | 'browser' on the spider)",
    "DUPEFILTER_CLASS": "no equivalent (the store dedups canonical URL fingerprints)",
    "SCHEDULER": "no equivalent (the queue store is the scheduler)",
    "JOBDIR": "no equivalent needed: the queue store keeps the crawl (--queue)",
    "HTTPCACHE_ENABLED": "no equivalent (every response is kept in WARC files)",
    "FEEDS": "use crawl -o FILE / -O FILE",
    "FEED_URI": "use crawl -o FILE / -O FILE",
    "FEED_FORMAT": "use crawl -o FILE.jsonl|.json|.csv|.parquet (or --format)",
    "FEED_EXPORT_ENCODING": "no equivalent (output is UTF-8)",
    "LOG_LEVEL": "use -v / -q",
    "LOG_ENABLED": "use -q",
    "LOG_FILE": "no equivalent (redirect stderr)",
    "CLOSESPIDER_PAGECOUNT": "no equivalent (host_page_budget caps pages per host)",
    "CLOSESPIDER_ITEMCOUNT": "no equivalent",
    "CLOSESPIDER_TIMEOUT": "no equivalent",
    "CLOSESPIDER_ERRORCOUNT": "no equivalent (crawl --max-error-rate)",
    "ROBOTSTXT_USER_AGENT": "no equivalent (USER_AGENT is matched)",
    "TWISTED_REACTOR": "no equivalent (crawlfleet runs on asyncio)",
    "REACTOR_THREADPOOL_MAXSIZE": "no equivalent",
    "BOT_NAME": "no equivalent (the spider's name)",
}


def split_custom_settings(custom: Mapping[str, Any]) -> CustomSettings:
    """Sort ``custom`` into per-job settings and spider attributes, converting values.

    Raises :class:`ConfigError` (one line) for a Scrapy key without an equivalent, a key of a
    fleet-wide section, an unknown key (naming the nearest) or a value of the wrong type.
    """
    out = CustomSettings()
    for key, value in custom.items():
        try:
            _one(key, value, out)
        except (TypeError, ValueError):
            raise ConfigError(f"custom setting {key}: bad value {value!r}") from None
    return out


def _one(key: str, value: Any, out: CustomSettings) -> None:
    if key in SCRAPY:
        maps = SCRAPY[key]
        converted = maps.convert(value)
        if maps.attribute:
            if converted is not None or key != "RETRY_ENABLED":
                out.attributes[maps.target] = converted
        else:
            out.settings[maps.target] = converted
        return
    if key in NO_EQUIVALENT:
        raise ConfigError(f"Scrapy setting {key} is not supported: {NO_EQUIVALENT[key]}")
    if key.isupper():
        hint = nearest(key, [*SCRAPY, *NO_EQUIVALENT])
        raise ConfigError(f"unknown Scrapy setting {key} (no crawlfleet equivalent){hint}")
    name = key.removeprefix("traps.")
    if name in SPIDER_ATTRIBUTES:
        out.attributes[name] = SPIDER_ATTRIBUTES[name](value)
        return
    if key == "queue":
        raise ConfigError("queue is not a per-spider setting (use --queue)")
    try:
        section, name = resolve_key(key)
    except ConfigError:
        hint = nearest(key, [*known_keys(), *SPIDER_ATTRIBUTES])
        raise ConfigError(f"unknown setting {key!r}{hint}") from None
    if section not in JOB_SECTIONS:
        raise ConfigError(
            f"{key} is a fleet-wide setting, not one of a spider: set it in [{section}] of "
            "crawlfleet.toml"
        )
    out.settings[f"{section}.{name}"] = value


def for_spider(settings: Settings, custom_settings: Mapping[str, Any], spider: str) -> Settings:
    """``settings`` with a spider's ``custom_settings`` applied, checked like the rest (a spider
    cannot raise ``fetch_timeout`` past ``lease_ttl`` behind the command's back).

    Keys of the per-job sections (store, worker, retry) apply here; Scrapy's names map to them
    (``DOWNLOAD_TIMEOUT`` is ``worker.fetch_timeout``). Keys that are spider attributes
    (``DOWNLOAD_DELAY``, ``ROBOTSTXT_OBEY``, ``traps.max_depth``...) are applied to the spider
    class by :func:`crawlfleet.spiders.configure`, not here. Anything else is refused with one
    line naming the equivalent, or saying there is none.
    """
    try:
        own = split_custom_settings(custom_settings).settings
        return settings.with_overrides(own).check()
    except ConfigError as exc:
        raise ConfigError(f"spider {spider}: {exc}") from None
