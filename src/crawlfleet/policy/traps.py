"""Crawler-trap guards: URLs too deep, too long or too repetitive to be worth fetching.

Infinite calendars, session-looped paths (``/a/b/a/b/a/b``) and relative-link loops generate
endless distinct URLs. :func:`check_url` rejects the obvious ones on sight; :func:`url_pattern`
gives a bounded key (digits and ids erased) so the caller can cap pages per URL shape.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final
from urllib.parse import urlsplit

from crawlfleet.model import Default
from crawlfleet.urls import DEFAULT_SESSION_PARAMS, is_session_param

__all__ = [
    "TRAP_SAMPLE",
    "TrapRules",
    "budget_keys",
    "check_url",
    "dropped_key",
    "over_budget",
    "sample_traps",
    "url_pattern",
]

#: trapped URLs a job keeps as ``dead(trap)`` rows per rule; past it a trap is only counted
#: (per rule and URL pattern), so an endless generator of links costs the store no more rows
TRAP_SAMPLE: Final = 1000


@dataclass(frozen=True)
class TrapRules:
    """Limits for one crawl. ``None`` means no limit. The budgets are enforced by the caller,
    which counts pages per host and per :func:`url_pattern`."""

    max_depth: int | None = None
    max_url_length: int = 2083  # the classic Internet Explorer limit; servers rarely allow more
    max_repeated_segments: int = 2
    max_path_segments: int = 64
    host_page_budget: int | None = None
    pattern_budget: int | None = None
    #: most new links one page may add to the crawl; the rest are dropped, counted and logged
    max_links_per_page: int | None = None


#: guards that always hold: a spider's None leaves them at their setting
ALWAYS_LIMITED: Final = frozenset({"max_url_length", "max_repeated_segments"})


def spider_overrides(own: Mapping[str, int | Default | None]) -> dict[str, int | None]:
    """The trap guards a spider sets itself: those not left at :data:`~crawlfleet.model.DEFAULT`
    (None: no limit, except for the :data:`ALWAYS_LIMITED` ones, where it means the default)."""
    return {
        k: v
        for k, v in own.items()
        if not isinstance(v, Default) and not (v is None and k in ALWAYS_LIMITED)
    }


def _path_segments(url: str) -> list[str]:
    """Non-empty path segments, without parsing more than needed."""
    start = url.find("://")
    start = url.find("/", start + 3) if start >= 0 else url.find("/")
    if start < 0:
        return []
    end = len(url)
    for sep in "?#":
        pos = url.find(sep, start)
        if 0 <= pos < end:
            end = pos
    return [seg for seg in url[start:end].split("/") if seg]


def check_url(url: str, depth: int, rules: TrapRules) -> str | None:
    """Why ``url`` (found at link ``depth``) looks like a trap, or None if it does not.

    Reasons: ``"depth"``, ``"url_length"``, ``"path_segments"`` and ``"repeated_segments"``
    (one segment more than ``max_repeated_segments`` times, as in ``/x/x/x`` or ``/a/b/a/b/a/b``).
    """
    if rules.max_depth is not None and depth > rules.max_depth:
        return "depth"
    if len(url) > rules.max_url_length:
        return "url_length"
    # "scheme://" holds two slashes: a URL with few more has too few segments to repeat any
    slashes = url.count("/") - 2
    fewer = slashes <= rules.max_repeated_segments and slashes <= rules.max_path_segments
    if fewer and "://" in url:
        return None
    segments = _path_segments(url)
    if len(segments) > rules.max_path_segments:
        return "path_segments"
    if len(segments) > rules.max_repeated_segments:
        _, most = Counter(segments).most_common(1)[0]
        if most > rules.max_repeated_segments:
            return "repeated_segments"
    return None


# Ids first (so their digits are not turned into N one by one): UUIDs, hex runs of 8+ with a
# digit, and long letter-digit tokens (base64-ish session or content ids). Then digit runs.
_ID: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\b(?=[a-fA-F]*\d)[0-9a-fA-F]{8,}\b"
    r"|(?=[A-Za-z_\-]*\d)[A-Za-z0-9_\-]{20,}"
)
_DIGITS: Final = re.compile(r"\d+")
_MAX_SEGMENTS: Final = 12
_MAX_SEGMENT_CHARS: Final = 40
_MAX_KEYS: Final = 12


def _shape(text: str) -> str:
    if text.isdecimal():  # the most common segment of a crawl's new URLs: an id
        return "N"
    if len(text) < 8:  # shorter than any id _ID matches
        return _DIGITS.sub("N", text)
    return _DIGITS.sub("N", _ID.sub("X", text))[:_MAX_SEGMENT_CHARS]


def _split(url: str) -> tuple[str | None, str, str]:
    """``(host, path, query)`` as ``urlsplit`` gives them (host lower-case, None: invalid),
    by string splits for the URLs a crawl mostly has (the store counts every new one)."""
    scheme_end = url.find("://")
    if scheme_end < 0 or "[" in url:
        try:
            parts = urlsplit(url)
            return (parts.hostname or "").lower(), parts.path, parts.query
        except ValueError:
            return None, "", ""
    rest = url[scheme_end + 3 :].partition("#")[0]
    end = len(rest)
    for sep in "/?":
        pos = rest.find(sep)
        if 0 <= pos < end:
            end = pos
    host = rest[:end].rpartition("@")[2].partition(":")[0].lower()
    path, _, query = rest[end:].partition("?")
    return host, path, query


def url_pattern(url: str) -> str:
    """A bounded key for the shape of ``url``: host, path with digits as ``N`` and long ids as
    ``X``, and the sorted query keys only; session ids (``?sid=...``, ``;jsessionid=...``: the
    parameters the fingerprint leaves out by default) are no part of it.
    ``https://shop.test/calendar/2024/05?day=3`` gives ``shop.test/calendar/N/N?day``. At
    most 12 segments and 12 keys, 40 characters each.
    """
    host, path, query = _split(url)
    if host is None:
        return "invalid"
    if len(path) + len(query) > _CACHED_CHARS:
        return host + _path_pattern(path, query)
    # every rule of the shape treats the ASCII digits alike, so the URLs of one shape that
    # differ only in their numbers (a crawl's new links, mostly) share one cache entry
    return host + _cached_path_pattern(path.translate(_FOLD_DIGITS), query.translate(_FOLD_DIGITS))


def _path_pattern(path: str, query: str) -> str:
    segments = [_shape(_without_sessions(seg)) for seg in path.split("/") if seg][:_MAX_SEGMENTS]
    keys = {
        _shape(name)
        for name, _, value in (pair.partition("=") for pair in query.split("&") if pair)
        if not is_session_param(name, value, DEFAULT_SESSION_PARAMS)
    }
    pattern = "/" + "/".join(segments)
    if keys:
        pattern += "?" + "&".join(sorted(keys)[:_MAX_KEYS])
    return pattern


def _without_sessions(segment: str) -> str:
    """A path segment without its ``;name=value`` session ids (``;jsessionid=...``): two
    spellings of one page (the fingerprint leaves session ids out) have one shape, so they
    draw on one URL-shape budget and a session id makes no shape of its own."""
    if ";" not in segment:
        return segment
    head, *params = segment.split(";")
    kept = [p for p in params if not is_session_param(*_param(p), DEFAULT_SESSION_PARAMS)]
    return ";".join([head, *kept])


def _param(pair: str) -> tuple[str, str]:
    name, _, value = pair.partition("=")
    return name, value


_FOLD_DIGITS: Final = str.maketrans("123456789", "000000000")
_CACHED_CHARS: Final = 256  # longer paths and queries are shaped uncached (a bounded cache)
_cached_path_pattern: Final = lru_cache(maxsize=4096)(_path_pattern)


def page_type(url: str) -> str:
    """The page type of ``url`` for learning which fetcher it needs: :func:`url_pattern` with
    the last segment of a deeper path as ``*`` (the item of a section: every category, every
    product page alike). ``https://shop.test/product/blue-mug-12?ref=x`` gives
    ``shop.test/product/*?ref``; ``https://shop.test/about`` stays ``shop.test/about``."""
    pattern, _, query = url_pattern(url).partition("?")
    host, _, path = pattern.partition("/")
    segments = path.split("/") if path else []
    if len(segments) >= 2:
        segments[-1] = "*"
    pattern = host + "/" + "/".join(segments)
    return pattern + "?" + query if query else pattern


def budget_keys(
    url: str, domain: str, rules: TrapRules, listed: bool | int = False
) -> list[tuple[str, str]]:
    """The budget counters a new request of ``domain`` draws on: ``("host", domain)`` and
    ``("pattern", url_pattern(url))``, each only when its budget is set. A URL a sitemap lists
    (``listed``) is the site's own inventory: the URL-shape budget, a guard against generated
    URLs, never counts it (a catalogue of 12,000 products is not a trap)."""
    keys = []
    if rules.host_page_budget is not None:
        keys.append(("host", domain))
    if rules.pattern_budget is not None and not listed:
        keys.append(("pattern", url_pattern(url)))
    return keys


def over_budget(
    new: Sequence[tuple[int, str, str]],
    used: Mapping[tuple[str, str], int],
    rules: TrapRules,
    keys_of: Sequence[list[tuple[str, str]]] | None = None,
) -> tuple[dict[int, str], dict[tuple[str, str], int]]:
    """Which new requests ``(id, url, domain)`` exceed their host or pattern budget, in order.

    ``used`` holds the counters as stored (missing: 0); ``keys_of``, the :func:`budget_keys` of
    each request in ``new`` where the caller computed them already (for the counters to read).
    Returns ``{id: reason}`` for those over budget (reason ``"host_budget"`` or
    ``"pattern_budget"``) and the new counter values of the keys that changed. A request over
    budget does not use up any budget.
    """
    limits = {"host": rules.host_page_budget, "pattern": rules.pattern_budget}
    if keys_of is None:
        keys_of = [budget_keys(url, domain, rules) for _, url, domain in new]
    # the usual case first: no counter reaches its budget with every new request counted, so
    # none is over it (a request is over when its counter already stood at the budget)
    counts = Counter(k for keys in keys_of for k in keys)
    for k, n in counts.items():
        counts[k] = n = n + used.get(k, 0)
        if n > (limits[k[0]] or 0):
            break
    else:
        return {}, dict(counts)
    counts.clear()
    trapped: dict[int, str] = {}
    for (rid, _, _), keys in zip(new, keys_of, strict=True):
        over = next((k for k in keys if counts.get(k, used.get(k, 0)) >= (limits[k[0]] or 0)), None)
        if over is not None:
            trapped[rid] = f"{over[0]}_budget"
            continue
        for k in keys:
            counts[k] = counts.get(k, used.get(k, 0)) + 1
    return trapped, counts


def sample_traps(
    rules: Sequence[str], kept: Mapping[str, int], cap: int = TRAP_SAMPLE
) -> tuple[list[bool], dict[str, int]]:
    """Which of the new traps (their rule each, in order) are kept as rows: the first ``cap``
    per rule, counting the ``kept`` rows already stored (missing: 0). Returns the mask and the
    new kept counts of the rules that changed."""
    counts: dict[str, int] = {}
    mask = []
    for rule in rules:
        n = counts.get(rule, kept.get(rule, 0))
        keep = n < cap
        mask.append(keep)
        if keep:
            counts[rule] = n + 1
    return mask, counts


def dropped_key(domain: str, rule: str, url: str) -> str:
    """The counter of the traps not kept as rows: ``domain<TAB>rule<TAB>url_pattern``."""
    return f"{domain}\t{rule}\t{url_pattern(url)}"
