"""robots.txt per RFC 9309, cached per origin, and the gate the attempt pipeline asks.

What the status of ``/robots.txt`` means (RFC 9309 §2.3.1):

====================================  =====================================================
2xx                                   parse the rules (only the first ``max_size`` bytes)
3xx followed to the end (≥ 5 hops)    whatever the final response says
4xx, including 404 (but not 429)      "unavailable": everything is allowed
5xx, 429, timeout, network error      "unreachable": everything is disallowed, and the file
                                      is fetched again after ``error_recheck`` seconds
====================================  =====================================================

The rules are read for the crawler's product token (:mod:`crawlfleet.fetch.robotstxt`): a
group applies when it names that token, whole and in any case.

An origin whose robots.txt stays unreachable is not waited for forever: past the gate's
``give_up`` seconds since its first failed fetch in a row (as this worker saw it), its requests
end ``dead(robots_unavailable)``, replayable once the site is back.

A host that cannot be connected to at all (connection refused, no DNS name, no connection
within the connect timeout: :class:`~crawlfleet.errors.HostUnreachable`) is not a robots.txt
that may come back in a while: it is tried again every ``down_recheck`` seconds, and its
requests end ``dead(host_unreachable)`` once it has been down ``down_give_up`` seconds
(seconds, not minutes) and ``HOST_MIN_TRIES`` connects, counted from the fleet's first failure
to connect (the store's :meth:`~crawlfleet.frontier.ports.Pacing.host_down`; this worker's own
when the store does not answer): every worker gives the host up at the same time, and its
requests come back on the give-up, not up to a recheck past it.
A fetch the worker itself could not make (out of file descriptors:
:class:`~crawlfleet.errors.LocalResourceError`) says nothing of the host: nothing is cached,
the request is tried again soon, and no clock of the host starts.

Scrapy treats a download error as "allow all"; that lets a struggling server be crawled
harder exactly when it is failing, so here it disallows. ``/robots.txt`` itself is always
allowed. One fetch per origin at a time: concurrent callers wait for the same fetch.

Shared by the fleet (``shared``: the store's :class:`~crawlfleet.frontier.ports.Pacing`): the
first worker to read an origin's robots.txt stores its text (or that there is none to read, a
4xx); another worker, or this one after a restart, takes it from there while it is younger
than ``ttl``, so a host sees one fetch of its robots.txt per ``ttl``, not one per worker. An
unreachable robots.txt is never shared (each worker re-checks it on its own clock), and a store
that does not answer within ``SHARED_WAIT`` seconds costs only a fetch of the file.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Final, Protocol

from yarl import URL

from crawlfleet.errors import (
    FetchError,
    HostUnreachable,
    LocalResourceError,
    RobotsDisallowed,
    RobotsUnavailable,
    RobotsUnreachable,
    StoreError,
    TooManyRedirects,
)
from crawlfleet.fetch.base import FetchRequest
from crawlfleet.fetch.robotstxt import RobotsRules, parse_robots

if TYPE_CHECKING:
    from crawlfleet.fetch.base import Fetcher, FetchResult
    from crawlfleet.frontier.ports import Pacing
    from crawlfleet.model import Lease

OK: Final = "ok"
ALLOW_ALL: Final = "allow_all"
UNREACHABLE: Final = "unreachable"
#: the worker could not fetch it (out of descriptors): not the host's state, never cached
LOCAL: Final = "local"

DEFAULT_MAX_SIZE = 500 * 1024
#: most seconds a robots.txt lookup or save waits for the shared store before doing without
SHARED_WAIT = 5.0
#: seconds: the shortest wait of a request whose host is down (its give-up is that close)
MIN_RECHECK = 0.1
#: failed connects in a row (every worker's) before a host is given up, whatever the time:
#: a host whose connects time out (down, or too busy to accept) is tried more than once
HOST_MIN_TRIES = 3

log = logging.getLogger("crawlfleet.robots")


class SharedRobots(Protocol):
    """Where the fleet shares robots.txt files and hosts found down (the store's Pacing
    port has these)."""

    async def robots_file(self, origin: str) -> tuple[str, str, float] | None: ...

    async def save_robots_file(self, origin: str, state: str, text: str) -> None: ...

    async def host_down(self, origin: str, window: float) -> tuple[float, int]: ...


@dataclass(slots=True)
class _Entry:
    state: str
    rules: RobotsRules | None
    expires: float
    why: str = ""  # an unreachable one: what the fetch said
    down: bool = False  # unreachable because the host cannot be connected to at all


class RobotsCache:
    """Answers "may this user agent fetch this URL?" from each origin's robots.txt.

    ``clock`` is injectable so tests can step past ``ttl`` and ``error_recheck``.
    ``max_hosts`` bounds memory on broad crawls (least recently used origins are dropped).
    ``climb`` are fetchers asked in turn when a bot wall answers robots.txt with a challenge or
    denial page (the ladder's rungs above ``fetcher``): the wall's 403 is not the site saying
    it has no robots.txt (which would allow everything), so the next rung asks again.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        *,
        user_agent: str,
        ttl: float = 86400.0,
        error_recheck: float = 60.0,
        down_recheck: float = 5.0,
        down_give_up: float = 30.0,
        max_size: int = DEFAULT_MAX_SIZE,
        clock: Callable[[], float] = time.monotonic,
        max_hosts: int = 10_000,
        climb: Sequence[Fetcher] = (),
        shared: SharedRobots | None = None,
    ) -> None:
        self._fetcher = fetcher
        self._shared = shared
        #: fetchers to ask in turn when one is answered by a bot wall (the rungs above it)
        self._climb = tuple(climb)
        self._user_agent = user_agent
        self._ttl = ttl
        self._error_recheck = error_recheck
        self._down_recheck = down_recheck
        #: a host not found down for this long since it last was starts its count again
        self._down_window = max(down_give_up, 3 * down_recheck)
        self._max_size = max_size
        self._clock = clock
        self._max_hosts = max_hosts
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._origins: dict[str, str] = {}  # URL authority -> origin (cached_verdict)
        self._inflight: dict[str, asyncio.Task[_Entry]] = {}
        #: per origin: when its robots.txt first failed, of the failures in a row now
        self._failing_since: dict[str, float] = {}
        #: per origin: why its robots.txt could not be read, the last time it could not
        self._why: dict[str, str] = {}
        #: per origin found down: its failed connects in a row (the fleet's, when it answers)
        self._down_tries: dict[str, int] = {}

    async def allowed(self, url: str) -> bool:
        """True if robots.txt lets our user agent fetch ``url``."""
        if url.startswith(("http://", "https://")):
            known = self.cached_verdict(url)  # a fresh entry: no URL parsed, nothing awaited
            if known is not None:
                return known
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
        return entry.rules.allowed(url)

    def cached_verdict(self, url: str) -> bool | None:
        """What :meth:`allowed` would answer from a fresh cache entry alone (None: not known).

        Lets a worker drop disallowed links when it discovers them, without awaiting a fetch.
        Only a parsed robots.txt answers here; an unreachable one is a temporary state. Asked
        once per link discovered: the origin of a URL's authority is remembered (a bounded
        memo), so a link costs a string split and a dict lookup before the rules.
        """
        start = url.find("://")
        end = url.find("/", start + 3) if start >= 0 else -1
        authority = url[:end] if end > 0 else url
        origin = self._origins.get(authority)
        if origin is None:
            if len(self._origins) >= self._max_hosts:
                self._origins.clear()
            origin = self._origins[authority] = _origin(URL(authority))
        entry = self._entries.get(origin)
        if entry is None or entry.expires <= self._clock() or entry.state == UNREACHABLE:
            return None
        if entry.state == ALLOW_ALL or entry.rules is None:
            return True
        if end > 0 and url[end:].partition("?")[0].partition("#")[0] == "/robots.txt":
            return True
        return entry.rules.allowed(url)

    async def crawl_delay(self, url: str) -> float | None:
        """The ``Crawl-delay`` for our user agent on ``url``'s origin, if it sets one."""
        parsed = URL(url)
        if parsed.scheme not in ("http", "https"):
            return None
        entry = await self._entry(_origin(parsed))
        if entry.rules is None:
            return None
        return entry.rules.crawl_delay

    def state(self, origin: str) -> str | None:
        """``"ok"``, ``"allow_all"`` or ``"unreachable"`` for a URL or ``scheme://host[:port]``
        (``None`` if never fetched). Expired entries still report their last state."""
        entry = self._entries.get(_origin(URL(origin)))
        return entry.state if entry is not None else None

    def host_down(self, url: str) -> bool:
        """Whether ``url``'s robots.txt is unreachable because its host cannot be connected
        to at all (refused, no DNS name, no connection in time), not because it answered 5xx."""
        entry = self._entries.get(_origin(URL(url)))
        return entry is not None and entry.state == UNREACHABLE and entry.down

    def why_unreachable(self, url: str) -> str:
        """Why the robots.txt of ``url``'s origin could not be read the last time
        (``HTTP 503``, ``address refused: ...``; ``""`` when it could)."""
        return self._why.get(_origin(URL(url)), "")

    def down_tries(self, url: str) -> int:
        """Failed connects in a row to ``url``'s host (the fleet's; 0 when it is not down)."""
        return self._down_tries.get(_origin(URL(url)), 0) if self.host_down(url) else 0

    def unreachable_for(self, url: str) -> float:
        """Seconds the robots.txt of ``url``'s origin has been unreachable, from its first failed
        fetch of the failures in a row (0 when it is not unreachable)."""
        origin = _origin(URL(url))
        since = self._failing_since.get(origin)
        if since is None or self.state(origin) != UNREACHABLE:
            return 0.0
        return self._clock() - since

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
        started = self._clock()
        entry = await self._load(origin)
        if entry.state == LOCAL:
            # the worker's own failure: nothing learnt of the host (its failing clock neither
            # starts nor stops); kept only to say so, expired already
            self._entries[origin] = entry
            return entry
        if entry.state == UNREACHABLE:
            if len(self._failing_since) >= self._max_hosts:
                self._failing_since.clear()
                self._why.clear()
                self._down_tries.clear()
            since = self._failing_since.setdefault(origin, started)
            if entry.down:
                tries = self._down_tries.get(origin, 0) + 1
                fleet_since, fleet_tries = await self._fleet_down(origin, started, tries)
                self._failing_since[origin] = min(since, fleet_since)
                self._down_tries[origin] = max(tries, fleet_tries)
            self._why[origin] = entry.why
        else:
            self._failing_since.pop(origin, None)
            self._why.pop(origin, None)
            self._down_tries.pop(origin, None)
        self._entries[origin] = entry
        self._entries.move_to_end(origin)
        while len(self._entries) > self._max_hosts:
            self._entries.popitem(last=False)
        return entry

    async def _load(self, origin: str) -> _Entry:
        entry = await self._from_store(origin)
        if entry is None:
            entry = await self._fetch(origin)
        return entry

    async def _from_store(self, origin: str) -> _Entry | None:
        """The origin's robots.txt as another worker fetched it within ``ttl`` (None: none did,
        or the store did not answer)."""
        if self._shared is None:
            return None
        try:
            async with asyncio.timeout(SHARED_WAIT):
                row = await self._shared.robots_file(origin)
        except (StoreError, TimeoutError) as exc:
            log.debug("robots.txt of %s not read from the store: %s", origin, exc)
            return None
        if row is None or row[2] >= self._ttl or row[0] not in (OK, ALLOW_ALL):
            return None
        state, text, age = row
        rules = parse_robots(text, self._user_agent) if state == OK else None
        return self._expiring(state, rules, self._ttl - max(0.0, age))

    async def _fleet_down(self, origin: str, started: float, tries: int) -> tuple[float, int]:
        """When the fleet first failed to connect to ``origin`` of the failures in a row (on
        this cache's clock), and how many there were: told to the store; ``started`` and
        this worker's ``tries`` when the store does not answer."""
        if self._shared is None:
            return started, tries
        try:
            async with asyncio.timeout(SHARED_WAIT):
                down_for, fleet_tries = await self._shared.host_down(origin, self._down_window)
        except (StoreError, TimeoutError) as exc:
            log.debug("host %s down: not told to the store: %s", origin, exc)
            return started, tries
        return self._clock() - max(0.0, down_for), fleet_tries

    async def _share(self, origin: str, state: str, text: str) -> None:
        if self._shared is None:
            return
        try:
            async with asyncio.timeout(SHARED_WAIT):
                await self._shared.save_robots_file(origin, state, text)
        except (StoreError, TimeoutError) as exc:
            log.debug("robots.txt of %s not shared: %s", origin, exc)

    async def _fetch(self, origin: str) -> _Entry:
        try:
            request = FetchRequest(f"{origin}/robots.txt", max_body=self._max_size, truncate=True)
            result = await self._fetcher.fetch(request)
            for fetcher in self._climb:
                if not _walled(result):
                    break
                result = await fetcher.fetch(request)
        except TooManyRedirects:
            # RFC 9309 §2.3.1.2: past five redirects the file may be taken as unavailable.
            await self._share(origin, ALLOW_ALL, "")
            return self._expiring(ALLOW_ALL, None, self._ttl)
        except LocalResourceError as exc:
            return _Entry(LOCAL, None, expires=self._clock(), why=_why(exc))
        except HostUnreachable as exc:
            entry = self._expiring(UNREACHABLE, None, self._down_recheck)
            entry.why, entry.down = _why(exc), True
            return entry
        except FetchError as exc:
            entry = self._expiring(UNREACHABLE, None, self._error_recheck)
            entry.why = _why(exc)
            return entry
        return await self._from_result(origin, result)

    async def _from_result(self, origin: str, result: FetchResult) -> _Entry:
        status = result.status
        if 200 <= status < 300:
            text = _text(result.body, result.truncated)
            await self._share(origin, OK, text)
            return self._expiring(OK, parse_robots(text, self._user_agent), self._ttl)
        if 300 <= status < 500 and status != 429:
            # 4xx: unavailable. A 3xx the fetcher could not follow (no Location) counts too.
            await self._share(origin, ALLOW_ALL, "")
            return self._expiring(ALLOW_ALL, None, self._ttl)
        entry = self._expiring(UNREACHABLE, None, self._error_recheck)
        entry.why = f"HTTP {status}"
        return entry

    def _expiring(self, state: str, rules: RobotsRules | None, lifetime: float) -> _Entry:
        return _Entry(state=state, rules=rules, expires=self._clock() + lifetime)


def _walled(result: FetchResult) -> bool:
    """Whether a bot wall answered (a challenge or denial page), not the site."""
    from crawlfleet.policy.blocks import detect_block
    from crawlfleet.policy.fetchers import climbs

    verdict = detect_block(result.status, result.header_map, result.body)
    return verdict.blocked and climbs(verdict.reason)


def _why(exc: FetchError) -> str:
    """A fetch error as one short line: its kind and message."""
    text = " ".join(str(exc).split())[:200]
    kind = type(exc).__name__
    return f"{kind}: {text}" if text else kind


def _origin(url: URL) -> str:
    return f"{url.scheme}://{url.host_port_subcomponent or ''}".lower()


def _text(body: bytes, truncated: bool) -> str:
    """A robots.txt body as the text to parse (and to share)."""
    if truncated:
        # A line cut in half could turn "Disallow: /private" into "Disallow: /pri" or worse
        # "Allow: /"; drop it.
        body = body[: body.rfind(b"\n") + 1]
    return body.decode("utf-8", errors="replace").removeprefix("\ufeff")


class Gate(StrEnum):
    """What the robots gate says of one lease."""

    ALLOW = "allow"
    DISALLOW = "disallow"  # robots.txt disallows the URL: dead(robots)
    UNREACHABLE = "unreachable"  # robots.txt cannot be read now: the host waits, no attempt used
    UNAVAILABLE = "unavailable"  # unreadable for longer than the give-up: dead(robots_unavailable)
    HOST_DOWN = "host_down"  # not connectable for longer than its give-up: dead(host_unreachable)
    LOCAL = "local"  # the worker could not fetch robots.txt (out of descriptors): tried soon
    GIVE_BACK = "give_back"  # leased before the store knew the Crawl-delay: paced again


class RobotsGate:
    """robots.txt for the attempt pipeline: may this lease be fetched now, and at what pace.

    RFC 9309: an unreachable robots.txt (5xx, 429, no answer) disallows the whole host for now.
    That is the host's state, not the request's fault: the pipeline retries the request after
    ``recheck`` seconds without using up an attempt, and the store holds the whole lane until
    then, for at most ``give_up`` seconds (None: no end) since the file first failed: then its
    requests end ``dead(robots_unavailable)``. A robots.txt Crawl-delay is told to the store
    once per domain (:meth:`~crawlfleet.frontier.ports.Pacing.set_crawl_delay`); leases the
    store handed out before it knew are given back to be paced (no attempt used), but for one.
    Every redirect hop is checked too (:meth:`check_hop`).
    """

    def __init__(
        self,
        cache: RobotsCache,
        pacing: Pacing,
        *,
        recheck: float,
        give_up: float | None = None,
        down_recheck: float = 5.0,
        down_give_up: float = 30.0,
        down_tries: int = HOST_MIN_TRIES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.pacing = pacing
        self.recheck = recheck
        self.give_up = give_up
        self.down_recheck = down_recheck
        self.down_give_up = down_give_up
        self.down_tries = down_tries
        self._clock = clock
        #: per domain: when the store was told its robots.txt Crawl-delay, and the delay
        self._told: dict[str, asyncio.Future[tuple[float, float]]] = {}
        #: domains with a Crawl-delay of which one lease handed out before it was known ran
        self._unpaced_ran: set[str] = set()

    async def check(self, lease: Lease) -> Gate:
        if not await self.cache.allowed(lease.url):
            state = self.cache.state(lease.url)
            if state == LOCAL:
                return Gate.LOCAL
            if state != UNREACHABLE:
                return Gate.DISALLOW
            if self.cache.host_down(lease.url):
                return Gate.HOST_DOWN if self._host_given_up(lease.url) else Gate.UNREACHABLE
            return Gate.UNAVAILABLE if self._given_up(lease.url) else Gate.UNREACHABLE
        told = self._told.get(lease.domain)
        if told is None:
            told = asyncio.ensure_future(self._tell_crawl_delay(lease))
            self._told[lease.domain] = told
        told_at, delay = await asyncio.shield(told)
        if not delay or lease.start_at >= told_at or lease.domain not in self._unpaced_ran:
            if delay and lease.start_at < told_at:
                self._unpaced_ran.add(lease.domain)
            return Gate.ALLOW
        return Gate.GIVE_BACK

    async def check_hop(self, url: str) -> None:
        """A redirect's target: raises RobotsDisallowed / RobotsUnreachable unless allowed."""
        if await self.cache.allowed(url):
            return
        if self.cache.state(url) == UNREACHABLE:
            if self._given_up(url):
                raise RobotsUnavailable(
                    f"robots.txt of the redirect's host unreachable for over {self.give_up:g}s"
                )
            raise RobotsUnreachable("robots.txt of the redirect's host cannot be read now")
        raise RobotsDisallowed("robots.txt disallows the redirect's target")

    def recheck_for(self, url: str) -> float:
        """Seconds a request of ``url``'s host waits before its robots.txt is tried again:
        short for a host that cannot be connected to (no later than its give-up), ``recheck``
        for one answering 5xx."""
        if not self.cache.host_down(url):
            return self.recheck
        if self.cache.down_tries(url) < self.down_tries:
            return self.down_recheck  # tries to make before any give-up
        # the request comes back on the give-up, not up to a recheck past it
        left = self.down_give_up - self.cache.unreachable_for(url)
        return max(MIN_RECHECK, min(self.down_recheck, left))

    def why(self, url: str) -> str:
        """Why ``url``'s robots.txt cannot be read now (``HTTP 503``, ``AddressRefused: ...``)."""
        return self.cache.why_unreachable(url) or "no answer"

    def _host_given_up(self, url: str) -> bool:
        """A host down for ``down_give_up`` seconds and ``down_tries`` connects, the fleet's."""
        return (
            self.cache.unreachable_for(url) >= self.down_give_up
            and self.cache.down_tries(url) >= self.down_tries
        )

    def _given_up(self, url: str) -> bool:
        return self.give_up is not None and self.cache.unreachable_for(url) >= self.give_up

    def cached_verdict(self, url: str) -> bool | None:
        return self.cache.cached_verdict(url)

    async def _tell_crawl_delay(self, lease: Lease) -> tuple[float, float]:
        delay = await self.cache.crawl_delay(lease.url) or 0.0
        if delay > 0:
            await self.pacing.set_crawl_delay(lease.domain, delay)
        return self._clock(), delay

    async def close(self) -> None:
        for told in self._told.values():
            told.cancel()
        await self.cache.close()
