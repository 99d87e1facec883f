"""Many processes through lease / complete / fail at once, checked offline from their histories.

Eight processes, each with its own frontier, enqueue overlapping shards of the same URLs and then
lease, complete and fail them (random retries, random "crashes" that abandon leases, random
stalls past the lease before reporting). Each appends what it did and what the store answered to
its own history file. ``check`` then reads every history and the store's final rows and reports
anything lost, completed twice, or held by two live leases at once (Jepsen's total-queue check,
plus the lease-overlap check that fencing tokens must make impossible).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from crawlfleet.frontier import open_frontier
from crawlfleet.model import (
    Completion,
    DeadReason,
    DomainLimits,
    Failure,
    JobSpec,
    NewRequest,
)
from crawlfleet.urls import canonicalize, fingerprint, host_of
from tests.chaos.harness import Store, new_store
from tests.conftest import BACKENDS

JOB = "history"
PROCESSES = 8
URLS = 10_000
DOMAINS = 16
TTL = 0.5
MAX_ATTEMPTS = 4

Event = dict[str, Any]


def all_urls(n: int) -> list[str]:
    return [f"http://d{i % DOMAINS}.test/item/{i}" for i in range(n)]


def new_request(url: str) -> NewRequest:
    canon = canonicalize(url)
    return NewRequest(canon, fingerprint(canon), host_of(canon))


# -- the processes ---------------------------------------------------------------------------------


def run_process(
    queue: str, index: int, n_urls: int, seed: int, barrier: Any, out: str
) -> None:  # pragma: no cover - runs in a child process
    history: list[Event] = []
    try:
        asyncio.run(_process(queue, index, n_urls, random.Random(seed), barrier, history))
    finally:
        Path(out).write_text("".join(json.dumps(e) + "\n" for e in history))


async def _process(
    queue: str,
    index: int,
    n_urls: int,
    rng: random.Random,
    barrier: Any,
    history: list[Event],
) -> None:  # pragma: no cover - runs in a child process
    frontier = open_frontier(queue)
    await frontier.open()
    try:
        urls = all_urls(n_urls)
        # two shards each, so every URL is enqueued by two processes at about the same time
        for shard in (index, (index + 1) % PROCESSES):
            mine = [new_request(u) for u in urls[shard::PROCESSES]]
            for start in range(0, len(mine), 500):
                batch = mine[start : start + 500]
                added = await frontier.enqueue(JOB, batch)
                history.append({"op": "enqueue", "n": len(batch), "added": added})
        await asyncio.to_thread(barrier.wait)
        await _lease_loop(frontier, f"p{index}", rng, history)
    finally:
        await frontier.close()


async def _lease_loop(
    frontier: Any, worker: str, rng: random.Random, history: list[Event]
) -> None:  # pragma: no cover - runs in a child process
    batch = 0
    while True:
        t0 = time.time()
        leases = await frontier.lease(worker, 100, TTL, jobs=[JOB])
        t1 = time.time()
        for lease in leases:
            history.append(
                {
                    "op": "lease",
                    "id": lease.id,
                    "url": lease.url,
                    "token": lease.token,
                    "attempts": lease.attempts,
                    "max": lease.max_attempts,
                    "t0": t0,
                    "t1": t1,
                    "expires": lease.expires_at,
                }
            )
        if not leases:
            if await frontier.is_finished(JOB):
                return
            await asyncio.sleep(0.02)
            continue
        batch += 1
        if batch == 3 or rng.random() < 0.03:
            history.append({"op": "crash", "ids": [lease.id for lease in leases]})
            continue  # a crashed worker: its leases are simply never reported
        if batch == 5 or rng.random() < 0.03:
            await asyncio.sleep(TTL * 1.5)  # stalled past the lease: the reports may be refused
        done, failed = [], []
        for lease in leases:
            roll = rng.random()
            if roll < 0.02:
                continue  # this one is abandoned
            if roll < 0.15:
                dead = lease.attempts >= lease.max_attempts
                failed.append(
                    Failure(
                        lease.ref,
                        "chaos",
                        retry_at=None if dead else time.time() + 0.05,
                        dead_reason=DeadReason.TOO_MANY_RETRIES if dead else None,
                    )
                )
            else:
                done.append(Completion(lease.ref, 200))
        await _report(frontier.complete, "complete", done, history)
        await _report(frontier.fail, "fail", failed, history)


async def _report(
    verb: Any, name: str, items: list[Any], history: list[Event]
) -> None:  # pragma: no cover - runs in a child process
    if not items:
        return
    t0 = time.time()
    accepted = await verb(items)
    t1 = time.time()
    for item in items:
        event = {
            "op": name,
            "id": item.lease.id,
            "token": item.lease.token,
            "accepted": item.lease.id in accepted,
            "t0": t0,
            "t1": t1,
        }
        if name == "fail":
            event["dead"] = item.retry_at is None
        history.append(event)


# -- the checker -----------------------------------------------------------------------------------


def check(
    histories: Iterable[Iterable[Event]],
    final: Mapping[int, tuple[str, str, int]],
    expected_urls: set[str],
) -> list[str]:
    """Everything wrong in the histories and the final rows (``id -> (url, state, attempts)``).

    * lost: an expected URL that is not done or dead, or was never leased;
    * duplicated: more than one accepted complete for a request, or a request that is both
      completed and dead, or a final state the accepted reports do not explain;
    * overlapping leases: a lease handed out while the previous one was still live (not
      expired, and not yet ended by an accepted report), or an accepted report from a holder
      whose lease had been handed on;
    * tokens: each lease of a request carries the next token and counts the next attempt,
      never more attempts than allowed; enqueue added each URL exactly once.
    """
    problems: list[str] = []
    leases: dict[int, list[Event]] = defaultdict(list)
    reports: dict[int, list[Event]] = defaultdict(list)
    added = 0
    for history in histories:
        for e in history:
            if e["op"] == "enqueue":
                added += e["added"]
            elif e["op"] == "lease":
                leases[e["id"]].append(e)
            elif e["op"] in ("complete", "fail"):
                reports[e["id"]].append(e)
    if added != len(expected_urls):
        problems.append(f"enqueue added {added} requests for {len(expected_urls)} URLs")
    final_urls = {url for url, _, _ in final.values()}
    for url in sorted(expected_urls - final_urls)[:5]:
        problems.append(f"lost: {url} is not in the store")
    for rid, (url, state, attempts) in sorted(final.items()):
        problems.extend(_check_request(rid, url, state, attempts, leases[rid], reports[rid]))
    return problems


def _check_request(
    rid: int, url: str, state: str, attempts: int, leases: list[Event], reports: list[Event]
) -> list[str]:
    problems = []
    if state not in ("done", "dead"):
        problems.append(f"lost: request {rid} ({url}) ended {state}")
    if not leases:
        return [*problems, f"lost: request {rid} ({url}) was never leased"]
    leases = sorted(leases, key=lambda e: e["token"])
    tokens = [e["token"] for e in leases]
    if tokens != list(range(1, len(leases) + 1)):
        problems.append(f"request {rid}: lease tokens {tokens} are not 1, 2, 3, ...")
    if [e["attempts"] for e in leases] != tokens:
        problems.append(f"request {rid}: attempts do not follow the leases")
    if max(e["attempts"] for e in leases) > leases[0]["max"] or attempts > leases[0]["max"]:
        problems.append(f"request {rid}: more than {leases[0]['max']} attempts")
    accepted = {e["token"]: e for e in reports if e["accepted"]}
    if len(accepted) < sum(e["accepted"] for e in reports):
        problems.append(f"request {rid}: two accepted reports for one lease")
    completes = [e for e in accepted.values() if e["op"] == "complete"]
    dead = [e for e in accepted.values() if e["op"] == "fail" and e["dead"]]
    if len(completes) > 1:
        problems.append(f"duplicated: request {rid} completed {len(completes)} times")
    if completes and dead:
        problems.append(f"duplicated: request {rid} both completed and dead")
    if state == "done" and len(completes) != 1:
        problems.append(f"request {rid} is done without exactly one accepted complete")
    ended = [e["token"] for e in completes + dead]
    if ended and max(tokens) > min(ended):
        problems.append(f"request {rid} was leased again after it ended")
    for prev, nxt in pairwise(leases):
        report = accepted.get(prev["token"])
        if report is not None and report["t0"] > nxt["t1"]:
            problems.append(
                f"overlap: request {rid} token {prev['token']} was accepted after token "
                f"{nxt['token']} was handed out"
            )
        if report is None and prev["expires"] >= nxt["t1"]:
            problems.append(
                f"overlap: request {rid} token {nxt['token']} was handed out while token "
                f"{prev['token']} was live"
            )
    return problems


def test_check__finds_lost_duplicated_and_overlapping() -> None:
    def lease(rid: int, token: int, t: float) -> Event:
        return {
            "op": "lease",
            "id": rid,
            "url": f"u{rid}",
            "token": token,
            "attempts": token,
            "max": 3,
            "t0": t,
            "t1": t + 0.01,
            "expires": t + 1,
        }

    def complete(rid: int, token: int, t: float, accepted: bool = True) -> Event:
        return {"op": "complete", "id": rid, "token": token, "accepted": accepted, "t0": t, "t1": t}

    good = [
        {"op": "enqueue", "n": 3, "added": 3},
        lease(1, 1, 0),
        complete(1, 1, 0.5),
        lease(2, 1, 0),
        lease(2, 2, 2),  # the first lease expired at 1
        complete(2, 1, 2.5, accepted=False),  # the zombie is refused
        complete(2, 2, 2.6),
        lease(3, 1, 0),
        {"op": "fail", "id": 3, "token": 1, "accepted": True, "dead": True, "t0": 1, "t1": 1},
    ]
    final = {1: ("u1", "done", 1), 2: ("u2", "done", 2), 3: ("u3", "dead", 1)}
    assert check([good], final, {"u1", "u2", "u3"}) == []
    del final[3]
    assert check([good], final, {"u1", "u2", "u3"}) == ["lost: u3 is not in the store"]

    bad = [
        {"op": "enqueue", "n": 3, "added": 4},
        lease(1, 1, 0),
        complete(1, 1, 0.5),
        lease(1, 2, 0.6),  # re-leased after done, while its first lease was live
        complete(1, 2, 0.7),  # and completed twice
        lease(2, 1, 0),
        lease(2, 2, 0.5),  # handed out before the first lease expired
        complete(2, 1, 0.6),  # and the first holder's late complete accepted
        lease(3, 1, 0),
    ]
    problems = check(
        [bad],
        {1: ("u1", "done", 2), 2: ("u2", "done", 2), 3: ("u3", "queued", 1)},
        {"u1", "u2", "u3"},
    )
    text = "\n".join(problems)
    assert "enqueue added 4 requests for 3 URLs" in text
    assert "duplicated: request 1 completed 2 times" in text
    assert "request 1 was leased again after it ended" in text
    assert "overlap: request 2 token 1 was accepted after token 2 was handed out" in text
    assert "lost: request 3 (u3) ended queued" in text


# -- the test --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_8_processes__lease_complete_fail__nothing_lost_duplicated_or_overlapping(
    backend: str, tmp_path: Path
) -> None:
    seed = random.randrange(1 << 30)
    with new_store(backend, tmp_path) as store:
        asyncio.run(_submit(store))
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(PROCESSES)
        outs = [tmp_path / f"history-{i}.jsonl" for i in range(PROCESSES)]
        procs = [
            ctx.Process(
                target=run_process,
                args=(store.url, i, URLS, seed + i, barrier, str(outs[i])),
            )
            for i in range(PROCESSES)
        ]
        started = time.monotonic()
        for p in procs:
            p.start()
        try:
            for p in procs:
                p.join(max(1.0, 90 - (time.monotonic() - started)))
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join()
            codes = [p.exitcode for p in procs]
            for p in procs:
                p.close()
        assert codes == [0] * PROCESSES, f"seed {seed}: exit codes {codes}"
        final = {
            rid: (url, state, attempts)
            for rid, url, state, attempts in store.rows(
                "SELECT id, url, state, attempts FROM requests"
            )
        }
    histories = [[json.loads(line) for line in out.read_text().splitlines()] for out in outs]
    expected = {canonicalize(u) for u in all_urls(URLS)}
    problems = check(histories, final, expected)
    assert not problems, f"seed {seed}: {len(problems)} problems:\n" + "\n".join(problems[:20])
    # the run went through what it is meant to survive
    events = [e for h in histories for e in h]
    rescued = sum(e["op"] == "lease" and e["token"] > 1 for e in events)
    refused = sum(e["op"] in ("complete", "fail") and not e["accepted"] for e in events)
    dead = sum(state == "dead" for _, state, _ in final.values())
    took = time.monotonic() - started
    print(f"seed {seed}: {len(events)} events, {rescued} re-leases, {refused} refused reports")
    print(f"seed {seed}: {dead} dead, {took:.1f}s")
    assert rescued > 0 and refused > 0 and dead > 0


async def _submit(store: Store) -> None:
    frontier = open_frontier(store.url)
    await frontier.open()
    try:
        await frontier.submit_job(
            JobSpec(
                name=JOB,
                spider="none.py",
                default_limits=DomainLimits(max_in_flight=10_000),
                max_attempts=MAX_ATTEMPTS,
            )
        )
    finally:
        await frontier.close()
