"""The frontier against a model of itself, under interleavings Hypothesis picks (both backends).

The model is a dict of request states. Rules drive the real store and the model side by side:
enqueue, lease, heartbeat, complete, fail (retry or dead), release, advance the fake clock
(leases expire), crash (the holder forgets its leases), rescue. After every step the store's rows
must agree with the model; nothing is lost, nothing is completed twice, and attempts never exceed
``max_attempts`` when holders follow the retry policy (retry only while attempts remain).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from crawlfleet.frontier import open_frontier
from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import (
    Completion,
    DeadReason,
    DomainLimits,
    Failure,
    JobSpec,
    Lease,
    NewRequest,
)
from crawlfleet.urls import canonicalize, fingerprint, host_of
from tests.chaos.harness import Store, new_store
from tests.conftest import PG_DSN, FakeClock

JOB = "model"
TTL = 10.0
MAX_ATTEMPTS = 2
URLS = [canonicalize(f"http://{host}.test/{i}") for host in ("a", "b") for i in range(4)]


@dataclass
class Row:
    state: str = "queued"
    attempts: int = 0
    token: int = 0
    expires: float = 0.0
    ready_at: float = 0.0


class FrontierModel(RuleBasedStateMachine):
    store: ClassVar[Store]  # set by the test: which backend, and where
    seen: ClassVar[Counter[str]] = Counter()  # what the examples went through, over all of them

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.tmp: str | None = None
        self.pg: Any = None  # one reading connection per example (PostgreSQL)
        if self.store.backend == "sqlite":
            self.tmp = tempfile.mkdtemp(prefix="crawlfleet-model-")
            self.reader = Store("sqlite", "", path=Path(self.tmp) / "queue.db")
            url = f"sqlite:///{self.reader.path}"
        else:
            import psycopg

            self.reader = self.store
            url = self.store.url
            self.store.empty()
            self.pg = psycopg.connect(PG_DSN, autocommit=True)
            self.pg.execute(f'SET search_path TO "{self.store.schema}"')
        self.frontier: Frontier = open_frontier(url, clock=self.clock)
        self.run(self.frontier.open())
        self.run(
            self.frontier.submit_job(
                JobSpec(JOB, "none.py", default_limits=DomainLimits(100), max_attempts=MAX_ATTEMPTS)
            )
        )
        self.model: dict[str, Row] = {}
        self.held: list[Lease] = []
        self.zombies: list[Lease] = []
        self.completes: Counter[str] = Counter()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            self.run(self.frontier.close())
        finally:
            self.loop.close()
            if self.pg is not None:
                self.pg.close()
            if self.tmp:
                shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the model's own rules ---------------------------------------------------------------------

    def _rescue(self) -> int:
        """Expired leases go back to the queue, or die on their last attempt."""
        n = 0
        for row in self.model.values():
            if row.state == "leased" and row.expires < self.clock.now:
                row.state = "dead" if row.attempts >= MAX_ATTEMPTS else "queued"
                row.ready_at = self.clock.now
                n += 1
                self.seen["worker_lost" if row.state == "dead" else "rescued"] += 1
        return n

    def _holds(self, lease: Lease) -> bool:
        row = self.model[lease.url]
        held = row.state == "leased" and row.token == lease.token
        self.seen["held" if held else "fenced"] += 1
        return held

    def _pick(self, i: int) -> Lease:
        return self.held.pop(i % len(self.held))

    # -- rules -------------------------------------------------------------------------------------

    @initialize(urls=st.lists(st.sampled_from(URLS), min_size=1, max_size=6))
    def first_enqueue(self, urls: list[str]) -> None:
        self.enqueue(urls)

    @rule(urls=st.lists(st.sampled_from(URLS), min_size=1, max_size=4))
    def enqueue(self, urls: list[str]) -> None:
        reqs = [NewRequest(u, fingerprint(u), host_of(u)) for u in urls]
        added = self.run(self.frontier.enqueue(JOB, reqs))
        new = {u for u in urls if u not in self.model}
        for u in new:
            self.model[u] = Row(ready_at=self.clock.now)
        assert added == len(new)

    @rule(limit=st.integers(1, 5))
    def lease(self, limit: int) -> None:
        self._rescue()
        ready = {
            u for u, r in self.model.items() if r.state == "queued" and r.ready_at <= self.clock.now
        }
        leases = self.run(self.frontier.lease("w", limit, TTL, jobs=[JOB]))
        # a lease may come back short (test_lease__fills_its_batch pins the full batch); it
        # never exceeds the limit and always makes progress while something is ready
        assert len(leases) <= min(limit, len(ready))
        assert leases or not ready, f"nothing leased while {len(ready)} requests were ready"
        for lease in leases:
            assert lease.url in ready, f"{lease.url} was not ready"
            ready.discard(lease.url)  # and never handed out twice in one batch
            row = self.model[lease.url]
            assert (lease.token, lease.attempts) == (row.token + 1, row.attempts + 1)
            row.state, row.token, row.attempts = "leased", lease.token, lease.attempts
            row.expires = self.clock.now + TTL
            assert lease.expires_at == pytest.approx(row.expires)
        self.held.extend(leases)

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 100))
    def heartbeat(self, i: int) -> None:
        lease = self.held[i % len(self.held)]
        kept = self.run(self.frontier.heartbeat([lease.ref], TTL))
        assert (lease.id in kept) == self._holds(lease)
        if lease.id in kept:
            row = self.model[lease.url]
            row.expires = max(row.expires, self.clock.now + TTL)

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 100))
    def complete(self, i: int) -> None:
        lease = self._pick(i)
        accepted = self.run(self.frontier.complete([Completion(lease.ref, 200)]))
        assert (lease.id in accepted) == self._holds(lease), "fencing disagrees with the model"
        if accepted:
            self.model[lease.url].state = "done"
            self.completes[lease.url] += 1

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 100), give_up=st.booleans(), delay=st.sampled_from([0.0, 1.0, 30.0]))
    def fail(self, i: int, give_up: bool, delay: float) -> None:
        lease = self._pick(i)
        # the retry policy: retry only while attempts remain
        dead = give_up or lease.attempts >= lease.max_attempts
        failure = Failure(
            lease.ref,
            "chaos",
            retry_at=None if dead else self.clock.now + delay,
            dead_reason=DeadReason.TOO_MANY_RETRIES if dead else None,
        )
        accepted = self.run(self.frontier.fail([failure]))
        assert (lease.id in accepted) == self._holds(lease)
        if accepted:
            row = self.model[lease.url]
            row.state = "dead" if dead else "queued"
            row.ready_at = row.ready_at if dead else self.clock.now + delay

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 100))
    def release(self, i: int) -> None:
        lease = self._pick(i)
        accepted = self.run(self.frontier.release([lease.ref]))
        assert (lease.id in accepted) == self._holds(lease)
        if accepted:
            row = self.model[lease.url]
            row.state, row.attempts, row.ready_at = "queued", row.attempts - 1, self.clock.now

    @rule(seconds=st.sampled_from([0.5, 5.0, TTL, TTL + 0.5, 3 * TTL]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def crash(self) -> None:
        # the holder stops reporting (dead or paused); its leases expire in the store
        self.zombies.extend(self.held)
        self.held.clear()

    @precondition(lambda self: self.zombies)
    @rule(i=st.integers(0, 100))
    def zombie_completes(self, i: int) -> None:
        """A paused holder wakes up and reports: accepted only if nobody took over."""
        lease = self.zombies.pop(i % len(self.zombies))
        accepted = self.run(self.frontier.complete([Completion(lease.ref, 200)]))
        assert (lease.id in accepted) == self._holds(lease), "a zombie's complete was accepted"
        if accepted:
            self.model[lease.url].state = "done"
            self.completes[lease.url] += 1

    @rule()
    def rescue(self) -> None:
        assert self.run(self.frontier.rescue_expired()) == self._rescue()

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def store_agrees_with_the_model(self) -> None:
        query = "SELECT url, state, attempts, lease_token FROM requests"
        rows = self.pg.execute(query).fetchall() if self.pg else self.reader.rows(query)
        got = {url: (state, attempts, token) for url, state, attempts, token in rows}
        want = {u: (r.state, r.attempts, r.token) for u, r in self.model.items()}
        assert got.keys() == want.keys(), "a request was lost or appeared from nowhere"
        assert got == want

    @invariant()
    def nothing_completed_twice(self) -> None:
        assert all(n == 1 for n in self.completes.values())

    @invariant()
    def attempts_within_bounds(self) -> None:
        assert all(0 <= r.attempts <= MAX_ATTEMPTS for r in self.model.values())


@pytest.fixture(params=["sqlite", "postgres"])
def model_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with new_store(request.param, tmp_path) as store:
        if store.backend == "postgres":
            asyncio.run(_migrate(store.url))
        yield store


async def _migrate(url: str) -> None:
    frontier = open_frontier(url)
    await frontier.open()
    await frontier.close()


@pytest.mark.slow
def test_frontier_matches_its_model_under_random_interleavings(model_store: Store) -> None:
    FrontierModel.store = model_store
    FrontierModel.seen.clear()
    machine = FrontierModel.TestCase
    machine.settings = settings(
        max_examples=100,
        stateful_step_count=60,
        deadline=None,
        database=None,
        # the same interleavings every run: the coverage check below must not hang on luck
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine().runTest()
    seen = FrontierModel.seen
    assert seen["fenced"] and seen["rescued"] and seen["worker_lost"], seen


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_lease__fills_its_batch_when_the_first_domain_runs_dry(
    backend: str, tmp_path: Path
) -> None:
    """The shortest sequence Hypothesis found: a lease that meets an exhausted domain first
    must still fill its batch from the next domain (the model expects min(limit, ready))."""
    with new_store(backend, tmp_path) as store:
        frontier = open_frontier(store.url, clock=FakeClock())
        await frontier.open()
        try:
            await frontier.submit_job(JobSpec(JOB, "none.py", default_limits=DomainLimits(100)))
            urls = [URLS[i] for i in (6, 1, 2, 4, 0, 5)]  # a.test: 3, b.test: 3
            await frontier.enqueue(JOB, [NewRequest(u, fingerprint(u), host_of(u)) for u in urls])
            first = await frontier.lease("w", 4, TTL, jobs=[JOB])
            second = await frontier.lease("w", 2, TTL, jobs=[JOB])
        finally:
            await frontier.close()
    assert len(first) == 4
    assert len(second) == 2, f"2 requests were ready, the lease returned {len(second)}"
