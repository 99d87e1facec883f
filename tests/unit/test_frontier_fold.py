"""The store's folds of a batch of attempts: a lane's pacing and a route's breaker."""

from __future__ import annotations

import json

from crawlfleet.frontier import pacing as pace
from crawlfleet.frontier.ports import DomainState
from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.pacing import PacingConfig, initial

NOW = 1000.0


def _refused(n: int) -> list[pace.Event]:
    return [pace.Event(Outcome.RETRYABLE_ERROR, None, None, None, NOW, "refused")] * n


def _cut(n: int) -> list[pace.Event]:
    return [pace.Event(Outcome.RETRYABLE_ERROR, None, None, None, NOW, None)] * n


def test_lane_pacing__a_refusing_proxy_teaches_the_lane_nothing_a_cut_connection_does() -> None:
    config = PacingConfig()
    lane = DomainState("shop.test", 8, 0.0, 0, 0.0, initial(config), "dc-1")
    refused = pace.apply(lane, config, NOW, _refused(20))
    cut = pace.apply(lane, config, NOW, _cut(20))
    assert refused == lane.pacing
    assert cut != lane.pacing


def test_breaker__cool_down_from_the_pacing_section() -> None:
    short = pace.health_config(PacingConfig(breaker_cooldown=1.0, breaker_cooldown_cap=2.0))
    document, open_until = pace.fold_breaker("{}", _refused(3), NOW, short)
    assert open_until == NOW + 1.0
    _, default_until = pace.fold_breaker("{}", _refused(3), NOW)
    assert default_until == NOW + 30.0
    # a failed probe doubles the cool-down, up to the cap
    later = NOW + 1.5
    _, again = pace.fold_breaker(document, _refused(1), later, short)
    assert again == later + 2.0
    assert json.loads(document)["state"] == "open"


def _answered(status: int, signal: str, n: int) -> list[pace.Event]:
    return [pace.Event(Outcome.BLOCKED, status, 0.01, 1.0, NOW, signal)] * n


def test_breaker__429s_leave_the_route_in_block_pages_take_it_out() -> None:
    """A burst of 429s says the lane went too fast for its site (its pacing slows down); the
    route still works for every domain. Block pages in a row say the route is burned."""
    _, after_429s = pace.fold_breaker("{}", _answered(429, "block", 20), NOW)
    assert after_429s == 0.0
    _, after_blocks = pace.fold_breaker("{}", _answered(200, "block", 5), NOW)
    assert after_blocks == NOW + 30.0
    _, proxy_429 = pace.fold_breaker("{}", _answered(429, "error", 5), NOW)
    assert proxy_429 == NOW + 30.0, "a proxy's own failure is the route's, whatever the status"
