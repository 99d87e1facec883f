"""Route pools from ``crawlfleet.toml``: which ways out a request may take.

A **route** is one way out: ``direct`` (the machine's own address) or one proxy of a pool. A
**pool** is a named set of routes with the same terms::

    [[routes.pool]]
    name = "dc"                       # letters, digits, "-" and "_"; used in route ids and metrics
    proxies = [                       # http:// (absolute-form requests; CONNECT for https
      "http://user:pass@10.0.0.1:3128",   #   targets), https:// (the same over TLS to the
      "socks5://user:pass@10.0.0.2:1080", #   proxy), socks5:// (the proxy resolves nothing:
    ]                                 #   crawlfleet resolves and checks the target itself)
    proxies_file = "dc-proxies.txt"   # or as well: one URL a line, "#" comments; relative to
                                      #   the config file's directory
    mode = "rotating"                 # "rotating": any route per request; "sticky": a session
                                      #   keeps its route
    rate = 1.0                        # requests/s per domain through one route (None: no cap)
    concurrency = 4                   # requests in flight per domain through one route
    cost = 0.0001                     # per request, in your currency (for `plan`)
    domains = ["shop.example"]        # only for these domains (and their subdomains) ...
    spiders = ["shop"]                # ... and/or these spiders (both empty: any request)
    tier = 1                          # lower tiers are tried first (cheap first); default 0
    session_uses = 50                 # sticky sessions: requests per session ...
    session_age = 3000                # ... and seconds per session (Crawlee's defaults)
    enabled = true

The built-in ``direct`` pool (one route, no proxy, tier 0, cost 0) is there unless an entry named
``direct`` says ``enabled = false``; such an entry may also set its limits, tier, domains and
spiders, but not proxies.

Which pools serve a request is :func:`select_pools`: the request's ``pool``, else the spider's
``route_pools``, else the pools that name its domain or spider, else the pools that name neither.

Credentials stay secret: every ``repr``/``str`` and every error message masks them
(``user:[secure]@``); only :attr:`Route.proxy_url` holds the full URL, for the fetcher.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from crawlfleet.errors import ConfigError
from crawlfleet.model import RoutePlan
from crawlfleet.urls import mask_credentials

__all__ = [
    "DIRECT",
    "PROXY_SCHEMES",
    "Pool",
    "PoolMode",
    "Route",
    "RoutesConfig",
    "load_routes",
    "parse_proxy_url",
    "parse_routes",
    "route_plans",
    "select_pools",
    "tiers",
]

DIRECT: Final = "direct"
PROXY_SCHEMES: Final = frozenset({"http", "https", "socks5"})
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
_POOL_KEYS: Final = (
    "name",
    "proxies",
    "proxies_file",
    "mode",
    "rate",
    "concurrency",
    "cost",
    "domains",
    "spiders",
    "tier",
    "session_uses",
    "session_age",
    "enabled",
)
_ROUTES_KEYS: Final = ("pool",)


class PoolMode(StrEnum):
    ROTATING = "rotating"
    STICKY = "sticky"


@dataclass(frozen=True, slots=True, repr=False)
class Route:
    """One way out. ``id`` is stable across processes and restarts (the pool's name and a hash
    of the proxy URL without its password), so the store can key health and sessions by it."""

    id: str
    pool: str
    proxy_url: str | None = field(default=None, compare=False)
    """The proxy URL with its credentials, for the fetcher only; None for ``direct``."""

    @property
    def is_direct(self) -> bool:
        return self.proxy_url is None

    @property
    def scheme(self) -> str:
        """``direct``, ``http``, ``https`` or ``socks5``."""
        return DIRECT if self.proxy_url is None else self.proxy_url.partition("://")[0]

    @property
    def display(self) -> str:
        """The proxy URL with the password masked (``direct`` for the direct route)."""
        return DIRECT if self.proxy_url is None else mask_credentials(self.proxy_url)

    def __repr__(self) -> str:
        return f"Route({self.id!r}, {self.display!r})"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class Pool:
    """A named set of routes with the same terms (see the module docstring for each key)."""

    name: str
    routes: tuple[Route, ...]
    mode: PoolMode = PoolMode.ROTATING
    rate: float | None = None
    """Requests/s per domain through one route (None: no cap of the pool's own)."""
    concurrency: int | None = None
    """Requests in flight per domain through one route (None: no cap of the pool's own)."""
    cost: float = 0.0
    domains: tuple[str, ...] = ()
    spiders: tuple[str, ...] = ()
    tier: int = 0
    session_uses: int | None = None
    session_age: float | None = None

    @property
    def is_direct(self) -> bool:
        return self.name == DIRECT

    @property
    def is_general(self) -> bool:
        """True when the pool names no domain and no spider: it serves any request."""
        return not self.domains and not self.spiders

    def serves_domain(self, domain: str) -> bool:
        """True if ``domain`` is one of :attr:`domains` or a subdomain of one."""
        host = domain.lower().rstrip(".")
        return any(host == d or host.endswith("." + d) for d in self.domains)


def _direct_pool(**terms: Any) -> Pool:
    return Pool(name=DIRECT, routes=(Route(DIRECT, DIRECT),), **terms)


@dataclass(frozen=True, slots=True)
class RoutesConfig:
    """Every enabled pool, in tier order (declaration order within a tier)."""

    pools: tuple[Pool, ...] = field(default_factory=lambda: (_direct_pool(),))

    def pool(self, name: str) -> Pool:
        """The pool called ``name``; :class:`ConfigError` (naming the closest) if none is."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise ConfigError(f"no route pool named {name!r}{_did_you_mean(name, self.names)}")

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.pools]

    def routes(self) -> list[Route]:
        """Every route of every pool."""
        return [route for pool in self.pools for route in pool.routes]


def select_pools(
    config: RoutesConfig,
    *,
    domain: str,
    spider: str | None = None,
    spider_pools: Sequence[str] | None = None,
    request_pools: str | Sequence[str] | None = None,
) -> tuple[Pool, ...]:
    """The pools that may carry a request for ``domain``, in tier order.

    The first rule that names any pool decides: the request's own ``pool`` (``request_pools``),
    the spider's ``route_pools`` (``spider_pools``), the pools whose ``domains`` hold ``domain``
    or whose ``spiders`` hold ``spider``, and last the general pools (no ``domains``, no
    ``spiders``). Raises :class:`ConfigError` for an unknown pool name, or when no pool serves
    the request.
    """
    named = [request_pools] if isinstance(request_pools, str) else request_pools
    for names in (named, spider_pools):
        if names:
            chosen = {config.pool(n).name for n in names}
            return tuple(p for p in config.pools if p.name in chosen)
    claimed = tuple(
        p for p in config.pools if p.serves_domain(domain) or (spider and spider in p.spiders)
    )
    chosen_pools = claimed or tuple(p for p in config.pools if p.is_general)
    if not chosen_pools:
        raise ConfigError(f"no route pool serves {domain} (spider {spider or '-'})")
    return chosen_pools


def route_plans(
    config: RoutesConfig, *, spider: str | None = None, spider_pools: Sequence[str] | None = None
) -> tuple[RoutePlan, ...]:
    """The routes a job may use, as the store keeps them (ids and terms, never proxy URLs).

    A spider's ``route_pools`` names its pools; otherwise every pool that names the spider, or
    names domains (those serve their domains only), or names neither (those serve the rest).
    Every other pool's routes come ``pinned``: only requests that name their pool
    (``Request(pool=...)``) go through them. Only ``direct`` and nothing configured: empty (the
    store gives each domain a direct lane).
    """
    if spider_pools:
        pools = tuple(config.pool(n) for n in spider_pools)
        general = True
    else:
        pools = tuple(p for p in config.pools if not p.spiders or (spider in p.spiders))
        general = False
    pinned = tuple(p for p in config.pools if p not in pools)
    if (
        not pinned
        and all(p.is_direct for p in pools)
        and not (any(p.domains for p in pools) or any(p.rate or p.concurrency for p in pools))
    ):
        return ()
    return tuple(
        RoutePlan(
            id=route.id,
            pool=pool.name,
            tier=pool.tier,
            max_in_flight=pool.concurrency,
            min_delay=1.0 / pool.rate if pool.rate else 0.0,
            cost=pool.cost,
            domains=() if general or only else pool.domains,
            pinned=only,
        )
        for only, group in ((False, pools), (True, pinned))
        for pool in group
        for route in pool.routes
    )


def tiers(pools: Iterable[Pool]) -> list[tuple[int, tuple[Pool, ...]]]:
    """``pools`` grouped by tier, cheapest (lowest) first: the escalation ladder."""
    by_tier: dict[int, list[Pool]] = {}
    for pool in pools:
        by_tier.setdefault(pool.tier, []).append(pool)
    return [(tier, tuple(by_tier[tier])) for tier in sorted(by_tier)]


# --- parsing ------------------------------------------------------------------------------------


def load_routes(config: str | Path | None = None) -> RoutesConfig:
    """The pools of ``config`` (or ./crawlfleet.toml if present; only ``direct`` without one)."""
    path = Path(config) if config else Path("crawlfleet.toml")
    if config and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    if not path.is_file():
        return RoutesConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    return parse_routes(data, where=str(path), base_dir=path.parent)


def parse_routes(
    data: Mapping[str, Any], *, where: str = "crawlfleet.toml", base_dir: Path = Path()
) -> RoutesConfig:
    """The ``[routes]`` section of a parsed config file (the whole file's dict)."""
    section = data.get("routes", {})
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: [routes] must be a table")
    _refuse_unknown(section, _ROUTES_KEYS, f"{where}: routes")
    entries = section.get("pool", [])
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise ConfigError(f"{where}: routes.pool must be an array of tables ([[routes.pool]])")
    pools: list[Pool] = []
    direct_seen = False
    for index, entry in enumerate(entries):
        label = f"{where}: routes.pool[{index}]"
        pool = _parse_pool(entry, label, base_dir)
        if pool is not None and any(p.name == pool.name for p in pools):
            raise ConfigError(f"{label}: a second pool named {pool.name!r}")
        direct_seen = direct_seen or entry.get("name") == DIRECT
        if pool is not None:
            pools.append(pool)
    if not direct_seen:
        pools.insert(0, _direct_pool())
    order = {id(p): i for i, p in enumerate(pools)}
    return RoutesConfig(tuple(sorted(pools, key=lambda p: (p.tier, order[id(p)]))))


def _parse_pool(entry: Mapping[str, Any], label: str, base_dir: Path) -> Pool | None:
    _refuse_unknown(entry, _POOL_KEYS, label)
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"{label}: name must be letters, digits, '-' or '_' (got {name!r})")
    label = f"{label} ({name})"
    if not _typed(entry, "enabled", bool, label, True):
        return None
    urls = _proxy_urls(entry, label, base_dir)
    if name == DIRECT and urls:
        raise ConfigError(f"{label}: the direct pool has no proxies")
    if name != DIRECT and not urls:
        raise ConfigError(f"{label}: no proxies (set proxies or proxies_file)")
    terms = _terms(entry, label)
    if name == DIRECT:
        return _direct_pool(**terms)
    return Pool(name=name, routes=_routes(name, urls, label), **terms)


def _terms(entry: Mapping[str, Any], label: str) -> dict[str, Any]:
    mode = entry.get("mode", "rotating")
    if mode not in tuple(PoolMode):
        raise ConfigError(f"{label}: mode must be 'rotating' or 'sticky' (got {mode!r})")
    rate = _number(entry, "rate", label, positive=True)
    cost = _number(entry, "cost", label)
    age = _number(entry, "session_age", label, positive=True)
    return {
        "mode": PoolMode(mode),
        "rate": rate,
        "concurrency": _count(entry, "concurrency", label),
        "cost": cost or 0.0,
        "domains": tuple(d.lower().strip(".") for d in _strings(entry, "domains", label)),
        "spiders": tuple(_strings(entry, "spiders", label)),
        "tier": _count(entry, "tier", label, minimum=0) or 0,
        "session_uses": _count(entry, "session_uses", label),
        "session_age": age,
    }


def _proxy_urls(entry: Mapping[str, Any], label: str, base_dir: Path) -> list[tuple[str, str]]:
    """``(url, where it came from)`` for every proxy of the entry."""
    urls = [(u, f"{label}: proxies[{i}]") for i, u in enumerate(_strings(entry, "proxies", label))]
    file = entry.get("proxies_file")
    if file is None:
        return urls
    if not isinstance(file, str):
        raise ConfigError(f"{label}: proxies_file must be a path")
    path = base_dir / file
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read proxies_file {path}: {exc.strerror}") from None
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if text:
            urls.append((text, f"{label}: {path} line {number}"))
    return urls


def _routes(pool: str, urls: list[tuple[str, str]], label: str) -> tuple[Route, ...]:
    routes: list[Route] = []
    for url, where in urls:
        route = Route(route_id(pool, parse_proxy_url(url, where)), pool, url)
        if any(r.id == route.id for r in routes):
            raise ConfigError(f"{where}: {route.display} is listed twice in this pool")
        routes.append(route)
    return tuple(routes)


def parse_proxy_url(url: str, where: str = "proxy") -> str:
    """Check a proxy URL; returns its identity (scheme, user, host, port: no password).

    Raises :class:`ConfigError` (credentials masked) for another scheme, a missing host or
    port, or a path or query.
    """
    shown = mask_credentials(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"{where}: {shown!r} is not a valid proxy URL") from None
    scheme = parts.scheme.lower()
    if scheme not in PROXY_SCHEMES:
        raise ConfigError(f"{where}: {shown!r}: scheme must be http, https or socks5")
    if not parts.hostname or port is None:
        raise ConfigError(f"{where}: {shown!r} needs a host and a port")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{where}: {shown!r}: a proxy URL has no path or query")
    return f"{scheme}://{parts.username or ''}@{parts.hostname.lower()}:{port}"


def route_id(pool: str, identity: str) -> str:
    """``pool/`` and 10 hex digits of a hash of the proxy's identity (no password in it)."""
    return f"{pool}/{hashlib.blake2b(identity.encode(), digest_size=5).hexdigest()}"


def _refuse_unknown(table: Mapping[str, Any], known: Sequence[str], label: str) -> None:
    for key in table:
        if key not in known:
            raise ConfigError(f"{label}: unknown key {key!r}{_did_you_mean(key, known)}")


def _did_you_mean(word: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _typed(entry: Mapping[str, Any], key: str, kind: type, label: str, default: Any) -> Any:
    value = entry.get(key, default)
    if not isinstance(value, kind):
        raise ConfigError(f"{label}: {key} must be a {kind.__name__}")
    return value


def _strings(entry: Mapping[str, Any], key: str, label: str) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{label}: {key} must be a list of strings")
    return value


def _number(
    entry: Mapping[str, Any], key: str, label: str, *, positive: bool = False
) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{label}: {key} must be a number")
    if value < 0 or (positive and value == 0):
        raise ConfigError(f"{label}: {key} must be {'> 0' if positive else '>= 0'}")
    return float(value)


def _count(entry: Mapping[str, Any], key: str, label: str, *, minimum: int = 1) -> int | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{label}: {key} must be a whole number >= {minimum}")
    return value


def unknown_pool(names: Iterable[str], known: Iterable[str]) -> str | None:
    """Why a request naming route pools ``names`` cannot be queued (one line), or None if every
    one of them is in ``known``."""
    pools = sorted(known)
    for name in names:
        if name not in pools:
            close = difflib.get_close_matches(name, pools, n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"no route pool named {name!r}{hint}"
    return None
