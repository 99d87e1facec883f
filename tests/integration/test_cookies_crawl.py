"""Cookies follow the crawl (the ``crawl`` command, two worker processes, a real site): the
cookie a GET page's answer sets goes with every request that page yields, whichever worker
leases it, as with Scrapy's one cookie jar."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from tests.integration.helpers import read_jsonl
from tests.sites.cookies import CookieSite, cookie_site

__all__ = ["cookie_site"]  # the imported fixture is used by name

pytestmark = pytest.mark.slow

SPIDER = """\
from crawlfleet import Spider


class Gated(Spider):
    name = "gated"
    start_urls = {start_urls!r}
    obey_robots = False

    def parse(self, response):
        yield from response.follow_all("a", callback=self.page)

    def page(self, response):
        yield {{"url": response.url, "gate": response.css("#gate::text").get()}}
"""


async def crawl(cwd: Path, *args: str, timeout: float = 120) -> tuple[int, str]:
    """Run ``crawl`` while this test's event loop keeps serving the site."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawlfleet",
        "crawl",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=dict(os.environ),
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_a_get_pages_cookie_reaches_every_page_it_links__two_workers(
    tmp_path: Path, cookie_site: CookieSite
) -> None:
    starts = [cookie_site.url("/plain"), cookie_site.url("/gate")]
    (tmp_path / "gated.py").write_text(SPIDER.format(start_urls=starts))
    # one request at a time per worker: the two start pages go to both workers (each makes a
    # session of its own), and the gate's pages spread over both
    (tmp_path / "crawlfleet.toml").write_text("[worker]\nconcurrency = 1\n")
    code, out = await crawl(tmp_path, "gated.py", "-w", "2", "-O", "pages.jsonl")
    assert code == 0, out[-3000:]
    [token] = cookie_site.issued
    assert cookie_site.seen == {f"/page/{i}": token for i in range(1, 6)}, "all 5 carried it"
    records = read_jsonl(tmp_path / "pages.jsonl")
    assert sorted(r["gate"] for r in records) == [token] * 5
