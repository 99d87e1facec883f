"""Broad crawls: many small hosts on loopback, dead ones among the seeds, robots.txt quirks.

The hosts are loopback addresses served by one in-process server (:mod:`tests.sites.broad`);
the crawl is the real command in a subprocess.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.sites.broad import BroadSite, start_broad

pytestmark = pytest.mark.slow

SPIDER = """
from crawlfleet import Spider


class Broad(Spider):
    name = "broad"
    start_urls = {start_urls!r}

    def parse(self, response):
        yield from response.follow_all("a")
"""

#: a dead host is tried for 2 s (30 by default); robots.txt answering 5xx for 3 s (120)
SHORT_WAITS = (
    "[pacing]\nhost_recheck = 0.5\nhost_give_up = 2\nrobots_recheck = 1\nrobots_give_up = 3\n"
)


async def crawlfleet(args: list[str], cwd: Path, timeout: float = 120) -> tuple[int, str, str]:
    """``crawlfleet ARGS`` in ``cwd`` without blocking the event loop (the site runs on it)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawlfleet",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode(errors="replace")


def write_spider(tmp_path: Path, start_urls: list[str]) -> Path:
    spider = tmp_path / "broad.py"
    spider.write_text(SPIDER.format(start_urls=start_urls))
    return spider


def dead_letters(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """URL -> (dead reason, last error) of the crawl's dead requests."""
    with sqlite3.connect(tmp_path / ".crawlfleet" / "queue.db") as db:
        rows = db.execute("SELECT url, dead_reason, last_error FROM requests WHERE state='dead'")
        return {url: (reason, error) for url, reason, error in rows}


@pytest.fixture
async def few_hosts() -> AsyncIterator[BroadSite]:
    site, stop = await start_broad(3, dead=2)  # robots.txt: ok, 404, ok
    try:
        yield site
    finally:
        await stop()


async def test_dead_seeds__the_crawl_starts_and_they_end_dead_with_their_reason(
    tmp_path: Path, few_hosts: BroadSite
) -> None:
    site = few_hosts
    (tmp_path / "crawlfleet.toml").write_text(SHORT_WAITS)
    spider = write_spider(tmp_path, site.seeds())
    code, _, err = await crawlfleet(["crawl", str(spider)], tmp_path)
    assert code == 0, err[-3000:]
    assert site.pages_hit() == dict.fromkeys(site.expected(), 1)
    dead = dead_letters(tmp_path)
    assert set(dead) == {site.url(h) for h in site.dead}
    for reason, error in dead.values():
        assert reason == "host_unreachable"
        assert "connection refused" in error, error


async def test_no_seed_can_be_fetched__the_crawl_fails_at_its_end_saying_why(
    tmp_path: Path, few_hosts: BroadSite
) -> None:
    site = few_hosts
    (tmp_path / "crawlfleet.toml").write_text(SHORT_WAITS)
    spider = write_spider(tmp_path, [site.url(h) for h in site.dead])
    code, out, err = await crawlfleet(["crawl", str(spider)], tmp_path)
    assert code == 1, (out + err)[-3000:]
    assert "no page was fetched: all 2 requests were given up" in out + err
    assert "Traceback" not in err
