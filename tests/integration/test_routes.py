"""Routes over real proxies: lanes per (domain, route), breakers, and the planner's arithmetic.

The demo shop limits each client address to N requests in any sliding second (429 beyond, and
captcha pages for an address that keeps pushing). Each tinyproxy leaves from its own address
(127.0.0.2, 127.0.0.3, ...), so the shop tells the routes apart: more routes are more
throughput, each route within the shop's limit, and ``crawlfleet plan --json`` predicts what a
crawl through them achieves.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.integration.helpers import demo_shop, read_jsonl, run, shop_stats
from tests.proxies import ProxyFleet, proxy_fleet

from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

LIMIT = 5  # requests per client address per sliding second, at the shop
RATE = 4.0  # what the pool declares safe per route (crawlfleet.toml: rate)
#: products of the one-route and the eight-route crawl: each long enough for a steady pace (a
#: lane takes up to the lease horizon's worth of start slots: a shallow queue feeds few lanes)
PRODUCTS = {1: 60, 8: 300}

SPIDER = """
from crawlfleet.demo.spider import DemoShop


class Shop(DemoShop):
    start_urls = [{start!r}]
    domain_concurrency = 64
"""


def _config(tmp: Path, proxies: list[str], **pool: Any) -> None:
    extra = "".join(f"{k} = {v!r}\n" for k, v in pool.items())
    (tmp / "crawlfleet.toml").write_text(
        '[[routes.pool]]\nname = "direct"\nenabled = false\n\n'
        f'[[routes.pool]]\nname = "dc"\nproxies = {json.dumps(proxies)}\nrate = {RATE}\n{extra}'
    )


def _crawl(tmp: Path, base: str) -> subprocess.CompletedProcess[str]:
    (tmp / "shop.py").write_text(SPIDER.format(start=base + "/"))
    return run(["crawl", "shop.py", "-o", "out.jsonl"], tmp, timeout=240)


def _plan(tmp: Path, *args: str) -> dict[str, Any]:
    out = run(["plan", *args, "--json"], tmp)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _measured(stats: dict[str, Any]) -> float:
    """Pages/s the shop answered in the bulk of the crawl: between its 10th and 90th percentile
    requests (the start, while the crawl discovers its first pages, and the tail of the last
    few are left out: a steady pace is what routes and the planner are about)."""
    arrivals = sorted(t for t, _ in stats["timeline"])
    low, high = arrivals[len(arrivals) // 10], arrivals[len(arrivals) * 9 // 10]
    return (len(arrivals) * 8 // 10) / (high - low)


@pytest.fixture
def fleet(tmp_path: Path) -> Any:
    with proxy_fleet(tmp_path / "proxies", http=8, auth=(0,)) as proxies:
        yield proxies


def test_routes__eight_proxies_eight_times_one__each_within_its_limit_all_records_once(
    tmp_path: Path, fleet: ProxyFleet
) -> None:
    measured, predicted = {}, {}
    for n in (1, 8):
        want = {r["sku"] for r in Catalog(PRODUCTS[n]).expected_records()}
        work = tmp_path / f"routes-{n}"
        work.mkdir()
        with demo_shop("--products", str(PRODUCTS[n]), "--rate-limit", str(LIMIT),
                       "--captcha-after", "20") as base:  # fmt: skip
            _config(work, [p.url for p in fleet.http[:n]])
            (work / "shop.py").write_text(SPIDER.format(start=base + "/"))
            predicted[n] = _plan(work, "shop.py")["pages_per_s"]  # before: a prediction
            result = _crawl(work, base)
            assert result.returncode == 0, result.stderr[-3000:]
            stats = shop_stats(base)
        records = read_jsonl(work / "out.jsonl")
        assert len(records) == len({r["sku"] for r in records}) == len(want), "every record once"
        assert {r["sku"] for r in records} == want, "no captcha page became a record"
        clients = {a: c for a, c in stats["per_client"].items() if a != "127.0.0.1"}
        assert len(clients) == n, f"the shop saw {sorted(clients)}"
        assert all(c["max_accepted_per_second"] <= LIMIT for c in clients.values())
        assert sum(c["captchas"] for c in clients.values()) == 0, "no route earned a captcha"
        too_many = stats["statuses"].get("429", 0)
        if n == 8:
            assert too_many <= 0.01 * stats["requests"], stats["statuses"]
        else:  # a short crawl: the one or two probes that find the limit are over 1% of it
            assert too_many <= 3, stats["statuses"]
        measured[n] = _measured(stats)
        after = _plan(work)  # from the store: what the crawl's lanes observed
        # the lanes' push-back as the store observed it: the few 429s bounded above, no captcha
        assert after["domains"][0]["block_rate"] <= 0.02 and after["domains"][0]["backlog"] == 0
        shown = [result.stdout, result.stderr, json.dumps(after)]
        for args in (
            ["status"],
            ["status", "--json"],
            ["dead", "list"],
            ["export", "-o", "x.jsonl"],
        ):
            out = run(args, work)
            assert out.returncode == 0, (args, out.stderr)
            shown += [out.stdout, out.stderr]
        _nowhere(fleet.http[0].password, work, shown)
    assert measured[8] >= 5 * measured[1], measured
    for n in (1, 8):
        assert abs(predicted[n] - measured[n]) <= 0.25 * measured[n], (n, predicted, measured)


def test_breaker__a_killed_proxy_is_out_within_seconds_and_back_once_restarted(
    tmp_path: Path, fleet: ProxyFleet
) -> None:
    """One of three routes dies mid-crawl: nothing is lost (its requests go by the others, no
    attempt used), and once it is back its breaker lets it carry requests again."""
    work = tmp_path / "killed"
    work.mkdir()
    routes = fleet.http[1:4]
    with demo_shop("--products", "200", "--latency", "0.03") as base:
        _config(work, [p.url for p in routes], concurrency=4)
        with (work / "crawlfleet.toml").open("a") as fh:  # probe a dead route every second
            fh.write("\n[pacing]\nbreaker_cooldown = 1.0\nbreaker_cooldown_cap = 2.0\n")
        (work / "shop.py").write_text(SPIDER.format(start=base + "/"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "crawlfleet", "crawl", "shop.py", "-o", "out.jsonl"],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait(lambda: shop_stats(base)["requests"] > 30, 60, "the crawl to start")
            routes[0].stop()
            _wait(lambda: shop_stats(base)["requests"] > 120, 60, "the crawl to go on")
            routes[0].start()
            before = shop_stats(base)["clients"].get(routes[0].source, 0)
            _, err = proc.communicate(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err[-3000:]
        stats = shop_stats(base)
    records = read_jsonl(work / "out.jsonl")
    assert {r["sku"] for r in records} == {r["sku"] for r in Catalog(200).expected_records()}
    dead = run(["dead", "list"], work)
    assert "no dead requests" in dead.stdout, dead.stdout
    assert stats["clients"].get(routes[0].source, 0) > before, "back in use once restarted"


def test_breaker__a_proxy_serving_only_captchas_is_taken_out_and_the_block_rate_shows_it(
    tmp_path: Path, fleet: ProxyFleet
) -> None:
    """One of three routes is flagged by the shop (captchas whatever it asks): its breaker
    opens, its requests go by the other two without using up attempts, no captcha page is a
    record, and the domain's block rate and the pool's health say what happened."""
    import re
    import sqlite3

    work = tmp_path / "captchas"
    work.mkdir()
    flagged, *good = routes = fleet.http[4:7]
    with demo_shop("--products", "80", "--captcha-client", flagged.source) as base:
        _config(work, [p.url for p in routes], concurrency=4)
        with (work / "crawlfleet.toml").open("a") as fh:  # no probe within the test
            fh.write("\n[pacing]\nbreaker_cooldown = 300.0\n")
        result = _crawl(work, base)
        assert result.returncode == 0, result.stderr[-3000:]
        stats = shop_stats(base)
    records = read_jsonl(work / "out.jsonl")
    want = {r["sku"] for r in Catalog(80).expected_records()}
    assert len(records) == len(want) and {r["sku"] for r in records} == want
    captchas = stats["faults"].get("captcha_wall", 0)
    assert 0 < captchas == stats["clients"][flagged.source], "the flagged route met captchas"
    assert captchas <= 20, f"the breaker took the route out after a few: {captchas}"
    assert all(stats["clients"][p.source] > 30 for p in good), stats["clients"]
    with sqlite3.connect(work / ".crawlfleet" / "queue.db") as db:
        (most,) = db.execute("SELECT max(attempts) FROM requests").fetchone()
        (blocked,) = db.execute(
            "SELECT count(*) FROM attempts WHERE outcome = 'blocked'"
        ).fetchone()
    assert most == 1, "a block through a route used up no attempt of its request"
    assert blocked == captchas, "every captcha page was a block, none a record"
    status = run(["status"], work)
    domain = next(line for line in status.stdout.splitlines() if "127.0.0.1: backlog" in line)
    rate = float(re.search(r"recent block rate ([\d.]+)%", domain).group(1))  # type: ignore[union-attr]
    assert rate > 0, domain
    assert re.search(r"dc 2 healthy, 1 open", status.stdout), status.stdout
    after = _plan(work)
    assert after["domains"][0]["block_rate"] > 0


def test_credentials__a_proxy_password_is_nowhere_in_a_postgresql_store(
    tmp_path: Path, fleet: ProxyFleet
) -> None:
    """The fleet store too: a crawl through a proxy with a password, then a dump of its
    schema (requests, attempts, routes, lanes, sessions, records, events) and what status,
    plan and export show."""
    import secrets
    from urllib.parse import urlsplit, urlunsplit

    import psycopg
    from tests.conftest import PG_DSN

    schema = f"routes_{secrets.token_hex(4)}"
    queue = urlunsplit(urlsplit(PG_DSN)._replace(query=f"schema={schema}"))
    proxy = fleet.http[0]
    work = tmp_path / "pg"
    work.mkdir()
    try:
        with demo_shop("--products", "15") as base:
            _config(work, [proxy.url])
            (work / "shop.py").write_text(SPIDER.format(start=base + "/"))
            result = run(["crawl", "shop.py", "-o", "out.jsonl", "--queue", queue], work)
            assert result.returncode == 0, result.stderr[-3000:]
            assert shop_stats(base)["clients"].get(proxy.source, 0) > 15, "it went by the proxy"
        dump = subprocess.run(
            ["pg_dump", "--schema", schema, "--data-only", PG_DSN],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"COPY {schema}.routes " in dump and f"COPY {schema}.requests " in dump
        shown = [result.stdout, result.stderr, dump]
        for args in (["status"], ["plan", "--json"], ["export", "-o", "x.jsonl"]):
            out = run([*args, "--queue", queue], work)
            assert out.returncode == 0, (args, out.stderr)
            shown += [out.stdout, out.stderr]
        _nowhere(proxy.password, work, shown)
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _nowhere(secret: str | None, work: Path, shown: list[str]) -> None:
    """``secret`` in none of ``work``'s files (logs, store, WARC decompressed, exports) but the
    user's own config, and in none of the texts ``shown`` (output, status, plan)."""
    import gzip

    assert secret
    files = 0
    for path in work.rglob("*"):
        if path.is_file() and path.name != "crawlfleet.toml":
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            assert secret.encode() not in data, path
            files += 1
    assert files >= 4, "the store, the WARC and the exports were looked at"
    assert list(work.rglob("*.warc.gz")), "the WARC was looked at"
    assert not [text for text in shown if secret in text]


def _wait(predicate: Any, timeout: float, what: str) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


PINNED = """
from crawlfleet.demo.spider import DemoShop, extract_product


class Shop(DemoShop):
    start_urls = [{start!r}]
    route_pools = ["a"]

    def parse(self, response):
        yield from response.follow_all("nav.main a, a.next")  # (the mega-menu links products)
        # product pages leave through pool b (another tier, a pool the spider does not use)
        yield from response.follow_all("a.product-link", pool="b")
        if response.url.endswith("/"):
            yield response.follow("/?via=nowhere", pool="nowher")  # refused alone, in one line
        record = extract_product(response)
        if record is not None:
            yield record
"""


def test_pinned__requests_pinned_to_a_pool_all_leave_through_its_proxy(
    tmp_path: Path, fleet: ProxyFleet
) -> None:
    """``Request(pool="b")``: every product page goes through pool b's proxy (it leaves from its
    own address), nothing else does, and the spider's own pool carries the rest."""
    a, b = fleet.http[1], fleet.http[2]
    products = 40
    want = {r["sku"] for r in Catalog(products).expected_records()}
    (tmp_path / "crawlfleet.toml").write_text(
        '[[routes.pool]]\nname = "direct"\nenabled = false\n\n'
        f'[[routes.pool]]\nname = "a"\nproxies = ["{a.url}"]\n\n'
        f'[[routes.pool]]\nname = "b"\nproxies = ["{b.url}"]\ntier = 1\n'
    )
    with demo_shop("--products", str(products)) as base:
        (tmp_path / "shop.py").write_text(PINNED.format(start=base + "/"))
        result = run(["crawl", "shop.py", "-o", "out.jsonl"], tmp_path, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        sections = shop_stats(base)["sections"]
    records = read_jsonl(tmp_path / "out.jsonl")
    assert {r["sku"] for r in records} == want and len(records) == len(want)
    through_a, through_b = sections.get(a.source, {}), sections.get(b.source, {})
    assert through_b.get("product", 0) >= len(want), sections
    assert set(through_b) <= {"product", "robots.txt"}, f"only pinned requests by b: {sections}"
    assert "product" not in through_a and through_a.get("category"), sections
    # robots.txt is fetched directly (the robots gate does not take a route)
    assert set(sections) - {a.source, b.source} <= {"127.0.0.1"}, sections
    assert set(sections.get("127.0.0.1", {})) <= {"robots.txt"}, sections
    refused = [line for line in result.stderr.splitlines() if "nowher" in line]
    assert refused and "no route pool named 'nowher'" in refused[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
