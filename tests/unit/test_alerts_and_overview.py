"""Alert rules, the overview built from store rows, and the charts' history: pure, time passed."""

from __future__ import annotations

import json

import pytest
from tests.unit.test_metrics import page

from crawlfleet.control.history import History
from crawlfleet.frontier.ports import DomainQueue, FleetCounts, LaneRow, RouteRow, WorkerStats
from crawlfleet.model import JobState, JobStats
from crawlfleet.monitor.alerts import Alert, AlertRules, evaluate
from crawlfleet.monitor.metrics import WorkerMetrics
from crawlfleet.monitor.overview import build_overview
from crawlfleet.policy.health import Breaker, BreakerState, RouteStats, Signal

RULES = AlertRules(oldest_age=60, block_rate=0.2, validation_rate=0.05)


@pytest.mark.parametrize(
    ("kwargs", "fired"),
    [
        ({}, []),
        ({"ready": 5, "workers_alive": 0}, ["no_worker_alive"]),
        ({"ready": 5, "workers_alive": 1}, []),
        ({"oldest": [("j/a", 61.0), ("j/b", 59.0)]}, ["oldest_queued_age"]),
        ({"blocks": [("a", 0.5, 20.0)]}, ["block_rate"]),
        ({"blocks": [("a", 0.5, 5.0)]}, []),  # too few recent attempts to judge
        ({"blocks": [("a", 0.1, 50.0)]}, []),
        ({"validation": [("j", 0.06, 100.0)]}, ["validation_failure_rate"]),
        ({"validation": [("j", 0.5, 4.0)]}, []),  # 2 of 4 records: too few to judge
    ],
)
def test_evaluate__each_rule_fires_past_its_threshold_only(
    kwargs: dict[str, object], fired: list[str]
) -> None:
    assert [a.rule for a in evaluate(RULES, **kwargs)] == fired  # type: ignore[arg-type]


def test_alert__message_names_subject_value_and_threshold() -> None:
    text = Alert("block_rate", "a.test", 0.5, 0.2).message
    assert text == "a.test: 50% of recent attempts blocked (over 20%)"


def _lane(domain: str, route: str, stats: RouteStats, in_flight: int = 0) -> LaneRow:
    health = json.dumps(stats.to_json())
    # one request in flight on the domain, through the lane that has it
    return LaneRow(domain, route, "dc", 0, in_flight, 4, 8, 0.5, 0.0, 0.0, health, 0, 1, 8)


def test_build_overview__domains_routes_workers_and_alerts_from_store_rows() -> None:
    now = 1000.0
    blocked = RouteStats()
    for i in range(30):
        blocked = blocked.record(Signal.BLOCK if i % 2 else Signal.SUCCESS, now, 0.1)
    clean = RouteStats().record(Signal.SUCCESS, now, 0.3)
    broken = Breaker(state=BreakerState.OPEN, open_until=now + 30)
    m = WorkerMetrics()
    for _ in range(19):
        m.observe(page(records=1))
    m.observe(page(quarantined=1))
    workers = [
        WorkerStats("w1", 1.0, "http", "h", 1, now - 5, m.snapshot(), '{"pages_per_second": 4}'),
        WorkerStats("w0", 1.0, "http", "h", 2, now - 300, "{}", "{}"),
    ]
    stats = JobStats("j", JobState.RUNNING, queued=3, done=20, records=19, quarantined=1)
    ov = build_overview(
        now,
        [stats],
        [{"robots": 2}],
        queue=[DomainQueue("j", "a.test", 3, 1, 1, now - 90)],
        lanes=[_lane("a.test", "dc/0", blocked, 1), _lane("a.test", "dc/1", clean)],
        routes=[
            RouteRow("dc/0", "dc", 0, json.dumps(broken.to_json()), now + 30),
            RouteRow("dc/1", "dc", 0, "{}", 0.0),
        ],
        counts=FleetCounts({}, 0, 0),
        workers=workers,
        rules=AlertRules(oldest_age=60, block_rate=0.2, validation_rate=0.04),
        proxies={"dc/1": "http://user:[secure]@10.0.0.1:3128"},
    )
    (d,) = ov.domains
    assert (d.backlog, d.leased, d.in_flight, d.lanes) == (4, 1, 1, 2)
    assert d.oldest_age == 90
    assert d.block_ratio == pytest.approx(15 / 31)
    assert [(r.id, r.state) for r in ov.routes] == [("dc/0", "open"), ("dc/1", "healthy")]
    assert ov.routes[1].proxy == "http://user:[secure]@10.0.0.1:3128"
    assert ov.routes[1].latency == pytest.approx(0.3)
    assert (ov.pools["dc"].healthy, ov.pools["dc"].open) == (1, 1)
    assert [(w.stats.worker, w.alive) for w in ov.workers] == [("w1", True), ("w0", False)]
    assert ov.pages_per_second == 4
    (job,) = ov.jobs
    assert job.validation_failure_ratio == 0.05
    assert sorted(a.rule for a in ov.alerts) == [
        "block_rate",
        "oldest_queued_age",
        "validation_failure_rate",
        "worker_stale",  # w0: silent for 300 s, never said it stopped
    ]


def test_history__rates_between_samples_and_levels() -> None:
    h = History(size=3)
    assert h.as_json()["t"] == []

    def ov(t: float, ok: int, blocked: int, backlog: int) -> object:
        m = WorkerMetrics()
        for _ in range(ok):
            m.observe(page(records=1))
        for _ in range(blocked):
            m.observe(page(outcome=page().outcome.BLOCKED))  # type: ignore[union-attr]
        w = WorkerStats("w", 1.0, "http", "h", 1, t, m.snapshot(), "{}")
        stats = JobStats("j", JobState.RUNNING, queued=backlog)
        counts = FleetCounts({}, 0, 0)
        return build_overview(
            t, [stats], [{}], queue=[], lanes=[], routes=[], counts=counts, workers=[w]
        )

    for point in (ov(10, 0, 0, 9), ov(12, 8, 2, 5), ov(12, 8, 2, 5), ov(14, 10, 2, 1)):
        h.add(point)  # type: ignore[arg-type]
    got = h.as_json()
    assert got["t"] == [10, 12, 14], "a cached overview is no new sample"
    assert got["throughput"] == [None, 5.0, 1.0]
    assert got["success"] == [None, 0.8, 1.0]
    assert got["block_rate"] == [None, 0.2, 0.0]
    assert got["backlog"] == [9, 5, 1]
    assert got["jobs"] == {"j": [9, 5, 1]}


def _worker_row(worker: str, started: float, seen: float, gauges: str = "{}") -> WorkerStats:
    return WorkerStats(worker, started, "http", "h", 1, seen, "{}", gauges)


@pytest.mark.parametrize(
    ("silent", "stopped", "restarted", "state"),
    [
        (0.0, False, False, "alive"),
        (30.0, False, False, "alive"),  # alive_after itself: still alive
        (30.5, False, False, "stale"),
        (3600.0, False, False, "stale"),
        (3601.0, False, False, "gone"),
        (1e9, False, False, "gone"),
        (5.0, True, False, "stopped"),
        (1e9, True, False, "stopped"),
        (120.0, False, True, "gone"),
    ],
)
def test_worker_state__alive_stale_stopped_or_gone(
    silent: float, stopped: bool, restarted: bool, state: str
) -> None:
    from crawlfleet.monitor.overview import worker_state

    got = worker_state(silent, alive_after=30.0, stopped=stopped, restarted=restarted)
    assert got == state


def test_build_overview__a_silent_worker_stays_listed_stale_and_fires_its_alert() -> None:
    now = 10_000.0
    rows = [
        _worker_row("frozen", 1.0, now - 125),  # SIGSTOP two minutes ago
        _worker_row("live", 1.0, now - 2),
        _worker_row("done", 1.0, now - 50, '{"stopped": 1}'),
        _worker_row("again", 1.0, now - 900),  # killed, then started again under its id
        _worker_row("again", 2000.0, now - 1),
        _worker_row("long-dead", 1.0, now - 7200),
    ]
    stats = JobStats("j", JobState.RUNNING, queued=3)
    ov = build_overview(
        now, [stats], [{}], queue=[], lanes=[], routes=[], counts=FleetCounts({}, 0, 0),
        workers=rows, alive_after=30.0,
    )  # fmt: skip
    states = [(w.stats.worker, w.stats.started_at, w.state) for w in ov.workers]
    assert states == [
        ("again", 2000.0, "alive"),
        ("live", 1.0, "alive"),
        ("frozen", 1.0, "stale"),
        ("done", 1.0, "stopped"),
        ("again", 1.0, "gone"),
        ("long-dead", 1.0, "gone"),
    ]
    assert [w.stats.worker for w in ov.workers_stale] == ["frozen"]
    assert ov.workers_stale[0].silent == 125
    (alert,) = ov.alerts
    assert (alert.rule, alert.subject, alert.value, alert.threshold) == (
        "worker_stale",
        "frozen",
        125.0,
        30.0,
    )
    assert alert.message.startswith("worker frozen has not reported for 2m05s (over 30s)")


def test_build_overview__a_finished_fleet_with_every_worker_stopped_fires_nothing() -> None:
    now = 10_000.0
    rows = [_worker_row(f"w{i}", 1.0, now - 300, '{"stopped": 1}') for i in range(5)]
    stats = JobStats("j", JobState.RUNNING, done=40)
    ov = build_overview(
        now, [stats], [{}], queue=[], lanes=[], routes=[], counts=FleetCounts({}, 0, 0),
        workers=rows,
    )  # fmt: skip
    assert (ov.workers_alive, len(ov.workers), ov.workers_stale, ov.alerts) == (0, 5, [], [])
