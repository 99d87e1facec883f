"""Data quality across runs, end to end: a local shop crawled twice with ``crawl`` and
``crawl --recrawl``, a real webhook receiver (signatures checked) told of each run.

* broken: the second time 40% of the products are gone from the shop (off the listing, their
  pages 404) and 30% of those left lost their rating (the model allows it empty): the run
  finishes green, but ``item_count`` and ``field_coverage`` fire, the webhook gets both with
  the field, the value and the baseline (and the products missing the rating as examples), and
  ``crawlfleet quality`` shows the drop;
* clean: the same shop crawled twice as it is fires nothing.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from tests.integration.test_monitoring import api, scrape, serving
from tests.sites.receiver import Receiver

pytestmark = pytest.mark.slow

SECRET = "quality-s3cret"
PER_LIST = 10

SPIDER = """
from pydantic import BaseModel

from crawlfleet import Spider


class Product(BaseModel):
    sku: str
    name: str
    price: float
    rating: float | None = None


class Shop(Spider):
    name = "{name}"
    start_urls = ["{base}/"]
    item = Product
    item_key = "sku"
    allow_private_addresses = True

    def parse(self, response):
        yield from response.follow_all("a.list")
        yield from response.follow_all("a.product", callback=self.parse_product)

    def parse_product(self, response):
        rating = response.css(".rating::text").get()
        yield {{
            "sku": response.css(".sku::text").get(),
            "name": response.css("h1::text").get(),
            "price": float(response.css(".price::text").get()),
            "rating": float(rating) if rating else None,
        }}
"""


@dataclass
class Shop:
    """Products on listing pages of ten; a product's rating may be missing from its page."""

    products: dict[str, float | None] = field(default_factory=dict)  # sku -> rating
    port: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def skus(self) -> list[str]:
        return sorted(self.products)

    async def home(self, _: web.Request) -> web.Response:
        lists = -(-len(self.products) // PER_LIST)
        links = "".join(f'<a class="list" href="/list/{n}">{n}</a>' for n in range(1, lists + 1))
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def listing(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        page = self.skus()[(n - 1) * PER_LIST : n * PER_LIST]
        if not page:
            raise web.HTTPNotFound()
        items = "".join(f'<a class="product" href="/p/{s}">{s}</a>' for s in page)
        return web.Response(text=f"<html><body>{items}</body></html>", content_type="text/html")

    async def product(self, request: web.Request) -> web.Response:
        sku = request.match_info["sku"]
        if sku not in self.products:
            raise web.HTTPNotFound()
        rating = self.products[sku]
        shown = f'<span class="rating">{rating}</span>' if rating is not None else ""
        return web.Response(
            text=f'<html><body><article><h1>Product {sku}</h1><span class="sku">{sku}</span>'
            f'<span class="price">{10 + int(sku[1:])}.50</span>{shown}</article></body></html>',
            content_type="text/html",
        )


@pytest.fixture
async def shop() -> AsyncIterator[Shop]:
    s = Shop({f"p{i:03}": 4.0 + (i % 10) / 10 for i in range(50)})
    app = web.Application()
    app.router.add_get("/", s.home)
    app.router.add_get("/list/{n:\\d+}", s.listing)
    app.router.add_get("/p/{sku}", s.product)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    s.port = runner.addresses[0][1]
    try:
        yield s
    finally:
        await runner.cleanup()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver({"/hook": SECRET}, fail_first=1).start()
    try:
        yield r
    finally:
        await r.stop()


def _setup(tmp_path: Path, shop: Shop, receiver: Receiver, name: str) -> Path:
    (tmp_path / "shop.py").write_text(SPIDER.format(name=name, base=shop.base))
    (tmp_path / "crawlfleet.toml").write_text(
        f"""
[quality]
min_records = 10

[notify]
webhook = "{receiver.url}/hook"
secret = "{SECRET}"
backoff = 0.2
backoff_cap = 1.0
timeout = 5.0
"""
    )
    return tmp_path / "shop.py"


async def _cli(tmp_path: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawlfleet",
        *args,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode == 0, (args, out.decode()[-2000:], err.decode()[-4000:])
    return out.decode()


async def _events(receiver: Receiver, run: int, timeout: float = 60) -> list[dict[str, object]]:
    """The bodies of ``run`` once its run_finished arrived (alerts go before it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        bodies = [b for b in receiver.bodies("/hook") if b.get("run") == run]
        if any(b["event"] == "run_finished" for b in bodies):
            return bodies
        assert loop.time() < deadline, f"no run_finished of run {run}: {receiver.bodies('/hook')}"
        await asyncio.sleep(0.1)


async def test_a_run_that_lost_products_and_a_field_fires_both_monitors(
    tmp_path: Path, shop: Shop, receiver: Receiver
) -> None:
    spider = _setup(tmp_path, shop, receiver, "shop")
    await _cli(tmp_path, "-q", "crawl", str(spider))
    first = await _events(receiver, 1)
    assert [b["event"] for b in first] == ["run_finished"]
    assert first[0]["summary"]["records"] == 50  # type: ignore[index]

    gone = shop.skus()[30:]  # 40% of the listing gone: off the listing, their pages 404
    for sku in gone:
        del shop.products[sku]
    emptied = shop.skus()[:9]  # 30% of those left lost their rating
    for sku in emptied:
        shop.products[sku] = None
    out = await _cli(tmp_path, "-qq", "crawl", str(spider), "--recrawl")
    assert "Traceback" not in out

    second = await _events(receiver, 2)
    alerts = {(b["alert"], b.get("field")): b for b in second if b["event"] == "alert"}
    assert set(alerts) == {("item_count", None), ("field_coverage", "rating")}
    items = alerts[("item_count", None)]
    assert (items["value"], items["baseline"], items["severity"]) == (30.0, 50.0, "critical")
    rating = alerts[("field_coverage", "rating")]
    assert (rating["field"], rating["value"], rating["baseline"]) == ("rating", 0.7, 1.0)
    examples = rating["examples"]
    assert isinstance(examples, list) and len(examples) == 5
    assert [e["key"] for e in examples] == emptied[:5]
    assert all(e["url"] == f"{shop.base}/p/{e['key']}" and e["warc_record_id"] for e in examples)
    (finished,) = [b for b in second if b["event"] == "run_finished"]
    assert finished["alerts"] == ["field_coverage", "item_count"]
    assert finished["summary"]["records"] == 30  # type: ignore[index]
    assert receiver.bad_signatures == 0

    shown = await _cli(tmp_path, "quality", "--job", "shop")
    assert "job shop run 2: finished" in shown
    (line,) = [ln for ln in shown.splitlines() if ln.strip().startswith("rating !")]
    assert line.split()[2:4] == ["70.0%", "100.0%"]
    (records,) = [ln for ln in shown.splitlines() if ln.strip().startswith("records")]
    assert records.split()[1:3] == ["30", "50"]
    assert "! item_count: records fell to 30 from a median of 50" in shown
    assert "! field_coverage: rating: coverage 70.0%" in shown
    as_json = json.loads(await _cli(tmp_path, "quality", "--job", "shop", "--json"))
    assert [(p["run"], p["final"], p["fields"]["rating"]["coverage"]) for p in as_json] == [
        (2, True, 0.7),
        (1, True, 1.0),
    ]
    status = await _cli(tmp_path, "status")
    assert "! field_coverage: rating" in status and "outbox webhook" in status

    # serve: the dashboard's API and /metrics say the same
    with serving(tmp_path) as base:
        (job,) = api(base, "/api/quality?job=shop")
        assert [r["fields"]["rating"]["coverage"] for r in job["runs"]] == [0.7, 1.0]
        assert {a["alert"] for a in job["runs"][0]["alerts"]} == {"item_count", "field_coverage"}
        (dest,) = api(base, "/api/outbox")["destinations"]
        assert (dest["done"], dest["dead"], dest["label"]) == (
            len(first) + len(second),
            0,
            f"webhook http://127.0.0.1:{receiver.port}/…",
        )
        _, samples = scrape(base + "/metrics")
        assert samples[("crawlfleet_field_coverage", (("field", "rating"), ("job", "shop")))] == 0.7
        assert samples[("crawlfleet_quality_alerts", (("job", "shop"),))] == 2


async def test_a_clean_second_run_fires_nothing(
    tmp_path: Path, shop: Shop, receiver: Receiver
) -> None:
    spider = _setup(tmp_path, shop, receiver, "clean")
    await _cli(tmp_path, "-q", "crawl", str(spider))
    await _events(receiver, 1)
    await _cli(tmp_path, "-q", "crawl", str(spider), "--recrawl")
    second = await _events(receiver, 2)
    assert [b["event"] for b in second] == ["run_finished"]
    assert second[0]["alerts"] == []
    assert second[0]["summary"]["records"] == 50  # type: ignore[index]
    shown = await _cli(tmp_path, "quality")
    assert "no alert in run 2" in shown
