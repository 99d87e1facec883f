"""Politeness and failure handling end to end: the real CLI crawling the demo shop with its fault
switches on, over real sockets. Each test keeps the crawl small (200 products) and the retry base
short so it stays well under a minute."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from tests.integration.helpers import (
    admin,
    demo_shop,
    read_jsonl,
    run,
    shop_stats,
    start,
    wait_for,
    write_spider,
)

from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

PRODUCTS = 200
CONFIG = """\
[retry]
base = 0.2
cap = 2.0

[pacing]
robots_recheck = 1.0
"""


def setup(tmp_path: Path, base: str, extra: str = "", **spider: object) -> Path:
    (tmp_path / "crawlfleet.toml").write_text(CONFIG + extra)
    return write_spider(tmp_path / "shop.py", base, **spider)


def crawl(tmp_path: Path, spider: Path, workers: int = 2) -> subprocess.CompletedProcess[str]:
    result = run(
        ["crawl", str(spider), "--workers", str(workers), "-o", "records.jsonl"],
        tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def expected_skus() -> set[str]:
    return {r["sku"] for r in Catalog(PRODUCTS).expected_records()}


def got_skus(tmp_path: Path) -> list[str]:
    return [r["sku"] for r in read_jsonl(tmp_path / "records.jsonl")]


def status_json(tmp_path: Path) -> dict[str, object]:
    result = run(["status", "--json"], tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    (job,) = json.loads(result.stdout)
    return job  # type: ignore[no-any-return]


def test_rate_limit__the_crawl_stays_under_the_servers_limit_after_the_first_429(
    tmp_path: Path,
) -> None:
    limit = 40
    with demo_shop("--products", str(PRODUCTS), "--rate-limit", str(limit)) as base:
        spider = setup(tmp_path, base)
        crawl(tmp_path, spider)
        stats = shop_stats(base)

    skus = got_skus(tmp_path)
    assert len(skus) == len(set(skus)) and set(skus) == expected_skus()
    refused = stats["faults"].get("rate_limited", 0)
    assert refused > 0, "the crawl never reached the limit"
    # The shop's limit is a sliding second of accepted requests; what the crawl sent, accepted
    # or not, once its first 429 was answered (the hold, the start slots already handed out):
    timeline = stats["timeline"]
    first = next(t for t, status in timeline if status == 429)
    after = [(t, status) for t, status in timeline if t > first + 2.0]
    assert after, "the crawl ended right after its first 429"
    starts = [t for t, _ in after]
    peak = max(sum(1 for u in starts[i:] if u < t + 1.0) for i, t in enumerate(starts))
    again = sum(1 for _, status in after if status == 429)
    print(f"first 429 at +{first:.1f}s, {refused} in all, {again} after it; peak {peak}/s")
    assert peak <= limit + 2, "past the limit but for the odd probe"
    assert again <= 2, "a 429 teaches the pace: a probe now and then meets the limit, no more"
    for reason in ("blocked", "too_many_retries"):
        dead = run(["dead", "list", "--reason", reason], tmp_path, timeout=60)
        assert dead.stdout.strip() == "no dead requests", dead.stdout


def test_trap__an_endless_calendar_is_bounded_and_counted_as_traps(tmp_path: Path) -> None:
    with demo_shop("--products", str(PRODUCTS), "--trap") as base:
        spider = setup(tmp_path, base, "\n[traps]\nmax_depth = 12\n", pattern_budget=400)
        crawl(tmp_path, spider)
        stats = shop_stats(base)

    assert set(got_skus(tmp_path)) == expected_skus()
    calendar = [p for p in stats["paths"] if p.startswith("/calendar/")]
    assert 1 <= len(calendar) <= 12, f"{len(calendar)} calendar pages fetched"
    job = status_json(tmp_path)
    assert job["traps"] >= 1
    assert job["traps_by_domain"] == {"127.0.0.1": job["traps"]}
    dead = run(["dead", "list", "--reason", "trap"], tmp_path, timeout=60)
    assert "/calendar/" in dead.stdout and "trap: depth" in dead.stdout
    shown = run(["status"], tmp_path, timeout=60)
    assert f"traps by domain: 127.0.0.1 {job['traps']}" in shown.stdout


def test_budgets__a_crawl_short_of_one_says_which_and_exits_3__none_is_no_limit(
    tmp_path: Path,
) -> None:
    products = {r["sku"] for r in Catalog(PRODUCTS).expected_records()}
    with demo_shop("--products", str(PRODUCTS)) as base:
        # a URL-shape budget below the catalogue: the crawl finishes, short of it, and says so
        spider = setup(tmp_path, base, pattern_budget=50)
        short = run(["crawl", str(spider), "-o", "records.jsonl"], tmp_path, timeout=120)
        assert short.returncode == 3, short.stderr[-3000:]
        assert "finished, short of its budgets" in short.stderr, short.stderr[-3000:]
        left_out = re.search(
            r"(\d+) URLs over the URL shape budget of 127.0.0.1/product/", short.stderr
        )
        assert left_out is not None, short.stderr[-3000:]
        assert int(left_out.group(1)) == status_json(tmp_path)["traps"]
        assert "(raise pattern_budget, or None for no limit)" in short.stderr
        assert 0 < len(got_skus(tmp_path)) < len(products)
        # None on the spider is no limit, whatever [traps] says (it was "the default")
        (tmp_path / "none").mkdir()
        extra = "\n[traps]\npattern_budget = 50\n"
        spider = setup(tmp_path / "none", base, extra, pattern_budget=None)
        whole = run(["crawl", str(spider), "-o", "records.jsonl"], tmp_path / "none", timeout=120)
        assert whole.returncode == 0, whole.stderr[-3000:]
        assert "budget" not in whole.stderr
        assert set(got_skus(tmp_path / "none")) == products


def test_transient_503s_and_cut_connections__retried_later_histogram_matches_the_server(
    tmp_path: Path,
) -> None:
    faults = ("--transient-503", "0.05", "--cut", "0.05")
    with demo_shop("--products", str(PRODUCTS), *faults) as base:
        spider = setup(tmp_path, base)
        crawl(tmp_path, spider)
        stats = shop_stats(base)

    skus = got_skus(tmp_path)
    assert len(skus) == len(set(skus)) and set(skus) == expected_skus()
    failed_once = {p for p, n in stats["pages"].items() if n == 2 and p != "/robots.txt"}
    assert stats["faults"]["transient_503"] + stats["faults"]["cut"] == len(failed_once) > 0
    assert not [p for p, n in stats["pages"].items() if n > 2 and p != "/robots.txt"]
    job = status_json(tmp_path)
    histogram = {int(k): v for k, v in job["attempts_histogram"].items()}  # type: ignore[attr-defined]
    assert histogram.get(2, 0) == len(failed_once), histogram
    assert set(histogram) <= {1, 2}
    assert job["retried"] == len(failed_once)
    shown = run(["status"], tmp_path, timeout=60).stdout
    assert re.search(rf"attempts 1:\d+ 2:{len(failed_once)}\b", shown), shown


def test_always_500__dead_after_max_attempts_shown_then_replayed_after_the_fix(
    tmp_path: Path,
) -> None:
    catalog = Catalog(PRODUCTS)
    product = next(iter(catalog.expected_records()))["sku"]
    path = f"/product/{product}"
    with demo_shop("--products", str(PRODUCTS), "--always-500", path) as base:
        spider = setup(tmp_path, base, max_attempts=3)
        crawl(tmp_path, spider)
        assert product not in got_skus(tmp_path)
        assert shop_stats(base)["pages"][path] == 3
        listed = run(["dead", "list", "--reason", "too_many_retries"], tmp_path, timeout=60)
        (line,) = listed.stdout.splitlines()
        assert path in line and "3 attempts" in line
        request_id = line.split("\t")[0]
        shown = run(["dead", "show", request_id], tmp_path, timeout=60).stdout
        attempts = [x for x in shown.splitlines() if x.strip().startswith("#")]
        assert len(attempts) == 3, shown
        for n, text in enumerate(attempts, 1):
            assert text.strip().startswith(f"#{n} ")
            assert "retryable_error status=500 route=direct HTTP 500" in text

        admin(base, "fix")
        replayed = run(["dead", "replay", request_id], tmp_path, timeout=60)
        assert "1 requests queued again" in replayed.stdout
        crawl(tmp_path, spider, workers=1)
        assert shop_stats(base)["pages"][path] == 4

    assert set(got_skus(tmp_path)) == expected_skus()
    job = status_json(tmp_path)
    assert job["done"] >= PRODUCTS and job["finished"]


def test_robots_503__holds_the_host_until_robots_answers_then_the_crawl_completes(
    tmp_path: Path,
) -> None:
    with demo_shop("--products", str(PRODUCTS), "--robots-503") as base:
        spider = setup(tmp_path, base, max_attempts=2)
        proc = start(["crawl", str(spider), "--workers", "2", "-o", "records.jsonl"], tmp_path)
        try:
            wait_for(lambda: shop_stats(base)["paths"].get("/robots.txt", 0) >= 6, 30, "rechecks")
            held = shop_stats(base)
            assert set(held["paths"]) == {"/robots.txt"}, "nothing fetched while robots is down"
            time.sleep(3)  # an outage longer than max_attempts rechecks kills nothing
            outage = shop_stats(base)["paths"]["/robots.txt"]
            assert outage <= 2 * (6 + 2 * 4), "robots.txt is re-checked, not hammered"
            admin(base, "robots-ok")
            _, err = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err[-3000:]
    assert set(got_skus(tmp_path)) == expected_skus()
    dead = run(["dead", "list"], tmp_path, timeout=60).stdout.splitlines()
    assert dead == ["no dead requests"] or all("\trobots\t" in line for line in dead), dead
