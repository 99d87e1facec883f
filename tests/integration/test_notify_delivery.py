"""Delivery out of crawlfleet, end to end: worker processes deliver the outbox to a real
receiver that checks signatures and fails its first answers; one worker is killed -9 in the
middle of a delivery, the receiver is down for a while, and still every alert and every batch
of changed records arrives, each event under one Idempotency-Key (a receiver that drops the
keys it saw processes each exactly once). On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import PG_TEST_DB
from tests.sites.receiver import Receiver

from crawlfleet.config import load_settings
from crawlfleet.frontier import open_frontier
from crawlfleet.frontier.outbox import OutboxEvent
from crawlfleet.notify.destinations import destinations
from crawlfleet.notify.payloads import dumps

pytestmark = pytest.mark.slow

HOOK_SECRET = "hook-s3cret"
SINK_SECRET = "sink-s3cret"


def _config(path: Path, port: int) -> Path:
    path.write_text(
        f"""
[notify]
webhook = "http://127.0.0.1:{port}/hook"
secret = "{HOOK_SECRET}"
backoff = 0.2
backoff_cap = 1.0
timeout = 2.0
delivery_lease = 4.0
tries = 1000

[[sink]]
url = "http://127.0.0.1:{port}/sink"
secret = "{SINK_SECRET}"
name = "warehouse"
"""
    )
    return path


def _queue(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'queue.db'}"
    return PG_TEST_DB.fresh()


def _events(first: int, n: int, hook: str, sink: str) -> list[OutboxEvent]:
    out = []
    for i in range(first, first + n):
        if i % 3:
            key = f"alert:shop:1:field_coverage:f{i}"
            body = {
                "event": "alert",
                "idempotency_key": key,
                "alert": "field_coverage",
                "field": f"f{i}",
                "job": "shop",
                "run": 1,
                "value": 0.7,
                "baseline": 1.0,
            }
            out.append(OutboxEvent(key, "alert", dumps(body), (hook,), "shop", 1, 1000))
        else:
            key = f"changes:shop:1:warehouse:{i}"
            body = {
                "event": "changes",
                "idempotency_key": key,
                "job": "shop",
                "run": 1,
                "batch": i,
                "records": [{"key": f"k{i}", "status": "new", "data": {"i": i}}],
            }
            out.append(OutboxEvent(key, "changes", dumps(body), (sink,), "shop", 1, 1000))
    return out


class Workers:
    def __init__(self, tmp_path: Path, config: Path, queue: str) -> None:
        self.tmp_path, self.config, self.queue = tmp_path, config, queue
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        with open(self.tmp_path / f"worker{len(self.procs)}.log", "wb") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "crawlfleet",
                    "--config",
                    str(self.config),
                    "-v",
                    "worker",
                    "--queue",
                    self.queue,
                ],
                cwd=self.tmp_path,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def workers_of(tmp_path: Path) -> Iterator[list[Workers]]:
    made: list[Workers] = []
    yield made
    for w in made:
        w.stop()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_every_event_arrives_once_by_key_across_a_kill_and_a_receiver_down(
    backend: str, tmp_path: Path, workers_of: list[Workers]
) -> None:
    receiver = await Receiver({"/hook": HOOK_SECRET, "/sink": SINK_SECRET}, fail_first=4).start()
    config = _config(tmp_path / "crawlfleet.toml", receiver.port)
    queue = _queue(backend, tmp_path)
    hook, sink = (d.id for d in destinations(load_settings(config)))
    store = open_frontier(queue)
    await store.open()
    workers = Workers(tmp_path, config, queue)
    workers_of.append(workers)
    try:
        first = _events(0, 15, hook, sink)
        await store.emit(first)

        # worker A takes deliveries; the receiver holds one open and A is killed -9 mid-way
        receiver.hold_next()
        a = workers.start()
        held = await receiver.wait_holding(timeout=60)
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
        receiver.release()

        # the receiver goes down; more events come; worker B finds it refusing connections
        await receiver.stop()
        rest = _events(15, 15, hook, sink)
        await store.emit(rest)
        workers.start()
        await asyncio.sleep(3)
        assert not receiver.keys("/hook") >= {e.key for e in rest if e.kind == "alert"}
        await receiver.start()  # back, on the same port

        events = first + rest
        alerts = {e.key for e in events if e.kind == "alert"}
        batches = {e.key for e in events if e.kind == "changes"}
        await receiver.wait_for("/hook", alerts, timeout=90)
        await receiver.wait_for("/sink", batches, timeout=90)
        await asyncio.sleep(1.5)  # a late repeat would show now

        assert receiver.keys("/hook") == alerts
        assert receiver.keys("/sink") == batches
        assert receiver.bad_signatures == 0
        assert receiver.failed == 4  # it did fail its first answers
        assert held in alerts | batches  # the delivery cut by the kill came again, same key
        by_key = {e.key: e.body.encode() for e in events}
        for path in ("/hook", "/sink"):
            for key, bodies in receiver.accepted[path].items():
                assert all(b == by_key[key] for b in bodies), key  # a repeat is the same event
        # only what A had in flight when it died can come twice
        repeats = [
            k for p in ("/hook", "/sink") for k, b in receiver.accepted[p].items() if len(b) > 1
        ]
        assert len(repeats) <= 8
        counts = {c.destination: c for c in await store.outbox_counts()}
        assert counts[hook].done == len(alerts) and counts[sink].done == len(batches)
        assert counts[hook].dead == counts[sink].dead == 0
    finally:
        workers.stop()
        await store.close()
        await receiver.stop()
