"""Lanes: pacing per (domain, route), a domain's own limits capping the sum of its lanes.

Every backend. A job's routes come from its pools (``JobSpec.routes``); a domain gets a lane per
route of the pools that serve it, and the lease hands out a route with each slot.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import pairwise

from tests.conftest import FakeClock
from tests.contract.test_frontier import TTL, job, req, urls

from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import Completion, DomainLimits, Lease, NewRequest, RoutePlan

ROUTES = tuple(RoutePlan(f"dc/{n}", "dc", max_in_flight=2) for n in range(3))


async def test_lanes__a_domain_gets_one_per_route_and_the_lease_spreads_over_them(
    frontier: Frontier,
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=5), routes=ROUTES)
    await frontier.enqueue("j", urls(20))
    lanes = await frontier.lanes("a.test")
    assert sorted(x.route for x in lanes) == ["dc/0", "dc/1", "dc/2"]
    leases = await frontier.lease("A", 20, TTL)
    per_route = Counter(x.route for x in leases)
    assert len(leases) == 5, "the domain's cap holds over its lanes"
    assert max(per_route.values()) <= 2, "each route's own cap holds"
    assert set(per_route) <= {"dc/0", "dc/1", "dc/2"}
    # a finished lease frees its own lane and its domain: the next lease can use that slot
    await frontier.complete([Completion(leases[0].ref, 200)])
    again = await frontier.lease("A", 20, TTL)
    assert len(again) == 1
    assert Counter(x.route for x in leases[1:] + again)[again[0].route] <= 2


async def test_lanes__without_routes_one_direct_lane_per_domain(frontier: Frontier) -> None:
    await job(frontier)
    await frontier.enqueue("j", urls(3) + urls(2, "b.test"))
    assert [x.route for x in await frontier.lanes("a.test")] == ["direct"]
    assert {x.route for x in await frontier.lease("A", 10, TTL)} == {"direct"}


async def test_lanes__pools_that_name_a_domain_serve_it_the_others_serve_the_rest(
    frontier: Frontier,
) -> None:
    routes = (
        RoutePlan("res/0", "res", tier=0, domains=("a.test",)),
        RoutePlan("dc/0", "dc"),
    )
    await job(frontier, routes=routes)
    await frontier.enqueue("j", urls(2, "a.test") + urls(2, "b.test"))
    assert [x.route for x in await frontier.lanes("a.test")] == ["res/0"]
    assert [x.route for x in await frontier.lanes("b.test")] == ["dc/0"]


async def test_lanes__push_back_on_one_route_slows_that_lane_only(
    frontier: Frontier, clock: FakeClock
) -> None:
    from crawlfleet.model import Failure

    await job(frontier, limits=DomainLimits(max_in_flight=10), routes=ROUTES)
    await frontier.enqueue("j", urls(30))
    leases = await frontier.lease("A", 6, TTL)
    hit = next(x for x in leases if x.route == "dc/1")
    await frontier.fail(
        [Failure(hit.ref, "HTTP 429", retry_at=clock() + 30, status=429, outcome="blocked",
                 retry_after=20, latency=0.01, started_at=clock() - 0.01)]
    )  # fmt: skip
    held = {x.route: x for x in await frontier.lanes("a.test")}
    assert held["dc/1"].pacing.blocked_until >= clock() + 20
    assert held["dc/0"].pacing.blocked_until < clock() + 1
    await frontier.complete([Completion(x.ref, 200) for x in leases if x is not hit])
    clock.advance(1)
    assert "dc/1" not in {x.route for x in await frontier.lease("A", 30, TTL)}


def _failure(lease: object, clock: FakeClock, **kw: object) -> object:
    from crawlfleet.model import Failure

    return Failure(lease.ref, "x", retry_at=clock() + 60, latency=0.01,  # type: ignore[attr-defined]
                   started_at=clock() - 0.01, **kw)  # type: ignore[arg-type]  # fmt: skip


async def test_lanes__a_request_blocked_through_a_route_goes_by_another_unless_it_has_none(
    frontier: Frontier, clock: FakeClock
) -> None:
    solo = RoutePlan("solo/0", "solo", domains=("b.test",))
    await job(frontier, limits=DomainLimits(max_in_flight=6), routes=(*ROUTES, solo))
    await frontier.enqueue("j", urls(1) + urls(1, "b.test"))
    seen: dict[str, list[str]] = {"a.test": [], "b.test": []}
    for _ in range(4):
        leases = await frontier.lease("A", 10, TTL)
        assert len(leases) == 2
        for lease in leases:
            seen[lease.domain].append(lease.route)
        blocked = [
            _failure(x, clock, outcome="blocked", status=200, route_signal="block",
                     count_attempt=False) for x in leases
        ]  # fmt: skip
        await frontier.fail(blocked)  # type: ignore[arg-type]
        clock.advance(61)
    a, b = seen["a.test"], seen["b.test"]
    assert all(x != y for x, y in pairwise(a)), f"another route each time: {a}"
    assert b == ["solo/0"] * 4, "a domain with one route tries it again"


async def test_breaker__a_refusing_route_is_out_at_once_and_tried_again_after_its_cool_down(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier, limits=DomainLimits(max_in_flight=6), routes=ROUTES)
    await frontier.enqueue("j", urls(40))
    leases = await frontier.lease("A", 6, TTL)
    down = [x for x in leases if x.route == "dc/2"]
    assert len(down) == 2
    refused = [
        _failure(x, clock, outcome="retryable_error", route_signal="refused", count_attempt=False)
        for x in down
    ]
    await frontier.fail(refused)  # type: ignore[arg-type]
    await frontier.complete([Completion(x.ref, 200) for x in leases if x.route != "dc/2"])
    clock.advance(1)
    again = await frontier.lease("A", 40, TTL)
    assert again and "dc/2" not in {x.route for x in again}, "its breaker is open"
    await frontier.complete([Completion(x.ref, 200) for x in again])
    clock.advance(31)  # past the cool-down: the route is tried again
    probe = await frontier.lease("A", 40, TTL)
    assert "dc/2" in {x.route for x in probe}
    await frontier.complete([Completion(x.ref, 200) for x in probe])
    clock.advance(1)
    assert "dc/2" in {x.route for x in await frontier.lease("A", 40, TTL)}, "the probe closed it"


async def test_escalation__a_domain_blocked_on_its_tier_moves_to_the_next(
    frontier: Frontier, clock: FakeClock
) -> None:
    routes = (RoutePlan("cheap/0", "cheap", tier=0), RoutePlan("dear/0", "dear", tier=1))
    await job(frontier, limits=DomainLimits(max_in_flight=20), routes=routes)
    await frontier.enqueue("j", urls(40))
    first = await frontier.lease("A", 12, TTL)
    assert {x.route for x in first} == {"cheap/0"}, "the lowest tier first"
    await frontier.fail([_failure(x, clock, outcome="blocked", status=403) for x in first])  # type: ignore[misc]
    clock.advance(60)  # the blocked lane's hold passes; the domain moved up meanwhile
    after = await frontier.lease("A", 12, TTL)
    assert after and {x.route for x in after} == {"dear/0"}


# -- requests pinned to pools (Request(pool=...)) -------------------------------------------------


def _pinned(n: int, *pools: str, host: str = "a.test") -> list[NewRequest]:
    return [replace(req(f"http://{host}/pin/{'-'.join(pools)}/{i}"), pool=pools) for i in range(n)]


async def _drain(frontier: Frontier, clock: FakeClock, rounds: int = 30) -> list[Lease]:
    """Lease and complete until nothing is left (or ``rounds`` runs out); every lease taken."""
    taken: list[Lease] = []
    for _ in range(rounds):
        leases = await frontier.lease("A", 100, TTL)
        taken.extend(leases)
        await frontier.complete([Completion(x.ref, 200) for x in leases])
        if await frontier.is_finished("j"):
            break
        clock.advance(1)
    return taken


async def test_pinned__a_request_is_leased_only_through_its_pools_routes(
    frontier: Frontier, clock: FakeClock
) -> None:
    # as route_plans makes them: the spider's pool "dc", and "res" (another tier) only for the
    # requests that name it
    routes = (
        *ROUTES,
        RoutePlan("res/0", "res", tier=1, pinned=True),
        RoutePlan("res/1", "res", tier=1, pinned=True),
    )
    await job(frontier, routes=routes)
    await frontier.enqueue("j", urls(12) + _pinned(6, "res") + _pinned(4, "dc", "res"))
    assert sorted(x.route for x in await frontier.lanes("a.test")) == [
        "dc/0", "dc/1", "dc/2", "res/0", "res/1"
    ]  # fmt: skip
    taken = await _drain(frontier, clock)
    assert await frontier.is_finished("j"), "a pinned request on another tier is not starved"
    by_kind: dict[str, set[str]] = {}
    for lease in taken:
        by_kind.setdefault(lease.url.rsplit("/", 1)[0], set()).add(lease.route)
    assert by_kind["http://a.test/p"] <= {"dc/0", "dc/1", "dc/2"}, "never a pinned-only route"
    assert by_kind["http://a.test/pin/res"] <= {"res/0", "res/1"}
    assert by_kind["http://a.test/pin/dc-res"] <= {"dc/0", "dc/1", "dc/2", "res/0", "res/1"}
    assert len(taken) == 22


async def test_pinned__a_request_pinned_to_a_pool_off_the_domains_tier_is_not_starved(
    frontier: Frontier, clock: FakeClock
) -> None:
    # both pools serve the domain; it is crawled on the cheap tier, the dear one is for
    # escalation only: a request that names the dear pool goes through it at once
    routes = (RoutePlan("cheap/0", "cheap", tier=0), RoutePlan("dear/0", "dear", tier=1))
    await job(frontier, routes=routes)
    await frontier.enqueue("j", urls(5) + _pinned(3, "dear"))
    taken = await _drain(frontier, clock)
    assert await frontier.is_finished("j")
    routes_of = {x.url: x.route for x in taken}
    assert {r for u, r in routes_of.items() if "/pin/" in u} == {"dear/0"}
    assert {r for u, r in routes_of.items() if "/pin/" not in u} == {"cheap/0"}, "tier rule holds"


async def test_pinned__a_lane_for_pinned_requests_only_never_leaves_a_lease_empty(
    frontier: Frontier, clock: FakeClock
) -> None:
    """Once the pinned requests are done, their lane still comes up in the lease's turn: the
    domain's own requests are leased through its other lanes in that same call."""
    await job(frontier, routes=(ROUTES[0], RoutePlan("res/0", "res", tier=1, pinned=True)))
    await frontier.enqueue("j", _pinned(1, "res") + urls(8))
    sizes = []
    while not await frontier.is_finished("j") and len(sizes) < 20:
        leases = await frontier.lease("A", 1, TTL)  # one a call: the lanes take turns
        sizes.append(len(leases))
        await frontier.complete([Completion(x.ref, 200) for x in leases])
        clock.advance(1)
    assert await frontier.is_finished("j")
    assert 0 not in sizes, f"leases per call: {sizes}"


async def test_pinned__a_cheaper_pool_only_for_pinned_requests_does_not_set_the_domains_tier(
    frontier: Frontier, clock: FakeClock
) -> None:
    # the spider's pool is on tier 1; a tier-0 pool only pinned requests use must not make the
    # domain's tier 0, where its own requests would have no lane
    routes = (RoutePlan("dear/0", "dear", tier=1), RoutePlan("cheap/0", "cheap", pinned=True))
    await job(frontier, routes=routes)
    await frontier.enqueue("j", _pinned(2, "cheap") + urls(4))
    taken = await _drain(frontier, clock)
    assert await frontier.is_finished("j"), "the domain's own requests are not starved"
    routes_of = {x.url: x.route for x in taken}
    assert {r for u, r in routes_of.items() if "/pin/" in u} == {"cheap/0"}
    assert {r for u, r in routes_of.items() if "/pin/" not in u} == {"dear/0"}


async def test_pinned__a_request_blocked_through_its_pools_only_route_tries_it_again(
    frontier: Frontier, clock: FakeClock
) -> None:
    # the domain has three lanes for its own requests, the pinned request one: a block through
    # it must not wait for "another route" of the domain that the request may not take
    routes = (*ROUTES, RoutePlan("solo/0", "solo", pinned=True))
    await job(frontier, limits=DomainLimits(max_in_flight=6), routes=routes)
    await frontier.enqueue("j", _pinned(1, "solo"))
    seen = []
    for _ in range(3):
        leases = await frontier.lease("A", 10, TTL)
        assert len(leases) == 1, f"leased again after a block: {seen}"
        seen.append(leases[0].route)
        blocked = _failure(leases[0], clock, outcome="blocked", status=200,
                           route_signal="block", count_attempt=False)  # fmt: skip
        await frontier.fail([blocked])  # type: ignore[list-item]
        clock.advance(61)
    assert seen == ["solo/0"] * 3


async def test_pinned__blocks_on_a_lane_only_pinned_requests_use_leave_the_domains_tier(
    frontier: Frontier, clock: FakeClock
) -> None:
    routes = (
        RoutePlan("cheap/0", "cheap", tier=0),
        RoutePlan("dear/0", "dear", tier=1),
        RoutePlan("walled/0", "walled", tier=0, pinned=True),
    )
    await job(frontier, limits=DomainLimits(max_in_flight=20), routes=routes)
    await frontier.enqueue("j", _pinned(12, "walled"))
    walled = await frontier.lease("A", 40, TTL)
    assert len(walled) >= 4 and {x.route for x in walled} == {"walled/0"}
    await frontier.fail([_failure(x, clock, outcome="blocked", status=403) for x in walled])  # type: ignore[misc]
    clock.advance(60)
    await frontier.enqueue("j", urls(20))
    after = await frontier.lease("A", 40, TTL)
    assert "dear/0" not in {x.route for x in after}, "the domain stays on its cheap tier"
    assert "cheap/0" in {x.route for x in after}


async def test_broad__a_domain_with_ready_work_behind_hundreds_done_is_leased_at_once(
    frontier: Frontier, clock: FakeClock
) -> None:
    # a broad crawl near its end: 600 domains served and done, one of them with a new request
    await job(frontier)
    hosts = [f"h{i:03d}.test" for i in range(600)]
    await frontier.enqueue("j", [req(f"http://{h}/") for h in hosts])
    leased: list[Lease] = []
    while batch := await frontier.lease("A", 1000, TTL):
        leased.extend(batch)
    assert len(leased) == len(hosts)
    await frontier.complete([Completion(x.ref, 200) for x in leased])
    clock.advance(1.0)
    await frontier.enqueue("j", [req("http://h599.test/next")])  # the last one served
    got = await frontier.lease("A", 1000, TTL)
    assert [x.url for x in got] == ["http://h599.test/next"]


async def test_broad__a_lease_cut_short_leaves_the_domains_it_did_not_reach_their_place(
    frontier: Frontier, clock: FakeClock
) -> None:
    # 40 domains with work, a lease of 10: the 30 it did not reach were not served, and the
    # next lease serves them before the 10 served already (a store that marks every domain it
    # looked at as served sends those 30 to the back of the line, unserved)
    await job(frontier, limits=DomainLimits(max_in_flight=1))
    hosts = [f"h{i:02d}.test" for i in range(40)]
    await frontier.enqueue("j", [req(f"http://{h}/{n}") for h in hosts for n in range(3)])
    first = await frontier.lease("A", 10, TTL)
    assert len({x.domain for x in first}) == 10
    await frontier.complete([Completion(x.ref, 200) for x in first])
    clock.advance(1.0)
    second = await frontier.lease("A", 30, TTL)
    assert {x.domain for x in second} == set(hosts) - {x.domain for x in first}
