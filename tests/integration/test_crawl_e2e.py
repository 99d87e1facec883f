"""The embedded crawl end to end: real shop, real worker processes, real SQLite, real WARC."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import sqlite3
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tests.integration.helpers import (
    children,
    demo_shop,
    read_jsonl,
    run,
    shop_stats,
    start,
    wait_for,
    write_spider,
)
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow


def warc_records(directory: Path) -> Counter[str]:
    kinds: Counter[str] = Counter()
    files = sorted(directory.glob("*.warc.gz"))
    assert files, f"no closed WARC files in {directory}"
    assert not list(directory.glob("*.open")), "a WARC file was left open"
    for path in files:
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                kinds[record.rec_type] += 1
                if record.rec_type == "response":
                    kinds[f"uri:{record.rec_headers.get_header('WARC-Target-URI')}"] += 1
    return kinds


def test_demo_shop__two_workers__every_record_once_quarantine_robots_dedup_warc(
    tmp_path: Path,
) -> None:
    catalog = Catalog(2000)
    with demo_shop("--products", "2000") as base:
        spider = write_spider(tmp_path / "shop.py", base)
        result = run(["crawl", str(spider), "--workers", "2", "-o", "records.jsonl"], tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        stats = shop_stats(base)

    records = read_jsonl(tmp_path / "records.jsonl")
    expected = {r["sku"]: r for r in catalog.expected_records()}
    got = {r["sku"]: r for r in records}
    assert len(records) == len(got), "a record appears twice"
    assert got == expected

    db = sqlite3.connect(tmp_path / ".crawlfleet" / "queue.db")
    dead = db.execute("SELECT url, dead_reason FROM requests WHERE state = 'dead'").fetchall()
    assert all(reason == "robots" for _, reason in dead), dead[:5]
    quarantined = db.execute("SELECT data, errors FROM quarantine").fetchall()
    db.close()
    q_skus = sorted(json.loads(d)["sku"] for d, _ in quarantined)
    assert q_skus == sorted(catalog.invalid_skus())
    assert all(json.loads(e) for _, e in quarantined), "a quarantined record has no reason"

    paths = stats["paths"]
    assert not [p for p in paths if p.startswith("/cart")], "robots-disallowed URLs fetched"
    assert paths["/robots.txt"] <= 2, "robots.txt is fetched once per worker process"
    pages = stats["pages"]
    over = {p: n for p, n in pages.items() if n > 1 and p != "/robots.txt"}
    assert not over, f"pages fetched more than once: {list(over.items())[:5]}"

    for fmt in ("csv", "parquet"):
        out = run(["export", "--format", fmt, "-o", f"records.{fmt}", "--provenance"], tmp_path)
        assert out.returncode == 0, out.stderr
    with (tmp_path / "records.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["sku"] for r in rows) == sorted(expected)
    assert all(r["_warc_record_id"].startswith("<urn:uuid:") for r in rows)
    table = pq.read_table(tmp_path / "records.parquet")
    assert sorted(table.column("sku").to_pylist()) == sorted(expected)
    piped = run(["export", "-o", "-"], tmp_path)  # stdout, as crawl -o - writes
    assert piped.returncode == 0, piped.stderr
    assert sorted(json.loads(line)["sku"] for line in piped.stdout.splitlines()) == sorted(expected)
    assert f"{len(expected)} records of demo-shop → stdout" in piped.stderr
    as_csv = run(["export", "--format", "csv", "-o", "-"], tmp_path)
    assert sorted(r["sku"] for r in csv.DictReader(io.StringIO(as_csv.stdout))) == sorted(expected)
    assert not (tmp_path / "-").exists()

    kinds = warc_records(tmp_path / ".crawlfleet" / "warc")
    fetched = stats["requests"] - paths.get("/robots.txt", 0)
    assert kinds["response"] == fetched
    assert kinds["request"] == fetched
    assert all(n == 1 for k, n in kinds.items() if k.startswith("uri:"))


def test_kill_9_of_one_worker__crawl_finishes_with_every_record_once(tmp_path: Path) -> None:
    catalog = Catalog(1500)
    (tmp_path / "crawlfleet.toml").write_text("[worker]\nlease_ttl = 4\nfetch_timeout = 3\n")
    with demo_shop("--products", "1500", "--slow", "0.05", "--slow-delay", "0.2") as base:
        spider = write_spider(tmp_path / "shop.py", base)
        proc = start(["crawl", str(spider), "--workers", "2", "-o", "records.jsonl"], tmp_path)
        wait_for(lambda: len(children(proc.pid)) == 2, 30, "two workers")
        db_path = tmp_path / ".crawlfleet" / "queue.db"

        def busy_worker() -> int | None:
            # a worker holding leases right now (worker ids end with the process id)
            try:
                with sqlite3.connect(db_path) as db:
                    done = db.execute("SELECT count(*) FROM requests WHERE state='done'")
                    if done.fetchone()[0] < 300:
                        return None
                    row = db.execute(
                        "SELECT lease_owner, count(*) FROM requests WHERE state='leased' "
                        "GROUP BY lease_owner ORDER BY 2 DESC LIMIT 1"
                    ).fetchone()
            except sqlite3.Error:
                return None
            return int(row[0].rsplit("-", 1)[1]) if row and row[1] >= 5 else None

        wait_for(lambda: busy_worker() is not None, 60, "a worker holding leases")
        victim = busy_worker()
        assert victim in children(proc.pid)
        os.kill(victim, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]

    records = read_jsonl(tmp_path / "records.jsonl")
    skus = [r["sku"] for r in records]
    assert len(skus) == len(set(skus))
    assert set(skus) == {r["sku"] for r in catalog.expected_records()}
    with sqlite3.connect(tmp_path / ".crawlfleet" / "queue.db") as db:
        rescued = db.execute(
            "SELECT count(*) FROM attempts WHERE outcome='lease_expired'"
        ).fetchone()[0]
        unfinished = db.execute(
            "SELECT count(*) FROM requests WHERE state IN ('queued','leased')"
        ).fetchone()[0]
    assert rescued >= 1, "the killed worker held leases that should have been rescued"
    assert unfinished == 0


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda d, base: ["crawl", str(d / "missing.py")], "does not exist"),
        (lambda d, base: ["crawl", str(d / "empty.py")], "no Spider subclass"),
        (
            lambda d, base: ["crawl", str(d / "shop.py"), "-o", "/proc/nope/records.jsonl"],
            "cannot write",
        ),
        (lambda d, base: ["export", "--format", "xml", "-o", "x.xml"], "Invalid value"),
        (lambda d, base: ["export", "-o", "x.xml"], "cannot tell which format to write to x.xml"),
        (
            lambda d, base: ["crawl", str(d / "shop.py"), "-o", "out.txt"],
            "cannot tell which format to write to out.txt (a .txt file)",
        ),
    ],
)
def test_bad_input__one_line_error_and_nonzero_exit(
    tmp_path: Path, make_args, message: str
) -> None:
    (tmp_path / "empty.py").write_text("x = 1\n")
    write_spider(tmp_path / "shop.py", "http://127.0.0.1:1")
    result = run(make_args(tmp_path, None), tmp_path, timeout=60)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) <= 3, result.stderr


def test_one_worker_runs_in_crawls_process__with_worker_process_in_its_own(
    tmp_path: Path,
) -> None:
    catalog = Catalog(40)
    expected = {r["sku"] for r in catalog.expected_records()}
    with demo_shop("--products", "40") as base:
        cases = (
            ("inproc", []),
            ("inproc-flag", ["--in-process"]),
            ("process", ["--worker-process"]),
        )
        for label, flags in cases:
            where = tmp_path / label
            where.mkdir()
            spider = write_spider(where / "shop.py", base)
            proc = start(["crawl", str(spider), "-o", "records.jsonl", *flags], where)
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-3000:]
            assert {r["sku"] for r in read_jsonl(where / "records.jsonl")} == expected
            with sqlite3.connect(where / ".crawlfleet" / "queue.db") as db:
                pids = {pid for (pid,) in db.execute("SELECT pid FROM worker_stats")}
            # the worker's rows name the process it ran in: crawl's own, or one of its own
            assert (pids == {proc.pid}) is label.startswith("inproc"), (label, pids, proc.pid)
            assert len(pids) == 1
