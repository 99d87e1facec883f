"""The WARC disk fills up mid-crawl: the worker's fault, not the pages'.

A real full file system: a 2 MiB tmpfs the test mounts (as root) for the raw store, nearly filled
by the test. The worker must stop leasing, give its leases back, say so in one line, raise the
``worker_local_fault`` alert (its gauge, ``status``, a webhook through the outbox), and go on once
the test frees the space; every record is then stored once and names a WARC file that reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from crawlfleet.demo.catalog import Catalog
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


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextmanager
def hooks() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook receiver on a free loopback port: its URL and the bodies it got."""
    got: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            got.append(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    finally:
        server.shutdown()
        server.server_close()


def fill(directory: Path, leave: int) -> Path:
    """Fill ``directory``'s file system but for ``leave`` bytes."""
    st = os.statvfs(directory)
    filler = directory / "filler"
    filler.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


def test_warc_disk_full__worker_gives_leases_back_alerts_and_resumes_when_space_returns(
    tmp_path: Path,
) -> None:
    catalog = Catalog(150)
    with (
        new_store("postgres", tmp_path) as store,
        tmpfs(tmp_path / "warc", "2m") as warc,
        hooks() as (hook, got),
        demo_shop("--products", "150", "--slow", "1.0", "--slow-delay", "0.1") as base,
    ):
        (tmp_path / "crawlfleet.toml").write_text(
            f'[worker]\nlease_ttl = 5\nfetch_timeout = 5\n\n[store]\nraw = "{warc}"\n\n'
            f'[notify]\nwebhook = "{hook}"\nbackoff = 0.2\nbackoff_cap = 1.0\n'
        )
        spider = spider_file(tmp_path / "shop.py", base, domain_concurrency=8)
        submitted = run(["submit", str(spider), "--queue", store.url, "--job", JOB], tmp_path)
        assert submitted.returncode == 0, submitted.stderr
        filler = fill(warc, 60_000)
        worker = start(
            ["worker", "--queue", store.url, "--job", JOB, "--exit-when-finished"], tmp_path
        )
        with reaped(worker):
            stopped = "SELECT gauges FROM worker_stats WHERE strpos(gauges, 'local_fault') > 0"
            wait_for(lambda: store.rows(stopped), 90, "the worker to report its local fault")
            status = run(["status", "--queue", store.url], tmp_path)
            # every lease is given back, a lease call on its way when the fault began as it
            # returns: none is left to expire (nothing leases, so none would go back meanwhile)
            leased = "SELECT count(*) FROM requests WHERE state = 'leased'"
            wait_for(lambda: store.value(leased) == 0, 30, "every lease given back")
            time.sleep(1)
            held = store.value(leased)
            wait_for(lambda: any(b.get("alert") == "worker_local_fault" for b in got), 60, "hook")
            assert worker.poll() is None, "the worker exited on a full disk"
            filler.unlink()
            err = finish(worker, 120)
        records = exported_records(store.url, JOB, tmp_path)
        files = {r["_warc_file"] for r in records}
        files |= {r["_warc_refers_to_file"] for r in records if r.get("_warc_refers_to_file")}
        ids = {name: set(warc_record_ids(warc / name)) for name in files if (warc / name).exists()}
        dead = store.value("SELECT count(*) FROM requests WHERE state = 'dead'")

    assert worker.returncode == 0, err[-3000:]
    assert held == 0, "the leases were given back"
    assert "stopped leasing: OSError: [Errno 28] No space left on device" in err, err[-3000:]
    assert err.count("stopped leasing") == err.count("leases again") >= 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "stopped leasing: a local fault (disk full" in status.stdout, status.stdout[-2000:]
    assert dead == 0, "a full disk counted against the pages"
    skus = [r["sku"] for r in records]
    assert len(skus) == len(set(skus)), "a record appears twice"
    assert sorted(skus) == sorted(r["sku"] for r in catalog.expected_records())
    assert set(ids) == files, f"records name WARC files that do not exist: {files - set(ids)}"
    for r in records:
        assert r["_warc_record_id"] in ids[r["_warc_file"]]
        if r.get("_warc_refers_to"):  # a revisit: its first capture survived the cut file too
            assert r["_warc_refers_to"] in ids[r["_warc_refers_to_file"]], r
