"""The data profile and the quality monitors: pure, table-driven."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Literal

import pytest
from pydantic import BaseModel

from crawlfleet.data.profile import (
    FieldStats,
    RunProfile,
    build_profile,
    field_kinds,
    field_stats,
    is_filled,
)
from crawlfleet.monitor.quality import MONITORS, Breach, QualityRules, evaluate


@pytest.mark.parametrize(
    ("value", "filled"),
    [
        (None, False),
        ("", False),
        ("   ", False),
        ([], False),
        ({}, False),
        ("x", True),
        (0, True),
        (0.0, True),
        (False, True),
        ([0], True),
        ({"a": None}, True),
    ],
)
def test_what_counts_as_filled(value: object, filled: bool) -> None:
    assert is_filled(value) is filled


def test_field_stats_counts_each_field() -> None:
    records = [
        {"sku": "a", "price": 3, "rating": None, "tags": ["x"]},
        {"sku": "b", "price": 1.5, "rating": "", "tags": []},
        {"sku": "c", "price": 2, "rating": 4.5},
        {"sku": "c", "price": "n/a"},
    ]
    stats = field_stats(records)
    assert stats["sku"] == FieldStats("sku", 4, 4, 4, 3, 0, None, None, None)
    assert stats["price"] == FieldStats("price", 4, 4, 1, 1, 3, 1.5, 2.0, 3.0)
    assert stats["rating"] == FieldStats("rating", 3, 1, 0, 0, 1, 4.5, 4.5, 4.5)
    assert stats["tags"] == FieldStats("tags", 2, 1, 0, 0, 0, None, None, None)


@pytest.mark.parametrize(
    ("numbers", "median"),
    [([5], 5.0), ([1, 9], 5.0), ([3, 1, 2], 2.0), ([4, 1, 3, 2], 2.5), ([True, 2], 2.0)],
)
def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two(
    numbers: list[object], median: float
) -> None:
    assert field_stats([{"n": v} for v in numbers])["n"].median == median


class Product(BaseModel):
    sku: str
    price: float
    stock: int | None = None
    rating: float | None = None
    grade: Literal["a", "b"] = "a"
    cost: Decimal = Decimal(0)
    sale: bool = False
    tags: list[str] = []


def test_field_kinds_read_the_model() -> None:
    assert field_kinds(Product) == {
        "sku": "text",
        "price": "number",
        "stock": "number",
        "rating": "number",
        "grade": "text",
        "cost": "number",
        "sale": "bool",
        "tags": "other",
    }
    assert field_kinds(None) == {}


def _base(records: int, **kw: object) -> RunProfile:
    return RunProfile("shop", 1, at=100.0, started_at=0.0, records=records, **kw)  # type: ignore[arg-type]


def test_a_profile_has_every_model_field_even_when_no_record_has_it() -> None:
    stats = field_stats([{"sku": "a", "rating": 4.0}, {"sku": "b", "rating": None}])
    p = build_profile(_base(2), stats, {"sku": "text", "rating": "number", "stock": "number"})
    assert sorted(p.fields) == ["rating", "sku", "stock"]
    assert p.fields["rating"].coverage == 0.5
    assert p.fields["stock"].coverage == 0.0
    assert p.fields["sku"].distinct_share == 1.0
    assert p.fields["sku"].kind == "text"
    again = RunProfile.from_json(p.to_json())
    assert again == p


def test_without_a_model_the_fields_found_are_profiled() -> None:
    stats = field_stats([{"a": 1, "b": "x"}, {"a": 2, "b": "x"}])
    p = build_profile(_base(2), stats)
    assert {n: f.kind for n, f in p.fields.items()} == {"a": "number", "b": "text"}
    assert p.fields["b"].distinct_share == 0.5


def _profile(
    run: int,
    records: int,
    coverage: dict[str, float] | None = None,
    *,
    final: bool = True,
    pages: int | None = None,
    **kw: object,
) -> RunProfile:
    base = RunProfile(
        "shop",
        run,
        at=100.0,
        started_at=0.0,
        finished_at=100.0 if final else None,
        final=final,
        records=records,
        pages=records if pages is None else pages,
        **kw,  # type: ignore[arg-type]
    )
    stats = {
        name: FieldStats(name, records, round(share * records), round(share * records))
        for name, share in (coverage or {}).items()
    }
    return build_profile(base, stats)


RULES = QualityRules(min_records=10)


def _fired(
    profile: RunProfile, previous: list[RunProfile], rules: QualityRules = RULES, now: float = 100.0
) -> list[tuple[str, str | None]]:
    return [(b.alert, b.field) for b in evaluate(profile, previous, rules, now=now)]


CLEAN = [_profile(1, 100, {"sku": 1.0, "rating": 1.0})]


@pytest.mark.parametrize(
    ("profile", "previous", "fired"),
    [
        # the same as before: nothing
        (_profile(2, 100, {"sku": 1.0, "rating": 1.0}), CLEAN, []),
        # 30% fewer records is not more than 30%
        (_profile(2, 70, {"sku": 1.0, "rating": 1.0}), CLEAN, []),
        (_profile(2, 60, {"sku": 1.0, "rating": 1.0}, pages=100), CLEAN, [("item_count", None)]),
        (
            _profile(2, 60, {"sku": 1.0, "rating": 1.0}),
            CLEAN,
            [("item_count", None), ("pages_fetched", None)],
        ),
        # ten points down is not more than ten
        (_profile(2, 100, {"sku": 1.0, "rating": 0.9}), CLEAN, []),
        (_profile(2, 100, {"sku": 1.0, "rating": 0.7}), CLEAN, [("field_coverage", "rating")]),
        # both at once: the broken second run
        (
            _profile(2, 60, {"sku": 1.0, "rating": 0.7}, pages=62),
            CLEAN,
            [("item_count", None), ("pages_fetched", None), ("field_coverage", "rating")],
        ),
        # a first run has no baseline: only the absolute rules
        (_profile(1, 60, {"sku": 1.0, "rating": 0.1}), [], []),
        (_profile(1, 0), [], [("zero_records", None)]),
        # while a run goes, counts are not judged (it is not over), shares are
        (
            _profile(2, 40, {"sku": 1.0, "rating": 0.5}, final=False),
            CLEAN,
            [("field_coverage", "rating")],
        ),
        # too few records to judge a share
        (_profile(2, 5, {"sku": 1.0, "rating": 0.0}, final=False), CLEAN, []),
        # an unfinished earlier run is no baseline
        (_profile(3, 50, {"sku": 1.0}), [_profile(2, 100, final=False)], []),
    ],
)
def test_monitors(
    profile: RunProfile, previous: list[RunProfile], fired: list[tuple[str, str | None]]
) -> None:
    assert _fired(profile, previous) == fired


def test_the_baseline_is_the_median_of_the_last_finished_runs() -> None:
    history = [_profile(r, n) for r, n in ((5, 100), (4, 1000), (3, 90), (2, 95), (1, 1))]
    rules = replace(RULES, baseline_runs=3)
    (breach,) = evaluate(_profile(6, 60, pages=100), history, rules, now=0)
    assert (breach.alert, breach.value, breach.baseline) == ("item_count", 60.0, 100.0)
    # runs after this one (a profile read again later) are no baseline of it
    assert evaluate(_profile(2, 60), history, rules, now=0) == []


def test_explicit_coverage_rules() -> None:
    rules = replace(RULES, coverage={"price": 1.0, "rating": 0.9})
    p = _profile(1, 100, {"price": 0.99, "rating": 0.95})
    (breach,) = evaluate(p, [], rules, now=0)
    assert (breach.alert, breach.field, breach.value, breach.threshold) == (
        "coverage_rule",
        "price",
        0.99,
        1.0,
    )
    assert breach.severity == "critical"
    assert breach.examples == "missing_field"
    assert "price" in breach.message and "1 of 100 records without it" in breach.message
    # a field no record has at all is at 0
    p = _profile(1, 100, {"rating": 0.95})
    assert [b.field for b in evaluate(p, [], rules, now=0)] == ["price"]


@pytest.mark.parametrize(
    ("kw", "fired"),
    [
        ({"quarantined": 6}, "validation_failure_rate"),
        ({"quarantined": 5}, None),
        ({"blocked": 30}, "block_rate"),
        ({"blocked": 20}, None),
        ({"dead": 12}, "dead_letters"),
        ({"dead": 11}, None),
        ({"retries": 120}, "retry_depth"),
        ({"retries": 100}, None),
    ],
)
def test_the_rates_of_todays_alerts(kw: dict[str, int], fired: str | None) -> None:
    got = _fired(_profile(1, 100, final=False, **kw), [])
    assert got == ([(fired, None)] if fired else [])


def test_max_run_time_while_running_and_at_the_end() -> None:
    rules = replace(RULES, max_run_time=50.0)
    assert _fired(_profile(1, 100, final=False), [], rules, now=40.0) == []
    assert _fired(_profile(1, 100, final=False), [], rules, now=60.0) == [("max_run_time", None)]
    assert _fired(_profile(1, 100), [], rules, now=10_000.0) == [("max_run_time", None)]


def test_a_field_that_was_numbers_and_is_now_text() -> None:
    def p(run: int, numbers: int) -> RunProfile:
        stats = {"price": FieldStats("price", 100, 100, 100 - numbers, 5, numbers)}
        return build_profile(replace(_profile(run, 100), fields={}), stats)

    assert _fired(p(2, 95), [p(1, 100)]) == []
    assert _fired(p(2, 40), [p(1, 100)]) == [("field_type", "price")]


def test_thresholds_set_to_none_turn_monitors_off() -> None:
    off = QualityRules(
        min_records=10,
        item_drop=None,
        pages_drop=None,
        coverage_drop=None,
        validation_rate=None,
        block_rate=None,
        dead_rate=None,
        retry_depth=None,
        zero_records=False,
    )
    broken = _profile(2, 0, {"rating": 0.0}, quarantined=90, blocked=90, dead=90, retries=900)
    assert evaluate(broken, CLEAN, off, now=0) == []
    assert evaluate(broken, CLEAN, RULES, now=0) != []


def test_every_breach_names_a_known_monitor_and_has_a_key_per_run_and_subject() -> None:
    b = Breach("field_coverage", 0.7, 1.0, 0.1, "m", field="rating")
    assert b.key("shop", 2) == "alert:shop:2:field_coverage:rating"
    assert (
        Breach("item_count", 1, 2, 0.3, "m").key("shop", 2) == "alert:shop:2:item_count:item_count"
    )
    assert set(MONITORS) >= {"item_count", "field_coverage", "coverage_rule", "zero_records"}


def test_rules_round_trip_and_take_the_spiders_field_coverage() -> None:
    from crawlfleet.config import Settings

    q = Settings.of(**{"quality.coverage": "price=1.0", "quality.item_drop": "0.5"}).quality
    rules = QualityRules.of(q, {"rating": 0.9})
    assert rules.coverage == {"price": 1.0, "rating": 0.9}
    assert rules.item_drop == 0.5
    assert QualityRules.from_json(rules.to_json()) == rules
