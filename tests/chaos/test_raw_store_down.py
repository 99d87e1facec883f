"""The raw store (an S3-compatible object store) goes away mid-crawl: the worker's fault, not the
pages'.

moto's S3 server runs in server mode on loopback; the worker reaches it through a TCP proxy of
the test's own (``tests/chaos/cut.py``) that the test cuts -- every connection reset, new ones
refused, as when the store stops -- and restores on the same port (the bucket and the objects
already uploaded stay: the server itself never stops). The worker must stop leasing, give its
leases back, raise ``worker_local_fault`` (its gauges, ``status``), and go on once the store
answers; every record is then stored once and names an object that was uploaded and holds it.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest

from crawlfleet.demo.catalog import Catalog
from tests.chaos.cut import _free_port, cuttable
from tests.chaos.harness import (
    exported_records,
    finish,
    new_store,
    reaped,
    run,
    spider_file,
    start,
    wait_for,
    warc_record_ids,
)
from tests.integration.helpers import demo_shop

pytestmark = pytest.mark.slow

JOB = "shop"
BUCKET = "chaos-raw"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIDCHAOSTEST",
    "AWS_SECRET_ACCESS_KEY": "chaos-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def moto_server() -> Iterator[int]:
    """moto's S3 server on a free loopback port; yields the port."""
    port = _free_port("127.0.0.1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def objects(client: Any) -> dict[str, bytes]:
    out = {}
    for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        body = client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"]
        with body:
            out[f"s3://{BUCKET}/{item['Key']}"] = body.read()
    return out


def response_ids(data: bytes) -> Counter[str]:
    """How often each ``response`` record id appears in a WARC file, and each ``revisit``'s (a
    page fetched again after the give-back, its bytes archived before: a revisit of that)."""
    return warc_record_ids(data, ("response", "revisit"))


@pytest.mark.parametrize("when", ["mid-crawl", "at-start"])
def test_raw_store_away__worker_gives_leases_back_alerts_and_resumes_when_it_answers(
    tmp_path: Path, when: str
) -> None:
    catalog = Catalog(150)
    with (
        moto_server() as moto,
        cuttable(moto) as proxy,
        new_store("postgres", tmp_path) as store,
        demo_shop("--products", "150", "--slow", "1.0", "--slow-delay", "0.1") as base,
    ):
        client = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{moto}",
            region_name="us-east-1",
            aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        )
        client.create_bucket(Bucket=BUCKET)
        (tmp_path / "crawlfleet.toml").write_text(
            "[worker]\nlease_ttl = 5\nfetch_timeout = 5\nstats_every = 0.5\n\n"
            f'[store]\nraw = "s3://{BUCKET}/run"\nwarc_max_size = 20000\n'
        )
        env = {
            **AWS_ENV,
            "CRAWLFLEET_S3_ENDPOINT": f"http://127.0.0.1:{proxy.port}",
            "CRAWLFLEET_RAW_SPOOL": str(tmp_path / "spool"),
        }
        spider = spider_file(tmp_path / "shop.py", base, domain_concurrency=2)
        submitted = run(["submit", str(spider), "--queue", store.url, "--job", JOB], tmp_path)
        assert submitted.returncode == 0, submitted.stderr
        if when == "at-start":  # a worker (re)started during the outage waits for the store
            proxy.cut()
        worker = start(
            ["worker", "--queue", store.url, "--job", JOB, "--exit-when-finished"], tmp_path, **env
        )
        done = "SELECT count(*) FROM requests WHERE state = 'done'"
        leased = "SELECT count(*) FROM requests WHERE state = 'leased'"
        down = "SELECT gauges FROM worker_stats WHERE strpos(gauges, 'raw_store_down') > 0"
        with reaped(worker):
            if when == "mid-crawl":
                wait_for(lambda: objects(client), 60, "a first WARC file uploaded")
                proxy.cut()
            cut_at_done = store.value(done)
            wait_for(lambda: store.rows(down), 60, "the worker to report its raw store away")
            wait_for(lambda: store.value(leased) == 0, 30, "every lease given back")
            during = store.value(done)
            time.sleep(3)  # the fault lasts: nothing leased, nothing done
            held, after = store.value(leased), store.value(done)
            status = run(["status", "--queue", store.url], tmp_path)
            assert worker.poll() is None, "the worker exited with its raw store away"
            proxy.restore()
            err = finish(worker, 300)
        records = exported_records(store.url, JOB, tmp_path)
        uploaded = objects(client)
        stored = {name: response_ids(data) for name, data in uploaded.items()}
        dead = store.value("SELECT count(*) FROM requests WHERE state = 'dead'")
        retried = store.value("SELECT count(*) FROM requests WHERE attempts > 1")
        client.close()

    assert worker.returncode == 0, err[-3000:]
    assert cut_at_done < len(catalog.expected_records()), "the store went away mid-crawl"
    assert (held, after) == (0, during), "leases held or pages done while the store was away"
    away = "stopped leasing: RawStoreUnavailable: raw store s3://chaos-raw/run is away"
    assert away in err, err[-3000:]
    assert err.count("stopped leasing") == err.count("leases again") >= 1, err[-3000:]
    assert "its raw store answers" in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "stopped leasing: a local fault (its raw store is away" in status.stdout, status.stdout[
        -2000:
    ]
    assert (dead, retried) == (0, 0), "the store's outage counted against the pages"
    skus = [r["sku"] for r in records]
    assert len(skus) == len(set(skus)), "a record appears twice"
    assert sorted(skus) == sorted(r["sku"] for r in catalog.expected_records())
    named = {r["_warc_file"] for r in records}
    assert named <= set(stored), f"records name objects never uploaded: {named - set(stored)}"
    assert not list((tmp_path / "spool").glob("*")), "the spool was not emptied"
    assert all(stored[r["_warc_file"]].get(r["_warc_record_id"], 0) <= 1 for r in records)
    absent = [
        r["_warc_record_id"]
        for r in records
        if not stored[r["_warc_file"]].get(r["_warc_record_id"])
    ]
    assert not absent, (
        f"{len(absent)} records name an uploaded object without their WARC record: "
        + str(sorted({r["_warc_file"] for r in records if r["_warc_record_id"] in absent}))
        + f" (objects: {sorted(stored)})\n{err[-4000:]}"
    )
    # a revisit's first capture holds the bytes: it was uploaded too
    full = {name: set(warc_record_ids(data, ("response",))) for name, data in uploaded.items()}
    revisits = [r for r in records if r.get("_warc_refers_to")]
    lost = [
        r for r in revisits if r["_warc_refers_to"] not in full.get(r["_warc_refers_to_file"], ())
    ]
    assert not lost, f"{len(lost)} revisits refer to a capture never uploaded"


def _write_page(warc: Any) -> tuple[str, str]:
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
    return str(ref.file), str(ref.record_id)


def test_s3_store__notices_the_store_away_idle_uploading_or_at_start_and_back_losing_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawlfleet.data.rawstore import S3Location, S3Store
    from crawlfleet.errors import StoreError

    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)
    with moto_server() as moto, cuttable(moto) as proxy:
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{moto}")
        client.create_bucket(Bucket=BUCKET)
        endpoint = f"http://127.0.0.1:{proxy.port}"
        store = S3Store(
            S3Location.parse(f"s3://{BUCKET}/raw"),
            tmp_path / "spool",
            endpoint,
            poll=0.05,
            probe_every=0.5,
        )
        store.open()
        try:
            assert store.fault is None
            proxy.cut()  # idle: nothing to upload, the HEADs notice it
            fault = wait_for(lambda: store.fault, 30, "the idle store noticed away")
            assert str(fault).startswith(f"raw store s3://{BUCKET}/raw is away: ")
            proxy.restore()
            wait_for(lambda: store.fault is None, 30, "the store noticed back")
            proxy.cut()  # uploading: the file waits in the spool
            warc = store.writer("w1", max_size=1 << 20, gzip_level=1)
            name, record = _write_page(warc)
            warc.close()
            wait_for(lambda: store.fault, 30, "the failed upload noticed the store away")
            assert [p.name for p in (tmp_path / "spool").iterdir()] == [name]
            proxy.restore()
            wait_for(lambda: store.fault is None and store.uploaded == 1, 30, "the upload")
        finally:
            store.close()
        proxy.cut()  # at start: a worker's open waits for the store, a one-shot check refuses
        waiting = S3Store(S3Location.parse(f"s3://{BUCKET}/raw"), tmp_path / "spool", endpoint)
        waiting.open(wait=True)
        try:
            assert waiting.fault is not None
            with pytest.raises(StoreError, match="cannot use raw store"):
                S3Store(S3Location.parse(f"s3://{BUCKET}/raw"), tmp_path / "s2", endpoint).open()
            proxy.restore()
            wait_for(lambda: waiting.fault is None, 30, "the store noticed at last")
        finally:
            waiting.close()
        with pytest.raises(StoreError, match=r"\(404\) when calling the HeadBucket"):
            S3Store(S3Location.parse("s3://no-such/raw"), tmp_path / "s3", endpoint).open(wait=True)
        stored = objects(client)
        client.close()
    assert response_ids(stored[f"s3://{BUCKET}/raw/{name}"])[record] == 1
    assert not list((tmp_path / "spool").iterdir())
