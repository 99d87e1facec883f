"""The pacing controller's required behaviours, against model sites on a fake clock.

Each test is one or a few simulated crawls (``crawlfleet.policy.simulate``): the policy, the
store's lease loop and the retry policy as they are, the site and the clock modelled. The
figures for every scenario: ``benchmarks/pacing_sim.py``.
"""

from __future__ import annotations

import itertools
import math

import pytest

from crawlfleet.policy.pacing import PacingConfig
from crawlfleet.policy.simulate import Crawl, Result, Site, count_statuses, simulate

CPU = 0.003  # seconds of worker CPU a page, as a worker spends on the demo shop
FAULTS = Site(p503=0.05, p_cut=0.02, p_slow=0.02)


def settled_rate(result: Result) -> float:
    """Accepted requests a second after the first quarter of the crawl (first contact)."""
    return result.accepted_rate(result.end / 4, result.end)


def test_the_model_site_limits_and_slows_as_told() -> None:
    limited = simulate(Site(rate_limit=10, latency=0.02), Crawl(pages=200))
    assert limited.max_window() <= 10
    assert min(x for _, x in limited.latencies) == pytest.approx(0.02)
    loaded = simulate(Site(per_request=0.005), Crawl(pages=300))
    assert max(x for _, x in loaded.latencies) > 0.02, "more in flight, slower answers"


def test_the_simulation_is_reproducible() -> None:
    a, b = (simulate(FAULTS, Crawl(pages=500, client_cpu=CPU, seed=3)) for _ in range(2))
    assert a.arrivals == b.arrivals and a.final == b.final


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_faults__throughput_at_least_80_percent_of_the_clean_crawl(seed: int) -> None:
    crawl = Crawl(pages=3000, client_cpu=CPU, seed=seed)
    clean, noisy = simulate(Site(), crawl), simulate(FAULTS, crawl)
    assert noisy.done == clean.done == 3000, "every page"
    statuses = count_statuses(noisy)
    assert statuses[503] > 100 and statuses[0] > 30, "the faults were there"
    assert noisy.throughput >= 0.8 * clean.throughput, (noisy.throughput, clean.throughput)


def test_a_lone_503_never_narrows_the_lane() -> None:
    result = simulate(Site(p503=0.05), Crawl(pages=3000, client_cpu=CPU))
    full = next(i for i, (_, _, width) in enumerate(result.states) if width == 32)
    assert min(width for _, _, width in result.states[full:]) == 32
    assert max(delay for _, delay, _ in result.states) < 0.01


@pytest.mark.parametrize(
    ("limit", "width"), [(5, 8), (5, 32), (40, 8), (40, 32), (200, 8), (200, 32)]
)
def test_rate_limit__settles_between_70_percent_and_the_limit_without_captchas(
    limit: int, width: int
) -> None:
    result = simulate(
        Site(rate_limit=limit), Crawl(pages=max(1000, limit * 60), max_concurrency=width)
    )
    assert result.done == result.crawl.pages
    assert 0.7 * limit <= settled_rate(result) <= limit
    assert result.share(429) <= 0.01
    assert result.captchas == 0


def test_rate_limit__a_client_that_keeps_pushing_earns_captchas() -> None:
    """The same site against a controller told to probe hard: the captcha rule bites (so the
    tests above could fail)."""
    pushy = PacingConfig(max_concurrency=32, limit_fraction=1.0, probe=2.0, probe_step=0.5)
    result = simulate(Site(rate_limit=40), Crawl(pages=2400, pacing=pushy))
    assert result.captchas > 0


def test_rate_limit__with_reports_batched_as_today() -> None:
    result = simulate(Site(rate_limit=40), Crawl(pages=2400, report_delay=0.05))
    assert 28 <= settled_rate(result) <= 40
    assert result.share(429) <= 0.01 and result.captchas == 0


@pytest.mark.parametrize("base", [0.005, 0.05])
def test_latency_growing_with_load__settles_within_twice_the_unloaded_latency(
    base: float,
) -> None:
    """Latency = base + base per request in flight: unloaded (alone) it is 2 x base."""
    site = Site(latency=base, per_request=base)
    result = simulate(site, Crawl(pages=3000 if base < 0.01 else 600, client_cpu=CPU))
    unloaded = 2 * base
    assert result.median_latency(result.end / 4, result.end) <= 2 * unloaded
    alone = 1 / unloaded
    assert result.throughput >= alone, "more than one request at a time where it pays"


def test_a_cpu_bound_worker_is_not_slowed_by_its_own_queue() -> None:
    """The latency a busy worker measures includes its own CPU queue; pacing at the rate it
    delivers keeps it busy (the bound: one page per CPU time)."""
    result = simulate(Site(), Crawl(pages=3000, client_cpu=CPU))
    assert result.throughput >= 0.9 / CPU


@pytest.mark.parametrize(
    ("wall_end", "follows"), [(12.0, False), (30.0, False), (100.0, False), (100.0, True)]
)
def test_a_lane_pushed_back_to_a_long_delay_recovers_within_the_bound(
    wall_end: float, follows: bool
) -> None:
    """Block pages for everything from 5 s on push the lane toward max_delay; once they stop
    the lane is back at full pace within 3 d + log2(d / snap) seconds (d: the delay it was
    at; one d of hold, one of the store's spacing, one more; with the store's next start
    pulled in when the delay shrinks, one d less)."""
    config = PacingConfig()
    site = Site(blocked_between=(5.0, wall_end))
    crawl = Crawl(pages=50000, max_attempts=1000, until=wall_end + 400, next_at_follows=follows)
    result = simulate(site, crawl)
    d = max(delay for t, delay, _ in result.states if t < wall_end)
    if wall_end >= 100:
        assert d == config.max_delay
    back = result.recovered_at(wall_end)
    assert back is not None
    bound = (2 if follows else 3) * d + math.log2(d / config.snap)
    assert back - wall_end <= bound, (back - wall_end, bound)


def test_a_dead_host_opens_the_circuit_and_does_not_burn_attempts() -> None:
    result = simulate(Site(dead=True), Crawl(pages=100, until=600))
    # the start-up width, the circuit threshold, then one probe per opening (30, 60, 120, 240 s)
    assert result.requests <= PacingConfig().start_concurrency + 5 + 4 + 2
    assert result.final is not None and result.final.trips >= 3
    assert result.done == 0 and result.dead == 0, "no request used up its attempts"


def test_crawl_delay__never_faster_than_robots_asks() -> None:
    result = simulate(Site(crawl_delay=2.0), Crawl(pages=60))
    starts = [t for t, _ in result.arrivals]
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 2.0 - 1e-9
    assert result.done == 60 and result.end <= 60 * 2.0 + 1
