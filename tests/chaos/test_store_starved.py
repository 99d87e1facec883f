"""A store with no connection slot left: a worker waits for one with backoff, never crashes.

The server is a private cluster (``tests/chaos/private_pg.py``) with ``max_connections = 12``;
the test takes every slot, starts a worker, and frees the slots a few seconds later.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from crawlfleet.demo.catalog import Catalog
from tests.chaos.harness import reaped, run, spider_file, start, wait_for, write_config
from tests.chaos.private_pg import private_postgres
from tests.integration.helpers import demo_shop, read_jsonl

pytestmark = pytest.mark.slow

JOB = "shop"


def test_max_connections_exhausted__the_worker_waits_for_a_slot_and_finishes(
    tmp_path: Path,
) -> None:
    catalog = Catalog(60)
    write_config(tmp_path, lease_ttl=5, fetch_timeout=5)
    settings = ("max_connections=12", "superuser_reserved_connections=0")
    with private_postgres(*settings) as url, demo_shop("--products", "60") as base:
        spider = spider_file(tmp_path / "shop.py", base)
        submitted = run(["submit", str(spider), "--queue", url, "--job", JOB], tmp_path)
        assert submitted.returncode == 0, submitted.stderr
        hogs = []
        while True:
            try:
                hogs.append(psycopg.connect(url))
            except psycopg.OperationalError:
                break
        assert len(hogs) == 12
        args = ["worker", "--queue", url, "--job", JOB, "--exit-when-finished"]
        worker = start(args, tmp_path)
        lines: list[str] = []
        assert worker.stderr is not None
        reader = threading.Thread(target=lambda: lines.extend(worker.stderr), daemon=True)
        reader.start()
        with reaped(worker):
            wait_for(lambda: any("is away" in line for line in lines), 60, "the outage line")
            time.sleep(2)
            assert worker.poll() is None, "the worker gave up on a full server"
            for conn in hogs:
                conn.close()
            worker.wait(120)
            reader.join(10)
        err = "".join(lines)
        out = tmp_path / "records.jsonl"
        exported = run(["export", "--queue", url, "--job", JOB, "-o", str(out)], tmp_path)
        assert exported.returncode == 0, exported.stderr

    assert worker.returncode == 0, err[-3000:]
    assert "is away (TooManyConnectionsError" in err, err[-3000:]
    assert "is back after" in err
    assert "Traceback" not in err, err[-3000:]
    skus = sorted(r["sku"] for r in read_jsonl(out))
    assert skus == sorted(r["sku"] for r in catalog.expected_records())
