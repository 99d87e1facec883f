"""The adaptive revisit policy: intervals that grow when a page stays the same and shrink when it
changes, and which pages a run revisits. Tables of cases, no clock but the one passed in."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlfleet.policy.revisit import (
    LONGEST,
    Change,
    PageVisit,
    RevisitRule,
    due_at,
    is_due,
    lastmod_moved,
    next_interval,
    parse_duration,
)

RULE = RevisitRule(min=3_600.0, max=86_400.0)
NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("interval", "change", "expected"),
    [
        (None, Change.NEW, 3_600.0),  # a first visit starts at min
        (None, Change.UNCHANGED, 3_600.0),  # no interval kept (an old store): a first visit
        (7_200.0, Change.NEW, 3_600.0),
        (3_600.0, Change.UNCHANGED, 5_400.0),  # x 1.5
        (5_400.0, Change.UNCHANGED, 8_100.0),
        (80_000.0, Change.UNCHANGED, 86_400.0),  # capped at max
        (86_400.0, Change.UNCHANGED, 86_400.0),
        (86_400.0, Change.CHANGED, 43_200.0),  # / 2
        (5_000.0, Change.CHANGED, 3_600.0),  # floored at min
        (3_600.0, Change.CHANGED, 3_600.0),
        (1.0, Change.UNCHANGED, 3_600.0),  # below min (the rule changed): back in range
        (1e12, Change.CHANGED, 86_400.0),  # above max (the rule changed): back in range
        (math.nan, Change.CHANGED, 3_600.0),  # nonsense from the store: a first visit
        (math.inf, Change.UNCHANGED, 3_600.0),
        (-5.0, Change.UNCHANGED, 3_600.0),
    ],
)
def test_next_interval(interval: float | None, change: Change, expected: float) -> None:
    assert next_interval(RULE, interval, change) == pytest.approx(expected)


def test_an_unchanged_page_reaches_max_and_a_changed_one_falls_back() -> None:
    interval = next_interval(RULE, None, Change.NEW)
    seen = [interval]
    for _ in range(10):
        interval = next_interval(RULE, interval, Change.UNCHANGED)
        seen.append(interval)
    assert seen == sorted(seen) and seen[-1] == 86_400.0
    for _ in range(10):
        interval = next_interval(RULE, interval, Change.CHANGED)
    assert interval == 3_600.0


@pytest.mark.parametrize(
    ("page", "now", "expected"),
    [
        (PageVisit(due_at=None), NOW, (True, "every run")),  # no rule: every run, every page
        (PageVisit(due_at=NOW - 1), NOW, (True, "due")),
        (PageVisit(due_at=NOW), NOW, (True, "due")),
        (PageVisit(due_at=NOW + 1), NOW, (False, "not yet")),
        (PageVisit(due_at=NOW + 1e6, seed=True), NOW, (True, "seed")),  # start URLs, sitemaps
        (PageVisit(due_at=NOW + 1e6, hub=True), NOW, (True, "hub")),  # new links last time
        (PageVisit(due_at=NOW + 1e6, seed=True, hub=True), NOW, (True, "seed")),
        (PageVisit(due_at=NOW + 1), NOW - 1e9, (False, "not yet")),  # a clock far behind
    ],
)
def test_is_due(page: PageVisit, now: float, expected: tuple[bool, str]) -> None:
    assert is_due(page, now) == expected


@pytest.mark.parametrize(
    ("listed", "known", "moved"),
    [
        (None, None, False),  # a sitemap without lastmod never pulls a page forward
        (None, NOW, False),
        (NOW, None, True),  # a lastmod the job never saw for the page
        (NOW, NOW, False),
        (NOW + 1, NOW, True),
        (NOW - 86_400, NOW, False),  # older than the one kept: not moved
        (math.nan, NOW, False),
        (NOW, math.nan, True),
    ],
)
def test_lastmod_moved(listed: float | None, known: float | None, moved: bool) -> None:
    assert lastmod_moved(listed, known) is moved


@pytest.mark.parametrize(
    ("fetched", "interval", "expected"),
    [
        (NOW, 3_600.0, NOW + 3_600.0),
        (NOW, 0.0, NOW),
        (NOW, 1e300, NOW + LONGEST),
        (NOW, -1.0, NOW),
        (math.nan, 60.0, 60.0),
        (NOW, math.inf, NOW),
    ],
)
def test_due_at_is_finite(fetched: float, interval: float, expected: float) -> None:
    assert due_at(fetched, interval) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (90, 90.0),
        (1.5, 1.5),
        ("3600", 3_600.0),
        ("90s", 90.0),
        ("15m", 900.0),
        ("6h", 21_600.0),
        ("1d", 86_400.0),
        ("2w", 1_209_600.0),
        ("1d12h", 129_600.0),
        ("1h 30m", 5_400.0),
        ("1.5h", 5_400.0),
    ],
)
def test_parse_duration(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "6x", "h", "-5", "0", "0s", "1h-2m", "inf", True])
def test_parse_duration_refuses(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("minimum", "maximum", "expected"),
    [
        (None, None, None),
        ("1h", "1d", RevisitRule(3_600.0, 86_400.0)),
        ("6h", None, RevisitRule(21_600.0, 21_600.0)),  # one alone: a fixed interval
        (None, 600, RevisitRule(600.0, 600.0)),
    ],
)
def test_rule_of_spider_attributes(
    minimum: str | None, maximum: str | int | None, expected: RevisitRule | None
) -> None:
    assert RevisitRule.of(minimum, maximum) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min": 7_200.0, "max": 3_600.0}, "longer than revisit_max"),
        ({"min": 0.0, "max": 3_600.0}, "revisit_min must be a positive"),
        ({"min": 1.0, "max": math.inf}, "revisit_max must be a positive"),
        ({"min": 1.0, "max": LONGEST * 2}, "over ten years"),
        ({"min": 1.0, "max": 2.0, "grow": 0.5}, "growth factor"),
        ({"min": 1.0, "max": 2.0, "shrink": math.nan}, "shrink factor"),
    ],
)
def test_bad_rules_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RevisitRule(**kwargs)


@given(
    low=st.floats(1.0, 1e5),
    span=st.floats(1.0, 1e3),
    interval=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    changes=st.lists(st.sampled_from(list(Change)), max_size=30),
)
def test_any_history_stays_within_the_rule(
    low: float, span: float, interval: float | None, changes: list[Change]
) -> None:
    rule = RevisitRule(low, low * span)
    for change in changes:
        interval = next_interval(rule, interval, change)
        assert rule.min <= interval <= rule.max
