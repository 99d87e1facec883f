"""Record feeds (crawl -o / -O): each format read back after every batch, append and overwrite."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from crawlfleet.data.feeds import feed_format, open_feed
from crawlfleet.errors import UsageError


def rows(start: int, n: int) -> list[dict[str, object]]:
    return [{"sku": f"S-{i}", "name": f"Mug ☕ {i}", "price": 1.5 * i} for i in range(start, n)]


@pytest.mark.parametrize(
    ("path", "fmt", "expected"),
    [
        ("a.jsonl", None, "jsonl"),
        ("a.json", None, "json"),
        ("a.CSV", None, "csv"),
        ("a.parquet", None, "parquet"),
        ("a.ndjson", None, "jsonl"),
        ("a.txt", "jsonl", "jsonl"),
        ("-", None, "jsonl"),
        ("-", "csv", "csv"),
    ],
)
def test_feed_format__follows_the_extension(path: str, fmt: str | None, expected: str) -> None:
    assert feed_format(path, fmt) == expected


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("out.xml", "a .xml file"),
        ("out.txt", "a .txt file"),
        ("records", "a file without an extension"),
    ],
)
def test_feed_format__an_extension_that_names_no_format_is_refused(path: str, what: str) -> None:
    with pytest.raises(UsageError, match=f"cannot tell which format to write to {path} \\({what}"):
        feed_format(path, None)


def test_jsonl__appends_lines_and_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"old": 1}')  # a last line without its newline
    feed = open_feed(str(path), "jsonl", overwrite=False)
    feed.write(rows(0, 2))
    assert [json.loads(x) for x in path.read_text().splitlines()][1:] == rows(0, 2)
    feed.close()
    feed = open_feed(str(path), "jsonl", overwrite=True)
    feed.write(rows(5, 6))
    feed.close()
    assert [json.loads(x) for x in path.read_text().splitlines()] == rows(5, 6)


def test_json__one_valid_array_after_every_batch_and_on_append(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    feed = open_feed(str(path), "json", overwrite=True)
    assert json.loads(path.read_text()) == []  # valid before the first record
    feed.write(rows(0, 2))
    assert json.loads(path.read_text()) == rows(0, 2)  # an interrupted crawl leaves this
    feed.write(rows(2, 3))
    assert json.loads(path.read_text()) == rows(0, 3)
    feed.close()
    feed = open_feed(str(path), "json", overwrite=False)
    feed.write(rows(3, 5))
    feed.close()
    assert json.loads(path.read_text()) == rows(0, 5)
    # appending to an empty array, and refusing what is not one
    path.write_text("[ ]\n")
    feed = open_feed(str(path), "json", overwrite=False)
    feed.write(rows(0, 1))
    feed.close()
    assert json.loads(path.read_text()) == rows(0, 1)
    path.write_text('{"a": 1}')
    with pytest.raises(UsageError, match="not a JSON array"):
        open_feed(str(path), "json", overwrite=False)


def test_csv__header_from_the_first_rows_widened_at_close_and_kept_on_append(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.csv"
    feed = open_feed(str(path), "csv", overwrite=True)
    feed.write(rows(0, 2))
    feed.write([{"sku": "S-9", "colour": "red"}])  # a column first seen later
    feed.close()
    with path.open(newline="") as fh:
        read = list(csv.DictReader(fh))
    assert list(read[0]) == ["sku", "name", "price", "colour"]
    assert read[2] == {"sku": "S-9", "name": "", "price": "", "colour": "red"}
    feed = open_feed(str(path), "csv", overwrite=False)
    feed.write([{"colour": "blue", "sku": "S-10"}])
    feed.close()
    with path.open(newline="") as fh:
        read = list(csv.DictReader(fh))
    assert len(read) == 4 and read[3]["colour"] == "blue" and read[3]["sku"] == "S-10"


def test_parquet__complete_once_closed_and_no_append(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    feed = open_feed(str(path), "parquet", overwrite=True)
    feed.write(rows(0, 3))
    assert not path.exists(), "a Parquet file is readable only once closed"
    feed.close()
    assert pq.read_table(path).to_pylist() == rows(0, 3)
    assert not Path(f"{path}.tmp").exists()
    with pytest.raises(UsageError, match=r"cannot append to .* Parquet"):
        open_feed(str(path), "parquet", overwrite=False)


def test_stdout__json_lines_or_an_array_and_no_parquet() -> None:
    code = (
        "from crawlfleet.data.feeds import open_feed\n"
        "f = open_feed('-', {fmt!r}, overwrite=False)\n"
        "f.write([{{'a': 1}}]); f.write([{{'a': 2}}]); f.close()\n"
    )

    def lines(text: str) -> list[object]:
        return [json.loads(x) for x in text.splitlines()]

    for fmt, parse in (("jsonl", lines), ("json", json.loads)):
        out = subprocess.run(
            [sys.executable, "-c", code.format(fmt=fmt)], capture_output=True, text=True, check=True
        ).stdout
        assert parse(out) == [{"a": 1}, {"a": 2}]
    with pytest.raises(UsageError, match="not Parquet"):
        open_feed("-", "parquet", overwrite=False)
