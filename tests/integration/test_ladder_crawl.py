"""Crawls of the demo shop over HTTPS behind a bot wall that judges each TLS ClientHello
(tests/sites/gate.py): ``http`` alone gets block verdicts and never a record, ``impersonate``
gets every page, and ``auto`` climbs the ladder from its first (blocked) page and gets every
record, with at most a few pages per page type through the browser. The shop's private CA is
trusted through ``SSL_CERT_FILE``, as a user would."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.helpers import read_jsonl, run, write_spider
from tests.sites.gate import GatedShop, start_gated_shop
from tests.tls import LocalCA, make_ca

from crawlfleet.demo.catalog import Catalog

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
PRODUCTS = 30


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> LocalCA:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture
async def shop(ca: LocalCA) -> AsyncIterator[GatedShop]:
    gated = await start_gated_shop(ca, Catalog(PRODUCTS))
    yield gated
    await gated.close()


async def _crawl(
    tmp_path: Path, shop: GatedShop, ca: LocalCA, fetcher: str, *, gated: bool = True
) -> Any:
    spider = write_spider(
        tmp_path / "shop.py", shop.base if gated else shop.open_base, fetcher=fetcher
    )
    env = {"SSL_CERT_FILE": str(ca.ca_file)}
    args = ["crawl", str(spider), "-o", "out.jsonl", "-w", "1", "-s", "max_attempts=2"]
    done = await asyncio.to_thread(run, args, tmp_path, 400, env=env)
    status = await asyncio.to_thread(run, ["status"], tmp_path, 60, env=env)
    assert status.returncode == 0, status.stderr
    return done, status.stdout


def _domain(status: str) -> dict[str, Any]:
    """The pages per rung ``status`` shows for the shop: ``localhost: ... · by http 3 (3
    blocked) · impersonate 120``."""
    line = next((ln for ln in status.splitlines() if ln.strip().startswith("localhost:")), "")
    assert " · by " in line, status
    rungs, blocks = {}, {}
    for part in line.split(" · by ", 1)[1].split(" · "):
        match = re.fullmatch(r"(\w+) ([\d,]+)(?: \(([\d,]+) blocked\))?", part.strip())
        assert match, part
        rungs[match[1]] = int(match[2].replace(",", ""))
        if match[3]:
            blocks[match[1]] = int(match[3].replace(",", ""))
    return {"rungs": rungs, "rung_blocks": blocks, "line": line}


def _fetched_carts(tmp_path: Path) -> int:
    """Pages under /cart/ (robots.txt disallows them) the crawl fetched."""
    with sqlite3.connect(tmp_path / ".crawlfleet" / "queue.db") as db:
        query = "SELECT count(*) FROM requests WHERE url LIKE '%/cart/%' AND state = 'done'"
        return int(db.execute(query).fetchone()[0])


def _skus(tmp_path: Path) -> set[str]:
    out = tmp_path / "out.jsonl"
    return {r["sku"] for r in read_jsonl(out)} if out.exists() else set()


def _records_exact(tmp_path: Path, products: int = PRODUCTS) -> None:
    """Every record of the catalog, once each."""
    expected = sorted(r["sku"] for r in Catalog(products).expected_records())
    skus = sorted(r["sku"] for r in read_jsonl(tmp_path / "out.jsonl"))
    assert skus == expected, set(skus) ^ set(expected)


def _judged_types(tmp_path: Path) -> int:
    """The page types the crawl judged (the domain's rung, stored under "", is none)."""
    with sqlite3.connect(tmp_path / ".crawlfleet" / "queue.db") as db:
        query = "SELECT count(*) FROM page_types WHERE pattern != ''"
        return int(db.execute(query).fetchone()[0])


EXPECTED = {r["sku"] for r in Catalog(PRODUCTS).expected_records()}


async def test_http_alone_gets_block_verdicts_never_records(
    tmp_path: Path, shop: GatedShop, ca: LocalCA
) -> None:
    done, status = await _crawl(tmp_path, shop, ca, "http")
    assert _skus(tmp_path) == set()
    domain = _domain(status)
    assert domain["rung_blocks"].get("http", 0) >= 1 and set(domain["rungs"]) == {"http"}
    assert shop.gate.passed == 0 and shop.gate.refused >= 1
    assert "blocked" in status, done.stderr[-2000:]


async def test_impersonate_gets_every_page(tmp_path: Path, shop: GatedShop, ca: LocalCA) -> None:
    done, status = await _crawl(tmp_path, shop, ca, "impersonate")
    assert done.returncode == 0, done.stderr[-3000:]
    assert _skus(tmp_path) == EXPECTED
    domain = _domain(status)
    assert set(domain["rungs"]) == {"impersonate"} and not domain["rung_blocks"]
    assert _fetched_carts(tmp_path) == 0  # robots.txt read through the wall too


async def test_auto_climbs_from_its_blocked_seed_and_gets_every_record(
    tmp_path: Path, shop: GatedShop, ca: LocalCA
) -> None:
    done, status = await _crawl(tmp_path, shop, ca, "auto")
    assert done.returncode == 0, done.stderr[-3000:]
    _records_exact(tmp_path)
    domain = _domain(status)
    rungs, blocks = domain["rungs"], domain["rung_blocks"]
    # the seed (and the few pages queued before the domain's rung was known, and the probes
    # down) were blocked over HTTP, and no page was a record from there; the shop came through
    # the impersonating fetcher, and a few pages per page type through the browser at most
    assert blocks.get("http", 0) >= 1 and blocks.get("http") == rungs.get("http"), domain
    assert rungs.get("impersonate", 0) >= len(EXPECTED), domain
    # the shop's page types (home, category, product, ...) are judged in the browser from one
    # page each (the others of the type wait for the judgement): a few pages in all
    assert rungs.get("browser", 0) <= 8, domain
    assert not blocks.get("impersonate") and not blocks.get("browser"), domain
    # robots.txt was read a rung up too: the wall's 403 is not "no robots.txt, allow all"
    assert _fetched_carts(tmp_path) == 0


#: a catalog with listings of several pages each: links of a page type found while a page of
#: it is being judged in the browser
OPEN_PRODUCTS = 600


@pytest.fixture
async def big_shop(ca: LocalCA) -> AsyncIterator[GatedShop]:
    gated = await start_gated_shop(ca, Catalog(OPEN_PRODUCTS))
    yield gated
    await gated.close()


async def test_auto_on_the_open_shop_judges_each_page_type_from_one_page(
    tmp_path: Path, big_shop: GatedShop, ca: LocalCA
) -> None:
    # the same shop without the wall: nothing climbs, and the browser renders each scripted
    # page type that gave no record over HTTP once (the listings: their links were queued from
    # the raw page meanwhile, and the links of a type being judged started over HTTP, not
    # pinned to the browser on a guess)
    shop = big_shop
    done, status = await _crawl(tmp_path, shop, ca, "auto", gated=False)
    assert done.returncode == 0, done.stderr[-3000:]
    _records_exact(tmp_path, OPEN_PRODUCTS)
    domain = _domain(status)
    rungs, blocks = domain["rungs"], domain["rung_blocks"]
    assert not blocks and "impersonate" not in rungs, domain
    assert rungs.get("http", 0) >= OPEN_PRODUCTS * 0.9, domain
    types = _judged_types(tmp_path)
    assert types >= 1 and 1 <= rungs.get("browser", 0) <= types, (types, domain)
    assert shop.gate.seen == [], "the open shop was crawled, not the gated one"
