"""Raw snapshots in an S3-compatible object store (moto in server mode on loopback)."""

from __future__ import annotations

import fcntl
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import boto3
import psycopg
import pytest
from tests.conftest import PG_DSN
from tests.integration.helpers import demo_shop, read_jsonl, run, shop_stats, write_spider
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.data.rawstore import S3Location, S3Store
from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

SECRET = "s3cr3t-" + secrets.token_hex(8)
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIDFLEETTEST",
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on a loopback port, for this module's tests."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(endpoint + "/moto-api/", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def pg_queue() -> Iterator[str]:
    """A queue URL with a schema of its own, dropped after the test."""
    schema = f"fleet_{secrets.token_hex(4)}"
    try:
        yield urlunsplit(urlsplit(PG_DSN)._replace(query=f"schema={schema}"))
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def objects(client: Any, bucket: str) -> dict[str, bytes]:
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    out = {}
    for item in listed:
        body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"]
        with body:
            out[item["Key"]] = body.read()
    return out


def warc_ids(data: bytes) -> Counter[str]:
    """Record ids of the response records in one WARC file, and a count per type."""
    seen: Counter[str] = Counter()
    for record in ArchiveIterator(BytesIO(data)):
        seen[record.rec_type] += 1
        if record.rec_type == "response":
            seen[record.rec_headers.get_header("WARC-Record-ID")] += 1
    return seen


def test_crawl_with_s3_raw_store__every_fetch_archived_once_records_point_at_objects(
    tmp_path: Path, s3: Any, s3_endpoint: str, pg_queue: str
) -> None:
    s3.create_bucket(Bucket="crawl-raw")
    (tmp_path / "crawlfleet.toml").write_text(
        '[store]\nraw = "s3://crawl-raw/fleet/run-1/"\nwarc_max_size = 100000\n'
    )
    env = {**AWS_ENV, "CRAWLFLEET_S3_ENDPOINT": s3_endpoint, "CRAWLFLEET_RAW_SPOOL": "spool"}
    with demo_shop("--products", "300") as base:
        spider = write_spider(tmp_path / "shop.py", base)
        args = ["crawl", str(spider), "--workers", "2", "--queue", pg_queue]
        result = run(args, tmp_path, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        stats = shop_stats(base)
    assert SECRET not in result.stdout + result.stderr
    assert "s3://crawl-raw/fleet/run-1" in result.stderr + result.stdout

    exported = run(
        ["export", "--queue", pg_queue, "--provenance", "-o", "records.jsonl"], tmp_path, env=env
    )
    assert exported.returncode == 0, exported.stderr

    assert not [p.name for p in (tmp_path / "spool").iterdir()], "spool not emptied"
    stored = objects(s3, "crawl-raw")
    assert len(stored) > 2, "files were rolled at warc_max_size and each uploaded"
    assert all(key.startswith("fleet/run-1/") and key.endswith(".warc.gz") for key in stored)
    per_object = {f"s3://crawl-raw/{key}": warc_ids(data) for key, data in stored.items()}
    totals: Counter[str] = sum(per_object.values(), Counter())
    fetched = stats["requests"] - stats["paths"].get("/robots.txt", 0)
    assert totals["response"] == fetched, "one response record per fetch"
    assert totals["request"] == fetched

    records = read_jsonl(tmp_path / "records.jsonl")
    assert len(records) == len(Catalog(300).expected_records())
    for record in records:
        warc_file = record["_warc_file"]
        assert warc_file in per_object, warc_file
        assert per_object[warc_file][record["_warc_record_id"]] == 1


def test_s3_store__uploads_closed_files_and_leftovers_then_empties_the_spool(
    tmp_path: Path, s3: Any, s3_endpoint: str
) -> None:
    s3.create_bucket(Bucket="spool-test")
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "dead-worker-20240101000000-00000.warc.gz").write_bytes(b"left by a crash")
    live = spool / "live-20240101000000-00000.warc.gz.open"
    live.write_bytes(b"still written")
    held = open(live, "rb")  # noqa: SIM115 - a live writer's lock, held through the test
    fcntl.flock(held.fileno(), fcntl.LOCK_EX)
    store = S3Store(S3Location.parse("s3://spool-test/raw"), spool, s3_endpoint, poll=0.05)
    store.open()
    try:
        warc = store.writer("w1", max_size=1 << 20, gzip_level=1)
        ref = warc.write(
            url="http://example.com/",
            method="GET",
            request_headers=[("Host", "example.com")],
            status=200,
            reason="OK",
            http_version="HTTP/1.1",
            response_headers=[("Content-Type", "text/html")],
            body=b"<html></html>",
            fetched_at=time.time(),
        )
        assert store.locate(ref.file) == f"s3://spool-test/raw/{ref.file}"
        warc.close()
    finally:
        store.close()
        held.close()
    stored = objects(s3, "spool-test")
    assert set(stored) == {f"raw/{ref.file}", "raw/dead-worker-20240101000000-00000.warc.gz"}
    assert warc_ids(stored[f"raw/{ref.file}"])[ref.record_id] == 1
    assert [p.name for p in spool.iterdir()] == ["live-20240101000000-00000.warc.gz.open"]


@pytest.mark.parametrize("command", ["worker", "crawl"])
def test_missing_bucket__one_line_error_before_any_work(
    tmp_path: Path, s3_endpoint: str, s3: Any, command: str
) -> None:
    env = {
        **AWS_ENV,
        "CRAWLFLEET_RAW": "s3://no-such-bucket/raw",
        "CRAWLFLEET_S3_ENDPOINT": s3_endpoint,
    }
    with demo_shop("--products", "10") as base:
        spider = write_spider(tmp_path / "shop.py", base)
        args = ["worker", "--exit-when-finished"] if command == "worker" else ["crawl", str(spider)]
        result = run(args, tmp_path, env=env, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: cannot use raw store s3://no-such-bucket/raw: " + (
        "ClientError: An error occurred (404) when calling the HeadBucket operation: Not Found"
    )
    assert SECRET not in result.stderr
