"""robots.txt per RFC 9309, cached per origin.

What the status of ``/robots.txt`` means (RFC 9309 §2.3.1):

====================================  =====================================================
2xx                                   parse the rules (only the first ``max_size`` bytes)
3xx followed to the end (≥ 5 hops)    whatever the final response says
4xx, including 404 (but not 429)      "unavailable": everything is allowed
5xx, 429, timeout, network error      "unreachable": everything is disallowed, and the file
                                      is fetched again after ``error_recheck`` seconds
====================================  =====================================================

Scrapy treats a download error as "allow all"; that lets a struggling server be crawled
harder exactly when it is failing, so here it disallows. ``/robots.txt`` itself is always
allowed. One fetch per origin at a time: concurrent callers wait for the same fetch.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from protego import Protego
from yarl import URL

from crawlfleet.errors import FetchError, TooManyRedirects

if TYPE_CHECKING:
    from crawlfleet.fetch.http import FetchResult, HttpFetcher

OK: Final = "ok"
ALLOW_ALL: Final = "allow_all"
UNREACHABLE: Final = "unreachable"

DEFAULT_MAX_SIZE = 500 * 1024


@dataclass(slots=True)
class _Entry:
    state: str
    rules: Protego | None
    expires: float


class RobotsCache:
    """Answers "may this user agent fetch this URL?" from each origin's robots.txt.

    ``clock`` is injectable so tests can step past ``ttl`` and ``error_recheck``.
    ``max_hosts`` bounds memory on broad crawls (least recently used origins are dropped).
    """

    def __init__(
        self,
        fetcher: HttpFetcher,
        *,
        user_agent: str,
        ttl: float = 86400.0,
        error_recheck: float = 60.0,
        max_size: int = DEFAULT_MAX_SIZE,
        clock: Callable[[], float] = time.monotonic,
        max_hosts: int = 10_000,
    ) -> None:
        self._fetcher = fetcher
        self._user_agent = user_agent
        self._ttl = ttl
        self._error_recheck = error_recheck
        self._max_size = max_size
        self._clock = clock
        self._max_hosts = max_hosts
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._inflight: dict[str, asyncio.Task[_Entry]] = {}

    async def allowed(self, url: str) -> bool:
        """True if robots.txt lets our user agent fetch ``url``."""
        parsed = URL(url)
        if parsed.scheme not in ("http", "https"):
            return True  # robots.txt governs http(s) only; the fetcher refuses the rest
        if parsed.path == "/robots.txt":
            return True
        entry = await self._entry(_origin(parsed))
        if entry.state == ALLOW_ALL:
            return True
        if entry.rules is None:
            return False
        return bool(entry.rules.can_fetch(url, self._user_agent))

    def cached_verdict(self, url: str) -> bool | None:
        """What :meth:`allowed` would answer from a fresh cache entry alone (None: not known).

        Lets a worker drop disallowed links when it discovers them, without awaiting a fetch.
        Only a parsed robots.txt answers here; an unreachable one is a temporary state.
        """
        parsed = URL(url)
        entry = self._entries.get(_origin(parsed))
        if entry is None or entry.expires <= self._clock() or entry.state == UNREACHABLE:
            return None
        if entry.state == ALLOW_ALL or entry.rules is None or parsed.path == "/robots.txt":
            return True
        return bool(entry.rules.can_fetch(url, self._user_agent))

    async def crawl_delay(self, url: str) -> float | None:
        """The ``Crawl-delay`` for our user agent on ``url``'s origin, if it sets one."""
        parsed = URL(url)
        if parsed.scheme not in ("http", "https"):
            return None
        entry = await self._entry(_origin(parsed))
        if entry.rules is None:
            return None
        delay = entry.rules.crawl_delay(self._user_agent)
        return float(delay) if delay is not None else None

    def state(self, origin: str) -> str | None:
        """``"ok"``, ``"allow_all"`` or ``"unreachable"`` for a URL or ``scheme://host[:port]``
        (``None`` if never fetched). Expired entries still report their last state."""
        entry = self._entries.get(_origin(URL(origin)))
        return entry.state if entry is not None else None

    async def close(self) -> None:
        """Cancel robots.txt fetches still in flight (at shutdown)."""
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _entry(self, origin: str) -> _Entry:
        entry = self._entries.get(origin)
        if entry is not None and entry.expires > self._clock():
            self._entries.move_to_end(origin)
            return entry
        task = self._inflight.get(origin)
        if task is None:
            task = asyncio.create_task(self._refresh(origin), name=f"robots {origin}")
            self._inflight[origin] = task
            task.add_done_callback(lambda _: self._inflight.pop(origin, None))
        # Shielded: one caller giving up must not cancel the fetch the others wait for.
        return await asyncio.shield(task)

    async def _refresh(self, origin: str) -> _Entry:
        entry = await self._load(origin)
        self._entries[origin] = entry
        self._entries.move_to_end(origin)
        while len(self._entries) > self._max_hosts:
            self._entries.popitem(last=False)
        return entry

    async def _load(self, origin: str) -> _Entry:
        try:
            result = await self._fetcher.fetch(
                f"{origin}/robots.txt", max_body=self._max_size, truncate=True
            )
        except TooManyRedirects:
            # RFC 9309 §2.3.1.2: past five redirects the file may be taken as unavailable.
            return self._expiring(ALLOW_ALL, None, self._ttl)
        except FetchError:
            return self._expiring(UNREACHABLE, None, self._error_recheck)
        return self._from_result(result)

    def _from_result(self, result: FetchResult) -> _Entry:
        status = result.status
        if 200 <= status < 300:
            return self._expiring(OK, _parse(result.body, result.truncated), self._ttl)
        if 300 <= status < 500 and status != 429:
            # 4xx: unavailable. A 3xx the fetcher could not follow (no Location) counts too.
            return self._expiring(ALLOW_ALL, None, self._ttl)
        return self._expiring(UNREACHABLE, None, self._error_recheck)

    def _expiring(self, state: str, rules: Protego | None, lifetime: float) -> _Entry:
        return _Entry(state=state, rules=rules, expires=self._clock() + lifetime)


def _origin(url: URL) -> str:
    return f"{url.scheme}://{url.host_port_subcomponent or ''}".lower()


def _parse(body: bytes, truncated: bool) -> Protego:
    if truncated:
        # A line cut in half could turn "Disallow: /private" into "Disallow: /pri" or worse
        # "Allow: /"; drop it.
        body = body[: body.rfind(b"\n") + 1]
    text = body.decode("utf-8", errors="replace").removeprefix("\ufeff")
    return Protego.parse(text)
