"""Slow fetches, poison pages, graceful stops and a hard kill of everything, on both backends.

Real ``crawlfleet`` processes against the demo shop (a subprocess) and a real store. Where a
fetch must outlast its lease, or the SIGTERM grace period must be short, the worker runs under
``tests.chaos.slow_worker`` (the real worker with its HTTP fetch delayed for marked URLs).
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest

from crawlfleet.demo.catalog import Catalog
from tests.chaos.harness import (
    Store,
    children,
    finish,
    new_store,
    reaped,
    run,
    spider_file,
    start,
    wait_for,
    worker_args,
    write_config,
)
from tests.chaos.test_worker_kills import JOB, assert_every_record_once, export, submit
from tests.conftest import BACKENDS
from tests.integration.helpers import demo_shop, shop_stats


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    with new_store(request.param, tmp_path) as s:
        yield s


# -- F4: a live slow fetch keeps its lease; a lease shorter than the fetch timeout is refused ----


@pytest.mark.slow
def test_slow_fetch_with_heartbeats__is_never_re_leased(store: Store, tmp_path: Path) -> None:
    # the fetch outlasts three leases; heartbeats come every ttl/3. The ttl leaves a heartbeat
    # two late ones of slack: a loaded machine (PostgreSQL on the same two cores) may hold a store
    # call for a few seconds, which is no lost heartbeat of the worker
    ttl, delay = 5.0, 16.0
    slow_path = "/product/CF-000003"
    catalog = Catalog(60)
    write_config(tmp_path, lease_ttl=ttl, fetch_timeout=ttl)
    with demo_shop("--products", "60") as base:
        submit(store, tmp_path, spider_file(tmp_path / "shop.py", base))
        env = {"CHAOS_SLOW_MARK": slow_path, "CHAOS_SLOW_DELAY": str(delay)}
        # both workers are slow on that page: whichever leases it holds it, the other keeps
        # leasing (and rescuing whatever expired) the whole time
        workers = [start(worker_args(store, JOB), tmp_path, slow=True, **env) for _ in range(2)]
        with reaped(*workers):
            for w in workers:
                err = finish(w, 60)
                assert w.returncode == 0, err[-3000:]
                assert "leases were lost" not in err
        stats = shop_stats(base)

    rows = store.rows(
        # the shop links it with a session id; the request keeps the URL as linked
        "SELECT id, state, attempts, lease_token FROM requests WHERE url LIKE ?",
        (f"%{slow_path}%",),
    )
    assert [r[1:] for r in rows] == [("done", 1, 1)], "the slow page was leased again"
    assert store.rows("SELECT * FROM attempts WHERE request_id = ?", (rows[0][0],)) == []
    assert stats["pages"][slow_path] == 1
    assert_every_record_once(export(store, tmp_path), catalog)


@pytest.mark.parametrize(
    ("config", "env", "args"),
    [
        ({"lease_ttl": 5, "fetch_timeout": 10}, {}, ["worker"]),
        ({"lease_ttl": 5, "fetch_timeout": 10}, {}, ["crawl", "shop.py"]),
        ({"lease_ttl": 5, "fetch_timeout": 10}, {}, ["submit", "shop.py"]),
        ({}, {"CRAWLFLEET_LEASE_TTL": "5"}, ["worker"]),
        ({}, {}, ["crawl", "shop.py", "--lease-ttl", "5"]),
    ],
)
def test_lease_shorter_than_fetch_timeout__refused_at_start_with_one_line(
    store: Store, tmp_path: Path, config: dict, env: dict, args: list[str]
) -> None:
    if config:
        write_config(tmp_path, **config)
    spider_file(tmp_path / "shop.py", "http://127.0.0.1:9")
    result = run_env([*args, "--queue", store.url], tmp_path, env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: lease_ttl (5s) is shorter than fetch_timeout")
    assert "Traceback" not in result.stderr
    assert store.rows("SELECT * FROM jobs") == [], "nothing reached the store"


def run_env(args: list[str], cwd: Path, env: dict[str, str]):
    import os
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "crawlfleet", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, **env),
        stdin=subprocess.DEVNULL,
    )


# -- F5: a page that kills its worker every time is given up, the crawl still finishes -----------


POISON = "/product/CF-000004"
POISON_PARSE = f"""
    def parse(self, response):
        if {POISON!r} in response.url:  # the shop may link it with a session id
            os._exit(1)  # the worker dies here, every time, before it can report
        yield from super().parse(response)
"""


@pytest.mark.slow
def test_page_that_crashes_its_worker__dead_worker_lost_after_max_attempts__crawl_finishes(
    store: Store, tmp_path: Path
) -> None:
    catalog = Catalog(100)
    write_config(tmp_path, lease_ttl=2, fetch_timeout=2)
    with demo_shop("--products", "100") as base:
        # one request of the domain in flight at a time: a crash takes down the poison page
        # only, not innocent pages that happened to share its worker
        spider = spider_file(
            tmp_path / "shop.py", base, POISON_PARSE, max_attempts=3, domain_concurrency=1
        )
        out = tmp_path / "crawl.jsonl"
        result = run(
            [
                "crawl",
                str(spider),
                "--workers",
                "2",
                "--queue",
                store.url,
                "--job",
                JOB,
                "-o",
                str(out),
            ],
            tmp_path,
            timeout=110,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        stats = shop_stats(base)
    listed = run(["dead", "list", "--queue", store.url, "--reason", "worker_lost"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert len(lines) == 1, listed.stdout
    _, job, reason, attempts, url, error = lines[0].split("\t")
    assert (job, reason, attempts) == (JOB, "worker_lost", "3 attempts")
    assert POISON in url
    assert "lease expired" in error
    assert stats["pages"][POISON] == 3, "fetched once per attempt, then given up"
    others = store.rows("SELECT dead_reason FROM requests WHERE state = 'dead'")
    assert sorted(r for (r,) in others) == ["worker_lost"] + ["robots"] * (len(others) - 1)
    expected = [r for r in catalog.expected_records() if not POISON.endswith(r["sku"])]
    records = export(store, tmp_path)
    assert len(records) == len(expected)
    assert sorted(r["sku"] for r in records) == sorted(r["sku"] for r in expected)


# -- F7: SIGTERM drains; F9: kill -9 of everything, then a restart, ends complete ----------------


@pytest.mark.slow
def test_sigterm__finishes_in_flight_work_releases_the_rest_and_exits_0(
    store: Store, tmp_path: Path
) -> None:
    catalog = Catalog(300)
    grace = 2.0
    write_config(tmp_path, lease_ttl=3, fetch_timeout=2)
    # products CF-000001..099 never answer within the grace period; the others take 1 s
    env = {"CHAOS_SLOW_MARK": "/product/CF-0000", "CHAOS_SLOW_DELAY": "60", "CHAOS_GRACE": "2"}
    with demo_shop("--products", "300", "--slow", "1.0", "--slow-delay", "1.0") as base:
        submit(store, tmp_path, spider_file(tmp_path / "shop.py", base, domain_concurrency=500))
        w = start(worker_args(store, JOB, "--worker-id", "draining"), tmp_path, slow=True, **env)
        with reaped(w):

            def held() -> list[tuple[int, str, int]] | None:
                rows = store.rows(
                    "SELECT id, url, attempts FROM requests "
                    "WHERE state = 'leased' AND lease_owner = 'draining'"
                )
                stuck = [r for r in rows if "/product/CF-0000" in r[1]]
                return rows if len(stuck) >= 10 and len(rows) - len(stuck) >= 10 else None

            before = wait_for(held, 60, "leases of both kinds")
            w.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            err = finish(w, 30)
            took = time.monotonic() - sent
        assert w.returncode == 0, err[-3000:]
        assert took < grace + 3, f"the worker took {took:.1f}s to stop"
        assert store.rows("SELECT id FROM requests WHERE lease_owner = 'draining'") == []
        assert store.value("SELECT count(*) FROM requests WHERE state = 'leased'") == 0
        ids = ",".join(str(i) for i, _, _ in before)
        after = {
            i: (state, attempts)
            for i, state, attempts in store.rows(
                f"SELECT id, state, attempts FROM requests WHERE id IN ({ids})"
            )
        }
        for rid, url, attempts in before:
            if "/product/CF-0000" in url:  # released untried: the attempt is not counted
                assert after[rid] == ("queued", attempts - 1), (url, after[rid])
            else:  # finished within the grace period
                assert after[rid] == ("done", attempts), (url, after[rid])
        assert store.rows(f"SELECT * FROM attempts WHERE request_id IN ({ids})") == []
        # another worker finishes the crawl; the released pages end with one attempt each
        w2 = start(worker_args(store, JOB), tmp_path)
        with reaped(w2):
            err = finish(w2, 60)
            assert w2.returncode == 0, err[-3000:]
    released = [rid for rid, url, _ in before if "/product/CF-0000" in url]
    rows = store.rows(
        "SELECT state, attempts FROM requests WHERE id IN (" + ",".join(map(str, released)) + ")"
    )
    assert set(rows) == {("done", 1)}
    assert_every_record_once(export(store, tmp_path), catalog)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_of_every_process_then_restart__full_result_set_no_duplicates(
    store: Store, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    catalog = Catalog(200)
    write_config(tmp_path, lease_ttl=2, fetch_timeout=2)
    out = tmp_path / "crawl.jsonl"
    with demo_shop("--products", "200") as base:
        spider = spider_file(tmp_path / "shop.py", base)
        cmd = [
            "crawl",
            str(spider),
            "--workers",
            "2",
            "--queue",
            store.url,
            "--job",
            JOB,
            "-o",
            str(out),
        ]
        # a random point of the crawl: before the first page is done, or anywhere up to the end
        point = rng.choice([0, rng.randrange(1, 220)])
        coordinator = start(cmd, tmp_path)
        with reaped(coordinator):
            wait_for(lambda: len(children(coordinator.pid)) == 2, 30, f"seed {seed}: workers")
            wait_for(
                lambda: (
                    (store.value("SELECT count(*) FROM requests WHERE state = 'done'") or 0)
                    >= point
                ),
                60,
                f"seed {seed}: {point} pages done",
            )
            victims = [coordinator.pid, *children(coordinator.pid)]
            for pid in victims:
                with_gone(pid)
            coordinator.wait(10)
        assert coordinator.returncode == -signal.SIGKILL, f"seed {seed}: crawl ended first"
        again = run(cmd, tmp_path, timeout=100)
        assert again.returncode == 0, f"seed {seed}: {again.stderr[-3000:]}"
    records = export(store, tmp_path)
    try:
        assert_every_record_once(records, catalog)
        assert store.value("SELECT count(*) FROM requests WHERE state IN ('queued', 'leased')") == 0
    except AssertionError as exc:
        raise AssertionError(f"seed {seed} (point {point}): {exc}") from exc


def with_gone(pid: int) -> None:
    import os
    from contextlib import suppress

    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
