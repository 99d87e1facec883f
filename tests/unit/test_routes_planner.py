"""The capacity planner's arithmetic, on tables of pools and domain limits."""

from __future__ import annotations

import json
import math
import tomllib

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.routes.planner import (
    DomainInput,
    Observed,
    make_plan,
    parse_target,
    plan_json,
    render_plan,
)
from crawlfleet.routes.pools import RoutesConfig, parse_routes


def pools(text: str) -> RoutesConfig:
    return parse_routes(tomllib.loads(text))


def proxies(n: int, port: int = 3000) -> str:
    return json.dumps([f"http://u:pw@10.0.0.{i + 1}:{port}" for i in range(n)])


EIGHT = pools(
    '[[routes.pool]]\nname = "direct"\nenabled = false\n'
    f'[[routes.pool]]\nname = "dc"\nproxies = {proxies(8)}\nrate = 2\ncost = 0.001\n'
)


@pytest.mark.parametrize(
    ("text", "per_second"),
    [
        ("2M/day", 2e6 / 86400),
        ("500k/h", 500e3 / 3600),
        ("1.5/s", 1.5),
        ("120 / min", 2.0),
        ("3B/day", 3e9 / 86400),
        ("100000/day", 100000 / 86400),
    ],
)
def test_parse_target(text: str, per_second: float) -> None:
    assert parse_target(text) == pytest.approx(per_second)


@pytest.mark.parametrize("text", ["2M", "fast", "2M/week", "/day", "-1/s"])
def test_parse_target_refuses_nonsense(text: str) -> None:
    with pytest.raises(ConfigError, match="expected a number per unit"):
        parse_target(text)


def test_routes_multiply_the_per_lane_rate_up_to_the_domain_cap() -> None:
    plan = make_plan(
        EIGHT,
        [
            DomainInput("a.example", backlog=32_000),  # routes bound it: 8 x 2/s
            DomainInput("b.example", rate=5.0),  # its own rate binds
            DomainInput("c.example", crawl_delay=0.5),  # robots: 2/s
            DomainInput("d.example", concurrency=4),  # 4 in flight / 0.5 s = 8/s
        ],
    )
    a, b, c, d = plan.domains
    assert (a.requests_per_s, a.bottleneck) == (16.0, "routes")
    assert a.drain_seconds == pytest.approx(2000.0)
    assert a.in_flight == pytest.approx(8.0)  # Little's law: 16/s x 0.5 s
    assert a.cost_per_day == pytest.approx(16 * 86400 * 0.001)
    assert (b.requests_per_s, b.bottleneck, b.cap_requests_per_s) == (5.0, "domain_rate", 5.0)
    assert (c.requests_per_s, c.bottleneck) == (2.0, "crawl_delay")
    assert (d.requests_per_s, d.bottleneck) == (8.0, "domain_concurrency")
    assert plan.pages_per_s == pytest.approx(16 + 5 + 2 + 8)
    assert a.drain_seconds is not None and b.drain_seconds == 0.0


def test_one_route_against_eight() -> None:
    one = pools(
        '[[routes.pool]]\nname = "direct"\nenabled = false\n'
        f'[[routes.pool]]\nname = "dc"\nproxies = {proxies(1)}\nrate = 2\n'
    )
    domain = [DomainInput("shop.example", backlog=1000)]
    slow, fast = make_plan(one, domain), make_plan(EIGHT, domain)
    assert fast.pages_per_s == 8 * slow.pages_per_s == 16.0
    assert slow.domains[0].drain_seconds == 500.0


def test_blocks_cost_requests_but_yield_no_pages_and_raise_routes_needed() -> None:
    seen = {("a.example", "dc"): Observed(latency=2.0, block_rate=0.2)}
    target = parse_target("1M/day")  # 11.57 pages/s
    plan = make_plan(EIGHT, [DomainInput("a.example", target=target)], observed=seen)
    a = plan.domains[0]
    assert a.requests_per_s == 16.0 and a.pages_per_s == pytest.approx(12.8)
    assert a.in_flight == pytest.approx(32.0)
    # each route yields 2 x 0.8 = 1.6 pages/s: 11.57 / 1.6 -> 8 routes
    assert a.routes_needed == math.ceil(target / 1.6) == 8
    unhealthy = make_plan(EIGHT, [DomainInput("a.example")], observed=seen, healthy={"dc": 3})
    assert unhealthy.domains[0].requests_per_s == 6.0


def test_a_target_past_the_domain_cap_needs_no_routes_it_cannot_use() -> None:
    plan = make_plan(EIGHT, [DomainInput("a.example", rate=1.0, target=5.0)])
    assert plan.domains[0].routes_needed is None
    assert plan.domains[0].bottleneck == "domain_rate"


def test_route_concurrency_bounds_a_pool_without_a_rate() -> None:
    config = pools(
        f'[[routes.pool]]\nname = "dc"\nproxies = {proxies(4)}\nconcurrency = 2\n'
        '[[routes.pool]]\nname = "direct"\nenabled = false\n'
    )
    seen = {("a.example", "dc"): Observed(latency=0.25)}
    a = make_plan(config, [DomainInput("a.example")], observed=seen).domains[0]
    assert (a.requests_per_s, a.bottleneck) == (32.0, "route_concurrency")  # 4 x 2 / 0.25


def test_unbounded_domains_say_so_in_data_and_table() -> None:
    plan = make_plan(RoutesConfig(), [DomainInput("a.example", backlog=10)])
    a = plan.domains[0]
    assert a.bottleneck == "unbounded" and math.isinf(a.requests_per_s)
    data = json.loads(json.dumps(plan_json(plan)))  # no infinities in the JSON
    assert data["domains"][0]["requests_per_s"] is None
    assert "unbounded" in render_plan(plan)


def test_a_total_target_is_split_by_backlog() -> None:
    plan = make_plan(
        EIGHT,
        [DomainInput("a.example", backlog=3000), DomainInput("b.example", backlog=1000)],
        target_total=8.0,
    )
    assert [d.target_pages_per_s for d in plan.domains] == [6.0, 2.0]
    assert [d.routes_needed for d in plan.domains] == [3, 1]


def test_tiers_sticky_sessions_and_cost_per_pool() -> None:
    config = pools(
        f'[[routes.pool]]\nname = "dc"\nproxies = {proxies(2)}\nrate = 1\ncost = 0.001\n'
        f'[[routes.pool]]\nname = "resi"\nproxies = {proxies(4, 7000)}\nrate = 0.5\n'
        'cost = 0.01\nmode = "sticky"\nsession_uses = 20\ntier = 1\n'
    )
    first = make_plan(config, [DomainInput("a.example")]).domains[0]
    assert [lane.pool for lane in first.lanes] == ["direct", "dc"]  # tier 0: direct and dc
    assert first.bottleneck == "unbounded"  # direct has no cap of its own
    escalated = make_plan(config, [DomainInput("a.example", tier=1)]).domains[0]
    (lane,) = escalated.lanes
    assert (lane.pool, lane.requests_per_s, lane.route_rate) == ("resi", 2.0, 0.5)
    assert lane.sessions_per_hour == pytest.approx(2.0 * 3600 / 20)
    assert escalated.cost_per_day == pytest.approx(2.0 * 86400 * 0.01)
    with pytest.raises(ConfigError, match="no route pool of tier 5"):
        make_plan(config, [DomainInput("a.example", tier=5)])


def test_plan_json_keys_and_table() -> None:
    plan = make_plan(
        EIGHT,
        [DomainInput("a.example", backlog=100, rate=4.0)],
        target_total=parse_target("2M/day"),
    )
    data = json.loads(json.dumps(plan_json(plan)))
    assert set(data) == {
        "target_pages_per_s",
        "pages_per_s",
        "requests_per_s",
        "cost_per_day",
        "latency_assumed",
        "domains",
    }
    domain = data["domains"][0]
    assert set(domain) == {
        "domain",
        "tier",
        "pages_per_s",
        "requests_per_s",
        "cap_requests_per_s",
        "bottleneck",
        "block_rate",
        "latency",
        "in_flight",
        "backlog",
        "drain_seconds",
        "target_pages_per_s",
        "routes_needed",
        "cost_per_day",
        "lanes",
    }
    assert set(domain["lanes"][0]) == {
        "pool",
        "routes",
        "healthy_routes",
        "route_rate",
        "requests_per_s",
        "pages_per_s",
        "cost_per_day",
        "sessions_per_hour",
    }
    assert domain["bottleneck"] == "domain_rate" and domain["routes_needed"] is None
    table = render_plan(plan)
    assert "a.example" in table and "dc (2.00/s per route)" in table and " 25 s " in table
    assert "total: 4.00 pages/s (345,600/day)" in table
