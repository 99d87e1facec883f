"""Hostile pages and bad spiders, crawled for real: the crawl command against the hostile site
over real sockets. Nothing hangs, every bad thing ends contained and named."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.sites.hostile import HostileSite, hostile_site  # noqa: F401

pytestmark = pytest.mark.slow

CRAWLFLEET = [sys.executable, "-m", "crawlfleet"]

SPIDER = """
import itertools
from crawlfleet import Request, Spider


def nested(levels):
    top = node = {{}}
    for _ in range(levels):
        node["x"] = node = {{}}
    return top


class Hostile(Spider):
    name = "hostile"
    start_urls = [
        "{base}/deep?levels=5000",
        "{base}/deep?levels=300",
        "{base}/latin1-header",
        "{base}/page?size=100&endless=1",
        "{base}/page?size=200&bad=1",
    ]
    custom_settings = {{"worker.max_yields_per_page": 1000}}
    obey_robots = False  # the site's Crawl-delay would only slow the test down

    def parse(self, response):
        url = response.url
        if "/deep" in url:
            css = response.css("p.deep::text").get()
            yield {{"kind": "deep", "css": css, "xpath": response.xpath("//p/text()").get()}}
        elif "latin1" in url:
            # the byte 0xE9 in a header: read with surrogateescape, a lone surrogate
            yield {{"kind": "header", "name": response.headers["x-name"]}}
            yield {{"kind": "after-header"}}
        elif "endless" in url:
            for n in itertools.count():
                yield Request("{base}/page?size=10&n=%d" % n)
        else:
            yield {{"kind": "bytes", "value": b"\\xe9\\xff"}}
            yield {{"kind": "nested", "value": nested(5000)}}
            yield {{"kind": "nan", "value": float("nan")}}
            yield Request(12345)
            yield Request("{base}/page?size=10&cb=1", callback="parse_missing")
            yield {{"kind": "good"}}
"""


async def cli(*args: str, cwd: Path, timeout: float = 60) -> tuple[int, str, str]:
    """Run the crawlfleet command without blocking the loop the hostile site is served on."""
    proc = await asyncio.create_subprocess_exec(
        *CRAWLFLEET,
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ, NO_COLOR="1"),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def strict_jsonl(path: Path) -> list[dict[str, Any]]:
    """JSON lines as a strict reader takes them: a bare NaN or Infinity fails."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"{path.name} holds a bare {constant}: not JSON")

    text = path.read_text(encoding="utf-8")
    return [json.loads(line, parse_constant=refuse) for line in text.splitlines() if line]


async def test_crawl__hostile_pages_and_bad_output_end_contained_and_named(
    hostile_site: HostileSite,  # noqa: F811
    tmp_path: Path,
) -> None:
    (tmp_path / "hostile.py").write_text(SPIDER.format(base=hostile_site.base_url))
    started = time.monotonic()
    code, _, err = await cli("crawl", "hostile.py", "-qq", cwd=tmp_path, timeout=90)
    took = time.monotonic() - started
    assert code in (0, 1), err[-2000:]
    assert took < 60, f"the crawl took {took:.0f}s"
    assert "Traceback" not in err, err[-3000:]

    code, dead, err = await cli("dead", "list", "--job", "hostile", cwd=tmp_path)
    assert code == 0, err
    lines = dead.splitlines()
    assert any("too_complex" in ln and "levels=5000" in ln for ln in lines), dead
    assert any("too_many_items" in ln and "endless" in ln for ln in lines), dead
    assert "levels=300" not in dead and "latin1" not in dead and "bad=1" not in dead

    assert (await cli("export", "--job", "hostile", "-o", "r.jsonl", cwd=tmp_path))[0] == 0
    records = strict_jsonl(tmp_path / "r.jsonl")
    kinds = sorted(r["kind"] for r in records)
    assert kinds == ["after-header", "deep", "good"], records
    (deep,) = [r for r in records if r["kind"] == "deep"]
    assert deep["css"] == deep["xpath"] == "found", "300 levels deep: both parsers answer"

    args = ("export", "--job", "hostile", "--quarantine", "-o", "q.jsonl")
    assert (await cli(*args, cwd=tmp_path))[0] == 0
    quarantine = strict_jsonl(tmp_path / "q.jsonl")
    text = json.dumps(quarantine)
    for reason in ("lone_surrogate", "non_finite_number", "invalid_value"):
        assert reason in text, (reason, quarantine)
    assert len(quarantine) == 4, quarantine  # header, bytes, nested dict, NaN
    # the refused Requests were never queued: only the five start pages were fetched
    assert hostile_site.hits["/page"] == 2


STUCK = """
from crawlfleet import Spider


class Stuck(Spider):
    name = "stuck"
    start_urls = ["{base}/page?size=100"]
    obey_robots = False

    def parse(self, response):
        n = 0
        while True:  # never yields, never returns: a spider bug, all CPU
            n += 1
"""


async def test_worker__a_callback_that_never_returns_does_not_stop_sigterm_or_heartbeats(
    hostile_site: HostileSite,  # noqa: F811
    tmp_path: Path,
) -> None:
    (tmp_path / "stuck.py").write_text(STUCK.format(base=hostile_site.base_url))
    queue = f"sqlite:///{tmp_path / 'queue.db'}"
    assert (await cli("submit", "stuck.py", "--queue", queue, cwd=tmp_path))[0] == 0
    # the real worker, its SIGTERM grace cut to 1 s (tests.chaos.slow_worker)
    env = dict(os.environ, CRAWLFLEET_LEASE_TTL="3", CRAWLFLEET_FETCH_TIMEOUT="2", CHAOS_GRACE="1")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.chaos.slow_worker",
        "worker",
        "--queue",
        queue,
        cwd=Path(__file__).resolve().parents[2],
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while hostile_site.hits["/page"] == 0:  # fetched: the callback is spinning now
            assert time.monotonic() < deadline, "the page was never fetched"
            await asyncio.sleep(0.1)
        await asyncio.sleep(4.0)  # past the lease's ttl: heartbeats must have kept it
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        assert proc.stderr is not None
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        took = time.monotonic() - sent
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert took < 8, f"the worker took {took:.1f}s to stop after SIGTERM"
    assert proc.returncode == 0, err.decode()[-2000:]
    assert hostile_site.hits["/page"] == 1, "the lease was never lost and fetched again"


PAGES = """
from crawlfleet import Spider


class Pages(Spider):
    name = "pages"
    start_urls = ["{base}/page?size=50&n=%d" % n for n in range(6)]
    obey_robots = False

    def parse(self, response):
        yield {{"url": response.url, "tag": "poison" if "n=3" in response.url else "ok"}}
"""


async def test_worker__a_report_the_store_refuses_does_not_stall_the_worker(
    hostile_site: HostileSite,  # noqa: F811
    tmp_path: Path,
) -> None:
    (tmp_path / "pages.py").write_text(PAGES.format(base=hostile_site.base_url))
    queue = f"sqlite:///{tmp_path / 'queue.db'}"
    assert (await cli("submit", "pages.py", "--queue", queue, cwd=tmp_path))[0] == 0
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.chaos.slow_worker",
        "worker",
        "--queue",
        queue,
        "--exit-when-finished",
        "-v",
        cwd=Path(__file__).resolve().parents[2],
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ, CHAOS_REPORT_POISON="poison"),
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "reporting them one by one" in err.decode()
    args = ("export", "--queue", queue, "--job", "pages", "-o", "r.jsonl")
    assert (await cli(*args, cwd=tmp_path))[0] == 0
    assert sorted(r["tag"] for r in strict_jsonl(tmp_path / "r.jsonl")) == ["ok"] * 5
    args = ("export", "--queue", queue, "--job", "pages", "--quarantine", "-o", "q.jsonl")
    assert (await cli(*args, cwd=tmp_path))[0] == 0
    (refused,) = strict_jsonl(tmp_path / "q.jsonl")
    assert "store_refused" in json.dumps(refused), refused
    code, status, _ = await cli("status", "--queue", queue, cwd=tmp_path)
    assert code == 0 and "6" in status
