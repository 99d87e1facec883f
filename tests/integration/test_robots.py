"""RobotsCache against the hostile site's robots.txt scenarios (H7, RFC 9309)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.sites.hostile import ROBOTS_BIG_LATE_RULE, HostileSite, hostile_site

from crawlfleet.fetch import FetchSettings, HttpClient, HttpFetcher, RobotsCache
from crawlfleet.frontier.sqlite import SQLiteFrontier

__all__ = ["hostile_site"]  # the imported fixture is used by name

UA = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
async def fetcher() -> AsyncIterator[HttpFetcher]:
    settings = FetchSettings(timeout=1.0, private_ok_hosts=frozenset({"127.0.0.1"}))
    async with HttpClient(settings) as client:
        yield HttpFetcher(client)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def robots(fetcher: HttpFetcher, clock: Clock) -> AsyncIterator[RobotsCache]:
    cache = RobotsCache(fetcher, user_agent=UA, ttl=3600, error_recheck=60, clock=clock)
    yield cache
    await cache.close()


async def test_rules_are_obeyed(hostile_site: HostileSite, robots: RobotsCache) -> None:
    url = hostile_site.url
    assert await robots.allowed(url("/page"))
    assert not await robots.allowed(url("/private/x"))
    assert await robots.allowed(url("/private/open/x"))
    assert not await robots.allowed(url("/nocrawlfleet"))  # our own group
    assert await robots.crawl_delay(url("/")) == 2.5
    assert robots.state(hostile_site.base_url) == "ok"
    assert hostile_site.hits["/robots.txt"] == 1


async def test_groups_of_other_crawlers_named_like_words_of_our_user_agent_do_not_apply(
    hostile_site: HostileSite, robots: RobotsCache
) -> None:
    hostile_site.robots = "others"  # "User-agent: crawl / github / HTTPS": "Disallow: /"
    assert await robots.allowed(hostile_site.url("/page"))
    assert not await robots.allowed(hostile_site.url("/private/x"))  # the "*" group is ours
    assert await robots.crawl_delay(hostile_site.url("/")) is None


@pytest.mark.parametrize("mode", ["404", "403"])
async def test_4xx_allows_everything(
    hostile_site: HostileSite, robots: RobotsCache, mode: str
) -> None:
    hostile_site.robots = mode
    assert await robots.allowed(hostile_site.url("/private/x"))
    assert await robots.crawl_delay(hostile_site.url("/")) is None
    assert robots.state(hostile_site.base_url) == "allow_all"


@pytest.mark.parametrize("mode", ["500", "503", "429", "slow", "cut"])
async def test_unreachable_disallows_then_rechecks(
    hostile_site: HostileSite, robots: RobotsCache, clock: Clock, mode: str
) -> None:
    hostile_site.robots = mode
    assert not await robots.allowed(hostile_site.url("/page"))
    assert robots.state(hostile_site.base_url) == "unreachable"

    hostile_site.robots = "rules"  # the server recovers
    clock.advance(59)
    assert not await robots.allowed(hostile_site.url("/page"))  # still cached
    assert hostile_site.hits["/robots.txt"] == 1
    clock.advance(2)
    assert await robots.allowed(hostile_site.url("/page"))
    assert robots.state(hostile_site.base_url) == "ok"
    assert hostile_site.hits["/robots.txt"] == 2


async def test_network_error_disallows(robots: RobotsCache) -> None:
    assert not await robots.allowed("http://127.0.0.1:9/page")  # nothing listens on port 9
    assert robots.state("http://127.0.0.1:9") == "unreachable"


async def test_robots_txt_itself_is_always_allowed(
    hostile_site: HostileSite, robots: RobotsCache
) -> None:
    hostile_site.robots = "500"
    assert await robots.allowed(hostile_site.url("/robots.txt"))
    assert hostile_site.hits["/robots.txt"] == 0


async def test_five_redirects_are_followed(hostile_site: HostileSite, robots: RobotsCache) -> None:
    hostile_site.robots = "redirect5"
    assert not await robots.allowed(hostile_site.url("/private/x"))
    assert robots.state(hostile_site.base_url) == "ok"
    assert hostile_site.hits["/robots-final.txt"] == 1


async def test_only_the_first_500_kib_is_parsed(
    hostile_site: HostileSite, robots: RobotsCache
) -> None:
    hostile_site.robots = "big"
    assert not await robots.allowed(hostile_site.url("/private/x"))  # rule near the top
    assert await robots.allowed(hostile_site.url(ROBOTS_BIG_LATE_RULE))  # rule past 500 KiB
    assert hostile_site.hits["/robots.txt"] == 1


async def test_a_larger_max_size_sees_the_late_rule(
    hostile_site: HostileSite, fetcher: HttpFetcher
) -> None:
    hostile_site.robots = "big"
    robots = RobotsCache(fetcher, user_agent=UA, max_size=1024 * 1024)
    assert not await robots.allowed(hostile_site.url(ROBOTS_BIG_LATE_RULE))
    await robots.close()


async def test_one_fetch_for_concurrent_callers(
    hostile_site: HostileSite, robots: RobotsCache
) -> None:
    answers = await asyncio.gather(
        *(robots.allowed(hostile_site.url(f"/private/{i}")) for i in range(20))
    )
    assert answers == [False] * 20
    assert hostile_site.hits["/robots.txt"] == 1


async def test_cached_for_ttl(hostile_site: HostileSite, robots: RobotsCache, clock: Clock) -> None:
    assert await robots.allowed(hostile_site.url("/page"))
    clock.advance(3599)
    assert await robots.allowed(hostile_site.url("/page"))
    assert hostile_site.hits["/robots.txt"] == 1
    clock.advance(2)
    hostile_site.robots = "404"
    assert await robots.allowed(hostile_site.url("/private/x"))
    assert hostile_site.hits["/robots.txt"] == 2


async def test_origins_are_cached_separately(
    hostile_site: HostileSite, fetcher: HttpFetcher, clock: Clock
) -> None:
    # localhost:P is a different origin from 127.0.0.1:P; the fetcher may not reach it, so
    # its robots.txt is unreachable while 127.0.0.1's is fine.
    robots = RobotsCache(fetcher, user_agent=UA, clock=clock)
    assert await robots.allowed(hostile_site.url("/page"))
    assert not await robots.allowed(hostile_site.url("/page", host="localhost"))
    assert robots.state(hostile_site.url("/x", host="localhost")) == "unreachable"
    assert robots.state(hostile_site.base_url) == "ok"
    await robots.close()


async def test_a_cancelled_caller_does_not_cancel_the_shared_fetch(
    hostile_site: HostileSite, robots: RobotsCache
) -> None:
    first = asyncio.create_task(robots.allowed(hostile_site.url("/private/a")))
    second = asyncio.create_task(robots.allowed(hostile_site.url("/private/b")))
    await asyncio.sleep(0)
    first.cancel()
    assert await second is False
    assert hostile_site.hits["/robots.txt"] == 1


async def test_rules_are_per_host_and_port(robots: RobotsCache) -> None:
    """Two servers on one host, different ports: each origin is judged by its own robots.txt."""
    from tests.sites.hostile import start_site

    strict, stop_strict = await start_site()
    open_, stop_open = await start_site()
    open_.robots = "404"  # no robots.txt: everything allowed
    try:
        assert strict.port != open_.port
        assert not await robots.allowed(strict.url("/private/x"))
        assert await robots.allowed(open_.url("/private/x"))
        assert robots.cached_verdict(strict.url("/private/y")) is False
        assert robots.cached_verdict(open_.url("/private/y")) is True
        assert (strict.hits["/robots.txt"], open_.hits["/robots.txt"]) == (1, 1)
    finally:
        await stop_strict()
        await stop_open()


async def test_redirect_into_a_disallowed_path__refused_before_it_is_fetched(
    hostile_site: HostileSite, fetcher: HttpFetcher
) -> None:
    """Every redirect hop is checked against robots.txt, not only the first URL."""
    from crawlfleet.errors import RobotsDisallowed
    from crawlfleet.fetch import FetchRequest
    from crawlfleet.fetch.robots import RobotsGate

    class NoPacing:
        async def set_crawl_delay(self, domain: str, seconds: float | None) -> None:
            pass

    gate = RobotsGate(RobotsCache(fetcher, user_agent=UA), NoPacing(), recheck=60.0)  # type: ignore[arg-type]
    start = hostile_site.url("/redirect-to?url=/private/secret-page")
    with pytest.raises(RobotsDisallowed):
        await fetcher.fetch(FetchRequest(start, check_hop=gate.check_hop))
    assert hostile_site.hits["/private/secret-page"] == 0
    allowed = hostile_site.url("/redirect-to?url=/private/open/page")
    result = await fetcher.fetch(FetchRequest(allowed, check_hop=gate.check_hop))
    assert result.url.endswith("/private/open/page")
    await gate.close()


async def test_unreachable_past_the_give_up__given_up_until_it_answers(
    hostile_site: HostileSite, fetcher: HttpFetcher, clock: Clock
) -> None:
    """robots.txt answering 500 forever holds its host only until the gate's give-up time."""
    from crawlfleet.errors import RobotsUnavailable, RobotsUnreachable
    from crawlfleet.fetch.robots import RobotsGate

    class NoPacing:
        async def set_crawl_delay(self, domain: str, seconds: float | None) -> None:
            pass

    hostile_site.robots = "500"
    cache = RobotsCache(fetcher, user_agent=UA, error_recheck=60, clock=clock)
    gate = RobotsGate(cache, NoPacing(), recheck=60.0, give_up=150.0)  # type: ignore[arg-type]
    url = hostile_site.url("/page")
    for step in (0, 61, 61):  # fetched again after each recheck: still 500
        clock.advance(step)
        with pytest.raises(RobotsUnreachable):
            await gate.check_hop(url)
    assert cache.unreachable_for(url) == 122
    clock.advance(61)
    with pytest.raises(RobotsUnavailable):
        await gate.check_hop(url)
    assert hostile_site.hits["/robots.txt"] == 4

    hostile_site.robots = "rules"  # back: the next fetch clears the count
    clock.advance(61)
    await gate.check_hop(hostile_site.url("/page"))
    assert cache.unreachable_for(url) == 0
    await gate.close()


@pytest.fixture
async def store(tmp_path: Path, clock: Clock) -> AsyncIterator[SQLiteFrontier]:
    frontier = SQLiteFrontier(tmp_path / "queue.db", clock=clock)
    await frontier.open()
    yield frontier
    await frontier.close()


async def test_the_fleet_fetches_a_hosts_robots_txt_once_per_ttl(
    hostile_site: HostileSite, fetcher: HttpFetcher, clock: Clock, store: SQLiteFrontier
) -> None:
    def worker() -> RobotsCache:
        return RobotsCache(fetcher, user_agent=UA, ttl=3600, clock=clock, shared=store)

    one, two = worker(), worker()
    assert not await one.allowed(hostile_site.url("/private/a"))
    clock.advance(600)
    # the second worker reads the file the first one stored, and obeys it
    assert not await two.allowed(hostile_site.url("/private/b"))
    assert await two.allowed(hostile_site.url("/page"))
    assert hostile_site.hits["/robots.txt"] == 1
    clock.advance(3001)  # the stored file is older than the ttl now: fetched again, once
    hostile_site.robots = "404"
    assert await worker().allowed(hostile_site.url("/private/c"))
    assert await two.allowed(hostile_site.url("/private/d")), "what the fleet fetched last"
    assert hostile_site.hits["/robots.txt"] == 2
    for cache in (one, two):
        await cache.close()


async def test_an_unreachable_robots_txt_is_not_shared(
    hostile_site: HostileSite, fetcher: HttpFetcher, clock: Clock, store: SQLiteFrontier
) -> None:
    # a 503 is the host's passing state: each worker re-checks it on its own clock
    hostile_site.robots = "503"
    one = RobotsCache(fetcher, user_agent=UA, clock=clock, shared=store)
    assert not await one.allowed(hostile_site.url("/page"))
    assert await store.robots_file(hostile_site.base_url) is None
    hostile_site.robots = "rules"
    two = RobotsCache(fetcher, user_agent=UA, clock=clock, shared=store)
    assert await two.allowed(hostile_site.url("/page"))
    assert hostile_site.hits["/robots.txt"] == 2
    await one.close()
    await two.close()


async def test_a_dead_host_is_given_up_on_the_fleets_clock(
    fetcher: HttpFetcher, clock: Clock, store: SQLiteFrontier
) -> None:
    from crawlfleet.fetch.robots import RobotsGate

    dead = "http://127.0.0.1:9/page"  # nothing listens on port 9: refused

    def worker() -> tuple[RobotsCache, RobotsGate]:
        cache = RobotsCache(
            fetcher, user_agent=UA, clock=clock, shared=store, down_recheck=3, down_give_up=10
        )
        gate = RobotsGate(cache, store, recheck=60, down_recheck=3, down_give_up=10)
        return cache, gate

    (one, gate_one), (two, gate_two) = worker(), worker()
    assert not await one.allowed(dead)
    assert one.host_down(dead) and one.down_tries(dead) == 1
    clock.advance(4)
    # the second worker meets the host later: its count is the fleet's, not its own
    assert not await two.allowed(dead)
    assert two.unreachable_for(dead) == pytest.approx(4)
    assert two.down_tries(dead) == 2
    assert gate_two.recheck_for(dead) == 3  # a try more to make before any give-up
    clock.advance(4)
    assert not await one.allowed(dead)  # its entry expired (3 s): tried again
    assert one.down_tries(dead) == 3
    # the give-up (10 s) is 2 s away: the request comes back then, not a recheck (3 s) later
    assert gate_one.recheck_for(dead) == pytest.approx(2)
    for gate in (gate_one, gate_two):
        await gate.close()
