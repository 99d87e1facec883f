"""Monitoring and control against real crawls: ``serve``'s /metrics after a crawl of the demo shop
with faults (captchas, 503s, cut connections, a paced second shop), the fleet's totals of two
worker processes, the dashboard in a real headless Chromium, and serve's refusals."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import re
import signal
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.integration.helpers import demo_shop, run, shop_stats, start, wait_for, write_spider

from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

PRODUCTS_A, PRODUCTS_B = 400, 30
FAULTS_A = ("--captcha", "0.06", "--transient-503", "0.03", "--cut", "0.02")
PACED = "127.0.0.2"
CONFIG = f"""
[worker]
stats_every = 0.3

[traps]
max_depth = 6

[control]
alert_oldest_age = 2.0
alert_validation_rate = 0.01

[domains."{PACED}"]
concurrency = 2
rate = 5.0
"""
#: every metric the issue names, by family (a counter's family drops its _total)
REQUIRED = {
    "crawlfleet_pages",  # pages by outcome
    "crawlfleet_response_bytes",
    "crawlfleet_fetch_duration_seconds",
    "crawlfleet_requests",
    "crawlfleet_queue_backlog",
    "crawlfleet_queue_oldest_age_seconds",
    "crawlfleet_leases_held",
    "crawlfleet_leases_expired",
    "crawlfleet_worker_success_ratio",
    "crawlfleet_route_state",
    "crawlfleet_pool_routes",
    "crawlfleet_route_success_ratio",
    "crawlfleet_route_latency_seconds",
    "crawlfleet_domain_block_ratio",
    "crawlfleet_validation_failure_ratio",
    "crawlfleet_retry_depth",
    "crawlfleet_retry_depth_avg",
    "crawlfleet_dead",
    "crawlfleet_dead_letters",
    "crawlfleet_records",
    "crawlfleet_records_stored",
    "crawlfleet_quarantined",
    "crawlfleet_duplicate_content",
    "crawlfleet_escalations",
    "crawlfleet_tier_moves",
    "crawlfleet_browser_memory_bytes",
    "crawlfleet_workers_alive",
    "crawlfleet_pages_per_second",
    "crawlfleet_alerts",
}


# -- helpers ----------------------------------------------------------------------------------


@contextmanager
def serving(cwd: Path, *args: str, **env: str) -> Iterator[str]:
    """``crawlfleet serve`` on a free loopback port; yields its base URL."""
    proc = start(["serve", "--port", "0", "--sample-every", "0.3", *args], cwd, **env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("serving the dashboard on "), (line, proc.stderr.read())  # type: ignore[union-attr]
        yield line.removeprefix("serving the dashboard on ")
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def get(url: str, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(resp.read().decode())


def api(base: str, path: str) -> Any:
    return json.loads(get(base + path))


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> tuple[set[str], Samples]:
    """The family names and the samples of a /metrics page (prometheus_client's parser)."""
    families = list(text_string_to_metric_families(get(url)))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples
    }
    return {f.name for f in families}, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the ``name`` samples whose labels include ``labels``."""
    return sum(
        v
        for (n, ls), v in samples.items()
        if n == name and all(dict(ls).get(k) == want for k, want in labels.items())
    )


# -- one crawl with faults, watched by serve ----------------------------------------------------


@dataclass
class FaultyCrawl:
    cwd: Path
    serve: str
    host_a: str
    shop_a: dict[str, Any]
    shop_b: dict[str, Any]
    crawl_stderr: str
    #: while the paced shop was crawled: (serve's oldest age, the store's own, backlog, alerts)
    paced: list[tuple[float, float, float, float]] = field(default_factory=list)


def _oldest_in_store(db: Path) -> float | None:
    with sqlite3.connect(db) as conn:
        (oldest,) = conn.execute(
            "SELECT min(created_at) FROM requests WHERE domain = ? AND state = 'queued' "
            "AND ready_at <= ?",
            (PACED, time.time()),
        ).fetchone()
    return None if oldest is None else time.time() - oldest


def _watch_paced(crawl: subprocess.Popen[str], cwd: Path, base: str, into: FaultyCrawl) -> None:
    db = cwd / ".crawlfleet" / "queue.db"
    while crawl.poll() is None:
        _, samples = scrape(base + "/metrics")
        mine = value(samples, "crawlfleet_queue_oldest_age_seconds", domain=PACED)
        store = _oldest_in_store(db)
        if store is not None and mine:
            backlog = value(samples, "crawlfleet_queue_backlog", domain=PACED)
            alerts = value(samples, "crawlfleet_alerts", rule="oldest_queued_age")
            into.paced.append((mine, store, backlog, alerts))
        time.sleep(0.4)


@pytest.fixture(scope="module")
def faulty_crawl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyCrawl]:
    cwd = tmp_path_factory.mktemp("monitoring")
    (cwd / "crawlfleet.toml").write_text(CONFIG)
    with (
        demo_shop("--products", str(PRODUCTS_A), *FAULTS_A) as shop_a,
        demo_shop("--host", PACED, "--products", str(PRODUCTS_B), "--trap") as shop_b,
    ):
        spider = write_spider(cwd / "shop.py", shop_a)
        text = spider.read_text().replace(
            f"start_urls = [{shop_a + '/'!r}]", f"start_urls = [{shop_a + '/'!r}, {shop_b + '/'!r}]"
        )
        spider.write_text(text)
        crawl = start(["crawl", "shop.py", "--workers", "2"], cwd)
        db = cwd / ".crawlfleet" / "queue.db"

        def submitted() -> bool:
            try:
                with sqlite3.connect(db) as conn:
                    return bool(conn.execute("SELECT count(*) FROM requests").fetchone()[0])
            except sqlite3.Error:
                return False

        wait_for(submitted, 60, "the crawl's job in the store")
        with serving(cwd) as base:
            result = FaultyCrawl(cwd, base, str(urlsplit(shop_a).hostname), {}, {}, "")
            _watch_paced(crawl, cwd, base, result)
            _, result.crawl_stderr = stop(crawl)
            assert crawl.returncode == 0, result.crawl_stderr[-3000:]
            result.shop_a, result.shop_b = shop_stats(shop_a), shop_stats(shop_b)
            yield result


def test_metrics__after_a_crawl_with_faults_every_metric_has_the_value_the_crawl_implies(
    faulty_crawl: FaultyCrawl,
) -> None:
    c = faulty_crawl
    # the workers' last reports are in: the counts no longer move
    names, samples = scrape(c.serve + "/metrics")
    assert names >= REQUIRED, sorted(REQUIRED - names)
    a, b = c.shop_a, c.shop_b
    fetched_a = a["requests"] - a["paths"].get("/robots.txt", 0)
    fetched_b = b["requests"] - b["paths"].get("/robots.txt", 0)
    host_a = c.host_a
    assert value(samples, "crawlfleet_pages_total", domain=host_a) == fetched_a
    assert value(samples, "crawlfleet_pages_total", domain=PACED) == fetched_b
    captchas = a["faults"]["captcha"]
    assert captchas > 0
    blocked = value(samples, "crawlfleet_pages_total", domain=host_a, outcome="blocked")
    assert blocked == captchas, "every captcha page is a blocked page, nothing else is"
    assert value(samples, "crawlfleet_pages_total", domain=PACED, outcome="blocked") == 0
    # the recent block rate (counts halved every minute) of a crawl of seconds: close to the
    # share of blocked attempts; none on the shop that served no captcha
    ratio = value(samples, "crawlfleet_domain_block_ratio", domain=host_a)
    assert 0.5 * captchas / fetched_a < ratio < 1.5 * captchas / fetched_a
    assert value(samples, "crawlfleet_domain_block_ratio", domain=PACED) == 0

    cat_a, cat_b = Catalog(PRODUCTS_A), Catalog(PRODUCTS_B)
    invalid = len(cat_a.invalid_skus()) + len(cat_b.invalid_skus())
    job = "demo-shop"
    assert value(samples, "crawlfleet_quarantined_total", job=job) == invalid
    assert value(samples, "crawlfleet_records_total", job=job) == PRODUCTS_A + PRODUCTS_B - invalid
    failure = value(samples, "crawlfleet_validation_failure_ratio", job=job)
    assert failure == pytest.approx(invalid / (PRODUCTS_A + PRODUCTS_B))
    assert value(samples, "crawlfleet_alerts", rule="validation_failure_rate") == 1

    # each faulty page failed once, then came: one retry each
    faults = captchas + a["faults"].get("transient_503", 0) + a["faults"].get("cut", 0)
    assert value(samples, "crawlfleet_retry_depth_sum", job=job) == faults
    finished = value(samples, "crawlfleet_retry_depth_count", job=job)
    assert value(samples, "crawlfleet_retry_depth_avg", job=job) == pytest.approx(faults / finished)
    assert value(samples, "crawlfleet_retry_depth_bucket", job=job, le="0") == finished - faults
    assert value(samples, "crawlfleet_retries_total", job=job) == faults

    with sqlite3.connect(c.cwd / ".crawlfleet" / "queue.db") as db:
        (records,) = db.execute("SELECT count(*) FROM records").fetchone()
        (traps,) = db.execute("SELECT count(*) FROM requests WHERE dead_reason = 'trap'").fetchone()
        (dupes,) = db.execute(
            "SELECT count(*) FROM requests WHERE duplicate_of IS NOT NULL"
        ).fetchone()
    assert value(samples, "crawlfleet_records_stored", job=job) == records
    # the paced shop's endless calendar: its links past max_depth are dead letters (traps)
    assert traps > 0
    assert value(samples, "crawlfleet_dead_letters", job=job, reason="trap") == traps
    assert value(samples, "crawlfleet_traps_total", job=job) == traps
    assert value(samples, "crawlfleet_duplicate_content_total", job=job) == dupes
    assert value(samples, "crawlfleet_leases_expired_total") == 0
    done = fetched_a + fetched_b - faults  # a page per request, and a retry per fault
    assert value(samples, "crawlfleet_requests", job=job, state="done") == done
    assert value(samples, "crawlfleet_fetch_duration_seconds_count") > 0.9 * (fetched_a + fetched_b)
    assert value(samples, "crawlfleet_response_bytes_total") > 1000 * (fetched_a + fetched_b)
    success = value(samples, "crawlfleet_worker_success_ratio", kind="http")
    assert success == pytest.approx(1 - faults / (fetched_a + fetched_b))
    assert value(samples, "crawlfleet_route_state", route="direct", state="healthy") == 1
    assert value(samples, "crawlfleet_workers_alive") == 0, "the crawl's workers said they stopped"

    # the paced shop: requests waited in the store, and serve said how long, as the store did
    assert c.paced, "the paced domain never had a ready request waiting"
    oldest = max(c.paced)
    assert oldest[0] >= 2.0 and oldest[2] > 0
    # read a moment apart (serve's scrape, then the store): on a busy machine seconds apart
    assert all(abs(mine - store) < 5.0 for mine, store, _, _ in c.paced), c.paced
    assert any(alerts >= 1 for *_, alerts in c.paced), "oldest_queued_age never fired"

    # crawl's live line (plain text off a terminal) and status agree with the store
    assert re.search(
        r"pages/s · [\d,]+ queued · [\d,]+ done · [\d,]+ blocked · .* ETA ", c.crawl_stderr
    )
    status = run(["status"], c.cwd, timeout=60).stdout
    assert status.startswith("demo-shop: finished ·")
    assert f"validation failures {invalid / (PRODUCTS_A + PRODUCTS_B):.1%}" in status
    assert f"! demo-shop: {invalid / (PRODUCTS_A + PRODUCTS_B):.1%} of records failed" in status


# -- the dashboard in a real Chromium ------------------------------------------------------------


async def _charts_drawn(page: Any, expected: int) -> list[tuple[int, int]]:
    """(points drawn, canvas size) of every chart once ``expected`` charts show two points or
    more (polled from here: the page's policy forbids the eval a wait_for_function polls with)."""
    deadline = time.monotonic() + 20
    while True:
        drawn: list[tuple[int, int]] = await page.eval_on_selector_all(
            "[data-chart]",
            "cs => cs.map(c => [Number(c.dataset.drawn || 0), c.querySelector('canvas')])"
            ".map(([n, canvas]) => [n, canvas ? canvas.width * canvas.height : 0])",
        )
        if (
            len(drawn) == expected and all(n >= 2 for n, _ in drawn)
        ) or time.monotonic() > deadline:
            return [tuple(d) for d in drawn]  # type: ignore[misc]
        await asyncio.sleep(0.2)


async def test_dashboard__every_page_draws_in_chromium_and_pause_and_replay_work(
    faulty_crawl: FaultyCrawl, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    from crawlfleet.fetch.browser.settings import DEFAULT_EXECUTABLE, BrowserSettings, launch_args

    base = faulty_crawl.serve
    errors: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=DEFAULT_EXECUTABLE,
            args=launch_args(BrowserSettings()),
            chromium_sandbox=False,
            headless=True,
        )
        page = await browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None
        )
        charts = {"/": 6, "/jobs": 1, "/domains": 1, "/workers": 1}
        for path in (
            "/",
            "/jobs",
            "/domains",
            "/routes",
            "/workers",
            "/dead",
            "/quarantine",
            "/quality",
        ):
            await page.goto(base + path)
            await page.wait_for_selector("main[data-rendered]")
            expected = charts.get(path, 0)
            if expected:  # drawn by uPlot, with at least two samples of the history
                drawn = await _charts_drawn(page, expected)
                assert len(drawn) == expected and all(n >= 2 and size for n, size in drawn), drawn
            if path == "/quality":  # the demo crawl's run, profiled field by field
                assert "coverage price" in await page.inner_text("#content")
            if path == "/":
                shot = tmp_path / "dashboard-overview.png"
                await page.screenshot(path=str(shot), full_page=True)
                print(f"dashboard screenshot: {shot}")
                alerts = await page.inner_text("#alerts")
                assert "of records failed validation" in alerts

        await page.goto(base + "/jobs")
        await page.click("button[data-action=pause][data-job=demo-shop]")
        await page.wait_for_selector("button[data-action=resume][data-job=demo-shop]")
        (job,) = api(base, "/api/jobs")
        assert job["state"] == "paused"

        dead_before = len(api(base, "/api/dead?limit=1000"))
        assert dead_before > 0, "the calendar's links past max_depth are dead letters"
        await page.goto(base + "/dead")
        await page.wait_for_selector("button[data-replay]")
        first = await page.get_attribute("button[data-replay]", "data-replay")
        await page.click(f"button[data-replay='{first}']")
        await page.wait_for_selector(f"button[data-replay='{first}']", state="detached")
        assert len(api(base, "/api/dead?limit=1000")) == dead_before - 1
        assert api(base, "/api/jobs")[0]["queued"] == 1, "the replayed request is queued again"

        await page.goto(base + "/quarantine")
        link = await page.wait_for_selector("a[href$='/snapshot']")
        assert link is not None
        response = await page.request.get(base + str(await link.get_attribute("href")))
        assert response.ok and response.headers["content-type"].startswith("text/plain")
        assert "sandbox" in response.headers["content-security-policy"]
        raw = await response.text()
        assert raw.startswith("HTTP/1.1 200") and 'class="product"' in raw
        await browser.close()
    assert errors == []


# -- two worker processes, one store -------------------------------------------------------------


@pytest.fixture
def pg_queue() -> Iterator[str]:
    """A queue URL with a schema of its own, dropped after the test."""
    import secrets
    from urllib.parse import urlunsplit

    import psycopg
    from tests.conftest import PG_DSN

    schema = f"monitor_{secrets.token_hex(4)}"
    try:
        yield urlunsplit(urlsplit(PG_DSN)._replace(query=f"schema={schema}"))
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


COUNTED = (
    "crawlfleet_pages_total",
    "crawlfleet_response_bytes_total",
    "crawlfleet_records_total",
    "crawlfleet_quarantined_total",
    "crawlfleet_leased_total",
    "crawlfleet_fetch_duration_seconds_count",
)


def test_two_worker_processes__serve_totals_are_the_sum_of_their_own_metrics(
    tmp_path: Path, pg_queue: str
) -> None:
    (tmp_path / "crawlfleet.toml").write_text("[worker]\nstats_every = 0.3\n")
    with demo_shop("--products", "600", "--latency", "0.01") as shop:
        spider = write_spider(tmp_path / "shop.py", shop)
        assert run(["submit", str(spider), "--queue", pg_queue], tmp_path).returncode == 0
        workers = [
            start(
                ["worker", "--queue", pg_queue, "--worker-id", f"w{n}", "--metrics-port", "0"],
                tmp_path,
            )
            for n in range(2)
        ]
        try:
            urls = []
            for w in workers:
                assert w.stdout is not None
                line = w.stdout.readline().strip()
                assert " metrics on " in line, line
                urls.append(line.rsplit(" ", 1)[-1])
            with serving(tmp_path, "--queue", pg_queue) as base:
                wait_for(lambda: api(base, "/api/jobs")[0]["finished"], 90, "the crawl to finish")

                def totals_match() -> bool:
                    _, fleet = scrape(base + "/metrics")
                    own = [scrape(u)[1] for u in urls]
                    return all(
                        value(fleet, name) == sum(value(s, name) for s in own) for name in COUNTED
                    )

                wait_for(totals_match, 15, "serve's totals to equal the workers' sums")
                own = [scrape(u)[1] for u in urls]
                assert all(value(s, "crawlfleet_pages_total") > 0 for s in own), "both worked"
                _, fleet = scrape(base + "/metrics")
                records = len(Catalog(600).expected_records())
                assert value(fleet, "crawlfleet_records_total") == records
                assert value(fleet, "crawlfleet_workers_alive", kind="http") == 2
                seen = {w["worker"]: w for w in api(base, "/api/workers")}
                assert set(seen) == {"w0", "w1"} and all(w["alive"] for w in seen.values())
                assert sum(w["pages"] for w in seen.values()) == value(
                    fleet, "crawlfleet_pages_total", outcome="ok"
                ) + value(fleet, "crawlfleet_pages_total", outcome="gone")
                for w in workers:
                    stop(w)
                wait_for(
                    lambda: api(base, "/api/overview")["workers_alive"] == 0, 15, "workers gone"
                )
                _, after = scrape(base + "/metrics")
                assert value(after, "crawlfleet_pages_total") == value(
                    fleet, "crawlfleet_pages_total"
                )
        finally:
            for w in workers:
                stop(w)


def test_frozen_worker__listed_stale_and_flagged_then_alive_again_and_a_finish_is_no_alarm(
    tmp_path: Path, pg_queue: str
) -> None:
    (tmp_path / "crawlfleet.toml").write_text(
        "[worker]\nstats_every = 0.3\n\n[control]\nalive_after = 3.0\n"
    )
    with demo_shop("--products", "300", "--latency", "0.05") as shop:
        spider = write_spider(tmp_path / "shop.py", shop)
        assert run(["submit", str(spider), "--queue", pg_queue], tmp_path).returncode == 0
        workers = [
            start(["worker", "--queue", pg_queue, "--worker-id", f"w{n}"], tmp_path)
            for n in range(2)
        ]
        try:
            with serving(tmp_path, "--queue", pg_queue) as base:

                def state(worker: str) -> str | None:
                    seen = {w["worker"]: w for w in api(base, "/api/workers")}
                    return seen[worker]["state"] if worker in seen else None

                wait_for(lambda: state("w0") == "alive" == state("w1"), 30, "both reporting")
                workers[0].send_signal(signal.SIGSTOP)
                wait_for(lambda: state("w0") == "stale", 30, "the frozen worker to go stale")
                frozen = next(w for w in api(base, "/api/workers") if w["worker"] == "w0")
                overview = api(base, "/api/overview")
                stale = [a for a in overview["alerts"] if a["rule"] == "worker_stale"]
                status = run(["status", "--queue", pg_queue], tmp_path)
                workers[0].send_signal(signal.SIGCONT)
                wait_for(lambda: state("w0") == "alive", 30, "the worker to report again")
                wait_for(lambda: api(base, "/api/jobs")[0]["finished"], 120, "the crawl to finish")
                for w in workers:
                    stop(w)
                wait_for(
                    lambda: {w["state"] for w in api(base, "/api/workers")} == {"stopped"},
                    15,
                    "both workers to say they stopped",
                )
                after = api(base, "/api/overview")
                (job,) = api(base, "/api/jobs")
        finally:
            for w in workers:
                with contextlib.suppress(ProcessLookupError):
                    w.send_signal(signal.SIGCONT)
                stop(w)
    assert frozen["alive"] is False and frozen["silent"] > 3.0
    assert [a["subject"] for a in stale] == ["w0"], overview["alerts"]
    assert "w0 has not reported for" in stale[0]["message"]
    assert overview["workers_stale"] == 1
    assert "worker w0 (http): stale, no report for" in status.stdout, status.stdout[-2000:]
    assert "! worker w0 has not reported for" in status.stdout
    # a clean finish: no worker alive, and nothing to alarm about
    assert (after["workers_alive"], after["workers"], after["workers_stale"]) == (0, 2, 0)
    assert after["alerts"] == []
    assert (job["state"], job["job_state"], job["finished"], job["progress"]) == (
        "finished",
        "running",
        True,
        "finished",
    )


# -- refusals ------------------------------------------------------------------------------------


def _request(base: str, method: str, path: str, **headers: str) -> int:
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        body = "{}" if method == "POST" else None
        conn.request(method, path, body=body, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def test_serve__refuses_open_binds_wrong_tokens_foreign_hosts_and_cross_origin_posts(
    tmp_path: Path,
) -> None:
    bare = run(["serve", "--host", "0.0.0.0"], tmp_path, timeout=60)
    assert bare.returncode == 2
    assert bare.stderr.strip().splitlines() == [
        "error: serve --host 0.0.0.0 needs a token ([control] token or --token): anyone who "
        "reaches the port could pause, cancel and replay jobs"
    ]
    assert run(["db", "upgrade"], tmp_path, timeout=60).returncode == 0
    with serving(tmp_path, CRAWLFLEET_CONTROL_TOKEN="s3cret") as base:
        host = urlsplit(base).netloc
        assert _request(base, "GET", "/api/overview", Host=host) == 401
        assert _request(base, "GET", "/metrics", Host=host, Authorization="Bearer wrong") == 401
        assert _request(base, "GET", "/metrics", Host=host, Authorization="Bearer s3cret") == 200
        basic = "Basic " + __import__("base64").b64encode(b"me:s3cret").decode()
        assert _request(base, "GET", "/", Host=host, Authorization=basic) == 200
        foreign = f"evil.example:{urlsplit(base).port}"
        assert (
            _request(base, "GET", "/api/overview", Host=foreign, Authorization="Bearer s3cret")
            == 400
        )
        conn = http.client.HTTPConnection("127.0.0.1", urlsplit(base).port, timeout=10)
        conn.request("GET", "/", headers={"Host": foreign})
        refused = conn.getresponse().read().decode()
        conn.close()
        assert f"unknown Host header '{foreign}'" in refused  # and what to do about it
        assert "add it to [control] allowed_hosts in crawlfleet.toml" in refused
        post = {"Host": host, "Content-Type": "application/json", "Authorization": "Bearer s3cret"}
        assert (
            _request(base, "POST", "/api/jobs/nope/pause", **post, Origin="http://evil.example")
            == 403
        )
        assert (
            _request(
                base, "POST", "/api/jobs/nope/pause", **post, **{"Sec-Fetch-Site": "cross-site"}
            )
            == 403
        )
        assert (
            _request(base, "POST", "/api/jobs/nope/pause", **post, Origin=f"http://{host}") == 404
        )
        assert (
            _request(base, "POST", "/api/jobs/nope/pause", **{**post, "Authorization": basic})
            == 401
        )
        with pytest.raises(urllib.error.HTTPError):
            get(base + "/api/jobs", token="wrong")
