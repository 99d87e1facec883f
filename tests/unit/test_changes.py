"""The change diff: which fields of a record changed between two versions, their old values,
and the rows export --changes writes."""

from __future__ import annotations

from typing import Any

import pytest

from crawlfleet.data.changes import ChangeRow, RecordStatus, changed_fields, record_hash


@pytest.mark.parametrize(
    ("previous", "current", "names", "old"),
    [
        ({"a": 1}, {"a": 1}, [], {}),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, [], {}),  # order does not count
        ({"sku": "x", "price": 9.5}, {"sku": "x", "price": 8.0}, ["price"], {"price": 9.5}),
        ({"a": 1}, {"a": 1, "b": 2}, ["b"], {"b": None}),  # a field that appeared
        ({"a": 1, "b": 2}, {"a": 1}, ["b"], {"b": 2}),  # a field that went
        ({"a": 1}, {"a": 1.0}, ["a"], {"a": 1}),  # 1 and 1.0 are written differently
        ({"a": None}, {"a": 0}, ["a"], {"a": None}),
        ({"t": ["x", "y"]}, {"t": ["y", "x"]}, ["t"], {"t": ["x", "y"]}),  # lists keep order
        ({"d": {"x": 1, "y": 2}}, {"d": {"y": 2, "x": 1}}, [], {}),  # objects do not
        ({"d": {"x": 1}}, {"d": {"x": 2}}, ["d"], {"d": {"x": 1}}),  # a nested change: whole
        (
            {"a": 1, "b": 2, "c": 3},
            {"c": 4, "b": 2, "z": 0},
            ["c", "z", "a"],  # current's order, then the fields that went
            {"c": 3, "z": None, "a": 1},
        ),
        ({"s": "é"}, {"s": "e\u0301"}, ["s"], {"s": "é"}),  # no Unicode folding: bytes differ
    ],
)
def test_changed_fields(
    previous: dict[str, Any], current: dict[str, Any], names: list[str], old: dict[str, Any]
) -> None:
    assert changed_fields(previous, current) == (names, old)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, True),
        ({"a": 1}, {"a": 1.0}, False),
        ({"a": 1}, {"a": "1"}, False),
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": 2, "x": 1}}, True),
        ({}, {}, True),
        ({"a": None}, {}, False),
    ],
)
def test_record_hash(a: dict[str, Any], b: dict[str, Any], same: bool) -> None:
    assert (record_hash(a) == record_hash(b)) is same
    assert len(record_hash(a)) == 16


@pytest.mark.parametrize(
    ("row", "columns"),
    [
        (
            ChangeRow("k", {"sku": "k", "price": 1.0}, RecordStatus.NEW),
            {
                "sku": "k",
                "price": 1.0,
                "_change": "new",
                "_changed_fields": None,
                "_previous": None,
            },
        ),
        (
            ChangeRow(
                "k", {"sku": "k", "price": 1.0}, RecordStatus.CHANGED, {"sku": "k", "price": 2.0}
            ),
            {
                "sku": "k",
                "price": 1.0,
                "_change": "changed",
                "_changed_fields": ["price"],
                "_previous": {"price": 2.0},
            },
        ),
        (  # a removed record: its last values
            ChangeRow("k", {"sku": "k", "price": 2.0}, RecordStatus.REMOVED),
            {
                "sku": "k",
                "price": 2.0,
                "_change": "removed",
                "_changed_fields": None,
                "_previous": None,
            },
        ),
        (  # changed, then back to the values it had before: nothing to say
            ChangeRow("k", {"sku": "k"}, RecordStatus.CHANGED, {"sku": "k"}),
            None,
        ),
    ],
)
def test_change_rows(row: ChangeRow, columns: dict[str, Any] | None) -> None:
    assert row.columns() == columns
