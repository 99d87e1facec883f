"""Workers die, stall and come back: real processes, real signals, a real store on each backend.

Each test runs the demo shop in a subprocess, submits a job with ``crawlfleet submit`` and runs
``crawlfleet worker`` processes it controls one by one, then asserts on the store's rows.
Workers use ``lease_ttl = 3`` and ``fetch_timeout = 2`` unless a test says otherwise.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from crawlfleet.demo.catalog import Catalog
from tests.chaos.harness import (
    Store,
    finish,
    new_store,
    pause_outside_transaction,
    reaped,
    run,
    spider_file,
    start,
    wait_for,
    worker_args,
    write_config,
)
from tests.conftest import BACKENDS
from tests.integration.helpers import demo_shop, read_jsonl, shop_stats

pytestmark = pytest.mark.slow

JOB = "shop"


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    with new_store(request.param, tmp_path) as s:
        yield s


def submit(store: Store, cwd: Path, spider: Path) -> None:
    result = run(["submit", str(spider), "--queue", store.url, "--job", JOB], cwd)
    assert result.returncode == 0, result.stderr


def export(store: Store, cwd: Path) -> list[dict]:
    out = cwd / "records.jsonl"
    result = run(["export", "--queue", store.url, "--job", JOB, "-o", str(out)], cwd)
    assert result.returncode == 0, result.stderr
    return read_jsonl(out)


def assert_every_record_once(records: list[dict], catalog: Catalog) -> None:
    skus = [r["sku"] for r in records]
    assert len(skus) == len(set(skus)), "a record appears twice"
    assert sorted(skus) == sorted(r["sku"] for r in catalog.expected_records())


def leases_by_owner(store: Store) -> dict[str, int]:
    rows = store.rows(
        "SELECT lease_owner, count(*) FROM requests WHERE state = 'leased' GROUP BY lease_owner"
    )
    return {owner: n for owner, n in rows if owner}


def owner_pid(owner: str) -> int:
    return int(owner.rsplit("-", 1)[1])


def test_kill_9__worker_holding_50_leases__all_crawled_again_once_with_attempts_2(
    store: Store, tmp_path: Path
) -> None:
    catalog = Catalog(600)
    write_config(tmp_path, lease_ttl=3, fetch_timeout=2)
    # every product page takes 1 s: a worker keeps its 64 slots full of leases for a while
    with demo_shop("--products", "600", "--slow", "1.0", "--slow-delay", "1.0") as base:
        spider = spider_file(tmp_path / "shop.py", base, domain_concurrency=500)
        submit(store, tmp_path, spider)
        workers = [start(worker_args(store, JOB), tmp_path) for _ in range(3)]
        with reaped(*workers):
            pids = {w.pid: w for w in workers}

            def busy() -> tuple[str, int] | None:
                held = leases_by_owner(store)
                best = max(held.items(), key=lambda kv: kv[1], default=None)
                return best if best and best[1] >= 56 and owner_pid(best[0]) in pids else None

            owner, _ = wait_for(busy, 60, "a worker holding at least 56 leases")
            victim = pids[owner_pid(owner)]
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            lost = store.rows(
                "SELECT id, attempts FROM requests WHERE state = 'leased' AND lease_owner = ?",
                (owner,),
            )
            assert len(lost) >= 50, f"the victim held only {len(lost)} leases when it died"
            assert {a for _, a in lost} == {1}
            for w in workers:
                if w is not victim:
                    err = finish(w, 120)
                    assert w.returncode == 0, err[-3000:]
        stats = shop_stats(base)

    ids = ",".join(str(i) for i, _ in lost)
    after = store.rows(f"SELECT id, state, attempts FROM requests WHERE id IN ({ids})")
    assert {(state, attempts) for _, state, attempts in after} == {("done", 2)}
    expired = store.rows(
        f"SELECT request_id, n FROM attempts WHERE request_id IN ({ids}) "
        "AND outcome = 'lease_expired'"
    )
    assert sorted(expired) == sorted((i, 1) for i, _ in lost), "one rescue per lost lease"
    assert store.value("SELECT count(*) FROM requests WHERE state IN ('queued', 'leased')") == 0
    # the records of the lost pages were written by the survivors
    urls = [u for (u,) in store.rows(f"SELECT url FROM requests WHERE id IN ({ids})")]
    writers = store.rows(
        "SELECT warc_file FROM records WHERE url IN (" + ",".join("?" * len(urls)) + ")", urls
    )
    assert all(f"-{victim.pid}" not in (w or "") for (w,) in writers)
    assert_every_record_once(export(store, tmp_path), catalog)
    # at-least-once fetching: a lost page is fetched again, never more than that
    assert max(n for p, n in stats["pages"].items() if p.startswith("/product/")) <= 2


def test_sigstop_past_the_lease__the_resumed_worker_cannot_complete_what_was_taken_over(
    store: Store, tmp_path: Path
) -> None:
    catalog = Catalog(300)
    write_config(tmp_path, lease_ttl=3, fetch_timeout=2)
    with demo_shop("--products", "300", "--slow", "1.0", "--slow-delay", "1.0") as base:
        spider = spider_file(tmp_path / "shop.py", base, domain_concurrency=500)
        submit(store, tmp_path, spider)
        zombie = start(worker_args(store, JOB, "--worker-id", "zombie"), tmp_path)
        with reaped(zombie) as procs:

            def holding_products() -> list[tuple[int, int, str]]:
                rows = store.rows(
                    "SELECT id, lease_token, url FROM requests "
                    "WHERE state = 'leased' AND lease_owner = 'zombie'"
                )
                return rows if sum("/product/" in u for *_, u in rows) >= 20 else []

            wait_for(holding_products, 60, "the first worker holding product leases")
            pause_outside_transaction(zombie, store)
            stopped_at = time.monotonic()
            taken = holding_products()
            assert taken, "the first worker reported its leases before it stopped"
            taker = start(worker_args(store, JOB, "--worker-id", "taker"), tmp_path)
            procs.append(taker)
            err = finish(taker, 120)
            assert taker.returncode == 0, err[-3000:]
            # the takeover happened while the zombie was stopped, past its lease
            assert time.monotonic() - stopped_at > 3
            zombie.send_signal(signal.SIGCONT)
            zombie_err = finish(zombie, 60)
            assert zombie.returncode == 0, zombie_err[-3000:]

    ids = ",".join(str(i) for i, *_ in taken)
    tokens = {i: t for i, t, _ in taken}
    after = store.rows(f"SELECT id, state, attempts, lease_token FROM requests WHERE id IN ({ids})")
    for rid, state, attempts, token in after:
        assert (state, attempts) == ("done", 2), (rid, state, attempts)
        assert token == tokens[rid] + 1, "the taker's lease finished it, not the zombie's"
    # the zombie's late reports (complete, or fail after its fetch timed out) left no trace
    history = store.rows(f"SELECT request_id, outcome FROM attempts WHERE request_id IN ({ids})")
    assert sorted(history) == sorted((i, "lease_expired") for i in tokens)
    urls = [u for *_, u in taken]
    writers = store.rows(
        "SELECT url, warc_file FROM records WHERE url IN (" + ",".join("?" * len(urls)) + ")",
        urls,
    )
    assert writers, "the taken-over product pages have records"
    assert all("taker" in w and "zombie" not in w for _, w in writers), writers[:3]
    assert_every_record_once(export(store, tmp_path), catalog)
    assert "leases were lost" in zombie_err, "the zombie did not notice it lost its leases"
