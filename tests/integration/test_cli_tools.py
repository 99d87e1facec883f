"""The tools of the loop against the demo shop: fetch, parse, shell and new, as subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.helpers import CRAWLFLEET, demo_shop, run, write_spider

from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

CATALOG = Catalog(40)


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    with demo_shop("--products", "40") as base:
        yield base


def product_url(base: str, valid: bool) -> str:
    invalid = set(CATALOG.invalid_skus())
    expected = [r["sku"] for r in CATALOG.expected_records()]
    sku = expected[0] if valid else sorted(invalid)[0]
    return f"{base}/product/{sku}"


def test_fetch__status_verdict_and_headers_on_stderr_body_to_stdout_or_a_file(
    tmp_path: Path, shop: str
) -> None:
    result = subprocess.run(
        [*CRAWLFLEET, "fetch", shop + "/"], cwd=tmp_path, capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    with urllib.request.urlopen(shop + "/", timeout=10) as resp:
        assert result.stdout == resp.read()
    err = result.stderr.decode()
    assert err.startswith(f"200 OK {shop}/ · ") and "crawlfleet sees: ok" in err
    assert "Content-Type: text/html" in err

    saved = run(["fetch", shop + "/nope", "-o", "page.html"], tmp_path, timeout=60)
    assert saved.returncode == 0
    assert "404 Not Found" in saved.stderr and "crawlfleet sees: gone" in saved.stderr
    assert (tmp_path / "page.html").read_bytes() != b""

    down = run(["fetch", "http://127.0.0.1:1/"], tmp_path, timeout=60)
    assert down.returncode == 1
    assert down.stderr.startswith("error: cannot fetch http://127.0.0.1:1/: ")
    assert len(down.stderr.strip().splitlines()) == 1


def test_parse__records_with_their_verdict_and_the_links_it_would_follow(
    tmp_path: Path, shop: str
) -> None:
    spider = write_spider(tmp_path / "shop.py", shop)
    good = run(["parse", product_url(shop, True), "--spider", str(spider), "--json"], tmp_path)
    assert good.returncode == 0, good.stderr
    out = json.loads(good.stdout)
    expected = {r["sku"]: r for r in CATALOG.expected_records()}
    (record,) = out["records"]
    assert record == expected[record["sku"]]
    assert out["quarantined"] == [] and out["crawlfleet_sees"] == "ok"
    assert out["links"] and all(link["url"].startswith(shop) for link in out["links"])

    bad = run(["parse", product_url(shop, False), "--spider", str(spider)], tmp_path)
    assert bad.returncode == 0, bad.stderr
    assert "records (1):\n  quarantined " in bad.stdout
    assert "links to follow (" in bad.stdout


def test_parse__a_raising_callback_prints_its_traceback_and_exits_1(
    tmp_path: Path, shop: str
) -> None:
    (tmp_path / "boom.py").write_text(
        "from crawlfleet import Spider\n\nclass Boom(Spider):\n    name = 'boom'\n"
        f"    start_urls = [{shop + '/'!r}]\n\n"
        "    def parse(self, response):\n        return {'x': 1}\n\n"
        "    def parse_item(self, response):\n        raise LookupError('no such field')\n"
    )
    result = run(["parse", shop + "/", "--spider", "boom.py", "-c", "parse_item"], tmp_path)
    assert result.returncode == 1
    assert "Traceback (most recent call last):" in result.stderr
    assert 'boom.py", line 11, in parse_item' in result.stderr
    assert result.stderr.rstrip().endswith("LookupError: no such field")
    missing = run(["parse", shop + "/", "--spider", "boom.py", "-c", "nope"], tmp_path)
    assert missing.returncode == 1 and "has no callback 'nope'" in missing.stderr


def test_shell__response_request_spider_and_fetch_in_a_python_shell(
    tmp_path: Path, shop: str
) -> None:
    spider = write_spider(tmp_path / "shop.py", shop)
    product = product_url(shop, True)
    script = (
        "print('STATUS', response.status, response.css('title::text').get())\n"
        f"fetch({product!r})\n"
        "print('NOW', request.url, response.css('h1::text').get())\n"
        "print('SPIDER', type(spider).__name__)\n"
    )
    result = subprocess.run(
        [*CRAWLFLEET, "shell", shop + "/", "--spider", str(spider), "--python"],
        cwd=tmp_path,
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "STATUS 200 Home | Crawlfleet Demo Shop" in result.stdout
    name = next(r["name"] for r in CATALOG.expected_records() if product.endswith(r["sku"]))
    assert f"NOW {product} {name}" in result.stdout
    assert "SPIDER Shop" in result.stdout


def test_new__writes_a_spider_and_a_test_that_passes_on_the_saved_page(
    tmp_path: Path, shop: str
) -> None:
    result = run(["new", "myshop", shop + "/", "--dir", "spiders"], tmp_path)
    assert result.returncode == 0, result.stderr
    where = tmp_path / "spiders"
    assert sorted(p.name for p in where.iterdir()) == [
        "myshop.page.html",
        "myshop.py",
        "test_myshop.py",
    ]
    text = (where / "myshop.py").read_text()
    assert "class MyshopPage(BaseModel):" in text and 'item_key = "url"' in text
    assert "response.follow_all(" in text
    generated = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_myshop.py"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert generated.returncode == 0, generated.stdout[-2000:]
    again = run(["new", "myshop", shop + "/", "--dir", "spiders"], tmp_path)
    assert again.returncode == 2 and "already there (--force replaces)" in again.stderr


def test_parse_and_fetch_with_the_browser__see_the_rendered_page(tmp_path: Path, shop: str) -> None:
    spider = write_spider(tmp_path / "shop.py", shop)
    record = CATALOG.expected_records()[0]
    page = f"{shop}/js/product/{record['sku']}"  # the product is drawn by a script
    plain = run(["parse", page, "--spider", str(spider), "--json"], tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["records"] == [], "HTTP sees no product on a JS page"
    rendered = run(["parse", page, "--spider", str(spider), "--json", "--browser"], tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    out = json.loads(rendered.stdout)
    # the price is drawn after a delay the spider does not wait for: valid or quarantined
    (seen,) = out["records"] + [q["data"] for q in out["quarantined"]]
    assert (seen["sku"], seen["name"]) == (record["sku"], record["name"])
    fetched = run(["fetch", page, "--browser", "-o", "dom.html"], tmp_path)
    assert fetched.returncode == 0, fetched.stderr
    assert "(rendered DOM " in fetched.stderr
    assert f'data-category="{record["category"]}"' in (tmp_path / "dom.html").read_text()
