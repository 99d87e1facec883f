"""export_records: each format read back and compared; atomic output; one-line errors."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from crawlfleet.data import export as export_module
from crawlfleet.data.export import export_records
from crawlfleet.errors import UsageError
from crawlfleet.model import QuarantineRow, RecordRow

FETCHED_AT = 1_714_564_800.5  # 2024-05-01T12:00:00.5Z


def rows(count: int = 5) -> list[RecordRow]:
    return [
        RecordRow(
            key=f"k{n}",
            data={
                "sku": f"S-{n}",
                "name": f"Mug ☕ {n}",
                "price": 9.5 + n,
                "tags": ["a", "b"][: n % 3],
                "dims": {"w": n, "h": 2},
            },
            url=f"https://shop.example/p/{n}",
            fetched_at=FETCHED_AT + n,
            warc_file="w1-20240501120000-00000.warc.gz",
            warc_record_id=f"<urn:uuid:{n}>",
            # archived as a revisit of an earlier capture of the same payload
            warc_refers_to_file="w0-20240501115959-00000.warc.gz",
            warc_refers_to=f"<urn:uuid:first-{n}>",
        )
        for n in range(count)
    ]


PROVENANCE_0 = {
    "_url": "https://shop.example/p/0",
    "_fetched_at": "2024-05-01T12:00:00.500000Z",
    "_warc_file": "w1-20240501120000-00000.warc.gz",
    "_warc_record_id": "<urn:uuid:0>",
    "_warc_refers_to_file": "w0-20240501115959-00000.warc.gz",
    "_warc_refers_to": "<urn:uuid:first-0>",
}


def test_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    assert export_records(rows(), "jsonl", path) == 5
    text = path.read_text(encoding="utf-8")
    assert "☕" in text  # no ASCII escaping
    assert [json.loads(line) for line in text.splitlines()] == [dict(r.data) for r in rows()]


def test_jsonl_with_provenance_and_mapping_rows(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    mapping = {"data": {"sku": "M"}, "url": "https://shop.example/m", "fetched_at": FETCHED_AT}
    assert export_records([rows(1)[0], mapping], "jsonl", path, provenance=True) == 2
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert first == {**rows(1)[0].data, **PROVENANCE_0}
    assert second == {
        "sku": "M",
        "_url": "https://shop.example/m",
        "_fetched_at": "2024-05-01T12:00:00.500000Z",
        "_warc_file": None,
        "_warc_record_id": None,
        "_warc_refers_to_file": None,
        "_warc_refers_to": None,
    }


def test_csv(tmp_path: Path) -> None:
    path = tmp_path / "records.csv"
    assert export_records(rows(), "csv", path, provenance=True) == 5
    with open(path, newline="", encoding="utf-8") as handle:
        read = list(csv.DictReader(handle))
    assert list(read[0]) == ["sku", "name", "price", "tags", "dims", *PROVENANCE_0]
    for got, row in zip(read, rows(), strict=True):
        assert got["sku"] == row.data["sku"]
        assert got["name"] == row.data["name"]
        assert float(got["price"]) == row.data["price"]
        assert json.loads(got["tags"]) == row.data["tags"]
        assert json.loads(got["dims"]) == row.data["dims"]
    assert {k: read[0][k] for k in PROVENANCE_0} == PROVENANCE_0


def test_csv_column_first_seen_after_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_module, "CSV_SAMPLE", 2)
    data = [{"a": 1}, {"a": 2, "b": None}, {"a": 3, "c": "late, with comma"}, {"b": True}]
    path = tmp_path / "records.csv"
    assert export_records([{"data": d} for d in data], "csv", path) == 4
    with open(path, newline="", encoding="utf-8") as handle:
        read = list(csv.reader(handle))
    assert read == [
        ["a", "b", "c"],
        ["1", "", ""],
        ["2", "", ""],
        ["3", "", "late, with comma"],
        ["", "true", ""],
    ]


def test_parquet(tmp_path: Path) -> None:
    path = tmp_path / "records.parquet"
    assert export_records(rows(), "parquet", path, provenance=True) == 5
    table = pq.read_table(path)
    assert table.column_names == ["sku", "name", "price", "tags", "dims", *PROVENANCE_0]
    got = table.to_pylist()
    assert [{k: g[k] for k in r.data} for g, r in zip(got, rows(), strict=True)] == [
        r.data for r in rows()
    ]
    assert {k: got[0][k] for k in PROVENANCE_0} == PROVENANCE_0


def test_parquet_schema_widens_across_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_module, "PARQUET_BATCH", 2)
    data: list[dict[str, Any]] = [
        {"id": 1, "price": 10, "note": None, "mixed": "x"},
        {"id": 2, "price": 11, "note": None, "mixed": "y"},
        {"id": 3, "price": 12.5, "note": "hi", "mixed": 3},  # int→float, null→str, str+int→JSON
        {"id": 4, "price": 13, "note": None, "mixed": {"k": 1}, "late": [1, 2]},
        {"id": 5, "price": 14, "dims": {"w": 1}},
        {"id": 6, "price": 15, "dims": {"h": 2}},  # a struct key the first struct lacks
    ]
    path = tmp_path / "records.parquet"
    assert export_records([{"data": d} for d in data], "parquet", path) == 6
    table = pq.read_table(path)
    assert table.column_names == ["id", "price", "note", "mixed", "late", "dims"]
    assert str(table.schema.field("price").type) == "double"
    assert table.schema.field("mixed").metadata == {b"crawlfleet.encoding": b"json"}
    got = table.to_pylist()
    assert [r["price"] for r in got] == [10, 11, 12.5, 13, 14, 15]
    assert [r["note"] for r in got] == [None, None, "hi", None, None, None]
    assert [None if r["mixed"] is None else json.loads(r["mixed"]) for r in got] == [
        "x",
        "y",
        3,
        {"k": 1},
        None,
        None,
    ]
    assert [r["late"] for r in got] == [None, None, None, [1, 2], None, None]
    assert [r["dims"] for r in got][4:] == [{"w": 1, "h": None}, {"w": None, "h": 2}]
    assert not [p.name for p in tmp_path.iterdir() if p.name != "records.parquet"]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_no_rows(tmp_path: Path, fmt: Any) -> None:
    path = tmp_path / f"records.{fmt}"
    assert export_records([], fmt, path) == 0
    assert path.exists()
    if fmt == "parquet":
        assert pq.read_table(path).num_rows == 0


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_failed_export_leaves_no_file(tmp_path: Path, fmt: Any) -> None:
    def broken() -> Iterator[RecordRow]:
        yield from rows(3)
        raise RuntimeError("store went away")

    path = tmp_path / f"records.{fmt}"
    path.write_text("previous export")
    with pytest.raises(RuntimeError, match="store went away"):
        export_records(broken(), fmt, path)
    assert path.read_text() == "previous export"  # untouched
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_unwritable_path_is_a_usage_error() -> None:
    # /sys refuses new files even to root, so this holds wherever the suite runs
    with pytest.raises(UsageError, match=r"^cannot write .*records\.jsonl: Permission denied$"):
        export_records(rows(), "jsonl", "/sys/records.jsonl")


def test_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="No such file or directory"):
        export_records(rows(), "csv", tmp_path / "nope" / "records.csv")


def test_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown export format 'xml'"):
        export_records(rows(), "xml", tmp_path / "x")  # type: ignore[arg-type]


def test_plain_dict_rows_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a record row"):
        export_records([{"sku": "A", "data": 1}], "jsonl", tmp_path / "r.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_permission_error_message_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(src: Any, dst: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(export_module.os, "replace", refuse)
    path = tmp_path / "records.jsonl"
    with pytest.raises(UsageError) as caught:
        export_records(rows(), "jsonl", path)
    assert str(caught.value) == f"cannot write {path}: Permission denied"
    assert list(tmp_path.iterdir()) == []


def test_parent_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="Not a directory"):
        export_records(rows(), "parquet", tmp_path / "file" / "records.parquet")


def test_quarantine_rows(tmp_path: Path) -> None:
    errors = [{"type": "missing", "loc": ["sku"], "msg": "Field required"}]
    quarantined = [
        QuarantineRow(data={"name": "x"}, errors=errors, url="https://s/1", fetched_at=FETCHED_AT),
        {"data": 42, "errors": errors, "url": "https://s/2", "fetched_at": FETCHED_AT},
    ]
    path = tmp_path / "quarantine.jsonl"
    assert export_records(quarantined, "jsonl", path, provenance=True) == 2
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert first["name"] == "x"
    assert first["_errors"] == errors
    assert first["_url"] == "https://s/1"
    assert second["_data"] == 42
    assert second["_errors"] == errors


def test_dumps__nan_and_infinity_are_written_as_null_never_bare() -> None:
    from crawlfleet.data.export import _dumps

    row = {"a": float("nan"), "b": [float("inf"), 1.5], "c": {"d": float("-inf")}, "e": "caf\udce9"}
    assert json.loads(_dumps(row, ascii=True)) == {
        "a": None,
        "b": [None, 1.5],
        "c": {"d": None},
        "e": "caf\udce9",
    }
    assert "NaN" not in _dumps(row) and "Infinity" not in _dumps(row)
