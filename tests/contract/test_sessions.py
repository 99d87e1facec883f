"""Sessions held in the store: a cookie learnt by one worker serves every worker; a blocked
session is retired and a new one made. Every backend, two workers' views of one store."""

from __future__ import annotations

from tests.conftest import FakeClock
from tests.contract.test_frontier import job
from tests.contract.test_frontier_report import _second_view

from crawlfleet.frontier.ports import Frontier
from crawlfleet.routes.identities import Identities, session_key
from crawlfleet.routes.pools import Pool, PoolMode, Route, RoutesConfig

STICKY = Pool("res", (Route("res/a", "res", "http://127.0.0.2:3128"),), mode=PoolMode.STICKY)
ROTATING = Pool("dc", (Route("dc/a", "dc", "http://127.0.0.3:3128"),))
ROUTES = RoutesConfig((STICKY, ROTATING))


def test_session_key__sticky_by_route_rotating_by_pool_direct_alone() -> None:
    assert session_key(STICKY.routes[0], ROUTES) == "res/a"
    assert session_key(ROTATING.routes[0], ROUTES) == "dc"
    assert session_key(None, ROUTES) == "direct"


async def test_sessions__a_login_cookie_serves_another_worker_and_a_block_retires_it(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    route = STICKY.routes[0]
    one = Identities(frontier, user_agent="ua-1", routes=ROUTES, clock=clock)
    session = await one.pick("j", route)
    assert session.route_id == "res/a"
    cookie = "sid=s3ss10n; Path=/; HttpOnly"
    one.after("j", route, session, url="http://a.test/login", set_cookies=[cookie], outcome="ok")
    await one.flush()

    other_store = await _second_view(frontier, clock)
    try:
        two = Identities(other_store, user_agent="ua-2", routes=ROUTES, clock=clock)
        continued = await two.pick("j", route)
        assert continued.id == session.id, "the other worker continues the same identity"
        assert continued.request_headers("http://a.test/account", clock())["Cookie"] == (
            "sid=s3ss10n"
        )
        two.after("j", route, continued, url="http://a.test/x", set_cookies=[], outcome="blocked")
        await two.flush()
        clock.advance(10)  # past the reload interval: the first worker reads the store again
        fresh = await one.pick("j", route)
        assert fresh.id != session.id, "the blocked identity is retired, a new one made"
        assert fresh.cookies == ()
    finally:
        await other_store.close()


async def test_sessions__a_named_session_is_read_afresh_for_a_later_lease_and_outlives_its_uses(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    other_store = await _second_view(frontier, clock)
    try:
        two = Identities(other_store, user_agent="ua-2", routes=ROUTES, clock=clock)
        early = await two.pick("j", None)  # the second worker reads the key before the login
        one = Identities(frontier, user_agent="ua-1", routes=ROUTES, clock=clock)
        login = await one.pick("j", None, "jar-1")
        assert (login.id, login.named, login.cookies) == ("jar-1", True, ())
        cookie = "auth=signed-in; Path=/; HttpOnly"
        one.after("j", None, login, url="http://a.test/login", set_cookies=[cookie], outcome="ok")
        await one.flush()
        clock.advance(1)  # within the reload interval: only the lease's time makes it read again
        leased_at = clock()
        same = await two.pick("j", None, "jar-1", since=leased_at)
        assert same.id == "jar-1" and same.id != early.id
        assert same.cookie_header("http://a.test/account/orders", clock()) == "auth=signed-in"

        for _ in range(60):  # past max_uses (50): a named session is not retired for it
            same = two.after("j", None, same, url="http://a.test/x", set_cookies=[], outcome="ok")
        await two.flush()
        clock.advance(10)
        again = await one.pick("j", None, "jar-1", since=clock())
        assert (
            again.uses >= 60 and again.cookie_header("http://a.test/", clock()) == "auth=signed-in"
        )

        one.after("j", None, again, url="http://a.test/y", set_cookies=[], outcome="blocked")
        await one.flush()
        clock.advance(10)
        fresh = await two.pick("j", None, "jar-1", since=clock())
        assert (fresh.id, fresh.cookies, fresh.uses) == ("jar-1", (), 0), (
            "a blocked named session starts again, empty, under its name"
        )
    finally:
        await other_store.close()


async def test_sessions__a_followed_session_reaches_another_worker_outlives_its_uses_never_made(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    other_store = await _second_view(frontier, clock)
    try:
        two = Identities(other_store, user_agent="ua-2", routes=ROUTES, clock=clock)
        own = await two.pick("j", None)  # the second worker has a session of its own already
        two.after("j", None, own, url="http://a.test/", set_cookies=[], outcome="ok")
        await two.flush()
        one = Identities(frontier, user_agent="ua-1", routes=ROUTES, clock=clock)
        gate = await one.pick("j", None, "age-gate")  # a session of its own, for the test
        one.after("j", None, gate, url="http://a.test/gate", set_cookies=["age=18"], outcome="ok")
        await one.flush()
        clock.advance(1)  # within the reload interval: only the lease's time makes it read again
        got = await two.pick("j", None, since=clock(), follow="age-gate")
        assert got.id == "age-gate" and got.cookie_header("http://a.test/p", clock()) == "age=18"
        for _ in range(60):  # past max_uses (50): followed, it is kept as a named one
            got = two.after("j", None, got, url="http://a.test/x", set_cookies=[], outcome="ok")
        await two.flush()
        clock.advance(10)
        assert (await one.pick("j", None, follow="age-gate", since=clock())).id == "age-gate"

        made = await one.pick("j", None, follow="gone-elsewhere", since=clock())
        assert made.id != "gone-elsewhere", "a followed session is never made: any other serves"
        sticky = await one.pick("j", STICKY.routes[0], follow="age-gate", since=clock())
        assert sticky.id != "age-gate" and sticky.route_id == "res/a", "another route's own"
    finally:
        await other_store.close()


async def test_sessions__a_pool_that_sets_session_uses_rotates_a_followed_session(
    frontier: Frontier, clock: FakeClock
) -> None:
    await job(frontier)
    pool = Pool("dc", ROTATING.routes, session_uses=3)
    routes = RoutesConfig((pool,))
    route = pool.routes[0]
    one = Identities(frontier, user_agent="ua-1", routes=routes, clock=clock)
    gate = await one.pick("j", route)
    gate = one.after("j", route, gate, url="http://a.test/", set_cookies=["c=1"], outcome="ok")
    for _ in range(2):
        assert (await one.pick("j", route, follow=gate.id)).id == gate.id
        gate = one.after("j", route, gate, url="http://a.test/p", set_cookies=[], outcome="ok")
    assert not gate.named
    rotated = await one.pick("j", route, follow=gate.id)
    assert rotated.id != gate.id and rotated.cookies == (), "session_uses = 3 asked for it"
