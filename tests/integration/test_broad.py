"""Broad crawls: many small hosts on loopback, dead ones among the seeds, robots.txt quirks.

The hosts are loopback addresses served by one in-process server (:mod:`tests.sites.broad`);
the crawl is the real command in a subprocess.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
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

#: a dead host is tried for 2 s (10 by default); robots.txt answering 5xx for 3 s (120)
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


def sockets_of(pid: int) -> int:
    """How many sockets process ``pid`` holds open now (0 once it is gone)."""
    fd_dir = Path(f"/proc/{pid}/fd")
    count = 0
    try:
        for fd in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                count += os.readlink(fd).startswith("socket:")
    except OSError:
        return 0
    return count


def workers_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


@pytest.fixture
async def many_hosts() -> AsyncIterator[BroadSite]:
    # robots.txt: ok, 404, 500, slow, deny, redirected, huge; pages answering slowly
    site, stop = await start_broad(300, dead=10, slow=0.5, quirks=True)
    try:
        yield site
    finally:
        await stop()


# 100: the worker runs out of descriptors now and then (EMFILE): retried as its own fault
@pytest.mark.parametrize("nofile", [None, 256, 100])
async def test_broad_crawl__every_allowed_page_once_sockets_bounded_dead_hosts_end_fast(
    tmp_path: Path, many_hosts: BroadSite, nofile: int | None
) -> None:
    site = many_hosts
    concurrency, max_idle = 64, 32
    (tmp_path / "crawlfleet.toml").write_text(
        SHORT_WAITS + f"[worker]\nconcurrency = {concurrency}\nmax_idle_connections = {max_idle}\n"
    )
    spider = write_spider(tmp_path, site.seeds())

    def low_limit() -> None:  # soft and hard: the worker cannot raise it
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawlfleet",
        "crawl",
        str(spider),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=low_limit,
    )
    communicate = asyncio.ensure_future(proc.communicate())
    peak = 0
    while not communicate.done():
        # the worker: a process of its own, or the crawl's own (in-process)
        for worker in workers_of(proc.pid) or [proc.pid]:
            peak = max(peak, sockets_of(worker))
        await asyncio.sleep(0.05)
    out, err = await asyncio.wait_for(communicate, 120)
    ended_at = asyncio.get_running_loop().time()
    assert proc.returncode == 0, (out + err).decode(errors="replace")[-3000:]
    # the end follows the last page by the short waits (dead hosts 2 s, robots.txt 5xx 3 s) and
    # the end's detection, not by a per-worker clock or a poll: seconds
    after_last = ended_at - site.last_page_at
    assert 0 < after_last < 10, f"the crawl ended {after_last:.1f}s after its last page"

    # every page robots.txt allows, once; none it disallows (a redirected robots.txt, the part
    # of a huge one read), none of a host whose robots.txt answers 500
    assert site.pages_hit() == dict.fromkeys(site.expected(), 1)
    assert {site.kind(h) for h, _ in site.expected()} >= {"redirect", "huge", "lagging", "slow"}
    dead = dead_letters(tmp_path)
    down = {site.url(h) for h in site.dead}
    unavailable = {site.url(h) for h in site.live if site.kind(h) == "500"}
    assert {u for u, (r, _) in dead.items() if r == "host_unreachable"} == down
    assert {u for u, (r, _) in dead.items() if r == "robots_unavailable"} == unavailable
    assert set(dead) == down | unavailable
    # sockets: in use (concurrency) + idle (max_idle) + the store's and the coordinator's few
    assert 0 < peak <= concurrency + max_idle + 10, peak
    with sqlite3.connect(tmp_path / ".crawlfleet" / "queue.db") as db:
        postponed_for_us = db.execute(
            "SELECT count(*) FROM attempts WHERE error LIKE '%host postponed%' "
            "AND (error LIKE '%EMFILE%' OR error LIKE '%Too many open files%')"
        ).fetchone()[0]
    assert postponed_for_us == 0
