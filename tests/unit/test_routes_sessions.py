"""Sessions on a fake clock: lifecycle (Crawlee's defaults), cookies, stickiness, JSON."""

from __future__ import annotations

import json

import pytest
from tests.conftest import FakeClock

from crawlfleet.routes.pools import Pool, PoolMode, Route
from crawlfleet.routes.sessions import (
    Cookie,
    Session,
    SessionConfig,
    pick_session,
    session_route,
)

ROUTE = Route("dc/0123456789", "dc", "http://u:pw@10.0.0.1:3128")
OTHER = Route("dc/abcdefabcd", "dc", "http://u:pw@10.0.0.2:3128")
UA = "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"


def new(clock: FakeClock, sid: str = "s1", route: Route = ROUTE) -> Session:
    return Session.new(sid, route, clock.now, user_agent=UA, headers={"Accept-Language": "pt"})


def test_error_score_retires_after_three_net_bad_attempts(clock: FakeClock) -> None:
    s = new(clock)
    for _ in range(2):
        s = s.mark_bad(clock.now)
    s = s.mark_good(clock.now)  # 2 - 0.5
    assert s.usable(clock.now)
    s = s.mark_bad(clock.now).mark_bad(clock.now)  # 3.5
    assert s.retire_reason(clock.now) == "errors"
    assert new(clock).mark_good(clock.now).error_score == 0.0  # never below zero


def test_retired_after_fifty_uses_or_fifty_minutes(clock: FakeClock) -> None:
    s = new(clock)
    for _ in range(49):
        s = s.mark_good(clock.now)
    assert s.usable(clock.now)
    assert s.mark_good(clock.now).retire_reason(clock.now) == "uses"
    fresh = new(clock)
    assert fresh.usable(clock.now + 2999)
    assert fresh.retire_reason(clock.now + 3000) == "age"
    pool = Pool("dc", (ROUTE,), session_uses=3, session_age=60)
    config = SessionConfig.for_pool(pool)
    assert (config.max_uses, config.max_age) == (3, 60)
    assert fresh.mark_good(1).mark_good(1).mark_good(1).retire_reason(1, config) == "uses"


def test_a_block_retires_the_session_for_good(clock: FakeClock) -> None:
    s = new(clock).retire(clock.now)
    assert s.retire_reason(clock.now) == "block"
    assert pick_session([s], clock.now) is None  # the caller creates a new one


def test_cookies_are_kept_scoped_and_expired(clock: FakeClock) -> None:
    s = new(clock).with_cookies(
        [
            "sid=abc123; Path=/; HttpOnly",
            "cart=7; Domain=.shop.example; Path=/cart; Max-Age=60",
            "pref=eu; Domain=shop.example",
            "tok=x; Secure",
            "evil=1; Domain=other.example",  # not for this host: ignored
            "broken",  # malformed: ignored
        ],
        "https://www.shop.example/index.html",
        clock.now,
    )
    assert sorted(c.name for c in s.cookies) == ["cart", "pref", "sid", "tok"]
    assert s.cookie_header("https://www.shop.example/cart/view", clock.now) == (
        "cart=7; sid=abc123; pref=eu; tok=x"
    )
    assert s.cookie_header("http://www.shop.example/", clock.now) == "sid=abc123; pref=eu"
    assert s.cookie_header("http://img.shop.example/", clock.now) == "pref=eu"  # host-only sid
    assert s.cookie_header("http://other.example/", clock.now) is None
    later = clock.now + 61
    assert s.cookie_header("https://www.shop.example/cart", later) == "sid=abc123; pref=eu; tok=x"
    deleted = s.with_cookies(
        ["sid=; Max-Age=0", "pref=us; Domain=shop.example; Expires=Wed, 21 Oct 2099 07:28:00 GMT"],
        "https://www.shop.example/",
        clock.now,
    )
    assert deleted.cookie_header("https://www.shop.example/", clock.now) == "pref=us; tok=x"
    headers = deleted.request_headers("https://www.shop.example/", clock.now)
    assert headers == {"User-Agent": UA, "Accept-Language": "pt", "Cookie": "pref=us; tok=x"}
    assert "Cookie" not in new(clock).request_headers("https://www.shop.example/", clock.now)


def test_default_cookie_path_is_the_request_directory(clock: FakeClock) -> None:
    s = new(clock).with_cookies(["a=1"], "https://shop.example/account/orders/7", clock.now)
    assert s.cookies[0].path == "/account/orders"
    assert s.cookie_header("https://shop.example/account/orders/8", clock.now) == "a=1"
    assert s.cookie_header("https://shop.example/account/ordersX", clock.now) is None
    assert s.cookie_header("https://shop.example/", clock.now) is None


def test_sticky_pools_keep_a_session_on_its_route(clock: FakeClock) -> None:
    sticky = Pool("resi", (ROUTE, OTHER), mode=PoolMode.STICKY)
    rotating = Pool("dc", (ROUTE, OTHER))
    s = new(clock, route=OTHER)
    assert session_route(s, sticky) == OTHER
    assert session_route(s, rotating) is None  # any route of the pool
    assert session_route(s, Pool("resi", (ROUTE,), mode=PoolMode.STICKY)) is None  # route gone


def test_pick_session_reuses_the_least_used_healthy_one(clock: FakeClock) -> None:
    a = new(clock, "a").mark_good(clock.now).mark_good(clock.now)
    b = new(clock, "b").mark_good(clock.now)
    c = new(clock, "c", OTHER)
    dead = new(clock, "d").retire(clock.now)
    assert pick_session([a, b, c, dead], clock.now) == c
    assert pick_session([a, b, c, dead], clock.now, route_ids={ROUTE.id}) == b
    assert pick_session([], clock.now) is None


def test_a_session_survives_json_and_hides_cookie_values(clock: FakeClock) -> None:
    s = (
        new(clock)
        .with_cookies(
            ["sid=SECRETVALUE; Max-Age=600", "lang=pt"], "https://shop.example/", clock.now
        )
        .mark_bad(clock.now + 1)
    )
    data = json.loads(json.dumps(s.to_json()))
    back = Session.from_json(data)
    assert back == s
    assert back.cookie_header("https://shop.example/", clock.now + 2) == "sid=SECRETVALUE; lang=pt"
    assert "SECRETVALUE" not in repr(s) and "SECRETVALUE" not in repr(s.cookies[0])
    assert "cookies=[lang,sid]" in repr(s)
    assert isinstance(s.cookies[0], Cookie)
    with pytest.raises(ValueError, match="not a stored session"):
        Session.from_json({**data, "cookies": [{"name": "x"}]})
    with pytest.raises(ValueError, match="not a stored session"):
        Session.from_json({"id": "x"})
