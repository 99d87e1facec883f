"""The queue store goes away and comes back: workers wait it out, nothing is lost or doubled.

A real socket fault, without touching the shared server: the workers reach PostgreSQL through a
TCP proxy of the test's own (``tests/chaos/cut.py``) that the test cuts -- every connection reset,
new ones refused, as when a server stops -- and restores on the same port.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from crawlfleet.demo.catalog import Catalog
from tests.chaos.cut import cuttable
from tests.chaos.harness import (
    Store,
    finish,
    new_store,
    reaped,
    run,
    spider_file,
    start,
    wait_for,
    worker_args,
    write_config,
)
from tests.integration.helpers import demo_shop, read_jsonl

pytestmark = pytest.mark.slow

JOB = "shop"


def through(url: str, port: int) -> str:
    """``url`` with its host:port replaced by the proxy's."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.mark.parametrize("outage", [1.0, 8.0], ids=["fast-restart", "8s-outage"])
def test_store_away_mid_crawl__workers_wait_reconnect_and_every_record_is_stored_once(
    tmp_path: Path, outage: float
) -> None:
    catalog = Catalog(200)
    write_config(tmp_path, lease_ttl=5, fetch_timeout=5)
    with (
        new_store("postgres", tmp_path) as direct,
        cuttable(urlsplit(direct.url).port or 5432) as proxy,
        demo_shop("--products", "200", "--slow", "1.0", "--slow-delay", "0.2") as base,
    ):
        store = Store("postgres", through(direct.url, proxy.port), schema=direct.schema)
        spider = spider_file(tmp_path / "shop.py", base, domain_concurrency=8)
        submitted = run(["submit", str(spider), "--queue", store.url, "--job", JOB], tmp_path)
        assert submitted.returncode == 0, submitted.stderr
        workers = [start(worker_args(store, JOB), tmp_path) for _ in range(2)]
        with reaped(*workers):
            records = "SELECT count(*) FROM records"
            wait_for(lambda: (direct.value(records) or 0) >= 30, 60, "30 records stored")
            proxy.cut()
            cut_at = direct.value(records)
            time.sleep(outage)
            assert all(w.poll() is None for w in workers), "a worker exited during the outage"
            proxy.restore()
            errs = [finish(w, 120) for w in workers]
            codes = [w.returncode for w in workers]
        out = tmp_path / "records.jsonl"
        exported = run(["export", "--queue", direct.url, "--job", JOB, "-o", str(out)], tmp_path)
        assert exported.returncode == 0, exported.stderr
        left = direct.value("SELECT count(*) FROM requests WHERE state IN ('queued', 'leased')")

    assert codes == [0, 0], "\n---\n".join(e[-3000:] for e in errs)
    assert cut_at < len(catalog.expected_records()), "the crawl was over before the cut"
    assert left == 0
    skus = [r["sku"] for r in read_jsonl(out)]
    assert len(skus) == len(set(skus)), "a record appears twice"
    assert sorted(skus) == sorted(r["sku"] for r in catalog.expected_records())
    for err in errs:
        assert "Traceback" not in err, err[-3000:]
        away, back = err.count("is away ("), err.count("is back after")
        assert away >= 1 and back == away, err[-3000:]


def test_store_away_mid_crawl__crawl_and_its_workers_wait_it_out(tmp_path: Path) -> None:
    catalog = Catalog(150)
    write_config(tmp_path, lease_ttl=5, fetch_timeout=5)
    with (
        new_store("postgres", tmp_path) as direct,
        cuttable(urlsplit(direct.url).port or 5432) as proxy,
        demo_shop("--products", "150", "--slow", "1.0", "--slow-delay", "0.2") as base,
    ):
        url = through(direct.url, proxy.port)
        spider = spider_file(tmp_path / "shop.py", base, domain_concurrency=8)
        out = tmp_path / "out.jsonl"
        crawl = start(["crawl", str(spider), "--queue", url, "-w", "2", "-o", str(out)], tmp_path)
        with reaped(crawl):
            records = "SELECT count(*) FROM records"
            wait_for(lambda: (direct.value(records) or 0) >= 30, 60, "30 records stored")
            proxy.cut()
            time.sleep(5)
            assert crawl.poll() is None, "crawl exited during the outage"
            proxy.restore()
            err = finish(crawl, 120)

    assert crawl.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "starting another" not in err, "a worker died in the outage"
    assert "is away (" in err and "is back after" in err, err[-3000:]
    skus = [r["sku"] for r in read_jsonl(out)]
    assert len(skus) == len(set(skus)), "a record appears twice"
    assert sorted(skus) == sorted(r["sku"] for r in catalog.expected_records())
