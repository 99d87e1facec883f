from __future__ import annotations

import random
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlfleet.policy.traps import (
    TrapRules,
    _path_pattern,
    budget_keys,
    check_url,
    over_budget,
    page_type,
    url_pattern,
)

RULES = TrapRules()


@pytest.mark.parametrize(
    ("url", "depth", "rules", "reason"),
    [
        ("https://shop.test/a/b/c", 3, RULES, None),
        ("https://shop.test/", 0, RULES, None),
        ("https://shop.test", 0, RULES, None),
        ("https://shop.test/a", 11, TrapRules(max_depth=10), "depth"),
        ("https://shop.test/a", 10, TrapRules(max_depth=10), None),
        ("https://shop.test/" + "a" * 2100, 0, RULES, "url_length"),
        ("https://shop.test/" + "a" * 2065, 0, RULES, None),  # 2083 exactly
        ("https://shop.test/?q=" + "a" * 100, 0, TrapRules(max_url_length=50), "url_length"),
        ("https://shop.test/a/b/a/b/a/b", 0, RULES, "repeated_segments"),
        ("https://shop.test/x/x/x", 0, RULES, "repeated_segments"),
        ("https://shop.test/x/x", 0, RULES, None),
        ("https://shop.test/x/y/x?x=x/x/x#x/x/x", 0, RULES, None),  # query and fragment ignored
        ("https://shop.test/x//x/", 0, RULES, None),  # empty segments are not segments
        ("https://shop.test/x/x/x", 0, TrapRules(max_repeated_segments=3), None),
        ("https://shop.test/" + "/".join(f"s{i}" for i in range(65)), 0, RULES, "path_segments"),
        ("https://shop.test/" + "/".join(f"s{i}" for i in range(64)), 0, RULES, None),
        # depth is checked first
        ("https://shop.test/x/x/x", 5, TrapRules(max_depth=1), "depth"),
    ],
)
def test_check_url(url: str, depth: int, rules: TrapRules, reason: str | None) -> None:
    assert check_url(url, depth, rules) == reason


@pytest.mark.parametrize(
    ("url", "pattern"),
    [
        ("https://shop.test/calendar/2024/05?day=3", "shop.test/calendar/N/N?day"),
        ("https://Shop.Test:8080/item-1234/", "shop.test/item-N"),
        ("https://shop.test/", "shop.test/"),
        ("https://shop.test", "shop.test/"),
        ("https://shop.test/p?b=1&a=2&b=3&c", "shop.test/p?a&b&c"),
        ("https://shop.test/p?f[12]=1&f[13]=2", "shop.test/p?f[N]"),
        ("https://shop.test/s/0f3a9c2be4d1/x", "shop.test/s/X/x"),
        ("https://shop.test/o/123e4567-e89b-12d3-a456-426614174000", "shop.test/o/X"),
        ("https://shop.test/t/aB3dE5gH7jK9mN1pQ3sT5vX", "shop.test/t/X"),
        ("https://shop.test/deadbeef/cafe", "shop.test/deadbeef/cafe"),  # words, not ids
        ("https://shop.test/a#frag", "shop.test/a"),
        ("http://[::1/", "invalid"),
    ],
)
def test_url_pattern(url: str, pattern: str) -> None:
    assert url_pattern(url) == pattern


def test_url_pattern__session_ids_make_no_shape_of_their_own() -> None:
    # the fingerprint leaves them out: two spellings of one page draw on one URL-shape budget
    spellings = [
        "http://shop.test/product/CF-000123",
        "http://shop.test/product/CF-000123?sid=9f3a1c7e2b8d4f60a1c3",
        "http://shop.test/product/CF-000124;jsessionid=A1B2C3D4E5",
        "http://shop.test/product/CF-000125?PHPSESSID=x",
    ]
    assert {url_pattern(u) for u in spellings} == {"shop.test/product/CF-N"}
    # a short sid is not a session token: it stays a key of the shape, as in the fingerprint
    assert url_pattern("http://shop.test/a?sid=en&x=1") == "shop.test/a?sid&x"


def test_url_pattern_collapses_a_calendar() -> None:
    urls = {
        f"https://shop.test/cal/{y}/{m}?day={d}"
        for y in range(2000, 2030)
        for m in range(12)
        for d in range(28)
    }
    assert {url_pattern(u) for u in urls} == {"shop.test/cal/N/N?day"}


@given(st.text(), st.text())
def test_url_pattern_is_bounded(path: str, query: str) -> None:
    pattern = url_pattern(f"https://shop.test/{path}?{query}")
    assert len(pattern) <= len("shop.test") + 12 * 41 + 1 + 12 * 41


_URL_CHARS = st.sampled_from("abcdefAF0123456789-_/=&.%~x٣")


@given(st.text(_URL_CHARS, max_size=80), st.text(_URL_CHARS, max_size=60), st.randoms())
def test_url_pattern__the_cache_of_shapes_changes_no_pattern(
    path: str, query: str, rnd: random.Random
) -> None:
    # the cache is keyed on the URL with its ASCII digits folded: any other digits, same shape
    url = f"https://shop.test/{path}?{query}"
    renumbered = "".join(rnd.choice("0123456789") if c in "0123456789" else c for c in url)
    uncached = "shop.test" + _path_pattern(*urlsplit(url)[2:4])
    assert url_pattern(url) == url_pattern(renumbered) == uncached


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://shop.test/product/blue-mug-12?ref=x", "shop.test/product/*?ref"),
        ("https://shop.test/js/category/audio?page=2", "shop.test/js/category/*?page"),
        ("https://shop.test/about", "shop.test/about"),
        ("https://shop.test/", "shop.test/"),
    ],
)
def test_page_type__the_items_of_a_section_share_one_type(url: str, expected: str) -> None:
    assert page_type(url) == expected


def test_over_budget__first_come_first_admitted_and_keys_given_or_not_agree() -> None:
    rules = TrapRules(host_page_budget=3, pattern_budget=2)
    new = [
        (1, "http://a.test/p/1", "a.test"),
        (2, "http://a.test/p/2", "a.test"),
        (3, "http://a.test/p/3", "a.test"),  # third of its pattern: over
        (4, "http://a.test/about", "a.test"),
        (5, "http://a.test/q/1", "a.test"),  # fourth of its host: over
        (6, "http://b.test/p/1", "b.test"),
    ]
    used = {("host", "b.test"): 3}  # b.test spent its budget earlier
    keys_of = [budget_keys(url, domain, rules) for _, url, domain in new]
    got = over_budget(new, used, rules, keys_of)
    assert got == over_budget(new, used, rules)
    trapped, counts = got
    assert trapped == {3: "pattern_budget", 5: "host_budget", 6: "host_budget"}
    assert counts[("host", "a.test")] == 3 and counts[("pattern", "a.test/p/N")] == 2


def _over_budget_one_by_one(
    new: list[tuple[int, str, str]], used: dict[tuple[str, str], int], rules: TrapRules
) -> tuple[dict[int, str], dict[tuple[str, str], int]]:
    """The rule as written: each new request in order, over if a counter stands at its budget."""
    limits = {"host": rules.host_page_budget, "pattern": rules.pattern_budget}
    counts: dict[tuple[str, str], int] = {}
    trapped = {}
    for rid, url, domain in new:
        keys = budget_keys(url, domain, rules)
        over = [k for k in keys if counts.get(k, used.get(k, 0)) >= (limits[k[0]] or 0)]
        if over:
            trapped[rid] = f"{over[0][0]}_budget"
            continue
        for k in keys:
            counts[k] = counts.get(k, used.get(k, 0)) + 1
    return trapped, counts


@given(
    st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from(["/p/1", "/q/x", "/p/2?s=1"]))),
    st.integers(0, 6),
    st.integers(0, 6),
    st.integers(0, 8),
)
def test_over_budget__agrees_with_counting_one_request_at_a_time(
    links: list[tuple[str, str]], host_budget: int, pattern_budget: int, used_before: int
) -> None:
    rules = TrapRules(host_page_budget=host_budget, pattern_budget=pattern_budget)
    new = [(i, f"https://{h}.test{path}", f"{h}.test") for i, (h, path) in enumerate(links)]
    used = {("host", "a.test"): used_before, ("pattern", "b.test/p/N"): used_before // 2}
    assert over_budget(new, used, rules) == _over_budget_one_by_one(new, used, rules)


def test_sample_traps__keeps_the_first_of_each_rule_up_to_the_cap() -> None:
    from crawlfleet.policy.traps import dropped_key, sample_traps

    mask, counts = sample_traps(["depth", "pattern_budget", "depth", "depth"], {"depth": 1}, cap=2)
    assert (mask, counts) == ([True, True, False, False], {"depth": 2, "pattern_budget": 1})
    assert sample_traps(["depth"], {"depth": 5}, cap=2) == ([False], {})
    assert sample_traps([], {}) == ([], {})
    key = dropped_key("a.test", "depth", "http://a.test/cal/2024/05")
    assert key == "a.test\tdepth\ta.test/cal/N/N"
