"""Content dedup never loses data: identical pages under other URLs are parsed, archived once.

A page's output depends on its URL, not only on its bytes (relative links resolve against it,
records carry it). These crawls serve the same pages under several hosts and under several paths
of one host and check that every page is reached and every record is present once, on both
backends, with one and two workers; and that duplicates are WARC revisit records that warcio
reads and that ``export --provenance`` resolves to the first capture.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PG_TEST_DB
from tests.integration.helpers import demo_shops, read_jsonl, run, shop_stats
from tests.sites.mirrors import ITEMS, MIRRORS, MirrorSite, start_mirrors
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

HOSTS_SPIDER = """
from urllib.parse import urlsplit

from crawlfleet.demo.spider import LINK_CSS, DemoShop, Product, extract_product


class HostProduct(Product):
    host: str


class Hosts(DemoShop):
    name = "hosts"
    start_urls = {start_urls!r}
    item = HostProduct
    item_key = ("host", "sku")
    domain_concurrency = 8

    def parse(self, response):
        yield from response.follow_all(LINK_CSS)
        record = extract_product(response)
        if record is not None:
            record["host"] = urlsplit(response.url).hostname
            yield record
"""

PATHS_SPIDER = """
from crawlfleet import Spider


class Paths(Spider):
    name = "paths"
    start_urls = {start_urls!r}
    domain_concurrency = 4

    def parse(self, response):
        yield from response.follow_all("a.item, a.next")
        sku = response.css(".sku::text").get()
        if sku:  # no item_key: one record per page URL and position
            yield {{"sku": sku, "page": response.url}}
"""


def _queue_args(backend: str) -> list[str]:
    return ["--queue", PG_TEST_DB.fresh()] if backend == "postgres" else []


@pytest.mark.parametrize(("backend", "workers"), [("sqlite", 1), ("postgres", 2)])
def test_same_shop_on_several_hosts__every_host_gives_every_record(
    tmp_path: Path, backend: str, workers: int
) -> None:
    catalog = Catalog(30)
    with demo_shops(3, "--products", "30") as bases:
        spider = tmp_path / "hosts.py"
        spider.write_text(HOSTS_SPIDER.format(start_urls=[b + "/" for b in bases]))
        args = ["crawl", str(spider), "--workers", str(workers), "-o", "out.jsonl"]
        result = run([*args, *_queue_args(backend)], tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        pages = shop_stats(bases[0])["pages"]

    records = read_jsonl(tmp_path / "out.jsonl")
    keys = Counter((r["host"], r["sku"]) for r in records)
    assert max(keys.values()) == 1, "a record appears twice"
    hosts = [b.split("//")[1].split(":")[0] for b in bases]
    assert set(keys) == {(h, r["sku"]) for h in hosts for r in catalog.expected_records()}
    # the server counts a page per path whatever the host: each of them, once per host
    product_pages = {p: n for p, n in pages.items() if p.startswith("/product/")}
    assert len(product_pages) == len(catalog.products)
    assert set(product_pages.values()) == {len(bases)}


@pytest.fixture
async def mirrors() -> AsyncIterator[MirrorSite]:
    site, stop = await start_mirrors()
    try:
        yield site
    finally:
        await stop()


async def _crawlfleet(args: list[str], cwd: Path) -> tuple[int, str, str]:
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
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode(errors="replace")


def _warc(directory: Path) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Response records by record id, and every revisit record, of the closed WARC files."""
    responses: dict[str, dict[str, Any]] = {}
    revisits: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                h = record.rec_headers
                row = {
                    "file": path.name,
                    "id": h.get_header("WARC-Record-ID"),
                    "uri": h.get_header("WARC-Target-URI"),
                    "digest": h.get_header("WARC-Payload-Digest"),
                    "refers_to": h.get_header("WARC-Refers-To"),
                    "refers_to_uri": h.get_header("WARC-Refers-To-Target-URI"),
                    "profile": h.get_header("WARC-Profile"),
                    "payload": record.content_stream().read(),
                }
                if record.rec_type == "response":
                    responses[row["id"]] = row
                elif record.rec_type == "revisit":
                    revisits.append(row)
    return responses, revisits


@pytest.mark.parametrize(("backend", "workers"), [("sqlite", 2), ("postgres", 1)])
async def test_same_pages_under_several_paths__all_parsed_duplicates_archived_as_revisits(
    tmp_path: Path, mirrors: MirrorSite, backend: str, workers: int
) -> None:
    starts = [f"{mirrors.base_url}/{m}/index.html" for m in MIRRORS]
    spider = tmp_path / "paths.py"
    spider.write_text(PATHS_SPIDER.format(start_urls=starts))
    args = ["crawl", str(spider), "--workers", str(workers), "-o", "out.jsonl"]
    queue = _queue_args(backend)
    code, _, err = await _crawlfleet([*args, *queue], tmp_path)
    assert code == 0, err[-3000:]

    assert {p: n for p, n in mirrors.hits.items()} == dict.fromkeys(mirrors.pages(), 1)
    records = read_jsonl(tmp_path / "out.jsonl")
    assert len(records) == len(MIRRORS) * ITEMS
    assert {r["page"] for r in records} == {
        f"{mirrors.base_url}/{m}/item-{i}.html" for m in MIRRORS for i in range(1, ITEMS + 1)
    }

    code, out, err = await _crawlfleet(["status", "--json", *queue], tmp_path)
    assert code == 0, err
    (status,) = json.loads(out)
    code, _, err = await _crawlfleet(
        ["export", "-o", "prov.jsonl", "--provenance", *queue], tmp_path
    )
    assert code == 0, err
    responses, revisits = _warc(tmp_path / ".crawlfleet" / "warc")
    # every page is in the WARC once, the first of each payload in full, most others as revisits
    assert len(responses) + len(revisits) == len(mirrors.pages())
    assert len({r["digest"] for r in responses.values()}) <= len(responses)
    assert status["duplicates"] == len(mirrors.pages()) - len(mirrors.pages()) // len(MIRRORS)
    assert revisits, "no duplicate page was archived as a revisit"
    for revisit in revisits:
        original = responses[revisit["refers_to"]]  # refers to a capture of the same payload
        assert revisit["payload"] == b""
        assert revisit["digest"] == original["digest"]
        assert revisit["refers_to_uri"] == original["uri"] != revisit["uri"]
        assert revisit["profile"].endswith("/revisit/identical-payload-digest")

    by_revisit = {r["id"]: r for r in revisits}
    for row in read_jsonl(tmp_path / "prov.jsonl"):
        if row["_warc_record_id"] in by_revisit:
            first = responses[row["_warc_refers_to"]]
            assert row["_warc_refers_to_file"].endswith(first["file"])
            assert f'<span class="sku">{row["sku"]}</span>'.encode() in first["payload"]
        else:
            assert row["_warc_refers_to"] is None
            assert responses[row["_warc_record_id"]]["uri"] == row["_url"]


async def test_skip_duplicate_content__the_spiders_opt_in_leaves_duplicates_unparsed(
    tmp_path: Path, mirrors: MirrorSite
) -> None:
    """Only with the spider's opt-in is a page with already-parsed bytes left unparsed: here the
    other mirrors' index pages, so their items are never reached (why it is not the default)."""
    starts = [f"{mirrors.base_url}/{m}/index.html" for m in MIRRORS]
    spider = tmp_path / "paths.py"
    source = PATHS_SPIDER.format(start_urls=starts)
    spider.write_text(source.replace("domain_concurrency = 4", "domain_concurrency = 1\n"
                                     "    skip_duplicate_content = True"))  # fmt: skip
    code, _, err = await _crawlfleet(["crawl", str(spider), "-o", "out.jsonl"], tmp_path)
    assert code == 0, err[-3000:]
    records = read_jsonl(tmp_path / "out.jsonl")
    assert {r["page"].split("/")[3] for r in records} == {"a"}
    assert len(records) == ITEMS
    assert sum(mirrors.hits.values()) == len(mirrors.pages()) // len(MIRRORS) + len(MIRRORS) - 1
