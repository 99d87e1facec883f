"""Metrics: a worker's counters from its events (labels capped), their snapshots added up across
workers, and serve's exposition of them parsed back by prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from crawlfleet.events import AttemptEvent, Leased, LeasesLost
from crawlfleet.frontier.ports import FleetCounts, WorkerStats
from crawlfleet.model import DeadReason, JobState, JobStats, Outcome
from crawlfleet.monitor.fleet import FleetCollector
from crawlfleet.monitor.metrics import OTHER, LabelCap, WorkerMetrics, merge, total
from crawlfleet.monitor.overview import build_overview


def page(domain: str = "a.test", outcome: Outcome = Outcome.OK, **kw: object) -> AttemptEvent:
    base: dict[str, object] = {"job": "j", "domain": domain, "fetcher": "http"}
    return AttemptEvent(**{**base, "outcome": outcome, **kw})  # type: ignore[arg-type]


def parsed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_label_cap__first_values_keep_their_name_the_rest_are_other() -> None:
    cap = LabelCap(2)
    assert [cap(v) for v in ("a", "b", "c", "a", "d", "b")] == ["a", "b", OTHER, "a", OTHER, "b"]


def test_worker_metrics__events_counted_by_job_domain_kind_and_outcome() -> None:
    m = WorkerMetrics(domains=2)
    m.observe(Leased(3))
    m.observe(page(latency=0.02, nbytes=100, records=2, quarantined=1, attempts=1, links_dropped=7))
    m.observe(page("b.test", Outcome.BLOCKED, retry=True, attempts=1))
    m.observe(page("c.test", Outcome.RETRYABLE_ERROR, dead_reason=DeadReason.TOO_MANY_RETRIES))
    m.observe(page("a.test", outcome=None))  # type: ignore[arg-type]  # given back: not counted
    m.observe(LeasesLost(2, reported=False))
    got = parsed(generate_latest(m.registry).decode())
    pages = {k[1]: v for k, v in got.items() if k[0] == "crawlfleet_pages_total"}
    assert pages == {
        (("domain", "a.test"), ("job", "j"), ("kind", "http"), ("outcome", "ok")): 1.0,
        (("domain", "b.test"), ("job", "j"), ("kind", "http"), ("outcome", "blocked")): 1.0,
        (("domain", OTHER), ("job", "j"), ("kind", "http"), ("outcome", "retryable_error")): 1.0,
    }
    assert got[("crawlfleet_records_total", (("job", "j"),))] == 2
    assert got[("crawlfleet_quarantined_total", (("job", "j"),))] == 1
    assert got[("crawlfleet_retries_total", (("job", "j"),))] == 1
    assert got[("crawlfleet_links_dropped_total", (("job", "j"),))] == 7
    assert got[("crawlfleet_dead_total", (("job", "j"), ("reason", "too_many_retries")))] == 1
    assert got[("crawlfleet_leased_total", ())] == 3
    assert got[("crawlfleet_leases_lost_total", (("how", "heartbeat"),))] == 2
    assert got[("crawlfleet_fetch_duration_seconds_count", (("kind", "http"),))] == 1
    # attempts per request: observed when a request finished here (the retried one did not)
    assert got[("crawlfleet_request_attempts_count", (("job", "j"),))] == 2
    assert got[("crawlfleet_worker_success_ratio", (("kind", "http"),))] == 1 / 3
    assert m.pages_total() == 3


def test_merge__snapshots_of_workers_add_up_and_far_domains_fold_into_other() -> None:
    a, b = WorkerMetrics(), WorkerMetrics()
    for _ in range(3):
        a.observe(page("a.test", records=1))
    b.observe(page("a.test", Outcome.BLOCKED))
    b.observe(page("b.test"))
    merged = merge([a.snapshot(), b.snapshot(), "", "not json"])
    assert total(merged, "crawlfleet_pages_total") == 5
    assert total(merged, "crawlfleet_pages_total", domain="a.test") == 4
    assert total(merged, "crawlfleet_pages_total", outcome=("ok", "gone")) == 4
    assert total(merged, "crawlfleet_records_total", job="j") == 3
    capped = merge([a.snapshot(), b.snapshot()], domains=1)
    assert total(capped, "crawlfleet_pages_total", domain="a.test") == 4, "the busiest stays"
    assert total(capped, "crawlfleet_pages_total", domain=OTHER) == 1


def test_fleet_collector__serve_exposes_the_sums_under_the_workers_names() -> None:
    workers = []
    for n in range(2):
        m = WorkerMetrics()
        for _ in range(n + 1):
            m.observe(page(latency=0.3, records=1))
        workers.append(WorkerStats(f"w{n}", 1.0, "http", "h", n, 100.0, m.snapshot(), "{}"))
    stats = JobStats("j", JobState.RUNNING, queued=4, done=3, records=3)
    ov = build_overview(
        100.0,
        [stats],
        [{}],
        queue=[],
        lanes=[],
        routes=[],
        counts=FleetCounts({"lease_expired": 2}, 1, 0),
        workers=workers,
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(lambda: ov))
    got = parsed(generate_latest(registry).decode())
    key = (("domain", "a.test"), ("job", "j"), ("kind", "http"), ("outcome", "ok"))
    assert got[("crawlfleet_pages_total", key)] == 3
    assert got[("crawlfleet_fetch_duration_seconds_bucket", (("kind", "http"), ("le", "0.5")))] == 3
    assert (
        got[("crawlfleet_fetch_duration_seconds_bucket", (("kind", "http"), ("le", "0.25")))] == 0
    )
    assert got[("crawlfleet_requests", (("job", "j"), ("state", "queued")))] == 4
    assert got[("crawlfleet_leases_expired_total", ())] == 2
    assert got[("crawlfleet_tier_moves_total", (("direction", "up"),))] == 1
    assert got[("crawlfleet_validation_failure_ratio", (("job", "j"),))] == 0
    assert got[("crawlfleet_alerts", (("rule", "no_worker_alive"),))] == 0, "both reported now"


def test_grafana_dashboard__every_metric_it_queries_is_one_serve_or_a_worker_exposes() -> None:
    import json
    import re
    from pathlib import Path

    m = WorkerMetrics()
    m.observe(page(latency=0.1, records=1, quarantined=1, escalated="browser", dead_reason=None))
    m.observe(LeasesLost(1, reported=True))
    worker = WorkerStats("w", 1.0, "http", "h", 1, 100.0, m.snapshot(), '{"memory": 1}')
    stats = JobStats("j", JobState.RUNNING, queued=1, attempts_histogram={1: 1})
    ov = build_overview(
        100.0, [stats], [{"trap": 1}], queue=[], lanes=[], routes=[],
        counts=FleetCounts({}, 0, 0), workers=[worker],
    )  # fmt: skip
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(lambda: ov))
    text = generate_latest(registry).decode() + generate_latest(m.registry).decode()
    exposed = set(re.findall(r"^# TYPE (\w+) (\w+)", text, re.MULTILINE))
    names = set()
    for name, kind in exposed:
        names |= {name, f"{name}_total"} if kind == "counter" else {name}
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    board = Path(__file__).parents[2] / "docs" / "grafana-dashboard.json"
    exprs = [t["expr"] for p in json.loads(board.read_text())["panels"] for t in p["targets"]]
    queried = {n for e in exprs for n in re.findall(r"\bcrawlfleet_\w+", e)}
    assert queried and queried <= names, sorted(queried - names)

    store_only = CollectorRegistry(auto_describe=False)
    store_only.register(FleetCollector(lambda: ov, counters=False))
    only = generate_latest(store_only).decode()
    assert "crawlfleet_pages_total" not in only and "crawlfleet_queue_backlog" in only


def test_sample_gauges__in_flight_leases_process_and_browser_memory() -> None:
    from types import SimpleNamespace

    m = WorkerMetrics()
    assert "browser_rss" not in m.sample_gauges(in_flight=3, leases_held=5)  # no browser
    m.browser = lambda: SimpleNamespace(memory=SimpleNamespace(rss=300 << 20, anon=200 << 20))
    gauges = m.sample_gauges(in_flight=3, leases_held=5)
    assert (gauges["in_flight"], gauges["leases_held"]) == (3, 5)
    assert gauges["memory"] > 1 << 20, "this process's own RSS, from /proc"
    assert (gauges["browser_rss"], gauges["browser_anon"]) == (300 << 20, 200 << 20)
    got = parsed(generate_latest(m.registry).decode())
    assert got[("crawlfleet_browser_memory_bytes", (("measure", "anon"),))] == 200 << 20
    assert got[("crawlfleet_leases_held", ())] == 5
