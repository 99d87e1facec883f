"""Recurring crawls end to end: one job crawls a catalogue three times, on SQLite and on
PostgreSQL with two workers, and ``export --changes`` says exactly what changed.

1. the catalogue as it is: every record new;
2. 10% of the products changed, 5% gone (404, off the listings), new ones linked: unchanged
   pages are 304s (not parsed, their records carried over), the changed ones changed with
   their old values, the gone ones removed, the new ones new;
3. with gzipped sitemaps only (robots.txt lists an index of two gzipped sitemaps; the spider
   reads nothing else, and new products are on no listing): the changed products changed,
   the new ones new, nothing removed.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from tests.conftest import PG_DSN
from tests.integration.helpers import read_jsonl
from tests.sites.catalog import CatalogSite, start_catalog

pytestmark = pytest.mark.slow

SPIDER = """
from pydantic import BaseModel

from crawlfleet import Spider


class Product(BaseModel):
    sku: str
    name: str
    price: float


class Catalogue(Spider):
    name = "catalogue"
    start_urls = {start_urls!r}
    sitemap_urls = {sitemap_urls!r}
    sitemap_rules = [("/product/", "parse_product")]
    item = Product
    item_key = "sku"
    allow_private_addresses = True

    def parse(self, response):
        yield from response.follow_all("a.list")
        yield from response.follow_all("a.product", callback=self.parse_product)

    def parse_product(self, response):
        yield {{
            "sku": response.css(".sku::text").get(),
            "name": response.css("h1::text").get(),
            "price": float(response.css(".price::text").get()),
        }}
"""


@pytest.fixture
async def site() -> AsyncIterator[CatalogSite]:
    catalog = CatalogSite()
    catalog.add(100)
    stop = await start_catalog(catalog)
    try:
        yield catalog
    finally:
        await stop()


@pytest.fixture(params=["sqlite", "postgres"])
def queue(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    if request.param == "sqlite":
        yield []
        return
    schema = f"recrawl_{secrets.token_hex(4)}"
    try:
        yield ["--queue", urlunsplit(urlsplit(PG_DSN)._replace(query=f"schema={schema}"))]
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def crawlfleet(args: list[str], cwd: Path) -> tuple[int, str, str]:
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
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode(errors="replace")


async def ok(args: list[str], cwd: Path) -> str:
    code, out, err = await crawlfleet(args, cwd)
    assert code == 0, err[-3000:]
    assert "Traceback" not in err
    return out + err


async def changes(cwd: Path, queue: list[str], *extra: str) -> dict[str, dict[str, Any]]:
    await ok(["export", "--changes", *extra, "-o", "changes.jsonl", *queue], cwd)
    rows = read_jsonl(cwd / "changes.jsonl")
    assert len({r["sku"] for r in rows}) == len(rows), "a record twice"
    return {r["sku"]: r for r in rows}


def row(p: Any, change: str, fields: list[str] | None = None, old: Any = None) -> dict[str, Any]:
    return {
        "sku": p.sku,
        "name": p.name,
        "price": p.price,
        "_change": change,
        "_changed_fields": fields,
        "_previous": old,
    }


async def test_three_runs__export_changes_says_exactly_what_changed(
    site: CatalogSite, queue: list[str], tmp_path: Path
) -> None:
    spider = tmp_path / "catalogue.py"
    spider.write_text(SPIDER.format(start_urls=[site.base_url + "/"], sitemap_urls=[]))
    crawl = ["crawl", "catalogue.py", "-w", "2", *queue]

    # run 1: the catalogue as it is
    await ok(crawl, tmp_path)
    first = await changes(tmp_path, queue)
    assert first == {p.sku: row(p, "new") for p in site.products.values()}
    again = await ok(crawl, tmp_path)
    assert "crawl --recrawl starts run 2" in again

    # run 2: 10 changed, 5 gone, 5 new ones linked
    skus = sorted(site.products)
    changed = {sku: site.products[sku].price for sku in skus[0:100:10]}
    for sku in changed:
        site.change(sku, site.products[sku].price + 1.5)
    gone = {sku: site.products[sku] for sku in skus[5:100:20]}
    for sku in gone:
        site.remove(sku)
    new = site.add(5)
    site.reset_counts()
    summary = await ok([*crawl, "--recrawl"], tmp_path)
    assert "run        2 (recrawl, finished)" in summary
    expected = {
        **{
            sku: row(site.products[sku], "changed", ["price"], {"price": old})
            for sku, old in changed.items()
        },
        **{sku: row(p, "removed") for sku, p in gone.items()},
        **{p.sku: row(p, "new") for p in new},
    }
    assert await changes(tmp_path, queue) == expected
    # every product page known and unchanged was a 304, never parsed or sent whole again
    unchanged = 100 - len(changed) - len(gone)
    assert site.not_modified["product"] == unchanged
    runs = (await ok(["jobs", "runs", "catalogue", "--json", *queue], tmp_path)).splitlines()[0]
    latest = json.loads(runs)[0]
    c = latest["counters"]
    assert (latest["run"], latest["kind"], latest["state"]) == (2, "recrawl", "finished")
    assert c["records_new"] == 5 and c["records_changed"] == 10 and c["records_removed"] == 5
    assert c["records_unchanged"] == unchanged
    assert c["not_modified"] >= unchanged and c["gone"] == len(gone)
    # plain export: the current records; --removed adds the gone ones with the run that did it
    await ok(["export", "-o", "all.jsonl", *queue], tmp_path)
    assert {r["sku"] for r in read_jsonl(tmp_path / "all.jsonl")} == set(site.products)
    await ok(["export", "--removed", "-o", "every.jsonl", *queue], tmp_path)
    removed_in = {r["sku"]: r["_removed_in"] for r in read_jsonl(tmp_path / "every.jsonl")}
    assert {k for k, v in removed_in.items() if v == 2} == set(gone)

    # run 3: the gzipped sitemaps only; 2 changed, 3 new listed by the sitemaps alone
    spider.write_text(SPIDER.format(start_urls=[], sitemap_urls=[site.base_url + "/robots.txt"]))
    later = sorted(site.products)
    changed3 = {sku: site.products[sku].price for sku in later[3:5]}
    for sku in changed3:
        site.change(sku, site.products[sku].price * 2)
    new3 = site.add(3, linked=False)
    site.reset_counts()
    await ok([*crawl, "--recrawl"], tmp_path)
    assert site.served["sitemap"] == 2 and site.served["sitemap_index"] == 1
    expected3 = {
        **{
            sku: row(site.products[sku], "changed", ["price"], {"price": old})
            for sku, old in changed3.items()
        },
        **{p.sku: row(p, "new") for p in new3},
    }
    assert await changes(tmp_path, queue) == expected3
    # --since 2: runs 2 and 3 against the catalogue of run 1
    since = await changes(tmp_path, queue, "--since", "2")
    assert {k: v["_change"] for k, v in since.items()} == {
        **dict.fromkeys(changed, "changed"),
        **dict.fromkeys(changed3, "changed"),
        **dict.fromkeys(gone, "removed"),
        **{p.sku: "new" for p in [*new, *new3]},
    }
    status = await ok(["status", *queue], tmp_path)
    assert "run 3 (recrawl, finished)" in status
