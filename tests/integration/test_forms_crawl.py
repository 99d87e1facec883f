"""Forms in real crawls of the demo shop (the crawl command as a subprocess): a spider signs in
through the login form and gets every order, on SQLite and with two workers on PostgreSQL (the
login's cookie serves both); a wrong CSRF token gets nothing and says why; the two-step
ViewState search gives every product."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from tests.conftest import PG_DSN
from tests.integration.helpers import demo_shop, read_jsonl, run
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.demo import forms as demo_forms
from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

ORDERS = """\
from pydantic import BaseModel

from crawlfleet import Spider
from crawlfleet.demo.spider import parse_price


class Order(BaseModel):
    order: str
    date: str
    skus: list[str]
    total: float


class Orders(Spider):
    name = "orders"
    start_urls = [{start!r}]
    item = Order
    item_key = "order"
    domain_concurrency = 4
    csrf = None  # crawl -a csrf=...: send this token instead of the form's

    def parse(self, response):
        formdata = {{"username": "demo", "password": "demo-password"}}
        if self.csrf:
            formdata["csrf_token"] = self.csrf
        yield response.follow_form("form.login", formdata=formdata, callback=self.orders)

    def orders(self, response):
        yield from response.follow_all("a.order", callback=self.order)
        yield from response.follow_all("a.next", callback=self.orders)

    def order(self, response):
        yield {{
            "order": response.css("article.order::attr(data-id)").get(),
            "date": response.css("time.date::text").get(),
            "skus": response.css("td.sku::text").getall(),
            "total": parse_price(response.css(".total::text").get()),
        }}
"""

SEARCH = """\
from crawlfleet import Spider


class Search(Spider):
    name = "search"
    start_urls = [{start!r}]
    item_key = "sku"

    def parse(self, response):
        for slug in response.css("#ddlCategory option::attr(value)").getall():
            yield response.follow_form(
                "#aspnetForm", formdata={{"ctl00$Main$ddlCategory": slug}}, callback=self.options
            )

    def options(self, response):
        yield response.follow_form("#aspnetForm", callback=self.results)

    def results(self, response):
        for row in response.css("tr.result"):
            cells = row.css("td::text").getall()
            yield {{"sku": cells[0], "category": cells[2]}}
"""


@pytest.fixture
def pg_queue() -> Iterator[str]:
    schema = f"forms_{secrets.token_hex(4)}"
    try:
        yield urlunsplit(urlsplit(PG_DSN)._replace(query=f"schema={schema}"))
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def crawl(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = run(["crawl", *args], cwd, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    return result


def archived(cwd: Path) -> dict[str, list[tuple[str, str, int | None, str | None]]]:
    """Per WARC file (one per worker): (type, URL, status, Cookie header) of every record."""
    out: dict[str, list[tuple[str, str, int | None, str | None]]] = {}
    for path in sorted((cwd / ".crawlfleet" / "warc").glob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type not in ("request", "response"):
                    continue
                uri = record.rec_headers.get_header("WARC-Target-URI")
                http = record.http_headers
                status = int(http.get_statuscode()) if record.rec_type == "response" else None
                cookie = http.get_header("Cookie") if record.rec_type == "request" else None
                out.setdefault(path.name, []).append((record.rec_type, uri, status, cookie))
    return out


def test_login__every_order_on_sqlite(tmp_path: Path) -> None:
    catalog = Catalog(40)
    with demo_shop("--products", "40") as base:
        (tmp_path / "orders.py").write_text(ORDERS.format(start=base + "/login"))
        crawl(["orders.py", "-O", "orders.jsonl"], tmp_path)
    got = sorted(read_jsonl(tmp_path / "orders.jsonl"), key=lambda r: r["order"])
    assert got == demo_forms.expected_orders(catalog)
    records = [r for rs in archived(tmp_path).values() for r in rs]
    order_requests = [r for r in records if r[0] == "request" and "/account/orders/" in r[1]]
    assert len(order_requests) == len(got)
    assert {r[3] for r in order_requests} == {"[secure]"}, "the cookie went, masked in the WARC"
    [login] = posted(tmp_path)
    assert b"username=demo&password=[secure]" in login and b"demo-password" not in login


def posted(cwd: Path) -> list[bytes]:
    """The bodies of the POST request records in the crawl's WARC files."""
    bodies = []
    for path in sorted((cwd / ".crawlfleet" / "warc").glob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "request" and record.http_headers.protocol == "POST":
                    bodies.append(record.content_stream().read())
    return bodies


def test_login__two_workers_on_postgresql_share_the_cookie(tmp_path: Path, pg_queue: str) -> None:
    catalog = Catalog(40)
    with demo_shop("--products", "40", "--latency", "0.05") as base:
        (tmp_path / "orders.py").write_text(ORDERS.format(start=base + "/login"))
        crawl(["orders.py", "-w", "2", "--queue", pg_queue, "-O", "orders.jsonl"], tmp_path)
    got = sorted(read_jsonl(tmp_path / "orders.jsonl"), key=lambda r: r["order"])
    assert got == demo_forms.expected_orders(catalog)
    by_worker = {
        name: [r for r in records if r[0] == "response" and "/account/orders" in r[1]]
        for name, records in archived(tmp_path).items()
    }
    served = [responses for responses in by_worker.values() if responses]
    assert len(served) == 2, f"both workers fetched signed-in pages: {sorted(by_worker)}"
    assert {r[2] for responses in served for r in responses} == {200}, "never a 403"


def test_login__a_wrong_csrf_token_gives_no_records_and_says_why(tmp_path: Path) -> None:
    with demo_shop("--products", "40") as base:
        (tmp_path / "orders.py").write_text(ORDERS.format(start=base + "/login"))
        result = crawl(["orders.py", "-a", "csrf=forged", "-O", "orders.jsonl"], tmp_path)
    assert read_jsonl(tmp_path / "orders.jsonl") == []
    assert "1 dead" in result.stdout + result.stderr
    dead = run(["dead", "list"], tmp_path, timeout=60)
    [line] = dead.stdout.strip().splitlines()
    assert line.endswith("/login\tHTTP 403: 403 Forbidden: CSRF token missing or wrong"), line


def test_viewstate_search__two_postbacks_per_category_give_every_product(tmp_path: Path) -> None:
    catalog = Catalog(40)
    with demo_shop("--products", "40") as base:
        (tmp_path / "search.py").write_text(SEARCH.format(start=base + "/search-vs"))
        crawl(["search.py", "-O", "found.jsonl"], tmp_path)
    got = sorted((r["sku"], r["category"]) for r in read_jsonl(tmp_path / "found.jsonl"))
    want = sorted(
        (sku, c.slug)
        for c in catalog.categories
        for sku in demo_forms.expected_search(catalog, c.slug)
    )
    assert got == want and len(got) == 40
    statuses = [r[2] for rs in archived(tmp_path).values() for r in rs if r[0] == "response"]
    assert statuses == [200] * (1 + 2 * len(catalog.categories)), "no ViewState error page"
