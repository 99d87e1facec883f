"""A result the store keeps refusing for a bug ends the crawl loudly; it never spins.

The shape that found it: a lane idle for five minutes made the pacing fold raise on every
completion of the lane, the worker logged each refusal, heartbeated the lease for ever, and the
crawl showed ``0/1 pages`` until killed. Here a lane's stored pacing document is made unreadable
by the fold (a real store, a real row), and ``crawl`` must end non-zero, showing the error.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from tests.integration.helpers import demo_shop, run

pytestmark = pytest.mark.slow

SPIDER = """\
from crawlfleet.demo.spider import DemoShop


class Shop(DemoShop):
    name = "shop"
    start_urls = [{base!r} + "/", {base!r} + "/category/kitchen", {base!r} + "/category/garden"]
"""


def test_crawl__a_store_that_refuses_every_completion_ends_the_crawl_with_the_error(
    tmp_path: Path,
) -> None:
    with demo_shop("--products", "30") as base:
        (tmp_path / "shop.py").write_text(SPIDER.format(base=base))
        submitted = run(["submit", "shop.py"], tmp_path, timeout=60)
        assert submitted.returncode == 0, submitted.stderr
        with sqlite3.connect(tmp_path / ".crawlfleet" / "queue.db") as db:
            changed = db.execute('UPDATE lanes SET pacing = \'{"window": "wide"}\'').rowcount
        assert changed >= 1, "the job's lane exists once it is submitted"

        began = time.monotonic()
        result = run(["crawl", "shop.py", "-w", "1"], tmp_path, timeout=120)
        took = time.monotonic() - began

    assert result.returncode != 0, result.stderr[-2000:]
    assert "the store refused 3 results in a row (TypeError" in result.stderr, result.stderr[-3000:]
    assert "stopped" in result.stderr
    assert "starting another" not in result.stderr, "a worker that stopped itself is not restarted"
    assert took < 60, f"the crawl spun for {took:.0f}s"
