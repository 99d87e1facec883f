"""Several producer processes enqueue spellings of the same URLs at once: one request per URL."""

from __future__ import annotations

import asyncio
import multiprocessing
import random
from pathlib import Path
from typing import Any

import pytest

from crawlfleet.frontier import open_frontier
from crawlfleet.model import DomainLimits, JobSpec, NewRequest
from crawlfleet.urls import canonicalize, fingerprint, host_of
from tests.chaos.harness import new_store
from tests.conftest import BACKENDS

JOB = "race"
PRODUCERS = 6
PAGES = 300


def spellings(i: int) -> list[str]:
    """One page, written the ways links in the wild write it."""
    return [
        f"http://shop.example/p/{i}?a=1&b=2",
        f"HTTP://Shop.Example:80/p/{i}?b=2&a=1",
        f"http://shop.example/p/{i}?b=2&a=1#reviews",
        f"http://SHOP.example:80/p/{i}?a=1&b=2#top",
        f"http://shop.example/p/{i}?a=1&sid=9f8e7d6c5b4a{i:08d}&b=2",
    ]


def produce(queue: str, index: int, barrier: Any, results: Any) -> None:  # pragma: no cover
    results.put(asyncio.run(_produce(queue, index, barrier)))


async def _produce(queue: str, index: int, barrier: Any) -> int:  # pragma: no cover
    rng = random.Random(index)
    frontier = open_frontier(queue)
    await frontier.open()
    try:
        # each producer sends every page in its own spellings and order, in small batches,
        # so the batches of different producers overlap in the store at the same moment
        urls = [u for i in range(PAGES) for u in rng.sample(spellings(i), 3)]
        rng.shuffle(urls)
        batches = [urls[k : k + 50] for k in range(0, len(urls), 50)]
        await asyncio.to_thread(barrier.wait)
        added = 0
        for batch in batches:
            added += await frontier.enqueue(JOB, [_request(u) for u in batch])
        return added
    finally:
        await frontier.close()


def _request(url: str) -> NewRequest:
    canon = canonicalize(url)
    return NewRequest(canon, fingerprint(canon), host_of(canon))


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_producers_of_url_variants__one_request_per_page(
    backend: str, tmp_path: Path
) -> None:
    assert all(len({canonicalize(u) for u in spellings(i)}) == 1 for i in range(3))
    with new_store(backend, tmp_path) as store:
        asyncio.run(_submit(store.url))
        ctx = multiprocessing.get_context("spawn")
        barrier, results = ctx.Barrier(PRODUCERS), ctx.SimpleQueue()
        procs = [
            ctx.Process(target=produce, args=(store.url, i, barrier, results))
            for i in range(PRODUCERS)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        added = [results.get() for p in procs if p.exitcode == 0]
        results.close()
        codes = [p.exitcode for p in procs]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
            p.close()
        assert codes == [0] * PRODUCERS
        assert sum(added) == PAGES, f"enqueue reported {added} new requests"
        rows = store.rows("SELECT url FROM requests")
    assert len(rows) == PAGES
    assert sorted(u for (u,) in rows) == sorted(canonicalize(spellings(i)[0]) for i in range(PAGES))


async def _submit(queue: str) -> None:
    frontier = open_frontier(queue)
    await frontier.open()
    try:
        await frontier.submit_job(JobSpec(JOB, "none.py", default_limits=DomainLimits(100)))
    finally:
        await frontier.close()
